/* unwind/memo.h: replay's memo of whole walks (memo.c).
 *
 * A walk is a function of its inputs and of the walker's state: the
 * registers it uses, the stack snapshot, the window bytes it looks at, the
 * target reads it makes (replay: served from the capture), the files of the
 * process view, and the LuaJIT walker's state (lua.h: ss_lua_state). An
 * offline unwinder (ss_unwinder_opts.memo) logs what a walk took from the
 * sample (memory.h: ss_mem_track) and keeps its frames; a later sample of
 * the same process whose inputs are all equal, byte for byte, with the
 * walker in the same state, gets those frames without a walk. Most samples
 * of a Lua program at the interpreter's loop differ only in bytes no walk
 * looks at (the values in Lua slots, scratch registers, GC counters). */
#ifndef SS_UNWIND_MEMO_H
#define SS_UNWIND_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "stacksnap/ss.h"

struct ss_memo;
void ss_memo_free(struct ss_memo *m);

/* Worth looking this sample up and logging its walk? Not while the memo of
 * this process is paused (its samples rarely repeated); counts the pause
 * down. */
bool ss_memo_want(struct ss_memo *m);

/* The frames of an earlier walk whose inputs equal s's (mem: set up for s;
 * state: ss_lua_state of the process now), n of them and how that walk
 * ended in *trunc; NULL when there is none (then, when the check read the
 * target, the target was restarted for the walk to come). */
const struct ss_frame *ss_memo_find(struct ss_memo **mp, struct ss_mem *mem,
                                    const struct ss_sample *s, const uint64_t *state, size_t nstate,
                                    unsigned *n, uint8_t *trunc);

/* Keep the frames of the walk of s that t logged (state: as it was before
 * and after the walk, both nstate words). Nothing kept when the log is
 * incomplete or out of memory. */
void ss_memo_store(struct ss_memo **mp, const struct ss_mem *mem, const struct ss_sample *s,
                   const uint64_t *state, size_t nstate, const struct ss_mem_track *t,
                   const struct ss_frame *f, unsigned n, uint8_t trunc);

/* The walker's state (ss_lua_state) as kept at epoch (ss_lua_epoch), or
 * NULL when it was not kept at that epoch; *n words. */
const uint64_t *ss_memo_state(const struct ss_memo *m, uint64_t epoch, size_t *n);
/* Keep the walker's state w (n words) as it is at epoch. */
void ss_memo_set_state(struct ss_memo **mp, uint64_t epoch, const uint64_t *w, size_t n);

/* Samples answered from the memo. */
uint64_t ss_memo_hits(const struct ss_memo *m);

#endif
