/* test/reliability/valgrind_test.c: valgrind memcheck over the offline
 * paths. `stacksnap replay` of the committed fixtures (test/fixtures/, a
 * native and a LuaJIT capture) and of a capture recorded now (LuaJIT, with
 * --bundle, ~1500 samples), plus `report` and `info`: no memcheck error,
 * no definite or indirect leak, and the same output bytes as without
 * valgrind. Only in the plain build (ASan and valgrind do not mix). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "rl.h"

#define VG                                                                                         \
    "valgrind", "--error-exitcode=99", "--leak-check=full",                                        \
        "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect"

/* Run cmd (stacksnap ARGS) with and without valgrind; outputs must match. */
static void check(const char *dir, const char *tag, char *const args[], const char *outfile)
{
    char *plain[16] = {RL_STACKSNAP}, *vg[24] = {VG, RL_STACKSNAP};
    size_t np = 1, nv = 6;
    for (size_t i = 0; args[i]; i++) {
        plain[np++] = args[i];
        vg[nv++] = args[i];
    }
    plain[np] = vg[nv] = NULL;
    char name[64], ref[600], errp[600];
    snprintf(name, sizeof(name), "%s-plain", tag);
    cr_assert_eq(rl_run(dir, name, plain, 120), 0, "%s: stacksnap failed without valgrind", tag);
    char *want = outfile ? rl_slurp(outfile, NULL) : NULL;
    snprintf(ref, sizeof(ref), "%s/%s.out", dir, name);
    if (!outfile) want = rl_slurp(ref, NULL);
    snprintf(name, sizeof(name), "%s-vg", tag);
    double t0 = rl_now();
    int rc = rl_run(dir, name, vg, 600);
    snprintf(errp, sizeof(errp), "%s/%s.err", dir, name);
    char *log = rl_slurp(errp, NULL);
    cr_log_info("valgrind %s: exit %d in %.1fs", tag, rc, rl_now() - t0);
    cr_expect_eq(rc, 0, "%s under valgrind: exit %d (99: memcheck errors or leaks):\n%.4000s", tag,
                 rc, log ? log : "");
    char outp[600];
    snprintf(outp, sizeof(outp), "%s/%s.out", dir, name);
    char *got = outfile ? rl_slurp(outfile, NULL) : rl_slurp(outp, NULL);
    cr_expect(want && got && !strcmp(want, got), "%s: output differs under valgrind", tag);
    free(want);
    free(got);
    free(log);
}

Test(valgrind, replay_report_info_fixtures, .timeout = 900)
{
    cr_assert(rl_have("valgrind"), "valgrind is needed (Debian package valgrind)");
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "vg");
    const char *fx[] = {SS_SOURCE_DIR "/test/fixtures/luajit.snap",
                        SS_SOURCE_DIR "/test/fixtures/native.snap"};
    for (int i = 0; i < 2; i++) {
        char out[400], tag[32];
        snprintf(out, sizeof(out), "%s/fx%d.folded", dir, i);
        snprintf(tag, sizeof(tag), "replay-fixture%d", i);
        char *replay[] = {"replay", (char *)fx[i], "-o", out, NULL};
        check(dir, tag, replay, out);
    }
    char *report[] = {"report", (char *)fx[0], "--top", "10", NULL};
    check(dir, "report", report, NULL);
    char *info[] = {"info", (char *)fx[1], NULL};
    check(dir, "info", info, NULL);
    rl_rmtree(dir);
}

static void die_with_parent(void *ctx)
{
    (void)ctx;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

Test(valgrind, replay_fresh_bundled_capture, .timeout = 900)
{
    cr_assert(rl_have("valgrind"), "valgrind is needed (Debian package valgrind)");
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "vg2");
    char *wargv[] = {"luajit", "-joff", RL_TORN_LUA, "60", NULL};
    struct rl_proc t;
    cr_assert_eq(rl_start(&t, dir, "target", wargv, die_with_parent, NULL), 0);
    usleep(200000);
    char snap[400], pid[16], out[400];
    snprintf(snap, sizeof(snap), "%s/fresh.snap", dir);
    snprintf(out, sizeof(out), "%s/fresh.folded", dir);
    snprintf(pid, sizeof(pid), "%d", (int)t.pid);
    char *rec[] = {RL_STACKSNAP, "record", "-p",       pid,  "-F", "499",
                   "-d",         "3",      "--bundle", "-o", snap, NULL};
    cr_assert_eq(rl_run(dir, "record", rec, 60), 0, "record failed");
    kill(t.pid, SIGKILL);
    rl_wait(&t, 10);
    char *replay[] = {"replay", snap, "-o", out, NULL};
    check(dir, "replay-fresh", replay, out);
    rl_rmtree(dir);
}
