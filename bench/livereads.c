/* bench/livereads.c: live user-space cost per Lua sample (issue 14's goal:
 * at most 0.5 process_vm_readv calls and 10 us of CPU per Lua sample,
 * median, warm). Records a LuaJIT command with real BPF as `stacksnap
 * record` does (plan handed to the capture after the sample that verified
 * it, poll paced as record paces it: ss_unwinder_pace) and unwinds each
 * sample at once; per Lua sample
 * (a stack with a Lua frame) after the first WARM_SECONDS (default 1): the
 * target calls and reads the unwinder made (ss_unwinder_stats before and
 * after) and this thread's CPU time in ss_unwind; and the window bytes the
 * BPF program copied per sample (all samples, the first plan's larger
 * windows included). --hot unwinds each warm Lua sample a second time at
 * once and times that too: the walk with the CPU's caches warm, against the
 * first one run after 2 ms of other processes. Several runs; the table
 * shows each run's mean and the median of the runs.
 *
 * Under `valgrind --tool=callgrind --toggle-collect=ss_unwind` the counts
 * start at the first warm Lua sample (CALLGRIND_ZERO_STATS): instructions
 * per warm Lua sample = Ir / warm Lua samples, whatever the machine's load
 * (use -w 6: valgrind is slow to start).
 *
 * -p POLL_MS polls every POLL_MS instead of record's pace (2 ms while walks
 * read the target, up to 32 ms while none does).
 *
 * --clock also prints what the timing itself costs: the mean interval
 * between two clock_gettime(CLOCK_THREAD_CPUTIME_ID) calls made right after
 * each timed walk (a system call in a VM; part of every interval measured).
 *
 *   bench_livereads [-n RUNS] [-s SECONDS] [-w WARM_SECONDS] [-p POLL_MS] [--hot]
 *                   [--clock] [--no-lua-window] -- COMMAND...
 */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define RUNNING_ON_VALGRIND 0
#endif

#include "stacksnap/capture.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

extern char **environ;

struct run {
    struct ss_unwinder *u;
    struct ss_capture *cap;
    double t0, warm_s;
    bool hot, clock;
    int poll_ms; /* 0: ss_unwinder_pace */
    unsigned long samples, lua, warm;
    double calls, reads, cpu_ns, win_bytes, hot_ns, clock_ns;
    unsigned long zero_calls; /* warm Lua samples that made no target call */
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct run *r = ctx;
    struct ss_unwinder_stats a, b;
    struct ss_stack st;
    ss_unwinder_stats(r->u, &a);
    double c0 = thread_ns();
    ss_unwinder_intake(r->u, s);
    int rc = ss_unwind(r->u, s, &st);
    double c1 = thread_ns();
    double c2 = r->clock ? thread_ns() : c1;
    ss_unwinder_stats(r->u, &b);
    r->samples++;
    for (uint32_t i = 0; i < s->nwin; i++)
        r->win_bytes += s->win[i].len;

    bool lua = false;
    for (uint32_t i = 0; rc == 0 && i < st.nframes && !lua; i++)
        lua = st.frames[i].kind == SS_FRAME_LUA;
    struct ss_win_plan plan;
    if (ss_unwinder_take_plan(r->u, s->pid, &plan))
        ss_capture_set_plan(r->cap, (pid_t)s->pid, &plan, NULL);
    if (!lua) return;
    r->lua++;
    if (mono() - r->t0 < r->warm_s) return;
    if (r->hot) { /* the same sample again at once: the CPU's caches warm */
        double h0 = thread_ns();
        ss_unwinder_intake(r->u, s);
        ss_unwind(r->u, s, &st);
        r->hot_ns += thread_ns() - h0;
    }
    if (!r->warm++) CALLGRIND_ZERO_STATS; /* under callgrind: count warm samples only */
    r->calls += (double)(b.target_calls - a.target_calls);
    r->reads += (double)(b.target_reads - a.target_reads);
    r->cpu_ns += c1 - c0;
    r->clock_ns += c2 - c1;
    r->zero_calls += b.target_calls == a.target_calls;
}

static int one(char *const argv[], double secs, double warm_s, int poll_ms, bool hot, bool clock,
               bool windows, struct run *r)
{
    struct ss_err err = {0};
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ)) return -1;
    posix_spawn_file_actions_destroy(&fa);
    usleep(300000);
    struct ss_capture_opts o = {.freq_hz = 499, .stack_size = 16384, .no_windows = !windows};
    struct ss_unwinder_opts uo = {0};
    memset(r, 0, sizeof(*r));
    r->warm_s = warm_s;
    r->hot = hot;
    r->clock = clock;
    r->poll_ms = poll_ms;
    int rc = ss_unwinder_new(&r->u, &uo, &err);
    if (!rc) rc = ss_capture_open(&r->cap, &o, &err);
    if (!rc) rc = ss_capture_add_pid(r->cap, pid, &err);
    if (!rc) rc = ss_capture_start(r->cap, &err);
    if (rc) {
        fprintf(stderr, "bench_livereads: %s\n", err.msg);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    r->t0 = mono();
    struct ss_pace pace = {0};
    while (mono() - r->t0 < secs) {
        int ms = r->poll_ms ? r->poll_ms : ss_unwinder_pace(r->u, &pace);
        if (ss_capture_poll(r->cap, ms, on_sample, r) < 0) break;
    }
    ss_capture_stop(r->cap);
    while (ss_capture_poll(r->cap, 0, on_sample, r) > 0)
        ;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ss_capture_close(r->cap);
    ss_unwinder_free(r->u);
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int runs = 5, i = 1, poll_ms = 0;
    double secs = 4, warm_s = 1;
    bool windows = true, hot = false, clock = false;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            warm_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc)
            poll_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hot"))
            hot = true;
        else if (!strcmp(argv[i], "--clock"))
            clock = true;
        else if (!strcmp(argv[i], "--no-lua-window"))
            windows = false;
        else {
            fprintf(stderr, "usage: bench_livereads [-n RUNS] [-s SECONDS] [-w WARM_SECONDS] "
                            "[-p POLL_MS] [--hot] [--clock] [--no-lua-window] -- "
                            "COMMAND...\n");
            return 2;
        }
    }
    if (i + 1 >= argc || runs < 1 || runs > 64 || poll_ms < 0) {
        fprintf(stderr, "bench_livereads: no command (or bad -n, -p)\n");
        return 2;
    }
    double calls[64], reads[64], cpu[64], zero[64], wb[64], hcpu[64], clk[64];
    printf("| run | samples | Lua | warm Lua | calls/Lua sample | reads/Lua sample | "
           "no-call share | CPU us/Lua sample | %swindow bytes/sample |\n"
           "|---|---|---|---|---|---|---|---|%s---|\n",
           hot ? "same sample again, hot: CPU us | " : "", hot ? "---|" : "");
    for (int k = 0; k < runs; k++) {
        struct run r;
        if (one(&argv[i + 1], secs, warm_s, poll_ms, hot, clock, windows, &r) || !r.warm) {
            fprintf(stderr, "bench_livereads: run %d failed (no warm Lua samples)\n", k);
            return 1;
        }
        calls[k] = r.calls / (double)r.warm;
        reads[k] = r.reads / (double)r.warm;
        cpu[k] = r.cpu_ns / (double)r.warm / 1000;
        zero[k] = 100.0 * (double)r.zero_calls / (double)r.warm;
        wb[k] = r.win_bytes / (double)r.samples;
        hcpu[k] = r.hot_ns / (double)r.warm / 1000;
        clk[k] = r.clock_ns / (double)r.warm / 1000;
        char hb[32] = "";
        if (hot) snprintf(hb, sizeof(hb), "%.1f | ", hcpu[k]);
        printf("| %d | %lu | %lu | %lu | %.2f | %.2f | %.1f%% | %.1f | %s%.0f |\n", k + 1,
               r.samples, r.lua, r.warm, calls[k], reads[k], zero[k], cpu[k], hb, wb[k]);
        fflush(stdout);
    }
    qsort(calls, (size_t)runs, sizeof(double), cmp_d);
    qsort(reads, (size_t)runs, sizeof(double), cmp_d);
    qsort(cpu, (size_t)runs, sizeof(double), cmp_d);
    qsort(zero, (size_t)runs, sizeof(double), cmp_d);
    qsort(wb, (size_t)runs, sizeof(double), cmp_d);
    qsort(hcpu, (size_t)runs, sizeof(double), cmp_d);
    qsort(clk, (size_t)runs, sizeof(double), cmp_d);
    char hb[32] = "";
    if (hot) snprintf(hb, sizeof(hb), "%.1f | ", hcpu[runs / 2]);
    printf("| median | | | | %.2f | %.2f | %.1f%% | %.1f | %s%.0f |\n", calls[runs / 2],
           reads[runs / 2], zero[runs / 2], cpu[runs / 2], hb, wb[runs / 2]);
    if (clock)
        printf("\nthe clock itself: %.2f us between two CLOCK_THREAD_CPUTIME_ID reads (median "
               "of the runs' means), in every CPU figure above\n",
               clk[runs / 2]);
    return 0;
}
