/* unwind/procs.h: the processes an unwinder knows (procs.c): the bundle
 * for a sample, lookups by pid, and their collection. */
#ifndef SS_UNWIND_PROCS_H
#define SS_UNWIND_PROCS_H

#include <stdbool.h>
#include <stdint.h>

#include "unwind/unwinder.h"

/* The bundle of s's process made ready for s (ss_unwinder_intake's work;
 * foreign.c's for its own sample): made at the process's first sample
 * (/proc, a forked parent's view, or the side band's log for a process
 * already gone), its exec checked and perf map synced for a live one, its
 * memory reader on s's stack snapshot and windows. NULL when the process
 * cannot be looked at (*err says why; err->code 0 on entry). */
struct ss_uproc *ss_procs_get(struct ss_unwinder *u, const struct ss_sample *s, struct ss_err *err);
/* The walk's question: the bundle ss_unwinder_intake readied for s (this
 * very sample, taken in last), or NULL with *code: the intake's error, or
 * -EINVAL when s was not taken in. ss_procs_ready takes the answer once
 * (the next walk needs the next intake); ss_procs_taken only looks. */
struct ss_uproc *ss_procs_ready(struct ss_unwinder *u, const struct ss_sample *s, int *code);
struct ss_uproc *ss_procs_taken(struct ss_unwinder *u, const struct ss_sample *s, int *code);
/* The bundle for pid; created for live processes when create is set.
 * NULL when the process cannot be looked at (*err says why). */
struct ss_uproc *ss_unwinder_proc(struct ss_unwinder *u, uint32_t pid, bool create,
                                  struct ss_err *err);
/* Add the per-process counters of every bundle to *st (and count the live
 * ones). */
void ss_procs_stats(const struct ss_unwinder *u, struct ss_unwinder_stats *st);
/* Forget every process's memo of walks (memo.h): names or inputs changed. */
void ss_unwinder_memo_drop(struct ss_unwinder *u);
/* Free every bundle (the unwinder's end). */
void ss_procs_free(struct ss_unwinder *u);
/* CLOCK_MONOTONIC now. */
uint64_t ss_procs_now_ns(void);

#endif
