/* test/reliability/kill_test.c: SIGKILL during `record`. The capture must be
 * readable up to its last complete record wherever the kill lands: during
 * start-up (bundling every mapped file with --bundle), and while samples
 * with many target reads stream in at 999 Hz. Read back with the reader
 * itself: no damaged region anywhere, at most one truncated tail and only
 * as the very last event, every record decodes, samples after the first
 * flush; replay of the cut file succeeds. (test/cli covers SIGINT/SIGTERM
 * and a replay after one SIGKILL.) */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl.h"
#include "stacksnap/snapfile.h"

static void die_with_parent(void *ctx)
{
    (void)ctx;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static void kill_at(double when, bool bundle, unsigned min_samples)
{
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "kill");
    char *wargv[] = {"luajit", "-joff", RL_TORN_LUA, "60", NULL};
    struct rl_proc target;
    cr_assert_eq(rl_start(&target, dir, "target", wargv, die_with_parent, NULL), 0);
    usleep(200000);
    char snap[512], pid[16];
    snprintf(snap, sizeof(snap), "%s/k.snap", dir);
    snprintf(pid, sizeof(pid), "%d", (int)target.pid);
    char *rargv[] = {
        RL_STACKSNAP, "record", "-p", pid, "-F", "999", "-o", snap, bundle ? "--bundle" : NULL,
        NULL};
    struct rl_proc rec;
    cr_assert_eq(rl_start(&rec, dir, "record", rargv, NULL, NULL), 0);
    usleep((useconds_t)(when * 1e6));
    cr_assert_eq(kill(rec.pid, SIGKILL), 0);
    int st = rl_wait(&rec, 10);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "record was not killed (status 0x%x)", st);

    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert_eq(ss_snap_open(&r, snap, &err), 0, "kill at %.1fs: %s", when, err.msg);
    struct ss_snap_record rec_;
    unsigned samples = 0, procs = 0, bundles = 0, truncated = 0, corrupt = 0, after_trunc = 0;
    int rc;
    while ((rc = ss_snap_next(r, &rec_, &err)) == 1) {
        if (truncated) after_trunc++;
        switch (rec_.type) {
        case SS_SNAP_SAMPLE:
            samples++;
            break;
        case SS_SNAP_PROCESS:
            procs++;
            break;
        case SS_SNAP_BUNDLE:
            bundles++;
            break;
        case SS_SNAP_CORRUPT:
            corrupt++;
            break;
        case SS_SNAP_TRUNCATED:
            truncated++;
            break;
        default:
            break;
        }
    }
    ss_snap_close_reader(r);
    cr_log_info("kill at %.1fs%s: %u samples, %u process records, %u bundles, %s tail", when,
                bundle ? " (--bundle)" : "", samples, procs, bundles,
                truncated ? "truncated" : "clean");
    cr_expect_eq(rc, 0, "kill at %.1fs: reading stopped with an error: %s", when, err.msg);
    cr_expect_eq(corrupt, 0, "kill at %.1fs: %u damaged regions in a file cut by SIGKILL", when,
                 corrupt);
    cr_expect_leq(truncated, 1);
    cr_expect_eq(after_trunc, 0, "kill at %.1fs: records after the truncated tail", when);
    cr_expect_geq(samples, min_samples, "kill at %.1fs: only %u samples survived", when, samples);
    if (samples) cr_expect_geq(procs, 1, "samples without their process record");

    char rep[512];
    snprintf(rep, sizeof(rep), "%s/r.folded", dir);
    char *pargv[] = {RL_STACKSNAP, "replay", snap, "-o", rep, NULL};
    cr_expect_eq(rl_run(dir, "replay", pargv, 120), 0, "kill at %.1fs: replay failed", when);
    kill(target.pid, SIGKILL);
    rl_wait(&target, 10);
    rl_rmtree(dir);
}

Test(kill, during_startup_bundling, .timeout = 120)
{
    kill_at(0.4, true, 0);
}

Test(kill, while_streaming, .timeout = 120)
{
    kill_at(2.7, false, 1); /* flushed about every second */
}

Test(kill, while_streaming_bundled, .timeout = 120)
{
    kill_at(4.1, true, 1);
}
