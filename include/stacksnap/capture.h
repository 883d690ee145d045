/* capture/: perf-event BPF snapshot capture (loader side).
 *
 * Opens a cpu-clock perf event on every online CPU, attaches the snapshot BPF
 * program (ring buffer variant, or the compat perf-buffer variant when the
 * ring buffer is unavailable or forced), filters by tgid, and hands every
 * sample to a callback. No unwinding happens here. */
#ifndef STACKSNAP_CAPTURE_H
#define STACKSNAP_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_capture;

struct ss_capture_opts {
    unsigned freq_hz;        /* default 99 */
    unsigned stack_size;     /* default SS_STACK_DEFAULT, max SS_STACK_MAX */
    bool system_wide;        /* -a: every process (except ourselves) */
    bool follow_children;    /* add children forked by a selected process */
    bool compat;             /* force the compat (perf buffer, no BTF) program */
    unsigned ringbuf_bytes;  /* 0 = default (8 MiB); tests shrink it to force drops.
                                Compat: split over the online CPUs (power of two
                                pages per CPU, at least one) */
    bool no_windows;         /* --no-lua-window: registers and stack only, no plans */
    bool off_cpu;            /* --off-cpu: samples when a selected thread blocks (weighted
                                by the time off the CPU, ss_sample.weight) instead of the
                                cpu-clock samples; ring buffer program only */
    unsigned off_cpu_min_us; /* --off-cpu-min-us: shorter waits give no sample (default 100) */
    bool kernel;             /* --kernel: each sample carries its kernel stack (ss_sample.kernel);
                                compat also keeps samples that interrupted kernel mode, with the
                                kernel stack alone */
    bool bpf_stats;          /* enable BPF run-time stats (BPF_ENABLE_STATS, the same
                                switch as kernel.bpf_stats_enabled) while open, for
                                ss_capture_prog_info's run_time_ns/run_cnt */
    /* Process markers (fork, exec, exit of selected processes), delivered
     * by ss_capture_poll in order with the samples; NULL: the marker
     * programs are not loaded. The compat program's markers come from
     * per-CPU buffers: poll delivers each batch sorted by time. */
    void (*proc_event)(void *arg, const struct ss_proc_event *ev);
    void *proc_event_arg;
    /* Executable mappings and execs of every process, from perf's side band
     * (a dummy software event per CPU with mmap records), delivered before
     * each sample or marker as far as the kernel has written them (so
     * before the samples they precede; later ones may come too: mind
     * time_ns); NULL: not opened. */
    void (*map_event)(void *arg, const struct ss_map_event *ev);
    void *map_event_arg;
    /* Called with the whole verifier log of each program the kernel rejects
     * (also when the compat program then loads); record -v prints it. */
    void (*verifier_log)(void *arg, const char *prog, const char *log);
    void *verifier_log_arg;
};

/* Counters summed over CPUs. */
struct ss_capture_stats {
    uint64_t seen;          /* program runs for a selected process */
    uint64_t emitted;       /* samples written to the buffer */
    uint64_t dropped;       /* buffer full: BPF side, or (compat) the perf buffer's lost
                               count if larger -- both see the same records */
    uint64_t copy_failed;   /* no stack bytes at all */
    uint64_t copy_partial;  /* shorter prefix copied */
    uint64_t skipped;       /* no user registers available */
    uint64_t win_failed;    /* windows of delivered samples whose load or copy failed */
    uint64_t off_blocks;    /* --off-cpu: a selected thread blocked */
    uint64_t off_short;     /* its wait was below off_cpu_min_us: no sample */
    uint64_t off_unmatched; /* it blocked outside a system call or moved on: no sample */
    uint64_t markers;       /* process markers delivered (opts.proc_event) */
    uint64_t map_events;    /* side band records delivered (opts.map_event) */
    uint64_t map_lost;      /* side band records the kernel could not write */
    uint64_t exec_stacks;   /* of copy_failed: samples inside an exec given the stack copied at
                               its entry (SS_SAMPLE_EXECSTACK; ring buffer, with markers) */
    uint64_t copy_holes;    /* delivered samples whose copy went on past unreadable pages
                               (ss_sample.holes) */
};

struct ss_bpf_prog_info {
    char name[32];
    uint32_t xlated_insns;         /* instructions after verification/rewrites */
    uint32_t jited_bytes;          /* native code size */
    uint32_t verified_insns;       /* bpf_prog_info.verified_insns */
    uint64_t run_time_ns, run_cnt; /* with opts.bpf_stats or kernel.bpf_stats_enabled */
};

typedef void (*ss_sample_fn)(void *ctx, const struct ss_sample *s);

/* Load the program: compat when forced, when the ring buffer, the
 * bpf_task_pt_regs helper or kernel BTF is missing, or when the kernel
 * rejects the ring buffer program; with follow_children the fork tracepoint
 * is attached here already. Nothing is sampled until start. A rejection's
 * message names the verifier's reason. */
int ss_capture_open(struct ss_capture **out, const struct ss_capture_opts *o, struct ss_err *err);
/* Select a process (tgid) before or after ss_capture_start. */
int ss_capture_add_pid(struct ss_capture *c, pid_t pid, struct ss_err *err);
int ss_capture_remove_pid(struct ss_capture *c, pid_t pid);
/* The memory windows to copy at every sample of pid from now on (ss.h:
 * struct ss_win_plan); NULL or an empty plan: none. A no-op with
 * opts.no_windows. Negative errno (-EINVAL: a window out of bounds). */
int ss_capture_set_plan(struct ss_capture *c, pid_t pid, const struct ss_win_plan *p,
                        struct ss_err *err);
/* The selected tgids (including followed children): fills up to max, returns
 * how many there are, or negative errno. */
int ss_capture_pids(struct ss_capture *c, pid_t *out, size_t max);
/* Open the cpu-clock event on every online CPU and attach. */
int ss_capture_start(struct ss_capture *c, struct ss_err *err);
/* Stop sampling (detach, close the perf events). Samples already in the
 * buffer can still be polled and the counters read, which are then final. */
void ss_capture_stop(struct ss_capture *c);
/* Wait up to timeout_ms for samples and deliver them; s->stack is valid only
 * during fn. The buffer wakes the reader only once a quarter full (a wakeup
 * per sample costs more than the sample), so poll returns after timeout_ms
 * with whatever arrived meanwhile. Live unwinding reads the target's memory
 * when the sample is handled, so keep the timeout short (record uses 2 ms:
 * at 100 ms most Lua stacks have moved on and their frames are dropped).
 * One call hands out at most SS_CAPTURE_POLL_MS of work: when samples come
 * faster than fn handles them, the rest stay in the buffer for the next
 * call, so the caller's loop still sees its clock (record -d stops on time).
 * Returns the number delivered, or negative errno (-EINTR is returned as
 * the number delivered, 0 or more). */
#define SS_CAPTURE_POLL_MS 100
int ss_capture_poll(struct ss_capture *c, int timeout_ms, ss_sample_fn fn, void *ctx);
void ss_capture_stats(struct ss_capture *c, struct ss_capture_stats *st);
bool ss_capture_is_compat(const struct ss_capture *c);
/* Why the compat program is in use although not forced (a missing kernel
 * feature, or the ring buffer program's rejection); "" otherwise. */
const char *ss_capture_fallback_reason(const struct ss_capture *c);
/* Why the process markers asked for are missing (the kernel rejected the
 * programs with them; they were loaded without), or "". */
const char *ss_capture_markers_reason(const struct ss_capture *c);
/* Snapshot size in effect: opts.stack_size, capped at 65176 in compat (48792 for a process with
 * windows) (a perf record must stay below 64 KiB). */
unsigned ss_capture_stack_size(const struct ss_capture *c);
int ss_capture_prog_info(struct ss_capture *c, struct ss_bpf_prog_info *info, struct ss_err *err);
void ss_capture_close(struct ss_capture *c);

#endif
