/* unwind: turning samples (registers + stack snapshot) into frame lists.
 *
 * An ss_unwinder keeps per-process state keyed by pid (mappings, opened
 * files shared by build-id, libunwind address space, rule and symbol
 * caches), created on the first sample of a live process or registered
 * explicitly for replay, and freed when the process exits
 * (ss_unwinder_forget, or ss_unwinder_gc for processes that are gone).
 *
 * ss_unwind() produces a leaf-first ss_frame list. Its strings (names,
 * module paths) are interned in the unwinder and stay valid until it is
 * freed; the frames array itself is reused by the next ss_unwind call. */
#ifndef STACKSNAP_UNWIND_H
#define STACKSNAP_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"

struct ss_unwinder;
struct ss_map_desc; /* process/process.h */

/* Hook for every read of target memory the walkers make (live only). A
 * call with addr 0, len 0 and err SS_READ_REWALK marks that the walk of the
 * current sample starts over (the mappings were re-read mid-walk). */
#define SS_READ_REWALK (-85) /* -ERESTART */
typedef void (*ss_unwind_record_fn)(void *ctx, uint32_t pid, uint64_t addr, const void *data,
                                    size_t len, int err);

/* How native frames are walked: the default, and two libunwind-only modes
 * that tests and benchmarks compare it with. */
enum ss_native_mode {
    SS_NATIVE_RULES = 0,  /* rule cache, libunwind for the rest (default) */
    SS_NATIVE_UNW_STEP,   /* libunwind for every step (cursor per frame) */
    SS_NATIVE_UNW_CURSOR, /* libunwind alone: one cursor for the whole walk */
};

struct ss_unwinder_opts {
    unsigned max_frames;             /* frame cap, default 512 */
    bool offline;                    /* replay: never look at /proc for unknown pids */
    const char *debug_root;          /* prefix of /usr/lib/debug ("" or NULL = host) */
    enum ss_native_mode native_mode; /* how native frames are walked */
    ss_unwind_record_fn record;
    void *record_ctx;
    bool lj_check_guards;            /* tests: ss_lj_runtime_check_guards on every LuaJIT runtime */
    struct ss_lj_detcache *lj_cache; /* LuaJIT detection results to share between
                                        unwinders (NULL: the unwinder keeps its own) */
    bool memo;         /* offline: a sample whose inputs (registers used, stack, window bytes
                          looked at, target reads) equal an earlier one's, with the walker in
                          the same state, gets that walk's frames without a walk */
    uint64_t pac_mask; /* aarch64: pointer-authentication bits stripped from return addresses
                          (util/pac.h; a capture's header says the recording's); 0 none */
    bool check_rules;  /* tests: every rule step of a walk of another architecture's capture
                          (unwind/foreign.c) checked against libdw's step from the same frame
                          (rule_checks, rule_check_diffs) */
    /* live: called in a walk of pid once one of its LuaJIT runtimes has verified a global
       state and no plan of windows was handed out for pid yet: ss_unwinder_take_plan gives
       it now, before the walk names its frames (the first walk loads symbol tables) */
    void (*plan_ready)(void *ctx, uint32_t pid);
    void *plan_ctx;
};

/* LuaJIT detection results by file (build-id, else device/inode/size/mtime):
 * detecting a LuaJIT build and deriving its layout costs milliseconds per
 * file; unwinders given the same cache (a replay's runs) do it once. Not
 * thread-safe; outlives the unwinders that use it. */
struct ss_lj_detcache;
int ss_lj_detcache_new(struct ss_lj_detcache **out);
void ss_lj_detcache_free(struct ss_lj_detcache *c);
/* Results of files with a build-id, for a capture to record (record type 12)
 * and a replay to put back, so that it derives nothing again. each: fn per
 * result from entry index `from` on; returns the index to pass next time
 * (results are only ever appended). put: keep info as the result of the
 * file (build-id, size); -EINVAL when it is not plausible (untrusted input:
 * ss_lj_elfinfo_plausible) or the id is longer than 20 bytes, -ENOMEM. */
struct ss_lj_elfinfo;
typedef void (*ss_lj_det_fn)(void *ctx, const uint8_t *id, size_t id_len, uint64_t fsize,
                             const struct ss_lj_elfinfo *info);
size_t ss_lj_detcache_each(const struct ss_lj_detcache *c, size_t from, ss_lj_det_fn fn, void *ctx);
int ss_lj_detcache_put(struct ss_lj_detcache *c, const uint8_t *id, size_t id_len, uint64_t fsize,
                       const struct ss_lj_elfinfo *info);

struct ss_unwinder_stats {
    uint64_t samples, frames, errors;
    uint64_t trunc[SS_TRUNC_ERROR + 1]; /* samples by how the walk ended */
    /* native steps by a cached CFI rule; by libunwind (for another
     * architecture's capture: by libdw); CFI rows fetched from libunwind */
    uint64_t rule_steps, unw_steps, rule_loads;
    uint64_t rule_checks, rule_check_diffs; /* ss_unwinder_opts.check_rules */
    uint64_t processes, files;              /* processes: ever seen; files: open ELF files */
    uint64_t live, lj_runtimes;             /* processes with state now, LuaJIT runtimes in them */
    uint64_t target_reads, target_calls;
    /* debuginfod (ss_unwinder_debuginfod): fetches that brought a debug file,
     * that ended without one (not on any server, timed out), still running */
    uint64_t debug_fetched, debug_failed, debug_pending;
    uint64_t memo_hits;        /* samples answered from the memo (ss_unwinder_opts.memo) */
    uint64_t native_memo_hits; /* native walks above the leaf answered from the memo of
                                  native walks (on with the memo) */
    /* Lua frames left out as not proven on the stack (ss_stack_unproven),
     * and the samples that lost any */
    uint64_t lua_unproven, lua_unproven_samples;
    /* samples by ss_stack_facts: truncated (SS_SF_TRUNCATED), cut at trace
     * code, with stale scan candidates refused, through code without CFI,
     * and those of them that reached the root */
    uint64_t truncated, trace_cut, scan_stale, nocfi, nocfi_root;
};

int ss_unwinder_new(struct ss_unwinder **out, const struct ss_unwinder_opts *o, struct ss_err *err);
void ss_unwinder_free(struct ss_unwinder *u);

/* Take in sample s before its walk: its process's state made at the
 * process's first sample (from /proc, a forked parent's view, or the side
 * band's log for a process already gone), a live one's exec checked and
 * perf map synced, its memory reader set on s's bytes. Returns 0, or the
 * negative errno that ss_unwind of s will return (the process cannot be
 * looked at; ss_unwind counts it). Call it for each sample just before
 * ss_unwind (or ss_unwind_twice) of the same s. */
int ss_unwinder_intake(struct ss_unwinder *u, const struct ss_sample *s);
/* Unwind one sample, taken in just before (ss_unwinder_intake). Returns 0
 * (out filled; out->trunc says how the walk ended) or a negative errno when
 * the process cannot be looked at at all (-ESRCH: gone; -EINVAL: s was not
 * taken in; out then has no frames). out->frames belong to u, read only,
 * valid until the next call on u (the memo's frames are handed out as they
 * are kept). */
int ss_unwind(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out);
/* Lua frames a walk of st left out because it could not prove them on the
 * stack (ss_frame.unproven summed; issue 32): counted, never shown. */
unsigned ss_stack_unproven(const struct ss_stack *st);
/* What a walk of st cut or stepped over (issue 32), from its frames and
 * how it ended, so replay's memo and captures without stack bytes carry
 * it: SS_SF_* bits. */
enum {
    SS_SF_TRUNCATED = 1u << 0,  /* the walk did not reach the root (st->trunc), or a Lua
                                   chain ends at a [truncated] root */
    SS_SF_TRACE_CUT = 1u << 1,  /* it ended at trace code the Lua walk could not claim
                                   (SS_FF_TRACE_CUT) */
    SS_SF_STALE = 1u << 2,      /* a stack scan refused stale candidates (SS_FF_STALE) */
    SS_SF_NOCFI = 1u << 3,      /* it stepped over code without CFI (SS_FF_NOCFI) */
    SS_SF_NOCFI_ROOT = 1u << 4, /* ... and reached the root (not SS_SF_TRUNCATED) */
};
unsigned ss_stack_facts(const struct ss_stack *st);
/* Replay of a sample the live walker walked twice (SS_READ_REWALK), taken in
 * as for ss_unwind: a first walk for its effect on the caches (no result,
 * no statistics), then between(ctx) (serve the second walk's reads), then
 * ss_unwind. */
int ss_unwind_twice(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out,
                    void (*between)(void *ctx), void *ctx);

/* Replay of a capture of another architecture (unwind/foreign.c): can
 * this build walk the native frames of samples of arch (its name in the
 * capture's header)? An x86-64 build walks aarch64 ones with libdw.
 * ss_unwind_foreign walks s with its recorded registers (regs, nregs of
 * them, in that architecture's order); s->regs are not looked at. Native
 * frames only: Lua frames need the walker of that architecture's build.
 * It takes s in itself (no ss_unwinder_intake: its registers are not
 * s->regs). Returns as ss_unwind. */
bool ss_unwind_foreign_arch(const char *arch);
int ss_unwind_foreign(struct ss_unwinder *u, const struct ss_sample *s, const uint64_t *regs,
                      unsigned nregs, struct ss_stack *out);

/* Replay: register process pid from recorded mappings; resolve opens the file
 * behind a mapping (returns an fd or -errno). Replaces a known pid. */
int ss_unwinder_add_process(struct ss_unwinder *u, uint32_t pid, const char *comm,
                            const struct ss_map_desc *maps, size_t n,
                            int (*resolve)(void *ctx, const struct ss_map_desc *m), void *ctx,
                            struct ss_err *err);
/* The view of live process pid and its LuaJIT runtimes (ELF files read,
 * VMs detected, layouts derived), made now rather than at its first sample:
 * record calls it for -p before sampling starts, so that the first walk,
 * and the window plan it yields, come sooner (under emulation the first
 * sample's walk took ~1.6 s, and every sample until then had no windows).
 * 0 or negative errno (the first sample tries again). */
int ss_unwinder_prepare(struct ss_unwinder *u, uint32_t pid, struct ss_err *err);
/* The file at path (a command about to run, a file mapped executable by a
 * followed process) opened and checked for LuaJIT now (its VM found, its
 * layout derived), rather than at the first sample of a process that maps
 * it: that walk, and the plan of windows it gives, come sooner. With ino
 * nonzero, only the file of that identity (device major:minor, inode).
 * 0 or negative errno. */
int ss_unwinder_prepare_file(struct ss_unwinder *u, const char *path, uint64_t ino,
                             uint32_t dev_major, uint32_t dev_minor, struct ss_err *err);
/* Memory windows the walkers want the BPF program to copy at every sample
 * of pid (ss.h; capture.h's ss_capture_set_plan): true, with p filled, once
 * each time the plan changes (a LuaJIT runtime's global state verified). */
bool ss_unwinder_take_plan(struct ss_unwinder *u, uint32_t pid, struct ss_win_plan *p);
/* A process marker (capture.h's proc_event, or a capture's record), in
 * stream order: live, a fork gives the child a copy of the parent's view
 * (creating the parent's from /proc if need be) that /proc does not
 * replace until the child's exec; an exec or an exit drops the process's
 * view, after the samples before it were unwound. Replay (offline) only
 * drops: the capture's process records carry the views. From the first
 * marker on, ss_unwinder_gc leaves a gone process's view alone until it
 * has not been used for 10 s (its exit marker frees it). */
void ss_unwinder_proc_event(struct ss_unwinder *u, const struct ss_proc_event *ev);
/* A mapping or exec from the side band (capture.h's map_event), live only:
 * a process gone before its first sample is walked is walked with the
 * mappings logged up to the sample's time. */
void ss_unwinder_map_event(struct ss_unwinder *u, const struct ss_map_event *ev);
/* Drop a process's state (it exited). */
void ss_unwinder_forget(struct ss_unwinder *u, uint32_t pid);
/* Drop live processes that are gone and close files nothing maps any more. */
void ss_unwinder_gc(struct ss_unwinder *u);
void ss_unwinder_stats(const struct ss_unwinder *u, struct ss_unwinder_stats *st);

/* How long the next poll of the capture may wait for samples (record, top,
 * bench_livereads): SS_PACE_MIN_MS while walks read the live target (the
 * Lua stack beyond the windows, the collector's bytes of a GC proof: what
 * they read moves on the later a sample is walked), doubled after each poll
 * whose walks made no target read, up to SS_PACE_MAX_MS (a batch of samples
 * unwound one after the other finds the walk's code and data in the CPU's
 * caches; one sample every 2 ms finds them cold). Start with {0}; call once
 * after each poll. */
#define SS_PACE_MIN_MS 2
#define SS_PACE_MAX_MS 32
struct ss_pace {
    int ms;
    uint64_t read_walks;
};
int ss_unwinder_pace(const struct ss_unwinder *u, struct ss_pace *p);

/* What the unwinder currently knows about pid (live or registered). The
 * generation changes whenever its mapping list changes; fn (optional) gets
 * every mapping, with the build-id of its file when one is known. -ESRCH
 * when the unwinder has no state for pid. */
struct ss_unwinder_pdesc {
    const char *comm;
    uint64_t serial; /* changes when the unwinder drops and recreates pid's state */
    uint64_t generation;
    size_t nmaps;
};
typedef void (*ss_unwinder_map_fn)(void *ctx, const struct ss_map_desc *m);
int ss_unwinder_describe(struct ss_unwinder *u, uint32_t pid, struct ss_unwinder_pdesc *out,
                         ss_unwinder_map_fn fn, void *ctx);

/* pid's perf map (perf-PID.map, naming anonymous executable memory): the
 * version (0 = none loaded; changes with the contents) and its text, for the
 * capture writer; -ESRCH when the unwinder has no state for pid. */
int ss_unwinder_perfmap(struct ss_unwinder *u, uint32_t pid, uint32_t *version, const char **text,
                        size_t *len);
/* Replay: install the perf map text a capture recorded for pid. */
int ss_unwinder_set_perfmap(struct ss_unwinder *u, uint32_t pid, const char *text, size_t len);

/* Debug files that arrive during a run (unwind/debugfiles.c). They name
 * symbols only, never change unwinding, and are used for files without a
 * full symbol table and without a local debug file.
 *
 * Live: ss_unwinder_debuginfod starts a background fetcher (libdebuginfod,
 * DEBUGINFOD_URLS; its cache; timeout_s per file, <= 0: 30 s). Such files are
 * then asked for by build-id when their symbols are first needed; ss_unwind
 * never waits for the network. ss_unwinder_debug_poll (the owner's thread,
 * between samples) installs the files whose fetch ended and calls fn for
 * each installed one: samples walked after it are named with it, and the
 * owner renames what it has aggregated (ss_unwinder_rename) and records it
 * (the capture's debug file record). Returns the number installed. */
int ss_unwinder_debuginfod(struct ss_unwinder *u, double timeout_s, struct ss_err *err);
typedef void (*ss_unwinder_debug_fn)(void *ctx, const uint8_t *id, size_t len, const char *path);
int ss_unwinder_debug_poll(struct ss_unwinder *u, ss_unwinder_debug_fn fn, void *ctx);
/* Fetches not yet ended; wait for them at most max_s seconds. */
size_t ss_unwinder_debug_pending(struct ss_unwinder *u);
void ss_unwinder_debug_wait(struct ss_unwinder *u, double max_s);
/* Replay (or a caller that has the file): use the debug file at path for
 * build-id id from now on. -ESTALE other build-id, -ENOENT unreadable. */
int ss_unwinder_add_debug(struct ss_unwinder *u, const uint8_t *id, size_t len, const char *path,
                          struct ss_err *err);
/* The name the current symbols give native frame in (of build-id id, named
 * before the debug file arrived): true with out filled (in with the new
 * name, system_name and sym_offset; strings owned by u), false to keep in. */
bool ss_unwinder_rename(struct ss_unwinder *u, const uint8_t *id, size_t len,
                        const struct ss_frame *in, struct ss_frame *out);
/* The same as a report's namer callback (report.h, ss_report_rename): ctx
 * is a struct ss_unwinder_renamer. */
struct ss_unwinder_renamer {
    struct ss_unwinder *u;
    const uint8_t *id;
    size_t len;
};
bool ss_unwinder_rename_fn(void *renamer, const struct ss_frame *in, struct ss_frame *out);

/* Kernel frames: a sample's kernel stack (ss_sample.kernel, --kernel)
 * becomes SS_FRAME_KERNEL frames before (leafward of) its user frames, named
 * from a kernel symbol table: live /proc/kallsyms (ss_unwinder_kernel_syms;
 * without one, or when its addresses are hidden, the frames have no name),
 * replay the symbols the capture recorded (ss_unwinder_add_ksym). A symbol
 * covers [start, end); module is NULL for the kernel itself. */
struct ss_ksym {
    uint64_t start, end;
    const char *name;
    const char *module;
};
/* Live: load path (NULL: /proc/kallsyms). -EACCES: every address hidden
 * (kernel.kptr_restrict); err says so and how to change it. */
int ss_unwinder_kernel_syms(struct ss_unwinder *u, const char *path, struct ss_err *err);
/* Replay: a recorded symbol (strings copied). 0 or -ENOMEM. */
int ss_unwinder_add_ksym(struct ss_unwinder *u, const struct ss_ksym *s);
/* The symbols first used to name a frame since the last call, for the
 * capture writer (before the sample): fn for each. */
void ss_unwinder_take_ksyms(struct ss_unwinder *u, void (*fn)(void *ctx, const struct ss_ksym *s),
                            void *ctx);

/* LuaJIT diagnostics per process (record -v, the capture's LuaJIT runtime
 * records): fn for each LuaJIT module of pid whose state changed since the
 * last call, without a rescan. news: SS_LJS_FOUND (the runtime was found,
 * or a file with LuaJIT's API but no usable VM: rt NULL, info says why),
 * SS_LJS_LAYOUT (its layout was chosen), SS_LJS_DIAG (it was turned off,
 * ss_lj_runtime_diag says why). Texts: ss_lj_found_text, ss_lj_layout_text
 * (ss_lj_luajit.h). */
#define SS_LJS_FOUND 1u
#define SS_LJS_LAYOUT 2u
#define SS_LJS_DIAG 4u
struct ss_lj_runtime;
struct ss_lj_elfinfo;
struct ss_lj_status {
    const char *path; /* the mapped file */
    const uint8_t *build_id;
    unsigned build_id_len;
    uint64_t bias;
    const struct ss_lj_runtime *rt;   /* NULL: no usable VM in the file */
    const struct ss_lj_elfinfo *info; /* detection and derivation's result */
    unsigned news;                    /* SS_LJS_* */
};
typedef void (*ss_lj_status_fn)(void *ctx, uint32_t pid, const struct ss_lj_status *st);
void ss_unwinder_lj_news(struct ss_unwinder *u, uint32_t pid, ss_lj_status_fn fn, void *ctx);

/* LuaJIT detection results u's cache holds from index from on
 * (ss_lj_detcache_each): what a capture records before a sample. */
size_t ss_unwinder_lj_detections(struct ss_unwinder *u, size_t from, ss_lj_det_fn fn, void *ctx);

/* Replay: serve pid's target reads from ops/ctx (memory/memory.h) instead of
 * the live process. -ESRCH when the unwinder has no state for pid. */
struct ss_target_ops;
int ss_unwinder_set_target(struct ss_unwinder *u, uint32_t pid, const struct ss_target_ops *ops,
                           void *ctx);

#endif
