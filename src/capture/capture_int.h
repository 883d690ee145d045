/* capture/capture_int.h: the capture context shared by the files of
 * src/capture/ (capture.c: load and maps; perf_events.c: perf events and attach;
 * buffer.c: ring/perf buffer polling and event decoding). */
#ifndef STACKSNAP_CAPTURE_INT_H
#define STACKSNAP_CAPTURE_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <bpf/libbpf.h>

#include "snapshot.h" /* struct ss_win */
#include "stacksnap/capture.h"

struct snapshot_bpf;
struct ss_exs;
struct ss_sideband;
struct snapshot_compat_bpf;

struct ss_capture {
    struct ss_capture_opts o;
    bool compat;
    char why[512];                     /* why compat when not forced, or "" */
    unsigned stack_size;               /* effective snapshot size */
    struct snapshot_bpf *skel;         /* ring buffer variant, or */
    struct snapshot_compat_bpf *cskel; /* the compat variant */
    struct bpf_program *prog;          /* the perf_event program */
    struct bpf_program *follow_prog;   /* fork tracepoint program */
    struct bpf_link *follow_link;      /* attached when following */
    struct bpf_link *off_links[2];     /* --off-cpu: sched_switch, sys_exit */
    int pids_fd, plans_fd, counters_fd, events_fd;
    uint64_t plans_set; /* plans written: markers drop a process's at its exec and exit */
    int stats_fd;       /* BPF_ENABLE_STATS, or -1 */

    int nperf; /* perf events opened by start */
    int *perf_fds;
    struct bpf_link **perf_links;

    struct ring_buffer *rb;
    struct perf_buffer *pb;
    uint64_t lost;       /* perf buffer lost records */
    uint64_t bad;        /* malformed records skipped */
    uint64_t win_failed; /* windows of delivered samples whose read failed */
    uint64_t copy_holes; /* delivered samples with holes in their stack copy */

    uint64_t kips[SS_KSTACK_MAX]; /* the delivered sample's kernel stack */
    /* procev.c: process markers */
    struct bpf_program *pev_prog[3]; /* fork, exec, exit */
    struct bpf_link *pev_link[3];
    uint64_t markers;             /* delivered */
    char pev_why[512];            /* markers asked for but not loaded: why */
    struct bpf_link *exs_link[2]; /* execstack: execve, execveat entry (ring buffer) */
    struct ss_exs *exs;           /* execstack.c: the stacks at exec entry, by thread */
    uint64_t exec_stacks;         /* samples given one */
    struct ss_sideband *sb;       /* sideband_log.c: perf's mmap records per CPU, or NULL */
    uint64_t map_events, map_lost;
    uint8_t *batch; /* compat: one poll's records, by time */
    void *batch_idx;
    size_t batch_len, batch_cap, batch_n, batch_icap;

    ss_sample_fn fn; /* set during ss_capture_poll */
    void *fn_ctx;
    int delivered;
    uint64_t poll_end_ns; /* CLOCK_MONOTONIC: this poll hands out no record after it */
};

/* capture.c: a libbpf print callback that drops everything (the library
 * never prints; errors come back through struct ss_err). */
int ss_capture_libbpf_silent(enum libbpf_print_level l, const char *f, va_list ap);

/* capture.c: the verifier's reason in its log (the last line before the
 * statistics line); cuts the log there. */
const char *ss_capture_log_reason(char *log);

/* buffer.c. ss_capture_pt_reg: a register of enum ss_reg (perf's order)
 * as the programs index it (enum ss_ev_reg), -1 when they have none. */
int ss_capture_pt_reg(unsigned r);
/* The program's range test of window o from w's SS_WIN_IF_IP range: any ip
 * passes without the flag. */
void ss_capture_win_ip(struct ss_win *o, const struct ss_win_spec *w);
int ss_capture_buffer_open(struct ss_capture *c, struct ss_err *err);
void ss_capture_buffer_close(struct ss_capture *c);

/* offcpu.c */
int ss_capture_offcpu_start(struct ss_capture *c, struct ss_err *err);
void ss_capture_offcpu_stop(struct ss_capture *c);

/* perf_events.c */
int ss_capture_follow_attach(struct ss_capture *c, struct ss_err *err);
/* Mount tracefs where it belongs if nobody did (classic tracepoints need it
 * for their ids), as perf does. */
void ss_capture_ensure_tracefs(void);

/* procev.c: the marker programs load only with opts.proc_event
 * (pev_autoload, before the object loads) and attach at open;
 * pev_deliver: true when the record was a marker (delivered or counted
 * bad). Compat: batch_add copies a record of one poll, batch_flush hands
 * them to deliver sorted by time. */
void ss_capture_pev_autoload(struct ss_capture *c);
int ss_capture_pev_attach(struct ss_capture *c, struct ss_err *err);
void ss_capture_pev_close(struct ss_capture *c);
bool ss_capture_pev_deliver(struct ss_capture *c, const void *data, size_t size);
int ss_capture_batch_add(struct ss_capture *c, const void *data, size_t size);
void ss_capture_batch_flush(struct ss_capture *c,
                            void (*deliver)(struct ss_capture *c, const void *data, size_t size));

/* sideband_log.c: open (with opts.map_event) per online CPU; drain hands what
 * the kernel wrote so far to opts.map_event. */
int ss_capture_sb_open(struct ss_capture *c, struct ss_err *err);
void ss_capture_sb_drain(struct ss_capture *c);
void ss_capture_sb_close(struct ss_capture *c);
/* perf_events.c: the online CPUs (/sys/devices/system/cpu/online) as a bitmap of
 * max; how many, or negative errno. */
int ss_capture_online_cpus(bool *on, int max, struct ss_err *err);

/* The record's holes (bpf/pages.h) on the pages below stack_len: the bits
 * above mean nothing. */
static inline uint32_t ss_ev_holes(const struct ss_event *e)
{
    uint64_t pages = e->stack_len ? ((e->regs[SS_PT_SP] & 4095) + e->stack_len + 4095) >> 12 : 0;
    return pages >= 32 ? e->holes : e->holes & ((1u << pages) - 1);
}

/* execstack.c: exs_take: true when the record was a stack at exec entry
 * (kept, or counted bad); exs_apply gives a sample inside that exec the
 * stack; exs_drop forgets a process's (its exec or exit marker). */
bool ss_capture_exs_take(struct ss_capture *c, const void *data, size_t size);
void ss_capture_exs_apply(struct ss_capture *c, struct ss_sample *s);
void ss_capture_exs_drop(struct ss_capture *c, uint32_t tgid);
void ss_capture_exs_free(struct ss_capture *c);

#endif
