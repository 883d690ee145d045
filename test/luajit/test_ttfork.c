/* test/luajit/test_ttfork.c: Tarantool's LuaJIT fork (tarantool/luajit
 * b52fe979, what Tarantool 2.11/3.x link in statically), built by
 * build-ttlj.sh into ${SS_CACHE}/luajit, copied to a name of its own and
 * stripped as Tarantool's binary is, recorded with real BPF:
 *  - GC64 with the JIT: the 5-deep chain (w.lua) with the JIT off and on,
 *    names, coroutines, the FFI callback (JIT off);
 *  - GC64 without the JIT, non-GC64 with the JIT: the chain;
 *  - a C host linked statically against the fork's libluajit.a (lj_host.c):
 *    Lua run by lua_pcall from C, calling C that calls Lua with lua_call
 *    (h.lua), JIT off and on;
 * exact chains on >= 99% of the judged samples, and the layout: the fork's
 * table row, reached from the facts derived from the code. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljcheck.h"
#include "ljtest.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"
#define SECS 1.5

/* The stripped copy of the fork's build variant, named tnt-VARIANT. */
/* Build (once) the fork's variants into the cache dir (dir). */
static void tt_build(char *dir, size_t cap)
{
    char cmd[1024];
    ljt_cache("luajit", dir, cap);
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-ttlj.sh %s", SS_SOURCE_DIR, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        cr_skip_test("no source of Tarantool's LuaJIT fork (build-ttlj.sh: set TTLJ_TARBALL)");
    cr_assert_eq(rc, 0, "building Tarantool's LuaJIT fork failed (%s, log in %s)", cmd, dir);
}

static void tt_bin(const char *variant, char *bin, size_t cap)
{
    char cmd[4096], dir[512];
    tt_build(dir, sizeof(dir));
    snprintf(bin, cap, "%s/ext/tnt-%s", SS_BINARY_DIR, variant);
    /* tests run in parallel processes: each writes its own temporary */
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/ext && strip -o %s.%d %s/lj-tt-%s/luajit && mv %s.%d %s", SS_BINARY_DIR,
             bin, (int)getpid(), dir, variant, bin, (int)getpid(), bin);
    cr_assert_eq(system(cmd), 0, "could not copy and strip the fork's luajit (%s)", cmd);
}

static const char *row(const char *variant)
{
    if (!strcmp(variant, "gc64-jit")) return "tarantool-luajit-b52fe979-gc64";
    if (!strcmp(variant, "gc64-nojit")) return "tarantool-luajit-b52fe979-gc64-nojit";
    return "tarantool-luajit-b52fe979-nogc64";
}

static void chain(const char *variant, bool jit)
{
    char bin[600], label[128];
    tt_bin(variant, bin, sizeof(bin));
    static struct ljc c;
    memset(&c, 0, sizeof(c));
    ljc_case_chain(&c, DIR "w.lua", false);
    c.layout = row(variant);
    c.derived = true;
    c.min_judged = 40;
    c.exact_pct = 99;
    snprintf(label, sizeof(label), "tarantool luajit %s w.lua (JIT %s)", variant,
             jit ? "on" : "off");
    char *argv[] = {bin, jit ? DIR "w.lua" : "-joff", DIR "w.lua", NULL};
    if (jit) argv[2] = NULL;
    ljc_run(label, argv, NULL, SECS, &c);
}

Test(luajit_ttfork, gc64_jit_chain_jit_off)
{
    chain("gc64-jit", false);
}
Test(luajit_ttfork, gc64_jit_chain_jit_on)
{
    chain("gc64-jit", true);
}
Test(luajit_ttfork, gc64_nojit_chain)
{
    chain("gc64-nojit", false);
}
Test(luajit_ttfork, nogc64_jit_chain_jit_off)
{
    chain("nogc64-jit", false);
}
Test(luajit_ttfork, nogc64_jit_chain_jit_on)
{
    chain("nogc64-jit", true);
}

/* Names and builtins, coroutines (the stand-in for fibers), the FFI
 * callback: the interpreter's truth on the GC64 JIT build. */
Test(luajit_ttfork, gc64_jit_names_coro_ffi, LJT_NOT_ASAN)
{
    char bin[600];
    tt_bin("gc64-jit", bin, sizeof(bin));
    static const char *const scripts[] = {"n.lua", "co.lua", "ffi_cb.lua"};
    for (unsigned k = 0; k < 3; k++) {
        static struct ljc c;
        memset(&c, 0, sizeof(c));
        char script[512], label[600];
        snprintf(script, sizeof(script), "%s%s", DIR, scripts[k]);
        if (k == 0) ljc_case_names(&c, script);
        if (k == 1) ljc_case_coro(&c, script);
        if (k == 2) ljc_case_ffi(&c, script);
        c.layout = row("gc64-jit");
        c.derived = true;
        c.min_judged = 40;
        snprintf(label, sizeof(label), "tarantool luajit gc64-jit %s", scripts[k]);
        char *argv[] = {bin, "-joff", script, NULL};
        ljc_run(label, argv, NULL, SECS, &c);
    }
}

/* lj_host.c linked against the fork's static library: the host's main
 * runs h.lua with lua_pcall; viac calls host.ccall (C), which calls Lua
 * back with lua_call (Tarantool's lua_call goes through jit_secure_call). */
static void host(bool jit)
{
    char dir[512], cmd[4096], bin[600];
    tt_build(dir, sizeof(dir));
    snprintf(bin, sizeof(bin), "%s/ext/tnt-host", SS_BINARY_DIR);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/ext && cc -O1 -g -I%s/lj-tt-gc64-jit/include %s/test/luajit/lj_host.c "
             "-o %s.%d %s/lj-tt-gc64-jit/libluajit.a -lm -ldl && mv %s.%d %s",
             SS_BINARY_DIR, dir, SS_SOURCE_DIR, bin, (int)getpid(), dir, bin, (int)getpid(), bin);
    cr_assert_eq(system(cmd), 0, "could not build the C host against the fork (%s)", cmd);
    static struct ljc c;
    memset(&c, 0, sizeof(c));
    const char *S = DIR "h.lua";
    snprintf(c.wbuf[0], sizeof(c.wbuf[0]),
             "main (%s:6);outer (%s:5);pcall ([builtin]:0);viac (%s:3);anonymous (%s:2);"
             "leaf (%s:1)",
             S, S, S, S, S);
    snprintf(c.wbuf[1], sizeof(c.wbuf[1]), "main (%s:6);outer (%s:5);spin (%s:4)", S, S, S);
    c.want[0] = c.wbuf[0];
    c.want[1] = c.wbuf[1];
    c.gaps = true; /* l_ccall between viac and the anonymous function */
    c.below = "lua_pcall";
    c.layout = row("gc64-jit");
    c.derived = true;
    c.min_judged = 40;
    c.exact_pct = 99;
    char *argv[] = {bin, (char *)S, NULL};
    if (jit) setenv("LJ_HOST_JIT", "1", 1);
    ljc_run(jit ? "C host + tarantool libluajit.a h.lua (JIT on)"
                : "C host + tarantool libluajit.a h.lua (JIT off)",
            argv, NULL, SECS, &c);
    unsetenv("LJ_HOST_JIT");
}

Test(luajit_ttfork, c_host_jit_off)
{
    host(false);
}
Test(luajit_ttfork, c_host_jit_on)
{
    host(true);
}

/* Everything cmd writes to stdout and stderr, into buf (NUL-terminated). */
static void run_out(const char *cmd, char *buf, size_t cap)
{
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t n = fread(buf, 1, cap - 1, p);
    buf[n] = 0;
    pclose(p);
}

/* `record -v` and `info` on the capture: where the runtime was found
 * (file, build-id), what derivation made of it, the layout used. */
static void verbose_case(const char *variant, const char *found, const char *found2,
                         const char *layout)
{
    char bin[600], cmd[4096], snap[600], id[64] = "", want[1024];
    static char out[1 << 16], info[1 << 16];
    tt_bin(variant, bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd), "readelf -n %s | awk '/Build ID/ {print $3}'", bin);
    run_out(cmd, id, sizeof(id));
    id[strcspn(id, "\n")] = 0;
    cr_assert(strlen(id) == 40, "%s: no build-id (%s)", bin, id);
    snprintf(snap, sizeof(snap), "%s/ext/ttv-%s-%d.snap", SS_BINARY_DIR, variant, (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s/stacksnap record -v -d 2 -o %s -- %s %sw.lua 2>&1 >/dev/null",
             SS_BINARY_DIR, snap, bin, DIR);
    run_out(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s/stacksnap info %s 2>&1", SS_BINARY_DIR, snap);
    run_out(cmd, info, sizeof(info));
    unlink(snap);
    snprintf(want, sizeof(want), "LuaJIT runtime in %s (build-id %s, bias 0x", bin, id);
    cr_expect(strstr(out, want), "record -v does not say '%s':\n%s", want, out);
    cr_expect(strstr(info, want), "info does not say '%s':\n%s", want, info);
    cr_expect(strstr(out, found), "record -v does not say '%s':\n%s", found, out);
    cr_expect(strstr(info, found), "info does not say '%s':\n%s", found, info);
    cr_expect(strstr(out, found2), "record -v does not say '%s':\n%s", found2, out);
    cr_expect(strstr(info, found2), "info does not say '%s':\n%s", found2, info);
    cr_expect(!strstr(out, "failed:"), "record -v reports a failed derivation:\n%s", out);
    snprintf(want, sizeof(want), "LuaJIT in %s: %s", bin, layout);
    cr_expect(strstr(out, want), "record -v does not say '%s':\n%s", want, out);
    snprintf(want, sizeof(want), "%s: %s", bin, layout);
    cr_expect(strstr(info, want), "info does not say '%s':\n%s", want, info);
}

Test(luajit_ttfork, record_v_and_info)
{
    /* (the VM's address range between the two parts) */
    verbose_case(
        "gc64-jit", "Tarantool's LuaJIT fork, GC64, JIT, VM 0x",
        " (CFA rsp+96, confirmed by lua_pcall lua_call lua_resume); facts derived from the "
        "code: VM entries (3), GC checks, exit handler, BC_JLOOP\n",
        "layout tarantool-luajit-b52fe979-gc64 (derived from the code, equal to this table "
        "row), GC64, JIT");
    verbose_case(
        "gc64-nojit", "Tarantool's LuaJIT fork, GC64, no JIT, VM 0x",
        " (CFA rsp+96, confirmed by lua_pcall lua_call lua_resume); facts derived from the "
        "code: VM entries (3), GC checks\n",
        "layout tarantool-luajit-b52fe979-gc64-nojit (derived from the code, equal to this "
        "table row), GC64, no JIT");
}

/* The same build without .eh_frame: LuaJIT's API is there, the VM's FDE
 * is not; -v and info say so and why. */
Test(luajit_ttfork, record_v_no_vm)
{
    char bin[600], cmd[4096], nov[700], snap[720], want[1024];
    static char out[1 << 16], info[1 << 16];
    tt_bin("gc64-jit", bin, sizeof(bin));
    snprintf(nov, sizeof(nov), "%s/ext/tnt-noeh-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd),
             "objcopy --remove-section=.eh_frame --remove-section=.eh_frame_hdr %s %s", bin, nov);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    snprintf(snap, sizeof(snap), "%s.snap", nov);
    snprintf(cmd, sizeof(cmd), "%s/stacksnap record -v -d 1 -o %s -- %s %sw.lua 2>&1 >/dev/null",
             SS_BINARY_DIR, snap, nov, DIR);
    run_out(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s/stacksnap info %s 2>&1", SS_BINARY_DIR, snap);
    run_out(cmd, info, sizeof(info));
    unlink(snap);
    unlink(nov);
    snprintf(want, sizeof(want), "LuaJIT's API but no usable VM in %s (build-id ", nov);
    cr_expect(strstr(out, want), "record -v does not say '%s':\n%s", want, out);
    cr_expect(strstr(info, want), "info does not say '%s':\n%s", want, info);
    const char *why = "Tarantool's LuaJIT fork, GC64; VM not found: no .eh_frame";
    cr_expect(strstr(out, why), "record -v does not say '%s':\n%s", why, out);
    cr_expect(strstr(info, why), "info does not say '%s':\n%s", why, info);
}

/* VM-state pseudo frames on the fork (LJ_VMST_LFUNC, FFUNC, CFUNC after
 * INTERP; GC is -5 there): allocation shows [GC], C functions called from
 * Lua show no state (before: "[trace exit]" above every os.clock on the
 * stripped builds that read G->vmstate from the sample), never a JIT
 * state with the JIT off. */
struct states {
    unsigned samples, gc, wrong, clock;
};
static void on_states(void *ctx, const struct ss_stack *st, const char *folded)
{
    (void)st;
    struct states *s = ctx;
    s->samples++;
    if (strstr(folded, "[GC]")) s->gc++;
    if (strstr(folded, "[trace exit]") || strstr(folded, "[JIT compiler]")) s->wrong++;
    if (strstr(folded, "os.clock ([builtin]:0)")) s->clock++;
}

static void states(const char *variant)
{
    char bin[600], msg[256];
    tt_bin(variant, bin, sizeof(bin));
    struct states s = {0};
    struct ljr_stats st;
    char *argv[] = {bin, "-joff", DIR "tt_states.lua", NULL};
    int rc = ljr_run(argv, NULL, 300, 499, SECS, on_states, &s, &st, msg, sizeof(msg));
    cr_assert_eq(rc, 0, "%s: recording failed: %s", variant, msg);
    cr_log_info("tarantool luajit %s tt_states.lua: %u samples, %u [GC], %u in os.clock, %u with a "
                "JIT state",
                variant, s.samples, s.gc, s.clock, s.wrong);
    cr_expect(s.samples >= 100, "%s: only %u samples", variant, s.samples);
    cr_expect(s.gc * 20 >= s.samples, "%s: only %u of %u samples show [GC]", variant, s.gc,
              s.samples);
    cr_expect(s.clock * 20 >= s.samples, "%s: only %u of %u samples in os.clock", variant, s.clock,
              s.samples);
    cr_expect_eq(s.wrong, 0u, "%s: %u samples with the JIT off show a JIT state", variant, s.wrong);
}

Test(luajit_ttfork, vm_states_gc64_nojit)
{
    states("gc64-nojit");
}
Test(luajit_ttfork, vm_states_nogc64_jit)
{
    states("nogc64-jit");
}

/* Short calls (test/cli/short.lua, the shape of request handlers: leaves
 * of ~1, 5 and 20 us under handler): every sample in spin shows the whole
 * chain with the caller's line, the JIT off and on. */
struct shortc {
    unsigned samples, judged, exact, by[3];
    char bad[2048];
};
static void on_short(void *ctx, const struct ss_stack *st, const char *folded)
{
    struct shortc *c = ctx;
    c->samples++;
    char lua[4096];
    ljr_lua_only(st, lua, sizeof(lua));
    const char *leaf = strrchr(lua, ';');
    if (!leaf || strncmp(leaf + 1, "spin (", 6)) return;
    c->judged++;
    const char *S = SS_SOURCE_DIR "/test/cli/short.lua";
    static const char *const callee[3] = {"parse", "route", "render"};
    for (unsigned k = 0; k < 3; k++)
        for (unsigned line = 8; line <= 11; line++) {
            char want[2048];
            snprintf(want, sizeof(want),
                     "main (%s:36);run (%s:30);recurse (%s:23);handler (%s:17);%s (%s:%u);"
                     "spin (%s:%u)",
                     S, S, S, S, callee[k], S, 14 + k, S, line);
            if (strcmp(lua, want)) continue;
            c->exact++;
            c->by[k]++;
            return;
        }
    if (!c->bad[0]) snprintf(c->bad, sizeof(c->bad), "%.2000s", folded);
}

static void short_calls(const char *variant, bool jit)
{
    char bin[600], msg[256];
    tt_bin(variant, bin, sizeof(bin));
    static struct shortc c;
    memset(&c, 0, sizeof(c));
    struct ljr_stats st;
    char *argv[] = {bin, jit ? SS_SOURCE_DIR "/test/cli/short.lua" : "-joff",
                    SS_SOURCE_DIR "/test/cli/short.lua", "600", NULL};
    if (jit) argv[1] = argv[2], argv[2] = argv[3], argv[3] = NULL;
    int rc = ljr_run(argv, NULL, 300, 499, SECS, on_short, &c, &st, msg, sizeof(msg));
    cr_assert_eq(rc, 0, "%s: recording failed: %s", variant, msg);
    cr_log_info("tarantool luajit %s short.lua (JIT %s): %u samples, %u in spin, %u exact "
                "(parse %u, route %u, render %u); layout %s",
                variant, jit ? "on" : "off", c.samples, c.judged, c.exact, c.by[0], c.by[1],
                c.by[2], st.layout);
    cr_expect(c.judged >= 100, "%s: only %u samples in spin of %u", variant, c.judged, c.samples);
    cr_expect(c.exact * 100 >= c.judged * 99,
              "%s: %u of %u samples in spin exact; first wrong:\n%s", variant, c.exact, c.judged,
              c.bad);
    cr_expect(c.by[1] && c.by[2], "%s: route %u, render %u samples", variant, c.by[1], c.by[2]);
}

Test(luajit_ttfork, short_calls_jit_off)
{
    short_calls("gc64-jit", false);
}
Test(luajit_ttfork, short_calls_jit_on)
{
    short_calls("gc64-jit", true);
}
