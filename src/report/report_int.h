/* report/report_int: the aggregated report as the writers see it. */
#ifndef SS_REPORT_INT_H
#define SS_REPORT_INT_H

#include <stdint.h>

#include "stacksnap/report.h"
#include "report/table.h"
#include "report/text.h"

/* A distinct frame; strings are ids in ss_report.str (0 = none). */
struct rp_frame {
    uint8_t kind;
    uint8_t build_id_len;
    uint8_t build_id[20];
    uint32_t name, module;
    uint32_t line, first_line;
    uint64_t addr, offset;
    uint32_t sysname;    /* native: the mangled symbol when name is demangled (0 none) */
    uint64_t sym_offset; /* native with a name: addr - symbol start (not part of the key) */
    uint32_t text;       /* raw frame text */
    uint32_t func;       /* raw top-table function name */
};

/* A distinct (pid, tid, comm, frames) key; frames are fids[first..], leaf first. */
struct rp_stack {
    uint32_t pid, tid;
    uint32_t comm; /* string id, 0 = unknown */
    uint32_t nframes;
    size_t first;
    uint64_t count;
    uint64_t n; /* samples (off_cpu: count is microseconds) */
};

#define RP_PCACHE 1024 /* producer strings by address */
struct rp_pcache {
    const char *p;
    uint32_t id;
};
#define RP_FCACHE_BITS 10 /* frames by address and name */

/* One ss_report_add (opts.timestamps): its time, stack and count; 16 bytes
 * a sample (an off-CPU count is microseconds: 32 bits hold 71 minutes). */
struct rp_event {
    uint64_t time_ns; /* the sample clock (CLOCK_MONOTONIC), 0 unknown */
    uint32_t stack;
    uint32_t count;
};

struct rp_plabel {
    uint32_t pid;
    int64_t exe, cgroup; /* string ids, -1 = unknown */
};

struct ss_report {
    uint32_t freq_hz;
    uint64_t period_ns;
    int64_t wall_start_ns;
    char *title;
    struct rp_strtab str;
    struct rp_frame *frames;
    size_t nframes, capframes;
    struct rp_index frame_ix;
    uint32_t *fids;
    size_t nfids, capfids;
    struct rp_stack *stacks;
    size_t nstacks, capstacks;
    struct rp_index stack_ix;
    uint64_t samples;
    bool off_cpu;                          /* counts are microseconds off the CPU */
    uint64_t nsamp;                        /* samples (== samples unless off_cpu) */
    uint64_t tmin, tmax;                   /* sample times seen (tmax < tmin: none) */
    struct rp_pcache pcache[RP_PCACHE];    /* a hint, checked against the text */
    uint32_t fcache[1u << RP_FCACHE_BITS]; /* frame index + 1, a hint checked by frame_eq */
    struct rp_buf scratch;
    struct rp_plabel *plabels; /* ss_report_set_labels: exe, cgroup per pid */
    size_t nplabels, capplabels;
    struct rp_index plabel_ix; /* by pid */
    uint32_t *tmp;
    size_t captmp;
    /* opts.timestamps: every add, for OTLP's per-sample timestamps */
    bool timestamps;
    struct rp_event *events;
    size_t nevents, capevents;
    /* ss_report_set_clock: CLOCK_REALTIME - sample clock, host, service */
    bool have_clock;
    int64_t mono_to_real_ns;
    uint32_t host, service; /* string ids, 0 = unknown / the command name */
};

/* Labels of pid set with ss_report_set_labels, or NULL. */
const struct rp_plabel *rp_plabel_of(const struct ss_report *r, uint32_t pid);

static inline const char *rp_s(const struct ss_report *r, uint32_t id)
{
    return rp_str(&r->str, id);
}
/* comm text for folded/SVG ("[unknown]" when empty). */
static inline const char *rp_comm(const struct ss_report *r, const struct rp_stack *s)
{
    return s->comm ? rp_s(r, s->comm) : "[unknown]";
}

/* Writes n bytes; -EIO with a message on a short write. */
int rp_fwrite(FILE *f, const void *p, size_t n, const char *what, struct ss_err *err);
/* fflush + ferror check. */
int rp_fflush(FILE *f, const char *what, struct ss_err *err);

#endif
