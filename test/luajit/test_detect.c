/* test/luajit/test_detect.c: LuaJIT detection by content on every build on
 * this machine, renamed copies, and files that are not LuaJIT. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljtest.h"

static void expect_lj(const char *path, bool gc64, uint32_t cfa)
{
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file(path, &info, &err), 0, "%s: %s", path, err.msg);
    cr_expect(info.is_luajit, "%s: not recognised as LuaJIT", path);
    cr_expect(info.vm_found, "%s: no cross-checked VM range", path);
    cr_expect_eq(info.gc64, gc64, "%s: gc64 %d", path, info.gc64);
    cr_expect_eq(info.vm_cfa_off, cfa);
    cr_expect(info.vm_hi > info.vm_lo && info.vm_hi - info.vm_lo > 0x1000 &&
                  info.vm_hi - info.vm_lo < 0x100000,
              "%s: implausible VM range %#lx-%#lx", path, (unsigned long)info.vm_lo,
              (unsigned long)info.vm_hi);
    cr_expect(info.checks & SS_LJ_CHECK_PCALL, "%s: lua_pcall does not enter the VM", path);
    cr_expect(!strncmp(info.version, "LuaJIT 2.1", 10), "%s: version '%s'", path, info.version);
    cr_log_info("%s: VM %#lx-%#lx cfa+%u gc64 %d checks %#x hints %#x '%s'", path,
                (unsigned long)info.vm_lo, (unsigned long)info.vm_hi, info.vm_cfa_off, info.gc64,
                info.checks, info.hints, info.version);
}

Test(luajit_detect, debian_luajit_binary_static_stripped_pie)
{
    expect_lj("/usr/bin/luajit", true, 80);
}

Test(luajit_detect, debian_libluajit_so)
{
    expect_lj("/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2", true, 80);
}

Test(luajit_detect, openresty_luajit2_binary_and_library)
{
    char cmd[600], p[600];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-ext.sh %s/ext", SS_SOURCE_DIR, SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack luajit2");
    snprintf(p, sizeof(p), "%s/ext/luajit2/usr/bin/luajit", SS_BINARY_DIR);
    expect_lj(p, true, 80);
    snprintf(p, sizeof(p), "%s/ext/luajit2/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2.1.0",
             SS_BINARY_DIR);
    expect_lj(p, true, 80);
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    ss_lj_detect_file(p, &info, &err);
    cr_expect(info.hints & SS_LJ_HINT_EXDATA, "luajit2 must be hinted as OpenResty");
}

Test(luajit_detect, tarantool_nogc64_static_not_pie)
{
    if (access("/usr/bin/tarantool", R_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    expect_lj("/usr/bin/tarantool", false, 80);
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    ss_lj_detect_file("/usr/bin/tarantool", &info, &err);
    /* cross-check against the symbol table Tarantool keeps */
    FILE *f = popen("nm /usr/bin/tarantool | grep -E ' (lj_vm_asm_begin|lj_vm_ffi_call)$'", "r");
    cr_assert_not_null(f);
    unsigned long begin = 0, ffi = 0, a;
    char name[64];
    while (fscanf(f, "%lx %*s %63s", &a, name) == 2) {
        if (!strcmp(name, "lj_vm_asm_begin")) begin = a;
        if (!strcmp(name, "lj_vm_ffi_call")) ffi = a;
    }
    pclose(f);
    cr_expect_eq(info.vm_lo, begin, "VM start %#lx != lj_vm_asm_begin %#lx",
                 (unsigned long)info.vm_lo, begin);
    cr_expect_eq(info.vm_hi, ffi, "VM end %#lx != lj_vm_ffi_call %#lx", (unsigned long)info.vm_hi,
                 ffi);
    cr_expect(info.hints & SS_LJ_HINT_TARANTOOL);
}

Test(luajit_detect, renamed_copy_is_still_luajit)
{
    char p[600], cmd[1300];
    snprintf(p, sizeof(p), "%s/ljt-renamed-%d.bin", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd), "cp /usr/bin/luajit %s", p);
    cr_assert_eq(system(cmd), 0);
    struct ss_lj_elfinfo a, b;
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file(p, &a, &err), 0);
    cr_assert_eq(ss_lj_detect_file("/usr/bin/luajit", &b, &err), 0);
    unlink(p);
    cr_expect(a.is_luajit && a.vm_found);
    cr_expect_eq(a.vm_lo, b.vm_lo);
    cr_expect_eq(a.vm_hi, b.vm_hi);
}

Test(luajit_detect, not_luajit)
{
    const char *files[] = {"/bin/ls", "/lib/x86_64-linux-gnu/libc.so.6"};
    for (unsigned i = 0; i < 2; i++) {
        struct ss_lj_elfinfo info;
        struct ss_err err = {0};
        cr_assert_eq(ss_lj_detect_file(files[i], &info, &err), 0, "%s", err.msg);
        cr_expect(!info.is_luajit && !info.vm_found, "%s detected as LuaJIT", files[i]);
    }
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    cr_expect_lt(ss_lj_detect_file(SS_SOURCE_DIR "/test/luajit/w.lua", &info, &err), 0);
    cr_expect(strstr(err.msg, "w.lua") != NULL, "error must name the file: %s", err.msg);
    struct ss_err err2 = {0};
    cr_expect_lt(ss_lj_detect_file("/nonexistent/x", &info, &err2), 0);
}

/* Debian's arm64 luajit and libluajit (test/luajit/fetch-arm64.sh), detected
 * on this machine by the ELF's machine, not the build's: the VM range must
 * be the FDE readelf shows under the "zPR" CIE, the cframe 208 bytes below
 * the CFA (vm_arm64.dasc), and lua_pcall must enter it (bl/b); the facts
 * derived from its code equal offsetof()'s. */
Test(luajit_detect, debian_arm64_binary_and_library)
{
    char dir[512] = "", path[700], cmd[1600];
    FILE *f = popen(SS_SOURCE_DIR "/test/luajit/fetch-arm64.sh", "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(dir, sizeof(dir), f), "fetch-arm64.sh printed no folder");
    cr_assert_eq(pclose(f), 0, "could not fetch Debian's arm64 luajit");
    dir[strcspn(dir, "\n")] = 0;
    const char *files[] = {"usr/bin/luajit", "usr/lib/aarch64-linux-gnu/libluajit-5.1.so.2"};
    for (unsigned i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        expect_lj(path, true, 208);
        struct ss_lj_elfinfo info;
        struct ss_err err = {0};
        ss_lj_detect_file(path, &info, &err);
        snprintf(
            cmd, sizeof(cmd),
            "readelf --debug-dump=frames '%s' | awk '/ CIE$/ { c = $1 } "
            "/Augmentation:/ { a[c] = $2 } / FDE cie=/ { split($5, k, \"=\"); "
            "if (a[k[2]] == \"\\\"zPR\\\"\") { sub(/^pc=/, \"\", $6); sub(/[.][.]/, \" \", $6); "
            "print $6 } }'",
            path);
        cr_assert_not_null(f = popen(cmd, "r"));
        unsigned long lo = 0, hi = 0;
        cr_expect_eq(fscanf(f, "%lx %lx", &lo, &hi), 2, "%s: no zPR FDE in readelf's output", path);
        pclose(f);
        cr_expect(info.vm_lo == lo && info.vm_hi == hi, "%s: VM %#lx-%#lx, readelf %#lx-%#lx", path,
                  (unsigned long)info.vm_lo, (unsigned long)info.vm_hi, lo, hi);
        cr_expect(info.checks & SS_LJ_CHECK_CALL, "%s: lua_call does not enter the VM", path);
        /* derive_a64.c against offsetof() on Debian 12's tree built with
         * aarch64-linux-gnu-gcc (lj_obj.h, lj_frame.h, lj_jit.h,
         * lj_dispatch.h; layout.c's arm64 row) */
        const struct ss_lj_derived *d = &info.derived;
        cr_expect_eq(d->have, SS_LJ_D_ENTRY | SS_LJ_D_GC | SS_LJ_D_EXIT | SS_LJ_D_JLOOP,
                     "%s: derived groups %#x (%s)", path, d->have, info.derive_why);
        const uint32_t got[] = {
            d->cf_size,       d->cf_prev, d->cf_pc,      d->cf_L,       d->cf_nres,
            d->L_glref,       d->L_base,  d->L_top,      d->L_cframe,   d->L_status,
            d->G_vmstate,     d->G_cur_L, d->G_gc_total, d->G_jit_base, (uint32_t)d->g2disp,
            (uint32_t)d->g2j, d->J_trace, d->T_mcode};
        const uint32_t want[] = {208, 0,   8,   16, 40,  16,   32,  40,  80,
                                 11,  184, 368, 16, 376, 3944, 728, 360, 88};
        for (unsigned k = 0; k < sizeof(want) / sizeof(want[0]); k++)
            cr_expect_eq(got[k], want[k], "%s: derived fact %u is %u, offsetof() says %u", path, k,
                         got[k], want[k]);
        cr_expect(info.exit_lo > info.vm_lo && info.exit_ret > info.exit_lo &&
                      info.exit_ret < info.vm_hi,
                  "%s: vm_exit_handler %#lx, return %#lx", path, (unsigned long)info.exit_lo,
                  (unsigned long)info.exit_ret);
        cr_expect(ss_lj_elfinfo_plausible(&info), "%s: derived facts not plausible", path);
    }
}
