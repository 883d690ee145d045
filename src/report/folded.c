/* report/folded: "comm;root;...;leaf COUNT" lines, merged by text, sorted. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

struct line {
    size_t off; /* into the text buffer */
    uint64_t count;
};

static int line_cmp(const void *a, const void *b, void *base)
{
    const struct line *x = a, *y = b;
    return strcmp((const char *)base + x->off, (const char *)base + y->off);
}

int ss_report_write_folded(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    struct rp_buf text = {0}, out = {0};
    struct line *lines = calloc(r->nstacks ? r->nstacks : 1, sizeof(*lines));
    int rc = 0;
    if (!lines) goto oom;
    for (size_t i = 0; i < r->nstacks; i++) {
        const struct rp_stack *s = &r->stacks[i];
        lines[i].off = text.len;
        lines[i].count = s->count;
        rp_escape_str(&text, rp_comm(r, s), RP_ESC_FOLDED);
        for (uint32_t j = s->nframes; j-- > 0;) {
            rp_buf_putc(&text, ';');
            rp_escape_str(&text, rp_s(r, r->frames[r->fids[s->first + j]].text), RP_ESC_FOLDED);
        }
        rp_buf_putc(&text, '\0');
    }
    if (text.oom) goto oom;
    qsort_r(lines, r->nstacks, sizeof(*lines), line_cmp, text.p);
    for (size_t i = 0; i < r->nstacks;) {
        uint64_t count = 0;
        size_t j = i;
        for (; j < r->nstacks && !strcmp(text.p + lines[j].off, text.p + lines[i].off); j++)
            count += lines[j].count;
        rp_buf_puts(&out, text.p + lines[i].off);
        rp_buf_printf(&out, " %" PRIu64 "\n", count);
        i = j;
        if (out.len >= 1 << 16 || i == r->nstacks) {
            if (out.oom) goto oom;
            if ((rc = rp_fwrite(f, out.p, out.len, "folded output", err))) goto out;
            rp_buf_reset(&out);
        }
    }
    rc = rp_fflush(f, "folded output", err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "folded output: out of memory");
    rc = -ENOMEM;
out:
    free(lines);
    rp_buf_free(&text);
    rp_buf_free(&out);
    return rc;
}
