/* test/cli/fixtures_fwd.c (cli_fixtures): the forward replay of calls out
 * of arm64 trace code (issue 32 on arm64, issue 33), judged on committed
 * captures. test/fixtures/arm64-fwd-joff.snap and arm64-fwd-jit.snap:
 * Debian's arm64 luajit on test/cli/jitoracle.lua and then fwdrefuse.lua in
 * one process, -joff and JIT on, recorded attached with stack bytes,
 * windows and live reads, bundled, in the emulated VM (SS_VM_FWDFX=1
 * test/vm/arm64.sh leaves build-arm64/vm/arm64-stack-fwd-*; pruned as
 * test/fixtures/make.sh says); their .folded: that record's live output.
 * Both replayed here (an x86-64 build walks arm64 samples: unwind/foreign.c,
 * arm64 trace code: trace_mcalls.c), the -joff replay is the truth: the
 * Lua chain above each C function (test/cli/oracle.c, as jitoracle.c
 * judges). Above string.rep's and table.concat's helpers, string.format's
 * and the FFI calls the JIT replay's chains must never show a frame the
 * interpreter did not have there, and the forward replay must prove the
 * whole chain on at least the share measured when it was made (before it
 * ran on arm64 those samples kept a prefix: the count fails there). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "oracle.h"

static char *replay(const char *dir, const char *name)
{
    char *snap, *got, file[64];
    snprintf(file, sizeof(file), "%s.folded", name);
    got = cli_path(dir, file);
    cr_assert(asprintf(&snap, "%s/test/fixtures/%s.snap", SS_SOURCE_DIR, name) > 0);
    char *argv[] = {(char *)cli_ss(), "replay", snap, "-o", got, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "%s: exit %d\n%s", snap, r.status, r.err);
    cli_res_free(&r);
    char *text = cli_load(got, NULL), *want;
    cr_assert(text, "%s", got);
    /* the live output (the arm64 build's walks, trace_mcalls.c's proofs
     * included) byte for byte */
    cr_assert(asprintf(&want, "%s/test/fixtures/%s.folded", SS_SOURCE_DIR, name) > 0);
    char *d = cli_diff(want, got);
    cr_expect(!d, "%s: %s", snap, d);
    free(d), free(want), free(snap), free(got);
    return text;
}

/* the kinds: string.rep's and table.concat's helpers, string.format's, FFI */
static int kind(const char *name)
{
    if (strstr(name, "lj_buf_putstr_rep") || strstr(name, "lj_buf_puttab")) return 0;
    if (!strcmp(name, "string.format")) return 1;
    if (strstr(name, "builtin ") || strstr(name, "lj_")) return -1;
    /* (the FFI's C functions: libc's, called right above a Lua frame) */
    if (!strncmp(name, "libc.so.6+", 10) || strstr(name, "strlen") || strstr(name, "strnlen") ||
        strstr(name, "memcmp") || strstr(name, "memchr"))
        return 2;
    return -1;
}

Test(cli_fixtures, arm64_forward_replay_proves_the_frames_at_calls_out_of_traces)
{
    static const char *const kn[3] = {"string.rep/table.concat", "string.format", "FFI"};
    char *dir = cli_tmpdir("fix-a64fwd");
    char *off = replay(dir, "arm64-fwd-joff"), *on = replay(dir, "arm64-fwd-jit");
    static struct orc_dist doff, don;
    static struct orc_row rows[ORC_KEYS];
    orc_parse(&doff, off);
    orc_parse(&don, on);
    unsigned nr = orc_compare(&doff, &don, 1, false, rows, ORC_KEYS);
    long long on_n[3] = {0}, same[3] = {0}, pre[3] = {0}, wrong[3] = {0};
    char report[4096] = "";
    for (unsigned i = 0; i < nr; i++) {
        const struct orc_row *r = &rows[i];
        int k = kind(r->name);
        size_t l = strlen(report);
        snprintf(report + l, sizeof(report) - l,
                 "%s: %lld on, %lld same, %lld prefix, %lld none, "
                 "%lld wrong, %lld open%s%s\n",
                 r->name, r->on, r->same, r->pre, r->none, r->wrong, r->open,
                 r->bad[0] ? "; wrong: " : "", r->bad);
        if (k < 0) continue;
        on_n[k] += r->on, same[k] += r->same, pre[k] += r->pre, wrong[k] += r->wrong + r->open;
    }
    cr_log_info("arm64 forward replay:\n%s", report);
    for (int k = 0; k < 3; k++) {
        cr_log_info("%s: %lld judged, %lld exact, %lld prefix, %lld wrong", kn[k], on_n[k], same[k],
                    pre[k], wrong[k]);
        cr_expect_eq(wrong[k], 0, "%s: %lld samples show a frame not on the stack:\n%s", kn[k],
                     wrong[k], report);
    }
    /* measured when made: 5 of 74 / 10 of 13 / 252 of 369 exact (the
     * rest: string.rep through a metamethod, a table, a branch, which the
     * replay refuses, and samples whose walks kept no Lua frame); main's
     * code before the arm64 replay: 0 / 0 / 252 (61 and 11 a prefix) */
    cr_expect_geq(same[0], 5, "string.rep/table.concat: %lld exact:\n%s", same[0], report);
    cr_expect_geq(same[1], 10, "string.format: %lld exact:\n%s", same[1], report);
    cr_expect_geq(same[2], 252, "FFI: %lld exact:\n%s", same[2], report);
    free(off), free(on);
    cli_rmtree(dir);
    free(dir);
}
