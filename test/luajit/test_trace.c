/* test/luajit/test_trace.c: samples in JIT-compiled trace code (JIT on),
 * recorded with real BPF and unwound with ss_unwind as they arrive.
 *
 *  - jit_inline.lua: outer -> mid -> leaf inlined into one trace; the
 *    samples must show main;outer (15);mid (9);leaf (5) or the prefix of it
 *    that the snapshots on both sides of the sampled code show (main;outer
 *    mostly: issue 32) under lua_pcall (>= 95%), and most
 *    samples must have come through a trace (runtime statistics), on
 *    Debian's luajit, OpenResty luajit2, the non-GC64 JIT build and
 *    Tarantool (no SnapShot.mcofs: snapshots placed by guards, whose
 *    placement is checked against mcofs on the non-GC64 build).
 *  - jit_states.lua on the unstripped matrix build: every [GC] and
 *    [JIT compiler] pseudo frame sits under native frames of LuaJIT's GC or
 *    trace compiler (symbols tell), and [GC] appears.
 *  - jit_exits.lua: samples in the trace exit handler (lj_trace_exit) keep
 *    their Lua frames and native callers (GC64 and non-GC64 builds).
 * Debian 13 (source builds, and its luajit in a container) runs the inline
 * and exit cases too. The jit.p witness and replays are in test_jitwit.c. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ljcheck.h"
#include "ljtest.h"
#include "ljtrec.h"

#include "stacksnap/capture.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "unwind/lua_runtimes.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"
#define INLINE DIR "jit_inline.lua"

/* ---- inlined frames ---- */

static void inline_chain_in(const char *label, const char *bin, const char *ldp, const char *layout,
                            const char *root)
{
    static struct ljc c;
    static struct rec r;
    memset(&c, 0, sizeof(c));
    const char *script = root ? "/mnt/jit_inline.lua" : INLINE;
    /* the loop's copy has one snapshot inside leaf (its store) and the
     * next at outer's FORL: the code between them (leaf's math and its
     * calls to sin/cos, mid's, outer's add) runs under outer, the frame
     * both show; mid and leaf are not proven there (issue 32), so only the
     * prefix is given. Samples at leaf's own guards keep all frames. */
    snprintf(c.wbuf[0], sizeof(c.wbuf[0]), "main (%s:23);outer (%s:15);mid (%s:9);leaf (%s:5)",
             script, script, script, script);
    snprintf(c.wbuf[1], sizeof(c.wbuf[1]), "main (%s:23);outer (%s:15);mid (%s:9)", script, script,
             script);
    snprintf(c.wbuf[2], sizeof(c.wbuf[2]), "main (%s:23);outer (%s:15)", script, script);
    snprintf(c.wbuf[3], sizeof(c.wbuf[3]), "main (%s:23);outer (%s:14)", script, script);
    for (int k = 0; k < 4; k++)
        c.want[k] = c.wbuf[k];
    c.below = "lua_pcall";
    char *argv[] = {(char *)bin, (char *)script, NULL};
    ljt_record_ex(argv, ldp, 4, ljc_on, &c, &r, false, 0, root);
    double us = r.samples ? r.unwind_ns / r.samples / 1000 : 0;
    cr_log_info("%s: %u samples, %u with Lua frames (%.1f%%), %u judged, %u exact (%.1f%%); "
                "%lu trace samples, %lu traces decoded; %.1f us/sample, %.2f reads/sample",
                label, c.samples, c.lua, c.samples ? 100.0 * c.lua / c.samples : 0, c.judged,
                c.exact, c.judged ? 100.0 * c.exact / c.judged : 0,
                (unsigned long)r.lj.trace_samples, (unsigned long)r.lj.trace_loads, us,
                r.samples ? (double)r.target_calls / r.samples : 0);
    cr_expect(c.judged >= 300, "%s: only %u samples in leaf (%u samples, %u with Lua)", label,
              c.judged, c.samples, c.lua);
    cr_expect(c.exact * 100 >= c.judged * 95, "%s: %u of %u leaf samples exact; first wrong:\n%s",
              label, c.exact, c.judged, c.bad);
    cr_expect(r.lj.trace_samples * 100 >= c.samples * 80,
              "%s: only %lu of %u samples were attributed through a trace", label,
              (unsigned long)r.lj.trace_samples, c.samples);
    cr_expect(c.lua * 100 >= c.samples * 90, "%s: %u of %u samples have Lua frames", label, c.lua,
              c.samples);
    if (layout) {
        const char *got = r.layout[0] ? r.layout : "-";
        cr_expect_str_eq(got, layout, "%s: layout %s, want %s", label, got, layout);
    }
}

static void inline_chain(const char *label, const char *bin, const char *ldp, const char *layout)
{
    inline_chain_in(label, bin, ldp, layout, NULL);
}

Test(luajit_trace, inline_debian_luajit)
{
    inline_chain("debian luajit", "/usr/bin/luajit", NULL, "debian-luajit-2.1.0-beta3-git20220320");
}

Test(luajit_trace, inline_openresty_luajit2)
{
    char cmd[600], bin[512];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-ext.sh %s/ext", SS_SOURCE_DIR, SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack luajit2 (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/ext/luajit2/usr/bin/luajit", SS_BINARY_DIR);
    inline_chain("openresty luajit2", bin, NULL, "openresty-luajit2-2.1-20230119");
}

Test(luajit_trace, inline_trixie_built_gc64_jit)
{
    inline_chain("trixie built gc64-jit", ljt_built_trixie("gc64-jit"), NULL, "derived-gc64-jit");
}

Test(luajit_trace, inline_trixie_built_nogc64_jit, LJT_NOT_ASAN)
{
    inline_chain("trixie built nogc64-jit", ljt_built_trixie("nogc64-jit"), NULL,
                 "derived-nogc64-jit");
}

/* Debian 13's own luajit in mount+pid namespaces chrooted into its root. */
Test(luajit_trace, inline_trixie_luajit_container, LJT_NOT_ASAN)
{
    char root[512];
    ljt_trixie_root(root, sizeof(root));
    inline_chain_in("trixie luajit (container)", "/usr/bin/luajit", NULL, "derived-gc64-jit", root);
}

Test(luajit_trace, inline_built_gc64_jit)
{
    inline_chain("built gc64-jit", ljt_built("gc64-jit"), NULL,
                 "debian-luajit-2.1.0-beta3-git20220320");
}

/* (ASan: the non-GC64 walk runs on Debian's luajit, inline_debian_luajit) */
Test(luajit_trace, inline_built_nogc64_jit, LJT_NOT_ASAN)
{
    inline_chain("built nogc64-jit", ljt_built("nogc64-jit"), NULL,
                 "luajit-2.1-git20220320-nogc64");
}

/* Tarantool 2.6's LuaJIT has no SnapShot.mcofs: its snapshots are placed
 * by the guards that branch to their exit stubs (guards.c). */
Test(luajit_trace, inline_tarantool)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    inline_chain("tarantool", "/usr/bin/tarantool", NULL, "tarantool-2.6-luajit-nogc64");
}

static void count_any(void *ctx, const struct ss_stack *st, const char *folded)
{
    (void)st, (void)folded;
    ++*(unsigned *)ctx;
}

/* The guard placement against the real SnapShot.mcofs of the non-GC64
 * build (same code generator as Tarantool's): the frames the guards give
 * must be the frames mcofs gives. Measured: 100% (jit_inline), 99.3-99.5%
 * (witness_jit), 99.9% (jit_states). */
Test(luajit_trace, guard_placement_matches_mcofs)
{
    static const char *const scripts[] = {"jit_inline.lua", "witness_jit.lua", "jit_states.lua"};
    for (unsigned i = 0; i < 3; i++) {
        static struct rec r;
        unsigned n = 0;
        char script[512];
        snprintf(script, sizeof(script), "%s%s", DIR, scripts[i]);
        char *argv[] = {(char *)ljt_built("nogc64-jit"), script, NULL};
        ljt_record_ex(argv, NULL, 3, count_any, &n, &r, true, 0, NULL);
        cr_log_info("%s: %u samples, %llu trace samples checked, %llu with the same frames "
                    "(%.1f%%)",
                    scripts[i], n, (unsigned long long)r.lj.guard_checked,
                    (unsigned long long)r.lj.guard_same,
                    r.lj.guard_checked ? 100.0 * r.lj.guard_same / r.lj.guard_checked : 0);
        cr_expect(r.lj.guard_checked >= 300, "%s: only %llu trace samples checked", scripts[i],
                  (unsigned long long)r.lj.guard_checked);
        cr_expect(r.lj.guard_same * 100 >= r.lj.guard_checked * 97,
                  "%s: guards placed %llu of %llu trace samples in a snapshot with the frames "
                  "mcofs gives",
                  scripts[i], (unsigned long long)r.lj.guard_same,
                  (unsigned long long)r.lj.guard_checked);
    }
}

/* ---- VM-state pseudo frames ---- */

struct states {
    unsigned gc, jit, gc_bad, jit_bad;
    bool stripped; /* no symbols to judge the labels by */
    char bad[2048];
};

static bool prefixed(const char *name, const char *const *pfx)
{
    for (; name && *pfx; pfx++)
        if (!strncmp(name, *pfx, strlen(*pfx))) return true;
    return false;
}

static void on_state(void *ctx, const struct ss_stack *st, const char *folded)
{
    static const char *const gcf[] = {"lj_gc_", "gc_", NULL};
    static const char *const jitf[] = {
        "lj_record", "rec_",     "lj_opt_",     "lj_asm_", "asm_",    "lj_trace_",   "trace_",
        "lj_snap_",  "snap_",    "lj_mcode",    "mcode_",  "lj_ir_",  "lj_ffrecord", "lj_crecord",
        "crec_",     "lj_meta_", "loop_",       "split_",  "sink_",   "fold_",       "lj_fold",
        "ra_",       "emit_",    "lj_dispatch", "lj_vm_",  "lj_mem_", "lj_alloc",    NULL};
    struct states *s = ctx;
    for (unsigned i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind != SS_FRAME_PSEUDO || !f->name) continue;
        bool is_gc = !strcmp(f->name, "[GC]"), is_jit = !strcmp(f->name, "[JIT compiler]");
        if (!is_gc && !is_jit) continue; /* e.g. [trace exit]: not counted here */
        if (s->stripped) {
            s->gc += is_gc, s->jit += is_jit;
            continue;
        }
        /* the C frames above it must include one of that part of LuaJIT */
        bool ok = false;
        for (unsigned k = 0; k < i && !ok; k++)
            ok = prefixed(st->frames[k].name, is_gc ? gcf : jitf);
        if (is_gc) s->gc++, s->gc_bad += !ok;
        if (is_jit) s->jit++, s->jit_bad += !ok;
        if (!ok && !s->bad[0]) snprintf(s->bad, sizeof(s->bad), "%.2000s", folded);
    }
}

static void vm_state_frames(const char *bin)
{
    static struct states s;
    static struct rec r;
    memset(&s, 0, sizeof(s));
    char *argv[] = {(char *)bin, DIR "jit_states.lua", NULL};
    ljt_record(argv, NULL, 5, on_state, &s, &r);
    cr_log_info("vm states: %u samples, [GC] %u (%u unconfirmed), [JIT compiler] %u (%u)",
                r.samples, s.gc, s.gc_bad, s.jit, s.jit_bad);
    /* This build has symbols: the sampled call chain decides the state
     * (vmstate.c), so every sample in the GC or the trace compiler gets its
     * label. Measured: [GC] 38-42% of samples, [JIT compiler] ~8% (jit.p -jp=v
     * on the same script: 33% GC; it cannot see compiler time). */
    cr_expect(s.gc * 10 >= r.samples, "only %u [GC] frames in %u samples", s.gc, r.samples);
    cr_expect(s.jit * 100 >= r.samples, "only %u [JIT compiler] frames in %u samples", s.jit,
              r.samples);
    cr_expect(s.gc_bad == 0 && s.jit_bad == 0, "a state frame not under GC/JIT code:\n%s", s.bad);
}

Test(luajit_trace, vm_state_frames)
{
    vm_state_frames(ljt_built("gc64-jit"));
}

Test(luajit_trace, vm_state_frames_trixie_built)
{
    vm_state_frames(ljt_built_trixie("gc64-jit"));
}

/* Debian's stripped luajit: the state functions come from its code
 * (stfn.c, checked against symbols by state_functions_stripped below).
 * Measured: [GC] ~40%, [JIT compiler] ~7% of samples (0.1-0.7% and ~0 when
 * only the live vmstate read could confirm a label). */
static void vm_state_frames_stripped_bin(const char *bin, const char *root, bool named)
{
    static struct states s;
    static struct rec r;
    memset(&s, 0, sizeof(s));
    s.stripped = !named;
    char *argv[] = {(char *)bin, root ? "/mnt/jit_states.lua" : DIR "jit_states.lua", NULL};
    ljt_record_ex(argv, NULL, 5, on_state, &s, &r, false, 0, root);
    cr_log_info("vm states (stripped): %u samples, [GC] %u, [JIT compiler] %u", r.samples, s.gc,
                s.jit);
    cr_expect(s.gc * 10 >= r.samples, "only %u [GC] frames in %u samples", s.gc, r.samples);
    cr_expect(s.jit * 100 >= r.samples, "only %u [JIT compiler] frames in %u samples", s.jit,
              r.samples);
    cr_expect(s.gc_bad == 0 && s.jit_bad == 0, "a state frame not under GC/JIT code:\n%s", s.bad);
}

static void vm_state_frames_stripped(const char *root)
{
    vm_state_frames_stripped_bin("/usr/bin/luajit", root, false);
}

Test(luajit_trace, vm_state_frames_stripped)
{
    vm_state_frames_stripped(NULL);
}

/* A stripped non-GC64 build: stfn.c finds no state functions in its code
 * (it knows GC64 code), so the sample's own G->vmstate names the state
 * (the plan's window on the global state, vmstate.c). Before the windows a
 * label needed a live read of vmstate confirmed by the return addresses:
 * 0.1-0.7% [GC], ~0 [JIT compiler], where the symbols give ~40% and ~7%.
 * Its frames are still named (the symbolizer finds the unstripped build by
 * its build-id), so each label is checked against the C code above it. */
Test(luajit_trace, vm_state_frames_stripped_nogc64)
{
    char strip[700], cmd[1600];
    snprintf(strip, sizeof(strip), "%s/stripped-nogc64-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd), "objcopy --strip-all %s %s", ljt_built("nogc64-jit"), strip);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    vm_state_frames_stripped_bin(strip, NULL, true);
    unlink(strip);
}

/* Debian 13's stripped luajit in a container. */
Test(luajit_trace, vm_state_frames_stripped_trixie_container, LJT_NOT_ASAN)
{
    char root[512];
    ljt_trixie_root(root, sizeof(root));
    vm_state_frames_stripped(root);
}

/* ---- VM-state functions of a stripped build ---- */

/* stfn.c finds, in a stripped GC64 build, the functions that switch
 * G->vmstate from their code. The matrix build has symbols: strip a copy
 * and every function found must be one its symbols name, state for state
 * (GC: lj_gc_step, lj_gc_fullgc; compiler: trace_state; lj_trace_exit). */
static void state_functions_stripped(const char *bin)
{
    char strip[700], cmd[1600];
    snprintf(strip, sizeof(strip), "%s/stripped-luajit-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd), "objcopy --strip-all %s %s", bin, strip);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    struct ss_lj_elfinfo sym, code;
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file(bin, &sym, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_lj_detect_file(strip, &code, &err), 0, "%s", err.msg);
    unlink(strip);
    unsigned states = 0;
    for (uint32_t i = 0; i < code.nstfn; i++) {
        const struct ss_lj_stfn *c = &code.stfn[i];
        bool named = false;
        for (uint32_t j = 0; j < sym.nstfn; j++)
            named |=
                sym.stfn[j].lo == c->lo && sym.stfn[j].hi == c->hi && sym.stfn[j].state == c->state;
        cr_log_info("stripped: state %u in %#lx-%#lx%s", c->state, (unsigned long)c->lo,
                    (unsigned long)c->hi, named ? "" : " (no symbol names it)");
        cr_expect(named, "state %u function %#lx-%#lx is not one the symbols name", c->state,
                  (unsigned long)c->lo, (unsigned long)c->hi);
        states |= 1u << c->state;
    }
    cr_expect_eq(states, 1u << 2 | 1u << 3 | 1u << 4, "states found without symbols: %#x", states);
}

Test(luajit_trace, state_functions_stripped)
{
    state_functions_stripped(ljt_built("gc64-jit"));
}

Test(luajit_trace, state_functions_stripped_trixie, LJT_NOT_ASAN)
{
    state_functions_stripped(ljt_built_trixie("gc64-jit"));
}

/* ---- trace exits ---- */

struct exits {
    unsigned in_exit, lua, rooted;
    bool by_label; /* stripped binary: exit samples are the ones labelled [trace exit] */
    char bad[2048];
};

/* Samples under lj_trace_exit (the matrix builds have symbols): the native
 * walk must step out of vm_exit_handler to the VM frame the trace ran on,
 * so the Lua frames of the exiting loop and the native callers show. */
static void on_exit_sample(void *ctx, const struct ss_stack *st, const char *folded)
{
    struct exits *e = ctx;
    bool in_exit = false, lua = false, rooted = false;
    for (unsigned i = 0; i < st->nframes; i++) {
        const char *nm = st->frames[i].name;
        if (!nm) continue;
        if (!strcmp(nm, e->by_label ? "[trace exit]" : "lj_trace_exit")) in_exit = true;
        /* the exiting loop's line, under the main chunk's call */
        if (st->frames[i].kind == SS_FRAME_LUA && !strcmp(nm, "exits") &&
            st->frames[i].line == 11 && i + 1 < st->nframes && st->frames[i + 1].name &&
            !strcmp(st->frames[i + 1].name, "main") && st->frames[i + 1].line == 16)
            lua = true;
        if (!strcmp(nm, "main") && st->frames[i].kind != SS_FRAME_LUA) rooted = true;
    }
    if (!in_exit) return;
    e->in_exit++;
    e->lua += lua;
    e->rooted += rooted;
    if ((!lua || !rooted) && !e->bad[0]) snprintf(e->bad, sizeof(e->bad), "%.2000s", folded);
}

static void trace_exits(const char *variant)
{
    static struct exits e;
    static struct rec r;
    memset(&e, 0, sizeof(e));
    e.by_label = !strcmp(variant, "debian");
    const char *bin = e.by_label                        ? "/usr/bin/luajit"
                      : !strncmp(variant, "trixie-", 7) ? ljt_built_trixie(variant + 7)
                                                        : ljt_built(variant);
    char *argv[] = {(char *)bin, DIR "jit_exits.lua", NULL};
    ljt_record(argv, NULL, 4, on_exit_sample, &e, &r);
    cr_log_info("trace exits (%s): %u samples, %u in the exit handler, %u of them with the Lua "
                "frame, %u reaching main",
                variant, r.samples, e.in_exit, e.lua, e.rooted);
    cr_expect(e.in_exit * 20 >= r.samples, "%s: only %u of %u samples in lj_trace_exit", variant,
              e.in_exit, r.samples);
    /* Measured: 99% reach main, 98.5-99.5% show main;exits at the right
     * lines (75-85% before another exit's snapshot restore, running under a
     * newer lj_vm_cpcall when the stack is read, was accepted). */
    cr_expect(e.lua * 10 >= e.in_exit * 9 && e.rooted * 10 >= e.in_exit * 9,
              "%s: %u/%u of %u exit samples with Lua frames/main; first without:\n%s", variant,
              e.lua, e.rooted, e.in_exit, e.bad);
}

Test(luajit_trace, trace_exits_gc64)
{
    trace_exits("gc64-jit");
}
Test(luajit_trace, trace_exits_nogc64, LJT_NOT_ASAN) /* ASan: trace_exits_debian */
{
    trace_exits("nogc64-jit");
}
Test(luajit_trace, trace_exits_trixie_gc64)
{
    trace_exits("trixie-gc64-jit");
}
Test(luajit_trace, trace_exits_trixie_nogc64, LJT_NOT_ASAN)
{
    trace_exits("trixie-nogc64-jit");
}
/* Debian's stripped luajit: the handler and lj_trace_exit are found by their
 * code; measured: every [trace exit] sample reaches main with main;exits. */
Test(luajit_trace, trace_exits_debian)
{
    trace_exits("debian");
}

/* ---- C called from a fast function ---- */

struct ffc {
    unsigned in_sin, chain;
    char bad[2048];
};

/* Samples in libm's sin: the frames below must be math.sin, then f. */
static void on_ffc(void *ctx, const struct ss_stack *st, const char *folded)
{
    struct ffc *c = ctx;
    unsigned i = 0;
    while (i < st->nframes && st->frames[i].kind != SS_FRAME_LUA &&
           !(st->frames[i].name && strstr(st->frames[i].name, "sin")))
        i++;
    if (i == st->nframes || st->frames[i].kind == SS_FRAME_LUA) return;
    while (i < st->nframes && st->frames[i].name && strstr(st->frames[i].name, "sin") &&
           st->frames[i].kind != SS_FRAME_LUA)
        i++;
    c->in_sin++;
    bool ok = i + 1 < st->nframes && st->frames[i].name &&
              !strcmp(st->frames[i].name, "math.sin") && st->frames[i + 1].name &&
              !strcmp(st->frames[i + 1].name, "f") && st->frames[i + 1].line == 4;
    c->chain += ok;
    if (!ok && !c->bad[0]) snprintf(c->bad, sizeof(c->bad), "%.2000s", folded);
}

Test(luajit_trace, c_under_fast_function)
{
    static struct ffc c;
    static struct rec r;
    memset(&c, 0, sizeof(c));
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "ffunc_c.lua", "4", NULL};
    ljt_record(argv, NULL, 4, on_ffc, &c, &r);
    cr_log_info("C under a fast function: %u samples, %u in sin, %u with f;math.sin under it",
                r.samples, c.in_sin, c.chain);
    /* Measured 74% (0 before rbp was used as BASE); the rest were read
     * after math.sin returned, when its frame slot holds the result. */
    cr_expect(c.in_sin * 4 >= r.samples, "only %u of %u samples in sin", c.in_sin, r.samples);
    cr_expect(c.chain * 2 >= c.in_sin, "%u of %u sin samples show f;math.sin; first not:\n%s",
              c.chain, c.in_sin, c.bad);
}

/* ---- C called from trace code ---- */

struct cft {
    unsigned lua, below; /* Lua samples; those with native frames above a Lua one */
};

static void on_cft(void *ctx, const struct ss_stack *st, const char *folded)
{
    (void)folded;
    struct cft *c = ctx;
    unsigned i = 0; /* the first Lua frame */
    while (i < st->nframes && st->frames[i].kind != SS_FRAME_LUA)
        i++;
    if (i == st->nframes) return;
    c->lua++;
    bool native = false;
    for (unsigned j = 0; j < i; j++)
        native |= st->frames[j].kind == SS_FRAME_NATIVE;
    c->below += native;
}

/* short.lua's loop calls os.clock from a trace (clock_gettime, a syscall):
 * the native walk from libc or the kernel reaches the trace's frame, where
 * no CFI is, and the trace check takes it from there. No libunwind step for
 * it: that one could only guess (was about one a Lua sample, two
 * sigprocmask calls each). */
Test(luajit_trace, c_called_from_trace_no_libunwind)
{
    static struct cft c;
    static struct rec r;
    memset(&c, 0, sizeof(c));
    char *argv[] = {"/usr/bin/luajit", SS_SOURCE_DIR "/test/cli/short.lua", "4", NULL};
    ljt_record(argv, NULL, 3, on_cft, &c, &r);
    cr_log_info("C from trace code: %u samples, %u with Lua frames, %u of them with native "
                "frames above; %lu trace samples, %lu libunwind steps",
                r.samples, c.lua, c.below, (unsigned long)r.lj.trace_samples,
                (unsigned long)r.unw_steps);
    cr_expect(c.lua * 10 >= r.samples * 9, "%u of %u samples have Lua frames", c.lua, r.samples);
    cr_expect(r.lj.trace_samples * 2 >= r.samples, "only %lu of %u samples through a trace",
              (unsigned long)r.lj.trace_samples, r.samples);
    cr_expect(c.below * 20 >= c.lua, "only %u of %u Lua samples in native code", c.below, c.lua);
    cr_expect(r.unw_steps * 20 <= r.samples, "%lu libunwind steps in %u samples",
              (unsigned long)r.unw_steps, r.samples);
}
