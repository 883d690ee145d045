/* bench/native_bench.c: native unwinding throughput against perf.
 *
 * In one run: start native_workload_pie deep40 (40 frames, -O2, no frame
 * pointers), record it with `perf record --call-graph dwarf,16384` and, at
 * the same time, capture it with our BPF program, keeping copies of the
 * samples. Then unwind the captured samples in-process many times (each
 * native mode) and time `perf script` on the perf.data; print samples/s,
 * us/sample and frames/s side by side.
 *
 *   native_bench [--seconds S] [--freq HZ] [--rounds-time S] [--keep DIR]
 *   native_bench --profile MODE   (one native mode, no perf: for profiling)
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stacksnap/capture.h"
#include "stacksnap/unwind.h"

extern char **environ;

struct saved {
    struct ss_sample s;
    uint8_t *bytes;
};

struct store {
    pid_t pid;
    struct saved *v;
    size_t n, cap;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of this thread: the machine may be shared, so both sides of the
 * comparison are measured in CPU time (perf script's through wait4). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void keep(void *ctx, const struct ss_sample *s)
{
    struct store *st = ctx;
    if ((pid_t)s->pid != st->pid || (s->flags & SS_SAMPLE_KERNEL)) return;
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 1024;
        st->v = realloc(st->v, st->cap * sizeof(*st->v));
    }
    struct saved *d = &st->v[st->n++];
    d->s = *s;
    d->bytes = malloc(s->stack_len ? s->stack_len : 1);
    memcpy(d->bytes, s->stack, s->stack_len);
    d->s.stack = d->bytes;
}

static pid_t spawn(char *const argv[], const char *out_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path) posix_spawn_file_actions_addopen(&fa, 1, out_path, 01 | 0100 | 01000, 0644);
    pid_t pid;
    int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return r ? -r : pid;
}

static int wait_ok(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) < 0) return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Run `perf script -i data`, count samples (header lines); returns perf's
 * CPU time (user + system) in seconds, *wall its wall time. */
static double perf_script(const char *data, long *samples, double *wall)
{
    int fds[2];
    if (pipe(fds)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 01, 0);
    char *argv[] = {"/usr/bin/perf", "script", "-i", (char *)data, NULL};
    double t0 = now_s();
    pid_t pid;
    int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (r) {
        close(fds[0]);
        return -1;
    }
    FILE *f = fdopen(fds[0], "r");
    char line[4096];
    long n = 0;
    while (fgets(line, sizeof(line), f))
        if (line[0] != ' ' && line[0] != '\t' && line[0] != '\n') n++;
    fclose(f);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) return -1;
    *wall = now_s() - t0;
    *samples = n;
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

struct result {
    double us_per_sample, samples_per_s, frames_per_s, frames_per_sample, cold_us;
    long complete;
};

static int unwind_all(struct store *st, int mode, double min_time, struct result *res)
{
    struct ss_unwinder *u;
    struct ss_err err = {0};
    struct ss_unwinder_opts o = {.native_mode = (enum ss_native_mode)mode};
    if (ss_unwinder_new(&u, &o, &err) < 0) {
        fprintf(stderr, "unwinder: %s\n", err.msg);
        return -1;
    }
    double t0 = cpu_s();
    long frames = 0, complete = 0;
    for (size_t i = 0; i < st->n; i++) { /* cold: opens files, loads rules */
        struct ss_stack out;
        ss_unwinder_intake(u, &st->v[i].s);
        ss_unwind(u, &st->v[i].s, &out);
        frames += out.nframes;
        complete += out.trunc == SS_TRUNC_NONE && out.nframes == 40;
    }
    res->cold_us = (cpu_s() - t0) * 1e6 / st->n;
    res->complete = complete;
    long rounds = 0, total = 0;
    frames = 0;
    t0 = cpu_s();
    double t;
    do {
        for (size_t i = 0; i < st->n; i++) {
            struct ss_stack out;
            ss_unwinder_intake(u, &st->v[i].s);
            ss_unwind(u, &st->v[i].s, &out);
            frames += out.nframes;
        }
        total += st->n;
        rounds++;
        t = cpu_s() - t0;
    } while (t < min_time);
    res->us_per_sample = t * 1e6 / total;
    res->samples_per_s = total / t;
    res->frames_per_s = frames / t;
    res->frames_per_sample = (double)frames / total;
    ss_unwinder_free(u);
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = 3, min_time = 2;
    unsigned freq = 999;
    const char *keepdir = NULL;
    int profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--freq") && i + 1 < argc)
            freq = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) /* one mode only, no perf */
            profile = atoi(argv[++i]) + 1;
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
            keepdir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--freq HZ] [--rounds-time S] [--keep DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    char dir[256];
    if (keepdir)
        snprintf(dir, sizeof(dir), "%s", keepdir);
    else {
        snprintf(dir, sizeof(dir), "/tmp/ss-native-bench-XXXXXX");
        if (!mkdtemp(dir)) return 1;
    }
    char data[512], tiny[512], wl[512];
    snprintf(data, sizeof(data), "%s/perf.data", dir);
    snprintf(tiny, sizeof(tiny), "%s/tiny.data", dir);
    snprintf(wl, sizeof(wl), "%s/native_workload_pie", SS_BINARY_DIR);

    /* the workload */
    char *wargv[] = {wl, "deep40", NULL};
    char wout[512];
    snprintf(wout, sizeof(wout), "%s/workload.out", dir);
    pid_t wpid = spawn(wargv, wout);
    if (wpid < 0) {
        fprintf(stderr, "cannot start %s\n", wl);
        return 1;
    }
    usleep(300000);

    /* perf record and our capture, same time, same rate */
    char pidbuf[32], fbuf[32], callg[] = "dwarf,16384", secs[32];
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int)wpid);
    snprintf(fbuf, sizeof(fbuf), "%u", freq);
    snprintf(secs, sizeof(secs), "%g", seconds);
    char *pargv[] = {"/usr/bin/perf", "record", "-q", "-F", fbuf,    "--call-graph", callg, "-p",
                     pidbuf,          "-o",     data, "--", "sleep", secs,           NULL};
    pid_t ppid = profile ? -1 : spawn(pargv, "/dev/null");
    struct store st = {.pid = wpid};
    struct ss_capture *c = NULL;
    struct ss_err err = {0};
    struct ss_capture_opts co = {.freq_hz = freq, .stack_size = 16384};
    if (ss_capture_open(&c, &co, &err) < 0 || ss_capture_add_pid(c, wpid, &err) < 0 ||
        ss_capture_start(c, &err) < 0) {
        fprintf(stderr, "capture: %s\n", err.msg);
        kill(wpid, SIGKILL);
        return 1;
    }
    double end = now_s() + seconds;
    while (now_s() < end)
        ss_capture_poll(c, 100, keep, &st);
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, keep, &st) > 0)
        ;
    ss_capture_close(c);
    int prc = ppid > 0 ? wait_ok(ppid) : -1;
    if (!st.n) {
        fprintf(stderr, "no samples captured\n");
        kill(wpid, SIGKILL);
        return 1;
    }

    /* our unwinding, the workload still alive (its files are resolved live) */
    const char *mode_name[] = {"stacksnap (rule cache + libunwind)", "libunwind, step per frame",
                               "libunwind, one cursor (perf's way)"};
    struct result res[3];
    if (profile) {
        unwind_all(&st, profile - 1, min_time, &res[0]);
        printf("mode %d: %zu samples, %.3f us/sample, %.1f frames\n", profile - 1, st.n,
               res[0].us_per_sample, res[0].frames_per_sample);
        kill(wpid, SIGKILL);
        return 0;
    }
    for (int m = 0; m < 3; m++)
        unwind_all(&st, m, m ? min_time / 2 : min_time, &res[m]);
    kill(wpid, SIGKILL);
    waitpid(wpid, NULL, 0);

    /* perf script */
    long psamples = 0, tsamples = 0;
    double pwall = 0, twall = 0;
    double pt = prc == 0 ? perf_script(data, &psamples, &pwall) : -1;
    char *targv[] = {"/usr/bin/perf", "record", "-q", "--call-graph", callg, "-o", tiny, "--",
                     "/bin/true",     NULL};
    pid_t tp = spawn(targv, "/dev/null");
    double tt = tp > 0 && wait_ok(tp) == 0 ? perf_script(tiny, &tsamples, &twall) : 0;

    printf("native unwinding: %zu captured samples of a 40-frame -O2 frame-pointer-less "
           "workload (%u Hz, %g s, 16 KiB stacks); times are CPU times\n",
           st.n, freq, seconds);
    printf("%-38s %12s %10s %12s %9s %9s\n", "unwinder", "samples/s", "us/sample", "frames/s",
           "frames", "vs perf");
    double perf_us = psamples > 0 ? pt * 1e6 / psamples : 0;
    double perf_us_net = psamples > 0 ? (pt - tt) * 1e6 / psamples : 0;
    for (int m = 0; m < 3; m++)
        printf("%-38s %12.0f %10.2f %12.0f %9.1f %8.1fx\n", mode_name[m], res[m].samples_per_s,
               res[m].us_per_sample, res[m].frames_per_s, res[m].frames_per_sample,
               perf_us_net > 0 ? perf_us_net / res[m].us_per_sample : 0);
    if (psamples > 0) {
        printf("%-38s %12.0f %10.2f %12s %9s %8.1fx\n", "perf script (minus start-up)",
               psamples / (pt - tt), perf_us_net, "-", "-", 1.0);
        printf("%-38s %12.0f %10.2f\n", "perf script (whole run)", psamples / pt, perf_us);
        printf("perf script: %ld samples, %.3f s CPU (%.3f s wall), start-up %.3f s CPU (perf "
               "script of an empty recording)\n",
               psamples, pt, pwall, tt);
    } else {
        printf("perf record/script failed (rc %d): no comparison\n", prc);
    }
    printf("first pass (cold caches: files opened, CFI rows loaded): %.2f us/sample; "
           "complete 40-frame chains: %ld/%zu\n",
           res[0].cold_us, res[0].complete, st.n);
    if (!keepdir) {
        unlink(data);
        unlink(tiny);
        unlink(wout);
        rmdir(dir);
    }
    for (size_t i = 0; i < st.n; i++)
        free(st.v[i].bytes);
    free(st.v);
    return 0;
}
