/* snapfile/replay_reads.h: the target a replay's unwinder reads
 * (replay_reads.c). A read the current sample did not record (a walker
 * whose read pattern differs from the one that recorded the capture) is
 * served from the history of every successful read recorded so far, by
 * (pid, addr), newest wins; with the same build this never happens, so
 * replay stays byte-identical to the live run. */
#ifndef SS_SNAPFILE_REPLAY_READS_H
#define SS_SNAPFILE_REPLAY_READS_H

#include <stdint.h>

#include "memory/memory.h"
#include "snapfile/target.h"

#define SS_REPLAY_READS_BUCKETS 4096

struct ss_replay_hist;
struct ss_replay_reads {
    struct ss_snap_replay *target;                     /* the current sample's reads */
    struct ss_replay_hist *b[SS_REPLAY_READS_BUCKETS]; /* the history */
    uint32_t pid;                                      /* the current sample's process */
    uint64_t hits;                                     /* reads the history served */
};

/* Target backend (ctx: struct ss_replay_reads): this sample's reads, then
 * the history. A recorded read that found the process gone fails the
 * call, as it did live. */
extern const struct ss_target_ops ss_replay_reads_target;

/* The successful reads of sample s of pid into the history. */
void ss_replay_reads_add(struct ss_replay_reads *r, uint32_t pid, const struct ss_snap_sample *s);
/* The history emptied (target stays). */
void ss_replay_reads_free(struct ss_replay_reads *r);

#endif
