/* report/svg: the flame graph of an aggregated report. Merges the stacks
 * into a flame tree by frame text (root "all", then the process's comm, then
 * frames root first) and writes it with svg_write.c, titled with the
 * report's title and a line saying which processes, how long, at what rate
 * and how many samples. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"
#include "report/svg_int.h"

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* "comm (pid P), comm2 (pid Q) and N more · 10.0 s at 99 Hz · 990 samples" */
static void subtitle(struct rp_buf *b, const struct ss_report *r)
{
    enum { SHOW = 3 };
    uint32_t pids[SHOW], comms[SHOW];
    size_t n = 0, distinct = 0;
    for (size_t i = 0; i < r->nstacks && n < SHOW; i++) {
        const struct rp_stack *s = &r->stacks[i];
        size_t j = 0;
        while (j < n && pids[j] != s->pid)
            j++;
        if (j == n) {
            pids[n] = s->pid;
            comms[n++] = s->comm;
        }
    }
    uint32_t *all = r->nstacks > SHOW ? malloc(r->nstacks * sizeof(*all)) : NULL;
    if (all) { /* how many processes in all */
        for (size_t i = 0; i < r->nstacks; i++)
            all[i] = r->stacks[i].pid;
        qsort(all, r->nstacks, sizeof(*all), u32_cmp);
        for (size_t i = 0; i < r->nstacks; i++)
            distinct += !i || all[i] != all[i - 1];
        free(all);
    }
    for (size_t i = 0; i < n; i++) {
        if (i) rp_buf_puts(b, ", ");
        rp_escape_str(b, comms[i] ? rp_s(r, comms[i]) : "[unknown]", RP_ESC_DISPLAY);
        rp_buf_printf(b, " (pid %u)", pids[i]);
    }
    if (distinct > n) rp_buf_printf(b, " and %zu more", distinct - n);
    if (!n) rp_buf_puts(b, "no process");
    if (r->tmax >= r->tmin)
        rp_buf_printf(b, " \xc2\xb7 %.1f s", (double)(r->tmax - r->tmin + r->period_ns) / 1e9);
    if (r->off_cpu)
        rp_buf_printf(b, " \xc2\xb7 off-CPU \xc2\xb7 %.3f s off the CPU in %" PRIu64 " sample%s",
                      (double)r->samples / 1e6, r->nsamp, r->nsamp == 1 ? "" : "s");
    else
        rp_buf_printf(b, " \xc2\xb7 %u Hz \xc2\xb7 %" PRIu64 " sample%s", r->freq_hz, r->samples,
                      r->samples == 1 ? "" : "s");
}

int ss_report_write_svg(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    struct fg_tree t;
    struct rp_buf sub = {0};
    int rc = 0;
    if (rp_fg_init(&t, &r->str)) goto oom;
    for (size_t i = 0; i < r->nstacks; i++) {
        const struct rp_stack *s = &r->stacks[i];
        t.n[0].total += s->count;
        int64_t cur = rp_fg_child(&t, 0, s->comm, FG_KIND_PROCESS);
        if (cur < 0) goto oom;
        t.n[cur].total += s->count;
        for (uint32_t j = s->nframes; j-- > 0;) {
            const struct rp_frame *fr = &r->frames[r->fids[s->first + j]];
            cur = rp_fg_child(&t, (uint32_t)cur, fr->text, fr->kind);
            if (cur < 0) goto oom;
            t.n[cur].total += s->count;
        }
    }
    if (rp_fg_layout(&t)) goto oom;
    subtitle(&sub, r);
    if (sub.oom) goto oom;
    struct fg_opts o = {
        .title = r->title, .subtitle = sub.p, .unit = r->off_cpu ? "\xc2\xb5s" : NULL};
    rc = rp_fg_write(&t, &o, f, err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "SVG output: out of memory");
    rc = -ENOMEM;
out:
    rp_fg_free(&t);
    rp_buf_free(&sub);
    return rc;
}
