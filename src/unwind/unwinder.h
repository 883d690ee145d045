/* unwind/unwinder.h: internals of struct ss_unwinder (unwinder.c) for the
 * modules that make it up: the walk (walk.c), the processes (procs.c: the
 * per-process bundle of process view, memory reader, native unwinding state
 * and symbol cache), the LuaJIT adapter (lua.c, lua_runtimes.c), kernel
 * frames, the side band, debug files. */
#ifndef SS_UNWIND_UNWINDER_H
#define SS_UNWIND_UNWINDER_H

#include "memory/memory.h"
#include "stacksnap/unwind.h"
#include "unwind/native.h"

struct ss_proc;
struct ss_symcache;
struct ss_elf_cache;
struct ss_strpool;
struct ss_lua_detect;
struct ss_perfmap;
struct ss_dfd;
struct ss_ksyms;

struct ss_uproc {
    uint32_t pid;
    uint64_t serial; /* unique per bundle created by this unwinder */
    struct ss_proc *proc;
    struct ss_mem mem; /* snapshot of the current sample + files + target */
    struct ss_target_live live;
    struct ss_nproc *np;
    struct ss_symcache *syms;
    struct ss_perfmap *pm; /* its perf map (process/perfmap.h) */
    struct ss_unwinder *u;
    void *luajit;         /* per-process state of the LuaJIT walker (owned there) */
    struct ss_memo *memo; /* memo.h: earlier walks (replay), or NULL */
    void (*luajit_free)(void *);
    void *foreign; /* foreign.c: libdw's state for a capture of another architecture */
    void (*foreign_free)(void *);
    uint64_t used_ns; /* live: when a sample last used it */
    bool sideband;    /* the view came from the side band (the process was gone) */
    struct ss_uproc *next;
};

/* procs.c: the sample last taken in (ss_unwinder_intake), for its walk;
 * code: the intake's error (0: its process is ready) */
struct ss_intake {
    const struct ss_sample *s; /* NULL: none, or walked */
    uint64_t time_ns;
    uint32_t pid;
    int code;
};

struct ss_unwinder {
    struct ss_unwinder_opts o;
    struct ss_elf_cache *files;
    bool files_shared; /* files belongs to the caller (ss_unwinder_new_files) */
    struct ss_strpool *strs;
    struct ss_uproc *buckets[256];
    struct ss_uproc *last;
    struct ss_native_frame *nf; /* o.max_frames native frames of the current sample */
    struct ss_frame *out;       /* output frames (capacity out_cap) */
    size_t out_cap;
    struct ss_unwinder_stats st;
    uint64_t read_walks;              /* walks that made a target read (ss_unwinder_pace) */
    struct ss_lua_detect *lua_detect; /* lua_runtimes.c: LuaJIT verdicts per file */
    struct ss_dfd *dfd;               /* debugfiles.c: debuginfod fetcher, or NULL */
    struct ss_lj_detcache *ljc;       /* detection results (o.lj_cache or ljc_own) */
    struct ss_lj_detcache *ljc_own;
    struct ss_ksyms *ksyms; /* kernel.c: kernel symbols, or NULL */
    bool markers;           /* process markers arrive: exits free views (ss_unwinder_proc_event) */
    struct ss_fork *forks;  /* procs.c: children forked, not sampled yet */
    struct ss_uproc *retired; /* procs.c: out of the table, freed by the next collection */
    struct ss_sblog *sb;      /* sideband_view.c: mappings the kernel's side band told, by pid */
    struct ss_intake intake;  /* procs.c: the sample taken in for the next walk */
    /* memo.h (o.memo, offline): the log of the current walk's inputs, the
     * LuaJIT state before and after it (SS_LUA_STATE_WORDS each; NULL: no
     * memo), and no_memo while a sample walked twice is walked again */
    struct ss_mem_track track;
    uint64_t *state[2];
    bool no_memo;
};

/* ss_unwinder_new with the caller's cache of opened files (NULL: its own):
 * a replay's runs share one, so a file's symbol table, FDE index and rule
 * rows are built once. files must outlive the unwinder and is not freed. */
int ss_unwinder_new_files(struct ss_unwinder **out, const struct ss_unwinder_opts *o,
                          struct ss_elf_cache *files, struct ss_err *err);
/* walk.c, for the walks of a sample (ss_unwind, foreign.c's): out started
 * for s (counted), the process's command name in out, the n frames of
 * u->out as out's with how the walk ended (counted). */
void ss_unwind_start(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out);
void ss_unwind_comm(struct ss_stack *out, const struct ss_uproc *up);
/* The n output frames of a walk into u->out: u->nf's native ones named, the
 * Lua ones of l (NULL: none) as its splice made them. */
struct ss_luaproc;
void ss_unwind_name(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_luaproc *l,
                    unsigned n);
void ss_unwind_finish(struct ss_unwinder *u, struct ss_stack *out, unsigned n, enum ss_trunc why);
/* Make room for n output frames (u->out). */
int ss_unwinder_reserve(struct ss_unwinder *u, size_t n);
/* kernel.c: put the sample's kernel frames before the nn user frames in
 * u->out (the caller made room for nn + SS_KSTACK_MAX; without it, none);
 * returns the new count. */
unsigned ss_unwind_kernel(struct ss_unwinder *u, const struct ss_sample *s, unsigned nn);

#endif
