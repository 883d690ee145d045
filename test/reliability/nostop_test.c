/* test/reliability/nostop_test.c: the target is never stopped. While
 * `stacksnap record` profiles a LuaJIT process (at 999 Hz, with Lua walks
 * that read its memory), every thread of the target is polled in
 * /proc/PID/task/TID/stat: none ever enters the stopped or traced state,
 * and nothing ever attaches as its tracer (TracerPid). The recorder runs
 * under `strace -f -e trace=ptrace`: it makes no ptrace call at all. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl.h"

static void die_with_parent(void *ctx)
{
    (void)ctx;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

struct watch {
    unsigned polls, stopped;
    long tracer;
    char bad_state;
};

/* One poll of every thread of pid. */
static void poll_threads(pid_t pid, struct watch *w)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        char s = rl_state(tid);
        if (s == 'T' || s == 't') {
            w->stopped++;
            w->bad_state = s;
        }
    }
    closedir(d);
    long tp = rl_status_kib(pid, "TracerPid"); /* a plain number, read the same way */
    if (tp > 0) w->tracer = tp;
    w->polls++;
}

/* Profile a fresh target with extra record arguments (NULL-terminated);
 * under strace when trace_file is set. Returns the target's watch. */
static struct watch profile(const char *dir, const char *trace_file, int secs)
{
    char *wargv[] = {"luajit", "-joff", RL_TORN_LUA, "60", NULL};
    struct rl_proc target;
    cr_assert_eq(rl_start(&target, dir, "target", wargv, die_with_parent, NULL), 0);
    usleep(200000);
    char pid[16], dur[16], out[512], snap[512];
    snprintf(pid, sizeof(pid), "%d", (int)target.pid);
    snprintf(dur, sizeof(dur), "%d", secs);
    snprintf(out, sizeof(out), "%s/n.folded", dir);
    snprintf(snap, sizeof(snap), "%s/n.snap", dir);
    char *rargv[] = {"strace",     "-f",     "-qq", "-e", "trace=ptrace", "-o",  (char *)trace_file,
                     RL_STACKSNAP, "record", "-p",  pid,  "-F",           "999", "-d",
                     dur,          "-o",     out,   "-o", snap,           NULL};
    char **argv = trace_file ? rargv : rargv + 7;
    struct rl_proc rec;
    cr_assert_eq(rl_start(&rec, dir, "record", argv, NULL, NULL), 0);
    struct watch w = {0};
    int st;
    while (waitpid(rec.pid, &st, WNOHANG) == 0) {
        poll_threads(target.pid, &w);
        usleep(500);
    }
    char *err = rl_slurp(rec.err_path, NULL), *folded = rl_slurp(out, NULL);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "record failed (0x%x): %s", st,
              err ? err : "");
    cr_expect(folded && strstr(folded, " ("), "no Lua frames were walked: %s", err ? err : "");
    free(folded);
    free(err);
    kill(target.pid, SIGKILL);
    rl_wait(&target, 10);
    return w;
}

Test(nostop, target_never_stopped_no_ptrace, .timeout = 180)
{
    cr_assert(rl_have("strace"), "strace is needed (Debian package strace)");
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "nostop");
    char trace[512];
    snprintf(trace, sizeof(trace), "%s/strace.txt", dir);
    struct watch w = profile(dir, trace, 4);
    char *t = rl_slurp(trace, NULL);
    cr_assert_not_null(t, "strace wrote nothing");
    cr_log_info("nostop (strace): %u polls of the target's threads, %u stopped; strace saw:\n%s",
                w.polls, w.stopped, t);
    cr_expect(!strstr(t, "ptrace("), "record made ptrace calls:\n%.2000s", t);
    cr_expect_eq(w.stopped, 0, "the target was seen in state '%c' %u times", w.bad_state,
                 w.stopped);
    cr_expect_eq(w.tracer, 0, "pid %ld traced the target", w.tracer);
    free(t);
    /* and without strace slowing the recorder down: more samples, same rule */
    w = profile(dir, NULL, 4);
    cr_log_info("nostop: %u polls, %u stopped, tracer %ld", w.polls, w.stopped, w.tracer);
    cr_expect_gt(w.polls, 100);
    cr_expect_eq(w.stopped, 0, "the target was seen in state '%c' %u times", w.bad_state,
                 w.stopped);
    cr_expect_eq(w.tracer, 0, "pid %ld traced the target", w.tracer);
    rl_rmtree(dir);
}
