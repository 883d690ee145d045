/* unwind/lua_runtimes.h: the LuaJIT runtimes of a process (lua_runtimes.c)
 * and the per-process state of the LuaJIT adapter (lua.c) that holds them. */
#ifndef SS_UNWIND_LUA_RUNTIMES_H
#define SS_UNWIND_LUA_RUNTIMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss_lj_luajit.h"
#include "unwind/unwinder.h"

#define SS_LUA_MAX_RTS 8

/* One LuaJIT module mapped in the process, with its runtime. */
#define SS_LUART_PATH 192
struct ss_luart {
    const struct ss_elf *elf;
    int64_t bias;
    struct ss_lj_runtime *rt;
    char path[SS_LUART_PATH]; /* the mapped file, for diagnostics */
    unsigned said;            /* SS_LJS_* reported by ss_unwinder_lj_news */
};

/* A file with LuaJIT's API but no usable VM (detection's verdict), for
 * diagnostics. */
#define SS_LUA_MAX_NOVM 4
struct ss_luanovm {
    const struct ss_elf *elf;
    int64_t bias;
    char path[SS_LUART_PATH];
    struct ss_lj_elfinfo info;
    bool said;
};

/* Per process (ss_uproc.luajit). */
struct ss_luaproc {
    struct ss_lua_detect *d; /* offline unwinders only: where to park runtimes */
    uint32_t pid;
    uint64_t gen; /* process generation the list was built for */
    bool scanned;
    struct ss_luart rts[SS_LUA_MAX_RTS];
    unsigned n;
    struct ss_luanovm novm[SS_LUA_MAX_NOVM];
    unsigned nnovm;
    /* the walk's scratch (lua.c) */
    struct ss_lj_native *natives;
    struct ss_lj_item *items;
    unsigned cap;
    uint32_t *tokens;      /* per native frame: ss_lj_trace_cfa token, 0 = not a trace */
    unsigned tcap, tdirty; /* tokens[tdirty..tcap) are zero */
    bool traces;           /* this sample's native walk holds at anonymous code */
    bool exit_leaf;        /* this sample's leaf is in the trace exit handler: not the VM's top */
    bool spliced;          /* the last splice's items are the output frames (else native alone) */
    uint64_t plan_key;     /* the window plan last handed out (ss_lj_runtime_plan), 0: none */
    uint64_t epoch;        /* lua_state calls: the walker may have changed its state (memo.h) */
};

/* The LuaJIT state of up, its runtimes rescanned when the process's
 * mappings changed (NULL: out of memory). Counts an epoch: the walker may
 * change its state from here on. */
struct ss_luaproc *ss_luaproc_get(struct ss_unwinder *u, struct ss_uproc *up);

/* After a splice: no plan handed out for l's process yet and one of its
 * runtimes verified a global state: ss_unwinder_opts.plan_ready. */
void ss_lua_plan_early(struct ss_unwinder *u, const struct ss_luaproc *l);

/* Per-unwinder cache of detection verdicts (freed with the unwinder). */
void ss_lua_detect_cache_free(struct ss_unwinder *u);

/* Runtimes of pid, for diagnostics: fills up to max, returns how many. */
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
