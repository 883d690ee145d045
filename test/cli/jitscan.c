/* test/cli/jitscan.c: samples in code without CFI reach the root (issue 32).
 * test/cli/nocfi.c spins in PCRE2's JIT code (with a JIT stack, and on the
 * machine stack) and in hand-written code in RWX memory (with and without a
 * perf map) beneath main > nocfi_outer > nocfi_middle > nocfi_inner, built
 * without frame pointers. Recorded with real BPF, at least 95% of the
 * samples in that code must carry the whole chain from _start, with the
 * code as one frame ("[jit] [anon]" or the perf-map name); the summary
 * and the capture's counters (`info`) count them; the replay of the capture
 * gives the same output. PCRE2's JIT code below a snapshot too short to
 * reach it: the truncated samples are counted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "counts.h"

#define ROOT                                                                                       \
    ";_start;__libc_start_main;__libc_start_call_main;main;nocfi_outer;nocfi_middle;nocfi_inner;"

/* Samples in the code without CFI: lines with jit (its frame name) or,
 * where the walk could not step out of it, an unnamed anonymous leaf; *good:
 * those that start with ROOT then via, jit after them. */
static long long count(const char *text, const char *prog, const char *jit, const char *via,
                       long long *good)
{
    long long n = 0;
    *good = 0;
    char want[512];
    snprintf(want, sizeof(want), "%s%s%s", prog, ROOT, via);
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[4096];
        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), l);
        const char *sp = strrchr(line, ' ');
        long long c = sp ? atoll(sp + 1) : 0;
        if (strstr(line, jit) || strstr(line, ";[unknown]+0x")) {
            n += c;
            if (!strncmp(line, want, strlen(want)) && strstr(line + strlen(want), jit)) *good += c;
        }
        if (!e) break;
        l = e + 1;
    }
    return n;
}

/* The counts of the summary (err) and of the capture's counters agree. */
static void counts_agree(const char *err, const char *snap, long long *root, long long *cut)
{
    *root = cnt_summary(err, " reached the root through code without CFI");
    *cut = cnt_summary(err, " samples)"); /* "T% truncated (N samples)" */
    cr_expect_geq(*cut, 0, "no truncated count on the summary: %s", err);
    cr_expect_eq(cnt_info(snap, "unwind.nocfi_root"), *root < 0 ? 0 : *root, "%s", err);
    cr_expect_eq(cnt_info(snap, "unwind.truncated"), *cut, "%s", err);
    cr_expect_eq(cnt_info(snap, "unwind.nocfi"), cnt_summary(err, " through code without CFI ("),
                 "%s", err);
    cr_expect_eq(cnt_info(snap, "unwind.scan_stale"),
                 cnt_summary(err, " with stale scan candidates"), "%s", err);
}

static void run_case(const char *exe, const char *mode, const char *stack, const char *jit,
                     const char *via)
{
    char tag[64];
    snprintf(tag, sizeof(tag), "jitscan-%s-%s", exe, mode);
    char *dir = cli_tmpdir(tag);
    char *live = cli_path(dir, "live.folded"), *snap = cli_path(dir, "c.snap");
    char *rep = cli_path(dir, "replay.folded"), *prog = cli_built(exe);
    char *argv[] = {(char *)cli_ss(),
                    "record",
                    "-F",
                    "499",
                    "--stack-size",
                    (char *)stack,
                    "-o",
                    live,
                    "-o",
                    snap,
                    "--",
                    prog,
                    (char *)mode,
                    "2",
                    NULL};
    struct cli_res r;
    cr_assert_eq(cli_run(&r, 90, argv), 0);
    cr_assert_eq(r.status, 0, "record %s: %s", mode, r.err);
    cr_expect(strstr(r.err, " through code without CFI ("), "%s: no count on the summary: %s", mode,
              r.err);
    long long root, cut;
    counts_agree(r.err, snap, &root, &cut);
    bool short_stack = !strcmp(mode, "pcre") && !strcmp(stack, "16384");
    cli_res_free(&r);
    char *text = cli_load(live, NULL);
    cr_assert(text);
    char why[200];
    long long total = cli_folded_check(text, why, sizeof(why)), good;
    cr_assert_gt(total, 0, "%s", why);
    long long n = count(text, exe, jit, via, &good);
    cr_log_info("%s: %lld of %lld samples in code without CFI reach the root through it (the "
                "summary: %lld, and %lld truncated)",
                mode, good, n, root, cut);
    cr_expect_geq(n * 100, total * 50, "%s: only %lld of %lld samples in the JIT code:\n%.2000s",
                  mode, n, total, text);
    if (short_stack) { /* the snapshot ends above the JIT code's callers */
        cr_expect_geq(cut * 100, n * 95, "%s: %lld of %lld samples in the JIT code truncated", mode,
                      cut, n);
    } else {
        cr_expect_geq(good * 100, n * 95,
                      "%s: %lld of %lld samples in the JIT code reach main:\n%.3000s", mode, good,
                      n, text);
        cr_expect(root >= good && root > 0,
                  "%s: the summary says %lld reached the root through code without CFI, the "
                  "folded text %lld",
                  mode, root, good);
    }
    char *rargv[] = {(char *)cli_ss(), "replay", snap, "-o", rep, NULL};
    cr_assert_eq(cli_run(&r, 90, rargv), 0);
    cr_assert_eq(r.status, 0, "replay: %s", r.err);
    /* the replay counts the same (the frames carry what the walk cut) */
    cr_expect_eq(cnt_summary(r.err, " reached the root through code without CFI"), root,
                 "replay: %s", r.err);
    cr_expect_eq(cnt_summary(r.err, " samples)"), cut, "replay: %s", r.err);
    cli_res_free(&r);
    char *d = cli_diff(live, rep);
    cr_expect(!d, "%s: replay differs from live: %s", mode, d ? d : "");
    free(d);
    free(text);
    cli_rmtree(dir);
    free(live);
    free(snap);
    free(rep);
    free(prog);
    free(dir);
}

Test(jitscan, pcre2_jit_with_jit_stack, .timeout = 150)
{
    run_case("cli_nocfi", "pcrestack", "16384", "[jit] [anon]",
             "pcre_work;pcre2_match_8;pcre2_jit_match_8;");
}

/* pcre2_match's default: the JIT code runs below jit_machine_stack_exec's
 * 32 KiB of locals (no symbol in Debian's library: named by its FDE), hence
 * the larger snapshot; most of those pages were never touched, and the
 * copy goes on past them (bpf/pages.h): the callers above are reached */
Test(jitscan, pcre2_jit_on_machine_stack, .timeout = 150)
{
    run_case("cli_nocfi", "pcre", "65528", "[jit] [anon]",
             "pcre_work;pcre2_match_8;pcre2_jit_match_8;");
}

/* the same below a 16 KiB snapshot: it ends in jit_machine_stack_exec's
 * locals, and the samples say they are truncated (counted) */
Test(jitscan, pcre2_jit_below_a_short_snapshot, .timeout = 150)
{
    run_case("cli_nocfi", "pcre", "16384", "[jit] [anon]", "");
}

Test(jitscan, rwx_code_without_perf_map, .timeout = 150)
{
    run_case("cli_nocfi", "rwx", "16384", "[jit] [anon]", "");
}

Test(jitscan, rwx_code_with_perf_map, .timeout = 150)
{
    run_case("cli_nocfi", "rwxmap", "16384", "nocfi_jit_spin", "");
}

/* callers built with frame pointers (CFA = rbp + 16) under code that uses
 * rbp for itself: the scan recovers their rbp (without it: main > [jit]) */
Test(jitscan, rwx_code_under_frame_pointer_callers, .timeout = 150)
{
    run_case("cli_nocfi_fp", "rwx", "16384", "[jit] [anon]", "");
}
