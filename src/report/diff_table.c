/* report/diff_table: the diff's table of functions. A function is a
 * frame's text with a Lua frame's line left out (NAME (CHUNK)), so every
 * line of one function adds up; self and total (once per stack) share on
 * each side and their change in points; the biggest change first. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/diff_int.h"

struct drow {
    uint32_t func;
    uint64_t self[2], total[2];
    size_t stamp; /* last stack counted in total, + 1 */
    double key;
};

struct tctx {
    const struct rp_strtab *fn;
};

static double absd(double v)
{
    return v < 0 ? -v : v;
}

static int drow_cmp(const void *a, const void *b, void *ctx)
{
    const struct drow *x = a, *y = b;
    const struct tctx *c = ctx;
    if (x->key != y->key) return x->key < y->key ? 1 : -1;
    return strcmp(rp_str(c->fn, x->func), rp_str(c->fn, y->func));
}

/* Function key of one folded frame: display text, Lua line dropped. */
static void func_key(struct rp_buf *b, const char *s, size_t n)
{
    rp_buf_reset(b);
    rp_unfold(b, s, n);
    if (b->oom || rp_kind_of_text(b->p, b->len) != SS_FRAME_LUA) return;
    size_t i = b->len - 1; /* at ')' */
    while (b->p[i - 1] != ':')
        i--;
    b->p[i - 1] = ')';
    b->len = i;
    b->p[i] = '\0';
}

static double pct(uint64_t v, uint64_t total)
{
    return total ? 100.0 * (double)v / (double)total : 0.0;
}

int ss_diff_write_table(const struct ss_diff *d, FILE *f, unsigned n, struct ss_err *err)
{
    struct rp_strtab fn;
    struct rp_buf k = {0}, b = {0};
    struct drow *rows = NULL;
    uint32_t *row_of = NULL;
    size_t nrows = 0, caprows = 0, caprow_of = 0;
    int rc = 0;
    if (rp_strtab_init(&fn)) goto oom;
    for (uint32_t id = 1; id < d->stk.n; id++) {
        const char *s = rp_str(&d->stk, id), *leaf = strrchr(s, ';');
        const char *p = strchr(s, ';'); /* the comm is not a function */
        while (p) {
            const char *q = strchr(p + 1, ';');
            size_t len = q ? (size_t)(q - p - 1) : strlen(p + 1);
            func_key(&k, p + 1, len);
            int64_t fid = k.oom ? -ENOMEM : rp_str_intern(&fn, k.p ? k.p : "", k.len);
            size_t old = caprow_of;
            if (fid < 0 || rp_grow(&row_of, &caprow_of, (size_t)fid + 1, sizeof(*row_of))) goto oom;
            if (caprow_of > old) memset(row_of + old, 0, (caprow_of - old) * sizeof(*row_of));
            if (!row_of[fid]) {
                if (rp_grow(&rows, &caprows, nrows + 1, sizeof(*rows))) goto oom;
                rows[nrows] = (struct drow){.func = (uint32_t)fid};
                row_of[fid] = (uint32_t)++nrows;
            }
            struct drow *w = &rows[row_of[fid] - 1];
            for (int side = 0; side < 2; side++) {
                if (p == leaf) w->self[side] += d->cnt[id][side];
                if (w->stamp != id) w->total[side] += d->cnt[id][side];
            }
            w->stamp = id;
            p = q;
        }
    }
    const uint64_t *t = d->total;
    for (size_t i = 0; i < nrows; i++) {
        struct drow *w = &rows[i];
        double ds = absd(pct(w->self[1], t[1]) - pct(w->self[0], t[0])),
               dt = absd(pct(w->total[1], t[1]) - pct(w->total[0], t[0]));
        w->key = ds > dt ? ds : dt;
    }
    struct tctx c = {&fn};
    qsort_r(rows, nrows, sizeof(*rows), drow_cmp, &c);
    rp_buf_printf(
        &b, "before: %" PRIu64 " samples (%s), after: %" PRIu64 " samples (%s), %zu functions\n",
        t[0], d->name[0] ? d->name[0] : "before", t[1], d->name[1] ? d->name[1] : "after", nrows);
    rp_buf_printf(&b, "%8s %8s %8s  %8s %8s %8s  %s\n", "SELF%B", "SELF%A", "DELTA", "TOTAL%B",
                  "TOTAL%A", "DELTA", "FUNCTION");
    for (size_t i = 0; i < nrows && (!n || i < n); i++) {
        const struct drow *w = &rows[i];
        double sb = pct(w->self[0], t[0]), sa = pct(w->self[1], t[1]);
        double tb = pct(w->total[0], t[0]), ta = pct(w->total[1], t[1]);
        rp_buf_printf(&b, "%7.2f%% %7.2f%% %+8.2f  %7.2f%% %7.2f%% %+8.2f  ", sb, sa, sa - sb, tb,
                      ta, ta - tb);
        rp_escape_str(&b, rp_str(&fn, w->func), RP_ESC_DISPLAY);
        rp_buf_putc(&b, '\n');
    }
    if (b.oom) goto oom;
    if (!(rc = rp_fwrite(f, b.p, b.len, "diff table", err))) rc = rp_fflush(f, "diff table", err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "diff table: out of memory");
    rc = -ENOMEM;
out:
    rp_strtab_free(&fn);
    rp_buf_free(&k);
    rp_buf_free(&b);
    free(rows);
    free(row_of);
    return rc;
}
