/* replay: unwind a capture file offline, exactly as record did live.
 *
 * Process records register the recorded mappings with an offline unwinder;
 * files are found in the capture's bundle first, then under --symfs, then at
 * their recorded paths, and used only when their build-id matches. Each
 * sample's target reads are served from the reads recorded with it. */
#ifndef STACKSNAP_REPLAY_H
#define STACKSNAP_REPLAY_H

#include "stacksnap/snapfile.h"
#include "stacksnap/unwind.h"

struct ss_replay;

struct ss_replay_opts {
    const char *symfs;               /* extra root to look for ELF files (NULL = none) */
    unsigned max_frames;             /* 0 = unwinder default */
    enum ss_native_mode native_mode; /* see ss_unwinder_opts */
    bool no_memo;      /* walk every sample (ss_unwinder_opts.memo off): tests, benches */
    bool pac_set;      /* strip pac_mask instead of the capture's mask (tests: 0, none) */
    uint64_t pac_mask; /* see ss_unwinder_opts */
    bool check_rules;  /* see ss_unwinder_opts (tests) */
};

/* Called for every walked stack; a nonzero return stops the replay. */
typedef int (*ss_replay_stack_fn)(void *ctx, const struct ss_stack *st);
/* Called with one line for each damaged region / truncation / file problem. */
typedef void (*ss_replay_msg_fn)(void *ctx, const char *msg);

int ss_replay_open(struct ss_replay **out, const char *path, const struct ss_replay_opts *o,
                   struct ss_err *err);
const struct ss_snap_header *ss_replay_header(const struct ss_replay *r);
/* Read the capture to its end (rewinding first when run again), unwinding every
 * sample. 0, a callback's nonzero return, or negative errno (I/O). */
int ss_replay_run(struct ss_replay *r, ss_replay_stack_fn fn, ss_replay_msg_fn msg, void *ctx,
                  struct ss_err *err);
/* Called (with run's ctx) after a debugfile record installed a debug file
 * for build-id id: the consumer renames what it aggregated (ss_unwinder_rename
 * of u), as record did live at the same point. A nonzero return stops. */
typedef int (*ss_replay_debug_fn)(void *ctx, struct ss_unwinder *u, const uint8_t *id, size_t len);
void ss_replay_set_debug_fn(struct ss_replay *r, ss_replay_debug_fn fn);
/* Called (with run's ctx) for every process record, as live's writer called
 * its hook after writing it (ss_snapout_opts.on_process); nonzero stops. */
typedef int (*ss_replay_proc_fn)(void *ctx, const struct ss_snap_process *p);
void ss_replay_set_proc_fn(struct ss_replay *r, ss_replay_proc_fn fn);
/* Counters of the last record of that kind ("capture.dropped", ...); 0 if absent. */
uint64_t ss_replay_counter(const struct ss_replay *r, const char *name);
void ss_replay_stats(const struct ss_replay *r, struct ss_snap_stats *st);
struct ss_unwinder *ss_replay_unwinder(struct ss_replay *r);
void ss_replay_close(struct ss_replay *r);

#endif
