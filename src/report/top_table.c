/* report/top_table: functions by self samples, with total (inclusive) samples. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

struct row {
    uint32_t func; /* string id of the function name */
    uint8_t kind;
    uint64_t self, total;
    size_t stamp; /* last stack counted in total, + 1 */
};

static int row_cmp(const void *a, const void *b, void *ctx)
{
    const struct row *x = a, *y = b;
    if (x->self != y->self) return x->self < y->self ? 1 : -1;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    return strcmp(rp_s(ctx, x->func), rp_s(ctx, y->func));
}

static double pct(uint64_t v, uint64_t total)
{
    return total ? 100.0 * (double)v / (double)total : 0.0;
}

int ss_report_write_top(const struct ss_report *r, FILE *f, unsigned n, struct ss_err *err)
{
    /* rows indexed by function string id, compacted afterwards */
    size_t nstr = r->str.n;
    uint32_t *row_of = calloc(nstr ? nstr : 1, sizeof(*row_of));
    struct row *rows = calloc(nstr ? nstr : 1, sizeof(*rows));
    struct rp_buf b = {0};
    size_t nrows = 0;
    int rc = 0;
    if (!row_of || !rows) goto oom;
    for (size_t i = 0; i < r->nstacks; i++) {
        const struct rp_stack *s = &r->stacks[i];
        for (uint32_t j = 0; j < s->nframes; j++) {
            const struct rp_frame *fr = &r->frames[r->fids[s->first + j]];
            uint32_t *ri = &row_of[fr->func];
            if (!*ri) {
                rows[nrows] = (struct row){.func = fr->func, .kind = fr->kind};
                *ri = (uint32_t)++nrows;
            }
            struct row *w = &rows[*ri - 1];
            if (j == 0) w->self += s->count;
            if (w->stamp != i + 1) { /* once per stack, recursion or not */
                w->stamp = i + 1;
                w->total += s->count;
            }
        }
    }
    qsort_r(rows, nrows, sizeof(*rows), row_cmp, (void *)r);
    uint64_t all = r->samples;
    if (r->off_cpu)
        rp_buf_printf(&b, "%.3f s off the CPU in %" PRIu64 " samples (SELF, TOTAL: microseconds)",
                      (double)all / 1e6, r->nsamp);
    else
        rp_buf_printf(&b, "%" PRIu64 " samples at %u Hz", all, r->freq_hz);
    if (r->tmax >= r->tmin && !r->off_cpu)
        rp_buf_printf(&b, " over %.1f s", (double)(r->tmax - r->tmin + r->period_ns) / 1e9);
    rp_buf_printf(&b, ", %zu functions\n", nrows);
    rp_buf_printf(&b, "%10s %7s %10s %7s  %-6s  %s\n", "SELF", "SELF%", "TOTAL", "TOTAL%", "KIND",
                  "FUNCTION");
    for (size_t i = 0; i < nrows && (!n || i < n); i++) {
        const struct row *w = &rows[i];
        rp_buf_printf(&b, "%10" PRIu64 " %6.2f%% %10" PRIu64 " %6.2f%%  %-6s  ", w->self,
                      pct(w->self, all), w->total, pct(w->total, all), ss_frame_kind_str(w->kind));
        rp_escape_str(&b, rp_s(r, w->func), RP_ESC_DISPLAY);
        rp_buf_putc(&b, '\n');
    }
    if (b.oom) goto oom;
    if (!(rc = rp_fwrite(f, b.p, b.len, "top table", err))) rc = rp_fflush(f, "top table", err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "top table: out of memory");
    rc = -ENOMEM;
out:
    free(row_of);
    free(rows);
    rp_buf_free(&b);
    return rc;
}
