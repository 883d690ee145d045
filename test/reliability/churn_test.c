/* test/reliability/churn_test.c: process churn. `stacksnap record -a`
 * profiles the whole system while this test forks, execs and reaps
 * hundreds of short-lived processes (plain forks that spin, shells, exec
 * chains, a few LuaJIT scripts). The recorder must finish without a crash,
 * count errors instead of printing one line per sample (stderr stays a
 * summary), keep its memory flat after warm-up (per-process state freed when
 * processes exit) and write a capture that reads back.
 * RL_CHURN_SECONDS sets the duration (CI: 20; by hand e.g. 60). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl.h"

#define MAX_KIDS 6

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static void spin_ms(int ms)
{
    double end = rl_now() + ms / 1000.0;
    volatile unsigned long x = 0;
    while (rl_now() < end)
        x++;
}

/* One short-lived process of kind k; returns its pid. */
static pid_t churn_one(unsigned k)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
    }
    switch (k % 25) {
    case 0: /* a LuaJIT script */
        execlp("luajit", "luajit", "-joff", "-e",
               "local function f(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end "
               "local function g() return f(300000) end for _ = 1, 6 do g() end",
               (char *)NULL);
        break;
    case 1:
    case 5:
    case 9:
    case 13:
    case 17:
    case 21: /* an exec chain */
        execl("/bin/sh", "sh", "-c", "exec sh -c 'i=0; while [ $i -lt 300 ]; do i=$((i+1)); done'",
              (char *)NULL);
        break;
    case 2:
    case 6:
    case 10:
    case 14:
    case 18:
    case 22: /* a shell loop */
        execl("/bin/sh", "sh", "-c", "i=0; while [ $i -lt 500 ]; do i=$((i+1)); done",
              (char *)NULL);
        break;
    case 3:
    case 7:
    case 11:
    case 15:
    case 19:
    case 23: /* exec, exit at once */
        execl("/bin/true", "true", (char *)NULL);
        break;
    default: /* fork only: spin a little, exit */
        spin_ms(2 + (int)(k % 7));
        _exit(0);
    }
    _exit(127);
}

Test(churn, record_all_survives_process_churn, .timeout = 400)
{
    const char *env = getenv("RL_CHURN_SECONDS");
    int secs = env ? atoi(env) : 20;
    if (secs < 6) secs = 6;
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "churn");
    char snap[512], folded[512], dur[16];
    snprintf(snap, sizeof(snap), "%s/churn.snap", dir);
    snprintf(folded, sizeof(folded), "%s/churn.folded", dir);
    snprintf(dur, sizeof(dur), "%d", secs);
    /* a capture only: the recorder then aggregates no profile (which
     * grows with every distinct stack of whatever runs on the machine) and
     * its memory is its per-process state; folded comes from replay */
    char *argv[] = {RL_STACKSNAP, "record", "-a", "-F", "199", "-d", dur, "-o", snap, NULL};
    struct rl_proc rec;
    cr_assert_eq(rl_start(&rec, dir, "record", argv, NULL, NULL), 0);
    usleep(800000); /* BPF program loaded, sampling */

    /* churn, sampling the recorder's RSS twice a second */
    double t0 = rl_now(), next_rss = t0, end = t0 + secs - 1.0;
    long rss[2 * 400];
    double rss_t[2 * 400];
    unsigned nrss = 0, spawned = 0, running = 0, failed_forks = 0;
    pid_t kids[MAX_KIDS] = {0};
    while (rl_now() < end) {
        for (int i = 0; i < MAX_KIDS; i++) {
            if (kids[i] > 0 && waitpid(kids[i], NULL, WNOHANG) == kids[i]) {
                kids[i] = 0;
                running--;
            }
            if (kids[i] == 0) {
                pid_t p = churn_one(spawned);
                if (p < 0) {
                    failed_forks++;
                    continue;
                }
                kids[i] = p;
                spawned++;
                running++;
            }
        }
        if (rl_now() >= next_rss && nrss < sizeof(rss) / sizeof(rss[0])) {
            rss[nrss] = rl_status_kib(rec.pid, "RssAnon");
            rss_t[nrss++] = rl_now() - t0;
            next_rss += 0.5;
        }
        usleep(3000);
    }
    for (int i = 0; i < MAX_KIDS; i++)
        if (kids[i] > 0) waitpid(kids[i], NULL, 0);

    int st = rl_wait(&rec, 90);
    char *err = rl_slurp(rec.err_path, NULL);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "record -a failed (status 0x%x, -1: hung) after %u processes: %s", st, spawned,
              err ? err : "");
    /* errors are counted in the summary, never printed per sample */
    size_t nerr = err ? rl_count_lines(err) : 0;
    cr_log_info("churn: %u processes in %ds (%u fork failures); recorder said:\n%s", spawned, secs,
                failed_forks, err ? err : "");
    cr_expect_leq(nerr, 4, "record printed %zu lines on stderr:\n%.3000s", nerr, err ? err : "");
    cr_expect_geq(spawned, 15u * (unsigned)secs, "only %u processes started", spawned);

    /* memory (RssAnon: file pages of the ELF images it maps depend on what
     * else runs): the median of the last fifth against the median after
     * warm-up (third to half of the run: every program that runs on the
     * machine has been seen once, its files parsed). Medians, because the state of
     * the processes alive at a moment (~1 MiB each) comes and goes with
     * them; a leak of per-process state is a trend, ~1 MiB per process */
    long warmv[400], latev[400];
    unsigned nw = 0, nl = 0;
    for (unsigned i = 0; i < nrss; i++) {
        if (rss[i] < 0) continue;
        if (rss_t[i] <= secs / 2.0 && rss_t[i] >= secs / 3.0) warmv[nw++] = rss[i];
        if (rss_t[i] >= secs * 0.8) latev[nl++] = rss[i];
    }
    qsort(warmv, nw, sizeof(long), cmp_long);
    qsort(latev, nl, sizeof(long), cmp_long);
    long warm = nw ? warmv[nw / 2] : 0, late = nl ? latev[nl / 2] : 0;
    char series[2048] = "";
    for (unsigned i = 0; i < nrss; i += 2)
        snprintf(series + strlen(series), sizeof(series) - strlen(series), " %.0fs:%ldM", rss_t[i],
                 rss[i] / 1024);
    cr_log_info("churn: recorder RssAnon (MiB) over time:%s", series);
    cr_assert_gt(warm, 0);
    if (!RL_ASAN)
        cr_expect_leq(late, warm + warm / 4 + 8 * 1024,
                      "recorder RssAnon (median) grew from %ld KiB after warm-up to %ld KiB:%s",
                      warm, late, series);

    /* the capture reads back and knows the short-lived processes */
    char *iargv[] = {RL_STACKSNAP, "info", snap, NULL};
    cr_expect_eq(rl_run(dir, "info", iargv, 120), 0, "info on the churn capture failed");
    char ip[600];
    snprintf(ip, sizeof(ip), "%s/info.out", dir);
    char *info = rl_slurp(ip, NULL);
    unsigned nproc = 0;
    for (char *p = info; p && (p = strstr(p, "\nprocess ")); p++)
        nproc++;
    cr_log_info("churn: the capture has %u process records", nproc);
    cr_expect_geq(nproc, 20u, "the capture has only %u process records", nproc);
    char *pargv[] = {RL_STACKSNAP, "replay", snap, "-o", folded, NULL};
    cr_expect_eq(rl_run(dir, "replay", pargv, 300), 0, "replay of the churn capture failed");
    char *f = rl_slurp(folded, NULL);
    cr_expect(f && strstr(f, "\nsh;"), "no samples of the shells in the folded output");
    free(f);
    free(info);
    free(err);
    rl_rmtree(dir);
}
