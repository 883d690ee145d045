/* test/cli/demangle.c: demangled C++ and Rust names (issue 16). A g++
 * program whose hot function is a member of a class template in nested
 * namespaces (test/cli/demangle_cxx.cpp) and a program built by Debian's
 * rustc with nested modules (test/cli/demangle_rs.rs) are recorded with
 * real BPF; the folded stacks and the top table must name the hot function
 * as perf does (libiberty's demangler: parameters for C++, no hash for
 * Rust) on most samples, and the pprof Function must keep the mangled symbol
 * (from the program's own symbol table) as system_name. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "profile.pb-c.h"

/* The mangled symbol of the program whose nm line contains key. */
static void mangled_of(const char *prog, const char *key, char *out, size_t len)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "nm %s | grep -m1 '%s' | awk '{print $3}'", prog, key);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    cr_assert(fgets(out, (int)len, p), "%s: no symbol with %s", prog, key);
    out[strcspn(out, "\n")] = 0;
    pclose(p);
}

static void check(const char *prog, const char *want, const char *key)
{
    char *dir = cli_tmpdir("demangle");
    char *folded = cli_path(dir, "d.folded"), *pb = cli_path(dir, "d.pb.gz");
    char *snap = cli_path(dir, "d.snap");
    char *argv[] = {
        (char *)cli_ss(), "record", "-F", "499", "-o", folded, "-o", pb, "-o", snap, "--",
        (char *)prog,     "1",      NULL};
    struct cli_res r;
    cr_assert_eq(cli_run(&r, 60, argv), 0);
    cr_assert_eq(r.status, 0, "record %s: %s", prog, r.err);
    cli_res_free(&r);
    char *text = cli_load(folded, NULL);
    cr_assert(text);
    char why[200];
    long long total = cli_folded_check(text, why, sizeof(why)), hit = 0;
    cr_assert_gt(total, 100, "%s: %s", prog, why);
    for (char *l = text; *l;) {
        char *e = strchr(l, '\n');
        if (e) *e = 0;
        char *sp = strrchr(l, ' ');
        /* the hot function is the leaf: the text after the last ';' */
        char *leaf = strrchr(l, ';');
        if (sp && leaf && !strncmp(leaf + 1, want, strlen(want)) && leaf + 1 + strlen(want) == sp)
            hit += atoll(sp + 1);
        if (!e) break;
        l = e + 1;
    }
    cr_expect_geq(hit * 10, total * 9, "%s: %lld of %lld samples in %s:\n%.2000s", prog, hit, total,
                  want, text);
    free(text);

    char mangled[512];
    mangled_of(prog, key, mangled, sizeof(mangled));
    Perftools__Profiles__Profile *p = cli_load_pprof(pb);
    cr_assert(p, "%s: unreadable or not a profile", pb);
    bool found = false;
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        if (f->name < 0 || (size_t)f->name >= p->n_string_table ||
            strcmp(p->string_table[f->name], want))
            continue;
        found = true;
        cr_expect(f->system_name >= 0 && (size_t)f->system_name < p->n_string_table &&
                      !strcmp(p->string_table[f->system_name], mangled),
                  "%s: pprof system_name %s, want %s", want,
                  f->system_name < (int64_t)p->n_string_table ? p->string_table[f->system_name]
                                                              : "?",
                  mangled);
    }
    cr_expect(found, "%s: no pprof function %s", prog, want);
    perftools__profiles__profile__free_unpacked(p, NULL);

    /* the top table of the capture groups by the demangled name */
    char *rargv[] = {(char *)cli_ss(), "report", snap, "--top", "5", NULL};
    cr_assert_eq(cli_run(&r, 60, rargv), 0);
    cr_expect_eq(r.status, 0, "report: %s", r.err);
    cr_expect(strstr(r.out, want), "report of %s lacks %s:\n%s", prog, want, r.out);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(folded);
    free(pb);
    free(snap);
    free(dir);
}

Test(demangle, cxx_templates, .timeout = 90)
{
    char *prog = cli_built("demangle_cxx");
    check(prog, "shop::detail::Basket<long>::add(long, int)", "Basket");
    free(prog);
}

Test(demangle, rust, .timeout = 90)
{
    char *prog = cli_built("demangle_rs");
    check(prog, "demangle_rs::shop::detail::spin", "detail4spin");
    free(prog);
}
