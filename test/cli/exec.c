/* test/cli/exec.c: processes that start programs one after the other
 * (issue 19's churn, in one process tree). `record -F 999 -v -- cli_execloop
 * 3 /bin/true`, real BPF, ring buffer program:
 * - samples the kernel took inside the child's execve after it switched the
 *   memory map keep their callers: the stack copied at the exec's entry
 *   (bpf/execstack.h) stands in for the copy that failed, so the chain runs
 *   main > el_loop > el_spawn > execv (before: the execve frame alone);
 * - the new program's samples in the dynamic loader end at its entry
 *   (`_start` without CFI) and count as whole: with both, at most 5% of all
 *   samples are truncated (before: ~50%);
 * - replay of the capture gives the same folded text byte for byte. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Samples whose leaf is an execve frame, and of those the ones with the
 * loop's callers. */
static void count_exec(const char *text, long long *in_exec, long long *with_callers)
{
    char *t = strdup(text);
    *in_exec = *with_callers = 0;
    for (char *l = t, *e; l && *l; l = e ? e + 1 : NULL) {
        e = strchr(l, '\n');
        if (e) *e = 0;
        char *sp = strrchr(l, ' '), *semi = sp ? memrchr(l, ';', (size_t)(sp - l)) : NULL;
        if (!semi) continue;
        *sp = 0;
        if (!strstr(semi, "execve")) continue;
        long long n = atoll(sp + 1);
        *in_exec += n;
        if (strstr(l, ";main;el_loop;el_spawn;")) *with_callers += n;
    }
    free(t);
}

static double summary_pct(const char *err, const char *what)
{
    const char *p = strstr(err, what);
    while (p && p > err && p[-1] != ' ' && p[-1] != ',')
        p--;
    const char *q = p;
    while (q && q > err && q[-1] != ' ')
        q--;
    return q ? atof(q) : -1;
}

Test(cli_exec, samples_inside_exec_keep_their_callers)
{
    char *dir = cli_tmpdir("exec");
    char *folded = cli_path(dir, "e.folded"), *snap = cli_path(dir, "e.snap");
    char *again = cli_path(dir, "r.folded"), *loop = cli_built("cli_execloop");
    char *argv[] = {(char *)cli_ss(), "record", "-F", "999", "-v", "-o",
                    folded,           "-o",     snap, "--",  loop, "3",
                    "/bin/true",      NULL};
    struct cli_res r;
    cr_assert_eq(cli_run(&r, 60, argv), 0);
    cr_assert_eq(r.status, 0, "record: %s", r.err);
    const char *gave = strstr(r.err, "samples in an exec given its entry's stack");
    cr_assert(gave, "no exec-stack count in the summary: %s", r.err);
    const char *num = gave;
    while (num > r.err && num[-1] == ' ')
        num--;
    while (num > r.err && num[-1] >= '0' && num[-1] <= '9')
        num--;
    long long given = atoll(num);
    double trunc = summary_pct(r.err, "% truncated");
    char *text = cli_load(folded, NULL);
    cr_assert(text);
    char why[200];
    long long total = cli_folded_check(text, why, sizeof(why)), in_exec, callers;
    cr_assert_gt(total, 300, "%s", why);
    count_exec(text, &in_exec, &callers);
    cr_log_info("%lld samples, %.1f%% truncated; %lld inside execve, %lld with their callers; "
                "%lld given the stack of the exec's entry",
                total, trunc, in_exec, callers, given);
    cr_assert_geq(in_exec, 10, "only %lld samples inside execve:\n%.3000s", in_exec, text);
    cr_expect_gt(given, 0, "%s", r.err);
    cr_expect_geq(callers * 100, in_exec * 95,
                  "%lld of %lld samples inside execve with main > el_loop > el_spawn:\n%.4000s",
                  callers, in_exec, text);
    cr_expect(trunc >= 0 && trunc <= 5.0, "%.1f%% of the samples truncated: %s", trunc, r.err);
    cli_res_free(&r);

    char *rargv[] = {(char *)cli_ss(), "replay", snap, "-o", again, NULL};
    cr_assert_eq(cli_run(&r, 60, rargv), 0);
    cr_assert_eq(r.status, 0, "replay: %s", r.err);
    cli_res_free(&r);
    char *d = cli_diff(folded, again);
    cr_expect(!d, "replay differs: %s", d);
    free(d);
    free(text);
    cli_rmtree(dir);
    free(loop);
    free(again);
    free(snap);
    free(folded);
    free(dir);
}
