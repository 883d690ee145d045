/* test/capture/cost.c: capture_cost, the per-sample kernel cost of the
 * snapshot program: samples capture_workload (deep: full copies, main and
 * top: partial copies) with BPF run-time stats on (BPF_ENABLE_STATS, switched
 * off again on exit) and prints run_time_ns / run_cnt and program sizes.
 * The perf event runs on every CPU, so most runs on the other CPUs only
 * reject a foreign pid: a first second with no pid selected measures that
 * cost, which is then taken out to give the cost per selected sample.
 *
 * --windows adds a window plan shaped like a LuaJIT runtime's (plan.c): 1120
 * bytes at the stack pointer, 112 bytes behind one load, 8 KiB at the stack
 * pointer (ip condition met), two alternatives skipped; all inside the deep
 * workload's stack. Prints per window how often it was copied or failed.
 *
 *   capture_cost [--compat] [--windows [--win-len BYTES]] [--mode deep|main|top]
 *                [--size BYTES] [--freq HZ] [--seconds S]
 * (--win-len: the stack-like window's length, default 8192) */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stacksnap/capture.h"
#include "proc.h"

static long win_ok[SS_WIN_MAX], win_bad[SS_WIN_MAX];

static void count(void *ctx, const struct ss_sample *s)
{
    for (unsigned i = 0; i < s->nwin; i++) {
        win_ok[i] += s->win[i].len > 0;
        win_bad[i] += s->win[i].err == -EFAULT;
    }
    (*(long *)ctx)++;
}

static int set_plan(struct ss_capture *c, const struct wl_ready *r, unsigned stack_len,
                    struct ss_err *err)
{
    struct ss_win_plan p = {.n = 5};
    for (unsigned i = 0; i < p.n; i++) {
        p.w[i].reg = SS_REG_SP;
        p.w[i].mask[0] = p.w[i].mask[1] = ~0ull;
        p.w[i].dst = SS_WIN_AREA - SS_WIN_LEN_MAX;
        p.w[i].len = SS_WIN_LEN_MAX;
    }
    p.w[0].dst = 0;
    p.w[0].len = 1120;
    /* a word of the pattern (in the spinning frame), masked into an offset
     * above it: a pointer that leads into the caller frames */
    p.w[1] = (struct ss_win_spec){.reg = SS_WIN_ABS,
                                  .nload = 1,
                                  .addr = r->pat,
                                  .mask = {0xff8},
                                  .off = {0, 0, (int64_t)(r->pat + 64)},
                                  .dst = 4096,
                                  .len = 112};
    p.w[2].len = (uint16_t)stack_len;
    p.w[2].flags = SS_WIN_IF_IP;
    p.w[2].ip_hi = ~0ull;
    p.w[3].flags = p.w[4].flags = SS_WIN_UNLESS_PREV;
    return ss_capture_set_plan(c, r->pid, &p, err);
}

int main(int argc, char **argv)
{
    struct ss_capture_opts o = {.freq_hz = 999, .bpf_stats = true};
    const char *mode = "deep";
    double seconds = 2;
    struct ss_capture_stats st;
    struct ss_bpf_prog_info pi;
    struct ss_capture *c;
    struct ss_err err = {0};
    struct wl_ready r;
    struct wl w;
    long n = 0;
    bool windows = false;
    unsigned win_len = SS_WIN_LEN_MAX;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--compat"))
            o.compat = true;
        else if (!strcmp(argv[i], "--windows"))
            windows = true;
        else if (!strcmp(argv[i], "--win-len") && i + 1 < argc)
            win_len = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            o.stack_size = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--freq") && i + 1 < argc)
            o.freq_hz = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: capture_cost [--compat] [--windows [--win-len BYTES]] "
                            "[--mode deep|main|top] [--size BYTES] [--freq HZ] [--seconds S]\n");
            return 2;
        }
    }
    if (wl_start(&w, mode, NULL) || wl_ready(&w, &r, 5000)) {
        fprintf(stderr, "capture_cost: capture_workload %s did not start\n", mode);
        return 1;
    }
    struct ss_bpf_prog_info base;
    if (ss_capture_open(&c, &o, &err) || ss_capture_start(c, &err) ||
        (usleep(1000 * 1000), ss_capture_prog_info(c, &base, &err)) ||
        ss_capture_add_pid(c, r.pid, &err) || (windows && set_plan(c, &r, win_len, &err))) {
        fprintf(stderr, "capture_cost: %s\n", err.msg);
        wl_stop(&w);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        ss_capture_poll(c, 100, count, &n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, count, &n) > 0)
        ;
    ss_capture_stats(c, &st);
    if (ss_capture_prog_info(c, &pi, &err)) {
        fprintf(stderr, "capture_cost: %s\n", err.msg);
        return 1;
    }
    printf("program %s: %u xlated insns, %u verified insns, %u JIT bytes\n", pi.name,
           pi.xlated_insns, pi.verified_insns, pi.jited_bytes);
    double reject = base.run_cnt ? (double)base.run_time_ns / (double)base.run_cnt : 0;
    uint64_t runs = pi.run_cnt - base.run_cnt, ns = pi.run_time_ns - base.run_time_ns;
    double per_sample =
        st.seen ? ((double)ns - (double)(runs - st.seen) * reject) / (double)st.seen : 0;
    printf("mode %s, stack %u bytes, %u Hz: %llu runs, %.0f ns per run; filtered-out run "
           "%.0f ns; per selected sample %.0f ns\n",
           mode, ss_capture_stack_size(c), o.freq_hz, (unsigned long long)runs,
           runs ? (double)ns / (double)runs : 0.0, reject, per_sample);
    printf("samples %ld, partial %llu, failed %llu, dropped %llu, skipped %llu, windows "
           "failed %llu\n",
           n, (unsigned long long)st.copy_partial, (unsigned long long)st.copy_failed,
           (unsigned long long)st.dropped, (unsigned long long)st.skipped,
           (unsigned long long)st.win_failed);
    for (int i = 0; windows && i < 5; i++)
        printf("window %d: %ld copied, %ld failed\n", i, win_ok[i], win_bad[i]);
    ss_capture_close(c);
    wl_stop(&w);
    return st.seen > 0 && pi.run_cnt > base.run_cnt ? 0 : 1;
}
