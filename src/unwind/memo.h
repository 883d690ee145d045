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

struct ss_uproc;

/* The memo's side of one walk, from ss_memo_answer to ss_memo_keep. */
struct ss_memo_walk {
    uint64_t *state[2];       /* the walker's state before and after the walk
                               * (SS_LUA_STATE_WORDS words each, the caller's) */
    struct ss_mem_track *log; /* the log of the walk's inputs (the caller's) */
    bool track;               /* this walk is looked up and logged */
    size_t nstate;            /* words of state[0] */
    uint64_t gen;             /* the process view's generation the walk began on */
};

/* The frames of an earlier walk of up whose inputs equal s's (mem: set up
 * for s; the memo's own copy, valid until the next call on up's memo), n
 * of them and how that walk ended in *trunc. Else NULL: then, when on
 * (an offline walk) and the memo of up is not paused (its samples rarely
 * repeated; the pause is counted down), the log of this walk's inputs is
 * started (up->mem.track = w->log), and when the check read the target,
 * the target was restarted for the walk to come. */
const struct ss_frame *ss_memo_answer(struct ss_uproc *up, const struct ss_sample *s, bool on,
                                      struct ss_memo_walk *w, unsigned *n, uint8_t *trunc);

/* After the walk of s that ss_memo_answer started the log of (f: its n
 * frames, ended as trunc): the walker's state kept, and the walk when it
 * left that state as it found it on the same process view (else a later
 * sample answered from the memo would miss that change). Nothing kept
 * when the log is incomplete or out of memory. */
void ss_memo_keep(struct ss_uproc *up, const struct ss_sample *s, const struct ss_memo_walk *w,
                  const struct ss_frame *f, unsigned n, uint8_t trunc);

/* Samples answered from the memo. */
uint64_t ss_memo_hits(const struct ss_memo *m);

#endif
