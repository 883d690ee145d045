/* test/capture/prog_test.c: the loaded programs stay small (xlated
 * instructions <= 400 for both variants and both filter modes, at the
 * default snapshot size and the largest: ~230 for the registers and stack,
 * the rest the window steps and the window subprogram; the page-by-page
 * copy is one loop whatever the size), run-time stats count runs
 * while asked for and leave kernel.bpf_stats_enabled as it was, and errors
 * name their cause. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "capture/capture_int.h"
#include "stacksnap/capture.h"
#include "proc.h"
#include "ringbuf.h"

#define MAX_XLATED 400

static bool kernel_at_least(int major, int minor)
{
    struct utsname u;
    int a = 0, b = 0;
    if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2) return true;
    return a > major || (a == major && b >= minor);
}

/* The verifier drops the code a snapshot size cannot need: check the
 * default and the largest. */
static void size_of(bool compat, bool all, unsigned stack_size)
{
    struct ss_capture_opts o = {.compat = compat, .system_wide = all, .stack_size = stack_size};
    struct ss_bpf_prog_info pi;
    struct ss_capture *c;
    struct ss_err err = {0};

    cr_assert_eq(ss_capture_open(&c, &o, &err), 0, "%s", err.msg);
    if (!compat && ss_capture_is_compat(c)) need_ringbuf(c);
    cr_assert_eq(ss_capture_prog_info(c, &pi, &err), 0, "%s", err.msg);
    cr_log_info("%s (%s, %u-byte stack): %u xlated insns, %u verified insns, %u JIT bytes", pi.name,
                all ? "system-wide" : "pid filter", ss_capture_stack_size(c), pi.xlated_insns,
                pi.verified_insns, pi.jited_bytes);
    cr_expect_str_eq(pi.name, compat ? "snapshot_compat" : "snapshot");
    cr_expect_gt(pi.xlated_insns, 20);
    cr_expect_leq(pi.xlated_insns, MAX_XLATED, "%s: %u xlated instructions", pi.name,
                  pi.xlated_insns);
    if (kernel_at_least(5, 16)) cr_expect_gt(pi.verified_insns, 0); /* field since 5.16 */
    ss_capture_close(c);
}

Test(capture_prog, size_ringbuf)
{
    size_of(false, false, 0);
    size_of(false, true, 0);
    size_of(false, false, SS_STACK_MAX);
}

Test(capture_prog, size_compat)
{
    size_of(true, false, 0);
    size_of(true, true, 0);
    size_of(true, false, SS_STACK_MAX);
}

static int stats_sysctl(void)
{
    FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "re");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

Test(capture_prog, run_time_stats, .timeout = 30)
{
    struct ss_capture_opts o = {.freq_hz = 499, .bpf_stats = true};
    struct ss_bpf_prog_info pi;
    struct ss_capture *c;
    struct ss_err err = {0};
    struct wl w;
    struct wl_ready r;
    int before = stats_sysctl();

    cr_assert_eq(wl_start(&w, "deep", NULL), 0);
    cr_assert_eq(wl_ready(&w, &r, 5000), 0);
    cr_assert_eq(ss_capture_open(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_add_pid(c, r.pid, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_start(c, &err), 0, "%s", err.msg);
    usleep(300 * 1000);
    ss_capture_stop(c);
    cr_assert_eq(ss_capture_prog_info(c, &pi, &err), 0, "%s", err.msg);
    cr_log_info("%s: %llu runs, %llu ns per run", pi.name, (unsigned long long)pi.run_cnt,
                (unsigned long long)(pi.run_cnt ? pi.run_time_ns / pi.run_cnt : 0));
    cr_expect_geq(pi.run_cnt, 50);
    cr_expect_gt(pi.run_time_ns, 0);
    ss_capture_close(c);
    wl_stop(&w);
    cr_expect_eq(stats_sysctl(), before, "kernel.bpf_stats_enabled restored");
}

Test(capture_prog, errors_name_the_cause)
{
    struct ss_capture *c;
    struct ss_err err = {0};
    struct ss_capture_opts big = {.stack_size = SS_STACK_MAX + 8};

    cr_expect_eq(ss_capture_open(&c, &big, &err), -EINVAL);
    cr_expect(strstr(err.msg, "stack size") != NULL, "message: %s", err.msg);

    struct ss_capture_opts fast = {.freq_hz = 100000000};
    memset(&err, 0, sizeof(err));
    cr_assert_eq(ss_capture_open(&c, &fast, &err), 0, "%s", err.msg);
    cr_expect_lt(ss_capture_start(c, &err), 0);
    cr_expect(strstr(err.msg, "perf_event_open cpu ") != NULL, "message: %s", err.msg);
    ss_capture_close(c);
}

/* The reason of a rejection is the verifier's last word before its
 * statistics: here Debian 6.1's log of the ring buffer program before the
 * bound was written for it (tail kept as the kernel printed it). */
Test(capture_prog, verifier_reason)
{
    char log[] = "; if (!bpf_probe_read_user(e->stack, len, (void *)sp) &&\n"
                 "105: (79) r3 = *(u64 *)(r10 -24)      ; R3_w=scalar() R10=fp0 refs=5\n"
                 "106: (85) call bpf_probe_read_user#112\n"
                 "R2 min value is negative, either use unsigned or 'var &= const'\n"
                 "processed 91 insns (limit 1000000) max_states_per_insn 0 total_states 7 "
                 "peak_states 7 mark_read 4\n";
    cr_expect_str_eq(ss_capture_log_reason(log),
                     "R2 min value is negative, either use unsigned or 'var &= const'");
    char plain[] = "libbpf: no statistics\nthe last line\n\n";
    cr_expect_str_eq(ss_capture_log_reason(plain), "the last line");
    char only[] = "processed 3 insns (limit 1000000)\n";
    cr_expect_str_eq(ss_capture_log_reason(only), "");
}
