/* snapfile/target.h: the replay target backend of memory/ (layer 3):
 * serves a sample's recorded target reads instead of process_vm_readv, so
 * replay sees exactly the bytes (and failures) the live walker saw. */
#ifndef SS_SNAPFILE_TARGET_H
#define SS_SNAPFILE_TARGET_H

#include "memory/memory.h"
#include "stacksnap/snapfile.h"

/* target_ctx for ss_snap_target_replay; point it at a sample before walking. */
struct ss_snap_replay {
    const struct ss_snap_read *reads;
    uint32_t n;
    uint32_t next;         /* reads are matched in recorded order from here */
    uint64_t hits, misses; /* misses: a read the live walker did not make */
    uint32_t total, mark;  /* all reads; 1 + index of the last SS_READ_REWALK, 0 none */
    bool astray;           /* a read since the start was not the next one recorded */
};

/* Point rp at sample s. When the live walker walked s twice (a rewalk
 * marker among its reads), only the reads of the first walk are served
 * until ss_snap_replay_rewalk. */
void ss_snap_replay_set(struct ss_snap_replay *rp, const struct ss_snap_sample *s);
/* Serve from the start again (the reads of the first walk only, as after
 * ss_snap_replay_set): the reads served so far were a check, not the walk. */
void ss_snap_replay_restart(struct ss_snap_replay *rp);
/* Were the reads served since the start exactly the ones recorded, in
 * their order, all of them? (The live walk made just those.) */
bool ss_snap_replay_consumed(const struct ss_snap_replay *rp);
/* Serve the second walk: the reads after the marker first, then the rest. */
void ss_snap_replay_rewalk(struct ss_snap_replay *rp);

/* readv: each element is matched to the next recorded read with the same
 * address and length (then any such read, then a successful read that
 * contains it); it gets the recorded bytes or the recorded error. Elements
 * never read live fail with -EFAULT and count as misses. */
extern const struct ss_target_ops ss_snap_target_replay;
/* One element as readv serves it: 1 served (bytes or the recorded error),
 * 0 never read live (v->err = -EFAULT, counted as a miss), -ESRCH served a
 * read that found the process gone. */
int ss_snap_replay_serve(struct ss_snap_replay *rp, struct ss_iov *v);

#endif
