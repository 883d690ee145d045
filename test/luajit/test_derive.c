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
#include <unistd.h>

#include "ljtest.h"
#include "unwind/luajit/lj_internal.h"

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
