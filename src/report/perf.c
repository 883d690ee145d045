/* report/perf: perf-script text, streamed one sample at a time (layout and
 * escapes in include/stacksnap/report.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

struct ss_perf_writer {
    FILE *f;
    uint64_t period_ns;
    struct rp_buf b;
    int rc;
};

struct ss_perf_writer *ss_perf_writer_new(FILE *f, uint32_t freq_hz, struct ss_err *err)
{
    struct ss_perf_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        ss_err_set(err, -ENOMEM, "perf-script output: out of memory");
        return NULL;
    }
    w->f = f;
    w->period_ns = 1000000000ull / (freq_hz ? freq_hz : 99);
    return w;
}

static int set(const char *s)
{
    return s && *s;
}

static void frame_line(struct rp_buf *b, const struct ss_frame *fr)
{
    uint64_t addr = fr->addr;
    const char *dso = NULL;
    if (fr->kind == SS_FRAME_LUA || fr->kind == SS_FRAME_PSEUDO) addr = 0;
    rp_buf_printf(b, "\t%16" PRIx64 " ", addr);
    switch (fr->kind) {
    case SS_FRAME_LUA:
        rp_escape_str(b, set(fr->name) ? fr->name : "anonymous", RP_ESC_PERF_SYM);
        if (set(fr->module)) {
            rp_buf_puts(b, " [");
            rp_escape_str(b, fr->module, RP_ESC_PERF_SYM);
            rp_buf_printf(b, ":%u]", fr->line);
        }
        dso = "[lua]";
        break;
    case SS_FRAME_PSEUDO:
        rp_escape_str(b, set(fr->name) ? fr->name : "[unknown]", RP_ESC_PERF_SYM);
        dso = "[stacksnap]";
        break;
    case SS_FRAME_KERNEL:
    default:
        rp_escape_str(b, set(fr->name) ? fr->name : "[unknown]", RP_ESC_DISPLAY);
        if (set(fr->name)) /* perf's "sym+0xoff" */
            rp_buf_printf(b, "+0x%" PRIx64, fr->sym_offset);
        dso = set(fr->module)               ? fr->module
              : fr->kind == SS_FRAME_KERNEL ? "[kernel.kallsyms]"
                                            : "[unknown]";
        break;
    }
    rp_buf_puts(b, " (");
    rp_escape_str(b, dso, RP_ESC_PERF_DSO);
    rp_buf_puts(b, ")\n");
}

int ss_perf_writer_add(struct ss_perf_writer *w, const struct ss_stack *s, struct ss_err *err)
{
    if (w->rc) return w->rc;
    if (s->nframes && !s->frames) {
        ss_err_set(err, -EINVAL, "perf-script output: invalid stack");
        return -EINVAL;
    }
    struct rp_buf *b = &w->b;
    rp_buf_reset(b);
    size_t clen = strnlen(s->comm, sizeof(s->comm));
    if (clen)
        rp_escape(b, s->comm, clen, RP_ESC_PERF_COMM);
    else
        rp_buf_puts(b, "[unknown]");
    rp_buf_printf(b, " %7u/%-7u [%03u] %5" PRIu64 ".%06" PRIu64 ": %10" PRIu64 " %s:\n", s->pid,
                  s->tid, s->cpu, (uint64_t)(s->time_ns / 1000000000u),
                  (uint64_t)(s->time_ns % 1000000000u / 1000u),
                  s->weight ? s->weight : w->period_ns, s->weight ? "offcpu-time" : "cpu-clock");
    for (uint32_t i = 0; i < s->nframes; i++)
        frame_line(b, &s->frames[i]);
    if (!s->nframes) {
        struct ss_frame none = {.kind = SS_FRAME_PSEUDO, .name = SS_REPORT_NO_FRAMES};
        frame_line(b, &none);
    }
    rp_buf_putc(b, '\n');
    if (b->oom) {
        ss_err_set(err, -ENOMEM, "perf-script output: out of memory");
        return w->rc = -ENOMEM;
    }
    return w->rc = rp_fwrite(w->f, b->p, b->len, "perf-script output", err);
}

int ss_perf_writer_finish(struct ss_perf_writer *w, struct ss_err *err)
{
    if (!w) return 0;
    int rc = w->rc ? w->rc : rp_fflush(w->f, "perf-script output", err);
    rp_buf_free(&w->b);
    free(w);
    return rc;
}
