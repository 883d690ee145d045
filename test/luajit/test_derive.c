/* test/luajit/test_derive.c: the layout facts derive.c reads from each
 * binary's machine code, against two independent records:
 *  - the table rows of layout.c (measured with offsetof / DWARF) for the
 *    builds the table lists: Debian 12's luajit and libluajit, Tarantool
 *    2.6, Debian 12's source built four ways;
 *  - offsetof() on the source tree itself (lj_offsets.c compiled against
 *    it with the build's flags) for Debian 13's source built four ways, a
 *    release the table does not list. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljtest.h"
#include "unwind/luajit/layout.h"

static void detect(const char *path, struct ss_lj_elfinfo *info)
{
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file(path, info, &err), 0, "%s: %s", path, err.msg);
    cr_assert(info->vm_found, "%s: no VM found", path);
}

/* Compare one derived fact with the reference value. */
#define FACT(label, name, got, want)                                                               \
    cr_expect_eq((long)(got), (long)(want), "%s: %s derived %ld, reference %ld", label, name,      \
                 (long)(got), (long)(want))

static void against_row(const char *path, const char *row, bool jit)
{
    struct ss_lj_elfinfo info;
    if (access(path, R_OK)) cr_skip_test("%s not present (scripts/dev installs it)", path);
    detect(path, &info);
    const struct lj_layout *t = NULL;
    for (unsigned i = 0; i < ss_lj_nlayouts; i++)
        if (!strcmp(ss_lj_layouts[i].name, row)) t = &ss_lj_layouts[i];
    cr_assert(t, "no table row %s", row);
    const struct ss_lj_derived *d = &info.derived;
    uint32_t want = SS_LJ_D_ENTRY | SS_LJ_D_GC | (jit ? SS_LJ_D_EXIT | SS_LJ_D_JLOOP : 0);
    cr_assert_eq(d->have, want, "%s: derived groups %#x, want %#x", path, d->have, want);
    cr_expect(d->nentries >= 2, "%s: only %u VM entries agreed", path, d->nentries);
    FACT(path, "L_glref", d->L_glref, t->L_glref);
    FACT(path, "L_base", d->L_base, t->L_base);
    FACT(path, "L_top", d->L_top, t->L_top);
    FACT(path, "L_cframe", d->L_cframe, t->L_cframe);
    FACT(path, "G_vmstate", d->G_vmstate, t->G_vmstate);
    FACT(path, "G_cur_L", d->G_cur_L, t->G_cur_L);
    FACT(path, "G_gc_total", d->G_gc_total, t->G_gc_total);
    FACT(path, "g2disp", d->g2disp, t->g2disp);
    FACT(path, "cf_size", d->cf_size, t->cf_size);
    FACT(path, "cf_L", d->cf_L, t->cf_L);
    FACT(path, "cf_pc", d->cf_pc, t->cf_pc);
    FACT(path, "cf_prev", d->cf_prev, t->cf_prev);
    FACT(path, "cf_nres", d->cf_nres, t->cf_nres);
    if (jit) {
        FACT(path, "G_jit_base", d->G_jit_base, t->G_jit_base);
        FACT(path, "g2j", d->g2j, t->g2j);
        FACT(path, "J_trace", d->J_trace, t->J_trace);
        FACT(path, "T_mcode", d->T_mcode, t->T_mcode);
    }
}

Test(luajit_derive, debian_luajit_binary)
{
    against_row("/usr/bin/luajit", "debian-luajit-2.1.0-beta3-git20220320", true);
}
Test(luajit_derive, debian_libluajit_so)
{
    against_row("/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2",
                "debian-luajit-2.1.0-beta3-git20220320", true);
}
Test(luajit_derive, tarantool)
{
    against_row("/usr/bin/tarantool", "tarantool-2.6-luajit-nogc64", true);
}

static const char *built12(const char *variant, char *bin, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "building Debian's LuaJIT source failed (%s)", cmd);
    snprintf(bin, cap, "%s/ext/lj-%s/luajit", SS_BINARY_DIR, variant);
    return bin;
}

Test(luajit_derive, debian12_built_matrix)
{
    char bin[600];
    against_row(built12("gc64-jit", bin, sizeof(bin)), "debian-luajit-2.1.0-beta3-git20220320",
                true);
    against_row(built12("gc64-nojit", bin, sizeof(bin)), "luajit-2.1-git20220320-gc64-nojit",
                false);
    against_row(built12("nogc64-jit", bin, sizeof(bin)), "luajit-2.1-git20220320-nogc64", true);
    against_row(built12("nogc64-nojit", bin, sizeof(bin)), "luajit-2.1-git20220320-nogc64-nojit",
                false);
}

/* offsetof() on the tree, with the build's flags: "NAME VALUE" lines. */
static int source_fact(const char *out, const char *name, long *v)
{
    FILE *f = fopen(out, "r");
    char n[64];
    long x;
    int found = 0;
    while (f && fscanf(f, "%63s %ld", n, &x) == 2)
        if (!strcmp(n, name)) *v = x, found = 1;
    if (f) fclose(f);
    return found;
}

static void against_source(const char *variant)
{
    char dir[256], cmd[4096], bin[400], src[300], out[400];
    ljt_cache("luajit", dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s trixie", SS_SOURCE_DIR, dir);
    cr_assert_eq(system(cmd), 0, "building Debian 13's LuaJIT source failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/lj-trixie-%s/luajit", dir, variant);
    /* the tree the build came from */
    char real[PATH_MAX];
    cr_assert(realpath(bin, real), "%s missing", bin);
    const char *ver = strstr(real, "/trixie-");
    cr_assert(ver, "%s: no version in the cached build's name", real);
    char v[200];
    snprintf(v, sizeof(v), "%s", ver + 8);
    char *cut = strstr(v, strstr(variant, "nogc64") ? "-nogc64" : "-gc64");
    cr_assert(cut, "%s: unexpected name", real);
    *cut = 0;
    ljt_cache("src/trixie", src, sizeof(src));
    snprintf(out, sizeof(out), "%s/derive-offsets-%s.txt", SS_BINARY_DIR, variant);
    bool nogc64 = strstr(variant, "nogc64"), nojit = strstr(variant, "nojit");
    snprintf(cmd, sizeof(cmd),
             "cc %s %s -I%s/luajit-%s/src %s/test/luajit/lj_offsets.c -o %s.bin && %s.bin > %s",
             nogc64 ? "-DLUAJIT_DISABLE_GC64" : "", nojit ? "-DLUAJIT_DISABLE_JIT" : "", src, v,
             SS_SOURCE_DIR, out, out, out);
    cr_assert_eq(system(cmd), 0, "offsetof program failed (%s)", cmd);
    struct ss_lj_elfinfo info;
    detect(real, &info);
    const struct ss_lj_derived *d = &info.derived;
    uint32_t want = SS_LJ_D_ENTRY | SS_LJ_D_GC | (nojit ? 0 : SS_LJ_D_EXIT | SS_LJ_D_JLOOP);
    cr_assert_eq(d->have, want, "%s: derived groups %#x, want %#x", bin, d->have, want);
    const struct {
        const char *n;
        long v;
    } facts[] = {{"L_glref", d->L_glref},
                 {"L_base", d->L_base},
                 {"L_top", d->L_top},
                 {"L_cframe", d->L_cframe},
                 {"G_vmstate", d->G_vmstate},
                 {"G_cur_L", d->G_cur_L},
                 {"G_gc_total", d->G_gc_total},
                 /* the fields gc.c reads at fixed places after gc.total */
                 {"G_gc_currentwhite", d->G_gc_total + (nogc64 ? 8 : 16)},
                 {"G_gc_state", d->G_gc_total + (nogc64 ? 9 : 17)},
                 {"G_gc_estimate", d->G_gc_total + (nogc64 ? 44 : 80)},
                 {"g2disp", d->g2disp},
                 {"cf_size", d->cf_size},
                 {"cf_L", d->cf_L},
                 {"cf_pc", d->cf_pc},
                 {"cf_prev", d->cf_prev},
                 {"cf_nres", d->cf_nres},
                 {"G_jit_base", d->G_jit_base},
                 {"g2j", d->g2j},
                 {"J_trace", d->J_trace},
                 {"T_mcode", d->T_mcode}};
    unsigned n = 0;
    for (unsigned i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        long ref;
        if (!source_fact(out, facts[i].n, &ref)) continue;        /* no JIT: no J facts */
        if (nojit && !strcmp(facts[i].n, "G_jit_base")) continue; /* not derived without JIT */
        FACT(bin, facts[i].n, facts[i].v, ref);
        n++;
    }
    cr_expect(n >= (nojit ? 16u : 20u), "%s: only %u facts compared", bin, n);
    cr_log_info("%s: %u derived facts equal offsetof() on luajit-%s", variant, n, v);
}

Test(luajit_derive, trixie_source_gc64_jit)
{
    against_source("gc64-jit");
}
Test(luajit_derive, trixie_source_gc64_nojit)
{
    against_source("gc64-nojit");
}
Test(luajit_derive, trixie_source_nogc64_jit)
{
    against_source("nogc64-jit");
}
Test(luajit_derive, trixie_source_nogc64_nojit)
{
    against_source("nogc64-nojit");
}

/* Tarantool's LuaJIT fork (build-ttlj.sh, cached): the facts derived from
 * a stripped copy of each build, and every fact of its table row, against
 * offsetof() on the fork's own tree with the build's flags. hdrs: the build
 * whose generated headers (and binary, when it is variant) serve; a
 * variant not built (non-GC64 without the JIT) has its row checked alone. */
static void against_ttfork_h(const char *variant, const char *rowname, const char *hdrs)
{
    bool built = !strcmp(variant, hdrs);
    char dir[256], cmd[8192], bin[400], out[400], strip[400];
    ljt_cache("luajit", dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-ttlj.sh %s", SS_SOURCE_DIR, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        cr_skip_test("no source of Tarantool's LuaJIT fork (build-ttlj.sh: set TTLJ_TARBALL)");
    cr_assert_eq(rc, 0, "building Tarantool's LuaJIT fork failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/lj-tt-%s/luajit", dir, hdrs);
    char real[PATH_MAX];
    cr_assert(realpath(bin, real), "%s missing", bin);
    /* the tree: DIR/tt-COMMIT-src next to DIR/tt-COMMIT-VARIANT */
    char src[1024];
    cr_assert(strlen(real) + 8 < sizeof(src), "%s: path too long", real);
    memcpy(src, real, strlen(real) + 1);
    char *cut = strrchr(src, '/');
    cr_assert(cut);
    *cut = 0;
    cut = strstr(strrchr(src, '/'), strstr(hdrs, "nogc64") ? "-nogc64" : "-gc64");
    cr_assert(cut, "%s: unexpected name", real);
    snprintf(cut, sizeof(src) - (size_t)(cut - src), "-src");
    bool gc64 = !strstr(variant, "nogc64"), nojit = strstr(variant, "nojit");
    snprintf(out, sizeof(out), "%s/derive-tt-offsets-%s.txt", SS_BINARY_DIR, variant);
    snprintf(cmd, sizeof(cmd),
             "cc %s %s -DLUAJIT_SMART_STRINGS=1 -I%s/src -I%s/lj-tt-%s/include "
             "%s/test/luajit/lj_offsets.c -o %s.bin && %s.bin > %s",
             gc64 ? "-DLUAJIT_ENABLE_GC64" : "", nojit ? "-DLUAJIT_DISABLE_JIT" : "", src, dir,
             hdrs, SS_SOURCE_DIR, out, out, out);
    cr_assert_eq(system(cmd), 0, "offsetof program failed (%s)", cmd);
    snprintf(strip, sizeof(strip), "%s/derive-tnt-%s", SS_BINARY_DIR, variant);
    snprintf(cmd, sizeof(cmd), "strip -o %s %s", strip, bin);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    struct ss_lj_elfinfo info;
    memset(&info, 0, sizeof(info));
    const struct ss_lj_derived *d = &info.derived;
    if (built) {
        detect(strip, &info);
        uint32_t want = SS_LJ_D_ENTRY | SS_LJ_D_GC | (nojit ? 0 : SS_LJ_D_EXIT | SS_LJ_D_JLOOP);
        cr_assert_eq(d->have, want, "%s: derived groups %#x, want %#x", strip, d->have, want);
        cr_expect(info.hints & SS_LJ_HINT_MISC, "%s: luaM_metrics not seen", strip);
    }
    const struct lj_layout *t = NULL;
    for (unsigned i = 0; i < ss_lj_nlayouts; i++)
        if (!strcmp(ss_lj_layouts[i].name, rowname)) t = &ss_lj_layouts[i];
    cr_assert(t, "no table row %s", rowname);
    struct {
        const char *n;
        long derived, row; /* derived -1: not derived */
    } facts[] = {
        {"sizeof_L", -1, t->sizeof_L},
        {"L_glref", d->L_glref, t->L_glref},
        {"L_base", d->L_base, t->L_base},
        {"L_top", d->L_top, t->L_top},
        {"L_stack", -1, t->L_stack},
        {"L_cframe", d->L_cframe, t->L_cframe},
        {"L_stacksize", -1, t->L_stacksize},
        {"G_vmstate", d->G_vmstate, t->G_vmstate},
        {"G_cur_L", d->G_cur_L, t->G_cur_L},
        {"G_jit_base", nojit ? -1 : (long)d->G_jit_base, t->G_jit_base},
        {"G_gc_total", d->G_gc_total, t->G_gc_total},
        {"G_mainthref", -1, t->G_mainthref},
        {"G_strempty", -1, t->G_strempty},
        {"G_size", -1, t->G_size},
        {"g2disp", d->g2disp, t->g2disp},
        {"g2j", d->g2j, t->g2j},
        {"J_trace", d->J_trace, t->J_trace},
        {"J_sizetrace", -1, t->J_sizetrace},
        {"T_mcode", d->T_mcode, t->T_mcode},
        {"cf_size", d->cf_size, t->cf_size},
        {"cf_L", d->cf_L, t->cf_L},
        {"cf_pc", d->cf_pc, t->cf_pc},
        {"cf_prev", d->cf_prev, t->cf_prev},
        {"cf_nres", d->cf_nres, t->cf_nres},
        {"str_len", -1, t->str_len},
        {"str_data", -1, t->str_data},
        {"fn_ffid", -1, t->fn_ffid},
        {"fn_pc", -1, t->fn_pc},
        {"fn_uvptr", -1, t->fn_uvptr},
        {"fn_cf", -1, t->fn_cf},
        {"pt_sizebc", -1, t->pt_sizebc},
        {"pt_k", -1, t->pt_k},
        {"pt_sizekgc", -1, t->pt_sizekgc},
        {"pt_sizept", -1, t->pt_sizept},
        {"pt_sizeuv", -1, t->pt_sizeuv},
        {"pt_chunkname", -1, t->pt_chunkname},
        {"pt_firstline", -1, t->pt_firstline},
        {"pt_numline", -1, t->pt_numline},
        {"pt_lineinfo", -1, t->pt_lineinfo},
        {"pt_uvinfo", -1, t->pt_uvinfo},
        {"pt_varinfo", -1, t->pt_varinfo},
        {"pt_size", -1, t->pt_size},
        {"uv_v", -1, t->uv_v},
        {"T_nsnap", -1, t->T_nsnap},
        {"T_nins", -1, t->T_nins},
        {"T_ir", -1, t->T_ir},
        {"T_nk", -1, t->T_nk},
        {"T_nsnapmap", -1, t->T_nsnapmap},
        {"T_snap", -1, t->T_snap},
        {"T_snapmap", -1, t->T_snapmap},
        {"T_startpt", -1, t->T_startpt},
        {"T_startpc", -1, t->T_startpc},
        {"T_szmcode", -1, t->T_szmcode},
        {"T_mcloop", -1, t->T_mcloop},
        {"T_spadjust", -1, t->T_spadjust},
        {"T_traceno", -1, t->T_traceno},
        {"T_root", -1, t->T_root},
        {"T_size", -1, t->T_size},
        {"snap_size", -1, t->snap_size},
        {"snap_ref", -1, t->snap_ref},
        {"snap_mcofs", -1, t->snap_mcofs},
        {"snap_nent", -1, t->snap_nent},
        {"ir_base", -1, t->ir_base},
        {"ir_kgc", -1, t->ir_kgc},
        {"ir_knum", -1, t->ir_knum},
        {"ir_nop", -1, t->ir_nop},
        {"ir_loop", -1, t->ir_loop},
        {"ir_use", -1, t->ir_use},
        {"ir_phi", -1, t->ir_phi},
        {"ir_rename", -1, t->ir_rename},
    };
    unsigned nd = 0, nr = 0;
    for (unsigned i = 0; !built && i < sizeof(facts) / sizeof(facts[0]); i++)
        facts[i].derived = -1;
    for (unsigned i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        long ref;
        if (!source_fact(out, facts[i].n, &ref)) continue; /* no JIT: no J/T facts */
        if (facts[i].derived >= 0) {
            FACT(strip, facts[i].n, facts[i].derived, ref);
            nd++;
        }
        FACT(rowname, facts[i].n, facts[i].row, ref);
        nr++;
    }
    if (built)
        cr_expect(nd >= (nojit ? 13u : 17u), "%s: only %u derived facts compared", strip, nd);
    cr_expect(nr >= (nojit ? 39u : 70u), "%s: only %u row facts compared", rowname, nr);
    cr_log_info("tarantool fork %s: %u derived facts and %u facts of row %s equal offsetof()",
                variant, nd, nr, rowname);
    unlink(strip);
}

static void against_ttfork(const char *variant, const char *rowname)
{
    against_ttfork_h(variant, rowname, variant);
}

Test(luajit_derive, ttfork_gc64_jit)
{
    against_ttfork("gc64-jit", "tarantool-luajit-b52fe979-gc64");
}
Test(luajit_derive, ttfork_gc64_nojit)
{
    against_ttfork("gc64-nojit", "tarantool-luajit-b52fe979-gc64-nojit");
}
Test(luajit_derive, ttfork_nogc64_jit)
{
    against_ttfork("nogc64-jit", "tarantool-luajit-b52fe979-nogc64");
}
/* not built (Tarantool builds the fork GC64): its row against offsetof()
 * with the JIT-less build's generated headers */
Test(luajit_derive, ttfork_nogc64_nojit_row)
{
    against_ttfork_h("nogc64-nojit", "tarantool-luajit-b52fe979-nogc64-nojit", "gc64-nojit");
}
