/* test/cli/perfmap.c: perf maps name anonymous executable memory (issue
 * 16). test/cli/jitmap.c runs two loops in anonymous executable memory that
 * it names in /tmp/perf-PID.map, the second appended half way through; the
 * live output must carry both names on most samples, and the replay of the
 * capture (the map file is gone by then) must give the same output byte for
 * byte, from the perf map records the capture holds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

Test(perfmap, names_jit_code_live_and_replayed, .timeout = 90)
{
    char *dir = cli_tmpdir("perfmap");
    char *live = cli_path(dir, "live.folded"), *snap = cli_path(dir, "c.snap");
    char *rep = cli_path(dir, "replay.folded"), *prog = cli_built("cli_jitmap");
    char *argv[] = {
        (char *)cli_ss(), "record", "-F", "499", "-o", live, "-o", snap, "--", prog, "1.5", NULL};
    struct cli_res r;
    cr_assert_eq(cli_run(&r, 60, argv), 0);
    cr_assert_eq(r.status, 0, "record: %s", r.err);
    cli_res_free(&r);
    char *text = cli_load(live, NULL);
    cr_assert(text);
    char why[200];
    long long total = cli_folded_check(text, why, sizeof(why));
    long long a = cli_leaf_count(text, "jit_alpha_loop"), b = cli_leaf_count(text, "jit_beta_loop");
    cr_assert_gt(total, 200, "%s", why);
    /* each loop runs half the time; start-up takes some of the first half */
    cr_expect_geq(a * 100, total * 15, "jit_alpha_loop on %lld of %lld samples:\n%.1500s", a, total,
                  text);
    cr_expect_geq(b * 100, total * 30, "jit_beta_loop on %lld of %lld samples:\n%.1500s", b, total,
                  text);
    cr_expect_geq((a + b) * 100, total * 90, "named JIT frames on %lld of %lld samples:\n%.1500s",
                  a + b, total, text);
    char *rargv[] = {(char *)cli_ss(), "replay", snap, "-o", rep, NULL};
    cr_assert_eq(cli_run(&r, 60, rargv), 0);
    cr_assert_eq(r.status, 0, "replay: %s", r.err);
    cli_res_free(&r);
    char *d = cli_diff(live, rep);
    cr_expect(!d, "replay differs from live: %s", d ? d : "");
    free(d);
    free(text);
    cli_rmtree(dir);
    free(live);
    free(snap);
    free(rep);
    free(prog);
    free(dir);
}
