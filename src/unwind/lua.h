/* unwind/lua.h: the LuaJIT side of ss_unwind (lua.c): which mapped files
 * embed LuaJIT (detected by content, cached by file identity), one runtime
 * per LuaJIT module of a process, and the walk that splices Lua frames into
 * the native frame list. */
#ifndef SS_UNWIND_LUA_H
#define SS_UNWIND_LUA_H

#include "unwind/unwinder.h"

/* Native walk of s plus LuaJIT splice; fills u->out and returns the number of
 * frames (*why says how the native walk ended). */
unsigned ss_unwind_mixed(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_sample *s,
                         enum ss_trunc *why);

/* Per-unwinder cache of detection verdicts (freed with the unwinder). */
void ss_lua_detect_cache_free(struct ss_unwinder *u);

/* Runtimes of pid, for diagnostics: fills up to max, returns how many. */
struct ss_lj_runtime;
unsigned ss_unwinder_lua_runtimes(struct ss_unwinder *u, uint32_t pid,
                                  const struct ss_lj_runtime **out, unsigned max);

/* The LuaJIT walker's state of up that a walk's result may depend on
 * beyond the sample (unwind/memo.c): at most SS_LUA_STATE_WORDS words into
 * w, returns how many (0: no LuaJIT state yet). */
#define SS_LUA_STATE_WORDS (2 + 8 * (1 + 72))
size_t ss_lua_state(const struct ss_uproc *up, uint64_t *w);
/* Changes whenever the walker may have run for up (so its state changed). */
uint64_t ss_lua_epoch(const struct ss_uproc *up);

/* LuaJIT runtimes found in up so far (no scan; for statistics). */
unsigned ss_lua_nruntimes(const struct ss_uproc *up);

#endif
