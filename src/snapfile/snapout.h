/* snapfile/snapout: a capture file written from a live unwinder — header,
 * process records that follow the unwinder's view of each process, samples
 * with their target reads, counters, and with bundle the mapped ELF files.
 * `record -o X.snap` and the agent's rolling captures share it. */
#ifndef SS_SNAPFILE_SNAPOUT_H
#define SS_SNAPFILE_SNAPOUT_H

#include <stdbool.h>

#include "stacksnap/capture.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/unwind.h"

struct ss_snapout;

struct ss_snapout_opts {
    const char *path;
    unsigned stack_size, freq_hz;
    bool bundle, kernel, off_cpu;
    /* --no-stack-bytes: stack records (the walked frames) instead of samples
     * and their target reads; no bundles (-EINVAL with bundle) */
    bool no_stack_bytes;
    const char *command; /* the profiled command line, "" or NULL: none */
    /* Start times and host name of the header (from ss_snap_header_init), so
     * that live outputs share the capture's clock; NULL: taken now. */
    const struct ss_snap_header *clock;
    /* Non-fatal problems (a file that could not be bundled); optional. */
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
    /* After each process record is written (live outputs label the process
     * with what replay will read: exe, cgroup); optional. */
    void (*on_process)(void *ctx, const struct ss_snap_process *p);
    void *process_ctx;
};

/* Create the file. Negative errno with a message naming the path. */
int ss_snapout_open(struct ss_snapout **out, const struct ss_snapout_opts *o, struct ss_err *err);
/* Route the unwinder's target reads into the capture (not with
 * no_stack_bytes: none are kept). */
void ss_snapout_hook(struct ss_snapout *so, struct ss_unwinder_opts *uo);
/* After ss_unwind of s: process record if needed, then the sample. */
int ss_snapout_sample(struct ss_snapout *so, struct ss_unwinder *u, const struct ss_sample *s,
                      struct ss_err *err);
/* The same, given the stack st that ss_unwind gave for s: with
 * no_stack_bytes a stack record of st (and no sample), else as
 * ss_snapout_sample. */
int ss_snapout_walked(struct ss_snapout *so, struct ss_unwinder *u, const struct ss_sample *s,
                      const struct ss_stack *st, struct ss_err *err);
/* A debug file arrived live (ss_unwinder_debug_poll): the debugfile record,
 * with bundle after a bundle of the file. */
int ss_snapout_debugfile(struct ss_snapout *so, const uint8_t *id, size_t len, const char *path,
                         uint64_t time_ns, struct ss_err *err);
/* A LuaJIT module of pid changed state (ss_unwinder_lj_news): its LuaJIT
 * runtime record (info shows it). */
struct ss_lj_status;
int ss_snapout_ljrt(struct ss_snapout *so, uint32_t pid, const struct ss_lj_status *st,
                    struct ss_err *err);
/* A process marker, after the unwinder saw it (ss_unwinder_proc_event):
 * written when the capture holds the process (replay then drops its view
 * where live did); the process's next sample writes a new process record. */
int ss_snapout_proc_event(struct ss_snapout *so, const struct ss_proc_event *ev,
                          struct ss_err *err);
/* A sample record does not write (the live walk failed): drop its reads. */
void ss_snapout_skip(struct ss_snapout *so);
/* Push buffered records to the file (about once a second, so a SIGKILL
 * loses little). */
int ss_snapout_flush(struct ss_snapout *so, struct ss_err *err);
/* Bytes written to the file so far (after the last flush). */
uint64_t ss_snapout_bytes(const struct ss_snapout *so);
/* Counters (of cap and u, either may be NULL), trailer, close; frees so. */
int ss_snapout_close(struct ss_snapout *so, struct ss_capture *cap, struct ss_unwinder *u,
                     struct ss_err *err);

#endif
