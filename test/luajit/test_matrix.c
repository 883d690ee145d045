/* test/luajit/test_matrix.c: the interpreter ground truth (JIT off) on every
 * LuaJIT build this machine has, recorded with real BPF and unwound live:
 *  - Debian's LuaJIT source built four ways by build-luajit.sh (cached in
 *    the build folder): GC64 + JIT, GC64 without JIT, non-GC64 + JIT,
 *    non-GC64 without JIT;
 *  - Debian's luajit binary and libluajit-5.1.so.2 (through lj_host);
 *  - OpenResty luajit2 (unpacked .debs, fetch-ext.sh);
 *  - Debian's tarantool 2.6 (non-GC64 LuaJIT inside, Lua on fiber stacks).
 * Per build: the 5-deep chain (w.lua), names and builtins (n.lua),
 * coroutines (co.lua) and the FFI callback (ffi_cb.lua), each with exact
 * chains and lines, and the layout descriptor the self-checks chose. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ljcheck.h"
#include "ljtest.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"
#define SECS 1.5

enum { CHAIN, NAMES, CORO, FFI, NCASES };
static const char *const scripts[NCASES] = {"w.lua", "n.lua", "co.lua", "ffi_cb.lua"};
#if defined(__SANITIZE_ADDRESS__)
/* Under ASan the point is the walker's memory safety on each layout: the
 * chain and the coroutine case of every build (the names and the FFI
 * callback cases judge agreement: normal build), in half the suite time. */
#define CASES (1u << CHAIN | 1u << CORO)
#else
#define CASES (~0u)
#endif

/* Run the cases in mask on a luajit-like command: argv0 [pre...] script;
 * in a namespaced chroot of root when set (the scripts are /mnt/... there,
 * and so are the chunk names); derived: the layout must be derived. */
static void run_cases_in(const char *label, const char *bin, const char *pre, const char *ldp,
                         const char *layout, unsigned mask, const char *root, bool derived)
{
    for (unsigned k = 0; k < NCASES; k++) {
        if (!(mask & CASES & (1u << k))) continue;
        static struct ljc c;
        memset(&c, 0, sizeof(c));
        char script[512], name[600];
        snprintf(script, sizeof(script), "%s%s", root ? "/mnt/" : DIR, scripts[k]);
        snprintf(name, sizeof(name), "%s %s", label, scripts[k]);
        switch (k) {
        case CHAIN:
            ljc_case_chain(&c, script, false);
            break;
        case NAMES:
            ljc_case_names(&c, script);
            break;
        case CORO:
            ljc_case_coro(&c, script);
            break;
        default:
            ljc_case_ffi(&c, script);
            break;
        }
        c.layout = layout;
        c.root = root;
        c.derived = derived;
        c.min_judged = 40;
        char *argv[5];
        unsigned n = 0;
        argv[n++] = (char *)bin;
        if (pre) argv[n++] = (char *)pre;
        if (pre && !strcmp(pre, "-e")) argv[n++] = "jit.off()";
        argv[n++] = script;
        argv[n] = NULL;
        ljc_run(name, argv, ldp, SECS, &c);
    }
}

static void run_cases(const char *label, const char *bin, const char *pre, const char *ldp,
                      const char *layout, unsigned mask)
{
    run_cases_in(label, bin, pre, ldp, layout, mask, NULL, true);
}

#define ALL ((1u << NCASES) - 1)

static void built(const char *variant, const char *layout)
{
    char cmd[1024], bin[600];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "building Debian's LuaJIT source failed (%s, log in %s/ext)", cmd,
                 SS_BINARY_DIR);
    snprintf(bin, sizeof(bin), "%s/ext/lj-%s/luajit", SS_BINARY_DIR, variant);
    cr_assert_eq(access(bin, X_OK), 0, "%s missing", bin);
    char label[64];
    snprintf(label, sizeof(label), "built %s", variant);
    run_cases(label, bin, "-joff", NULL, layout, ALL);
}

/* Debian 13's luajit source (2.1.0+openresty20250117) built the same four
 * ways, cached in ${SS_CACHE}/luajit: no table row describes it, the layout
 * is derived from each binary's code. */
static void built_trixie(const char *variant, const char *layout)
{
    char cmd[1024], bin[600], dir[512];
    ljt_cache("luajit", dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s trixie", SS_SOURCE_DIR, dir);
    cr_assert_eq(system(cmd), 0, "building Debian 13's LuaJIT source failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/lj-trixie-%s/luajit", dir, variant);
    cr_assert_eq(access(bin, X_OK), 0, "%s missing", bin);
    char label[64];
    snprintf(label, sizeof(label), "trixie built %s", variant);
    run_cases(label, bin, "-joff", NULL, layout, ALL);
}

Test(luajit_matrix, trixie_built_gc64_jit)
{
    built_trixie("gc64-jit", "derived-gc64-jit");
}
Test(luajit_matrix, trixie_built_gc64_nojit, LJT_NOT_ASAN)
{
    built_trixie("gc64-nojit", "derived-gc64-nojit");
}
Test(luajit_matrix, trixie_built_nogc64_jit)
{
    built_trixie("nogc64-jit", "derived-nogc64-jit");
}
Test(luajit_matrix, trixie_built_nogc64_nojit, LJT_NOT_ASAN)
{
    built_trixie("nogc64-nojit", "derived-nogc64-nojit");
}

/* Debian 13's own luajit binary (PIE, stripped, its glibc) run the way a
 * container runs it: own mount and pid namespaces, chrooted into a trixie
 * root (test/roots/mkroot.sh), profiled from the host. Chunk names are the
 * paths the container sees (/mnt/...). */
Test(luajit_matrix, trixie_luajit_container)
{
    char root[512];
    ljt_trixie_root(root, sizeof(root));
    run_cases_in("trixie luajit (container)", "/usr/bin/luajit", "-joff", NULL, "derived-gc64-jit",
                 ALL, root, true);
}

/* A C host (lj_host.c) linking Debian 13's libluajit-5.1.so.2, compiled
 * here (the Lua C API headers are the same) into the root's /tmp and run in
 * the container against that library and glibc. */
Test(luajit_matrix, trixie_libluajit_host_container, LJT_NOT_ASAN)
{
    char root[512], cmd[2048], bin[64];
    ljt_trixie_root(root, sizeof(root));
    snprintf(bin, sizeof(bin), "/tmp/lj_host-%d", (int)getpid());
    snprintf(cmd, sizeof(cmd),
             "cc -O1 -I/usr/include/luajit-2.1 %s/test/luajit/lj_host.c -o %s%s "
             "%s/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2 -Wl,--allow-shlib-undefined",
             SS_SOURCE_DIR, root, bin, root);
    cr_assert_eq(system(cmd), 0, "could not build the trixie C host (%s)", cmd);
    run_cases_in("lj_host+trixie libluajit (container)", bin, NULL, NULL, "derived-gc64-jit", ALL,
                 root, true);
    char host[600];
    snprintf(host, sizeof(host), "%s%s", root, bin);
    unlink(host);
}

Test(luajit_matrix, built_gc64_jit)
{
    built("gc64-jit", "debian-luajit-2.1.0-beta3-git20220320");
}

Test(luajit_matrix, built_gc64_nojit, LJT_NOT_ASAN)
{
    built("gc64-nojit", "luajit-2.1-git20220320-gc64-nojit");
}

Test(luajit_matrix, built_nogc64_jit)
{
    built("nogc64-jit", "luajit-2.1-git20220320-nogc64");
}

Test(luajit_matrix, built_nogc64_nojit, LJT_NOT_ASAN)
{
    built("nogc64-nojit", "luajit-2.1-git20220320-nogc64-nojit");
}

/* Coroutines and the FFI callback on this build run in test_coro.c. */
Test(luajit_matrix, debian_luajit_binary)
{
    run_cases("debian luajit", "/usr/bin/luajit", "-joff", NULL,
              "debian-luajit-2.1.0-beta3-git20220320", 1u << CHAIN | 1u << NAMES);
}

/* A C host linking Debian's libluajit-5.1.so.2 (JIT off by luaJIT_setmode). */
Test(luajit_matrix, debian_libluajit_host)
{
    run_cases("lj_host+libluajit", SS_BINARY_DIR "/lj_host", NULL, NULL,
              "debian-luajit-2.1.0-beta3-git20220320", ALL);
}

Test(luajit_matrix, openresty_luajit2)
{
    char cmd[600], bin[512];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-ext.sh %s/ext", SS_SOURCE_DIR, SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack luajit2 (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/ext/luajit2/usr/bin/luajit", SS_BINARY_DIR);
    run_cases("openresty luajit2", bin, "-joff", NULL, "openresty-luajit2-2.1-20230119", ALL);
}

Test(luajit_matrix, tarantool)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    /* w_tt.lua: the chain one line lower (it starts with jit.off()) */
    static struct ljc c;
    memset(&c, 0, sizeof(c));
    ljc_case_chain(&c, DIR "w_tt.lua", true);
    c.layout = "tarantool-2.6-luajit-nogc64";
    c.min_judged = 40;
    char *argv[] = {"/usr/bin/tarantool", DIR "w_tt.lua", NULL};
    ljc_run("tarantool w_tt.lua", argv, NULL, SECS, &c);
    run_cases("tarantool", "/usr/bin/tarantool", "-e", NULL, "tarantool-2.6-luajit-nogc64",
              1u << NAMES | 1u << CORO | 1u << FFI);
}
