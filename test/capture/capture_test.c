/* test/capture/capture_test.c: the snapshot capture against real processes
 * with real BPF (root): pid filter, sampled ip, stack bytes at the offsets
 * the workload predicts, partial copies near the top of a stack, user regs
 * of kernel-mode samples, drops, following children, program size. Every
 * check runs for the ring buffer and the compat variant. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stacksnap/capture.h"
#include "pattern.h"
#include "proc.h"
#include "ringbuf.h"

/* What one run saw, checked sample by sample in the callback (the stack
 * bytes are only valid there). */
struct tally {
    struct wl_ready want; /* the spinning thread */
    uint64_t after_ns;    /* check its samples from then on (CLOCK_MONOTONIC) */
    pid_t other;          /* a second workload, or 0 */
    pid_t child;          /* a forked child (follow test), or 0 */
    long total, target, other_n, self_n, child_n;
    long kernel, ip_in, ip_out, pat_ok, pat_bad, full, partial, len_ok, len_bad, beyond;
    long user_regs_bad;
    uint32_t max_len, min_len;
};

static bool pattern_at(const struct ss_sample *s, uint64_t addr)
{
    uint64_t sp = s->regs[SS_REG_SP];
    if (addr < sp || addr - sp + SS_PATTERN_LEN > s->stack_len) return false;
    return memcmp(s->stack + (addr - sp), SS_PATTERN, SS_PATTERN_LEN) == 0;
}

/* Bytes copied before the first page the copy could not read (the copy
 * goes on past such pages, bpf/pages.h: the holes). */
static uint32_t readable_len(const struct ss_sample *s)
{
    if (!s->holes) return s->stack_len;
    uint64_t sp = s->regs[SS_REG_SP], hole = (sp & ~4095ull) + 4096ull * __builtin_ctz(s->holes);
    return hole > sp ? (uint32_t)(hole - sp) : 0;
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct tally *t = ctx;
    uint64_t ip = s->regs[SS_REG_IP], sp = s->regs[SS_REG_SP];

    t->total++;
    if ((s->regs[SS_REG_CS] & 3) != 3 || ip >= 0x800000000000ull || sp >= 0x800000000000ull)
        t->user_regs_bad++;
    if ((pid_t)s->pid == getpid()) t->self_n++;
    if (t->other && (pid_t)s->pid == t->other) t->other_n++;
    if (t->child && (pid_t)s->pid == t->child) {
        t->child_n++;
    }
    if ((pid_t)s->pid != t->want.pid || (pid_t)s->tid != t->want.tid || s->time_ns < t->after_ns)
        return;
    t->target++;
    if (s->flags & SS_SAMPLE_KERNEL)
        t->kernel++;
    else if (ip >= t->want.fn && ip < t->want.fn + t->want.fn_size)
        t->ip_in++;
    else
        t->ip_out++;
    if (pattern_at(s, t->want.pat))
        t->pat_ok++;
    else
        t->pat_bad++;
    if (s->flags & SS_SAMPLE_PARTIAL)
        t->partial++;
    else if (s->stack_len == s->stack_req)
        t->full++;
    uint32_t len = readable_len(s);
    if (t->want.top) {
        if (len == t->want.top - sp)
            t->len_ok++;
        else
            t->len_bad++;
        if (s->stack_len > len) t->beyond++; /* on past the guard page */
    }
    if (len > t->max_len) t->max_len = len;
    if (!t->min_len || len < t->min_len) t->min_len = len;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long now_ms(void)
{
    return (long)(now_ns() / 1000000);
}

/* Poll for ms milliseconds, then stop sampling and drain the buffer. */
static void run(struct ss_capture *c, int ms, struct tally *t)
{
    long end = now_ms() + ms;
    while (now_ms() < end)
        cr_assert_geq(ss_capture_poll(c, 50, on_sample, t), 0);
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, on_sample, t) > 0)
        ;
}

/* The ring buffer program where the kernel has what it needs (5.15+), else
 * a loud skip (the kernel matrix boots 5.10); a rejection fails. */
static struct ss_capture *open_capture(struct ss_capture_opts o)
{
    struct ss_capture *c;
    struct ss_err err = {0};
    int r = ss_capture_open(&c, &o, &err);
    cr_assert_eq(r, 0, "ss_capture_open: %s", err.msg);
    if (!o.compat && ss_capture_is_compat(c)) need_ringbuf(c);
    cr_assert_eq(ss_capture_is_compat(c), o.compat);
    return c;
}

/* Share of a spinning workload's samples that interrupt user mode, in
 * percent: under emulation (the kernel matrix sets SS_VM_GUEST) timer and
 * fault handling take a large part of the guest's time. */
static long user_share_min(void)
{
    return getenv("SS_VM_GUEST") ? 50 : 90;
}

static void start(struct ss_capture *c, pid_t pid)
{
    struct ss_err err = {0};
    if (pid) cr_assert_eq(ss_capture_add_pid(c, pid, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_start(c, &err), 0, "ss_capture_start: %s", err.msg);
}

static void spawn_arg(struct wl *w, const char *mode, const char *arg, struct wl_ready *r)
{
    cr_assert_eq(wl_start(w, mode, arg), 0, "spawn capture_workload %s", mode);
    cr_assert_eq(wl_ready(w, r, 5000), 0, "capture_workload %s: no ready line", mode);
}

static void spawn(struct wl *w, const char *mode, struct wl_ready *r)
{
    spawn_arg(w, mode, NULL, r);
}

/* Samples for the selected pid only; ip inside the spinning function; the
 * pattern at (&array - sp); full copies below a deep stack. */
static void filter_and_pattern(bool compat, unsigned stack_size)
{
    struct wl a, b;
    struct wl_ready ra, rb;
    struct tally t = {0};
    struct ss_capture_stats st;

    spawn(&a, "deep", &ra);
    spawn(&b, "deep", &rb);
    t.want = ra;
    t.other = rb.pid;
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 499, .stack_size = stack_size, .compat = compat});
    start(c, ra.pid);
    run(c, 700, &t);
    ss_capture_stats(c, &st);
    cr_log_info("%s size %u: %ld samples, %ld ip in fn, %ld pattern ok, max len %u, stats seen "
                "%lu emitted %lu dropped %lu",
                compat ? "compat" : "ringbuf", ss_capture_stack_size(c), t.total, t.ip_in, t.pat_ok,
                t.max_len, st.seen, st.emitted, st.dropped);
    cr_expect_geq(t.target, 30, "samples of the spinning workload: %ld", t.target);
    cr_expect_eq(t.total, t.target, "samples of other tasks: %ld", t.total - t.target);
    cr_expect_eq(t.other_n, 0, "samples of the unselected busy workload: %ld", t.other_n);
    cr_expect_eq(t.ip_out, 0, "user-mode samples with ip outside ss_spin: %ld", t.ip_out);
    cr_expect_geq(t.ip_in, t.target * user_share_min() / 100, "user-mode samples %ld of %ld",
                  t.ip_in, t.target);
    cr_expect_eq(t.pat_bad, 0, "samples without the pattern at pat - sp: %ld", t.pat_bad);
    cr_expect_eq(t.full, t.target, "full copies %ld of %ld", t.full, t.target);
    cr_expect_eq(t.max_len, ss_capture_stack_size(c));
    cr_expect_eq(t.user_regs_bad, 0);
    cr_expect_eq(st.emitted, (uint64_t)t.total);
    cr_expect_eq(st.dropped, 0);
    cr_expect_eq(st.seen, st.emitted + st.skipped);
    ss_capture_close(c);
    wl_stop(&a);
    wl_stop(&b);
}

Test(capture, filter_and_pattern, .timeout = 30)
{
    filter_and_pattern(false, 0);
}
Test(capture, filter_and_pattern_compat, .timeout = 30)
{
    filter_and_pattern(true, 0);
}
Test(capture, max_stack_size, .timeout = 30)
{
    filter_and_pattern(false, SS_STACK_MAX);
}
Test(capture, max_stack_size_compat, .timeout = 30)
{
    filter_and_pattern(true, SS_STACK_MAX);
}

/* A thread spinning below the end of its stack mapping (a PROT_NONE page
 * above it, readable memory above that): a partial snapshot whose bytes
 * before the first hole are exactly top - sp, pattern included. Depth 0 is
 * ~100 bytes below the top: the copy goes on past the guard page (a hole)
 * into the memory above (user space clips it at the mapping's end,
 * test/native). */
static void partial(bool compat, const char *depth_kib, unsigned stack_size, uint32_t lo,
                    uint32_t hi)
{
    struct wl w;
    struct tally t = {0};
    struct ss_capture_stats st;

    spawn_arg(&w, "top", depth_kib, &t.want);
    cr_assert_neq(t.want.tid, t.want.pid);
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 499, .stack_size = stack_size, .compat = compat});
    start(c, t.want.pid);
    run(c, 500, &t);
    ss_capture_stats(c, &st);
    cr_log_info("%s depth %s: %ld samples, %ld partial, length %u..%u, %ld pattern ok",
                compat ? "compat" : "ringbuf", depth_kib, t.target, t.partial, t.min_len, t.max_len,
                t.pat_ok);
    cr_expect_geq(t.target, 20);
    cr_expect_eq(t.partial, t.target);
    cr_expect_eq(t.len_bad, 0, "partial copies not ending at the stack top: %ld", t.len_bad);
    if (!strcmp(depth_kib, "0"))
        cr_expect_eq(t.beyond, t.target, "%ld of %ld copies went on past the guard page", t.beyond,
                     t.target);
    cr_expect_geq(t.min_len, lo);
    cr_expect_leq(t.max_len, hi);
    cr_expect_eq(t.pat_bad, 0);
    cr_expect_eq(t.ip_out, 0);
    cr_expect_geq(st.copy_partial, (uint64_t)t.target);
    cr_expect_eq(st.copy_failed, 0);
    ss_capture_close(c);
    wl_stop(&w);
}

static void partials(bool compat)
{
    partial(compat, "0", 0, 64, 1024);                         /* a few hundred bytes */
    partial(compat, "9", 0, 9 * 1024, 12 * 1024);              /* 2 pages + rest of page 0 */
    partial(compat, "40", SS_STACK_MAX, 40 * 1024, 44 * 1024); /* the 8-page chunk too */
}

Test(capture, partial_near_stack_top, .timeout = 30)
{
    partials(false);
}
Test(capture, partial_near_stack_top_compat, .timeout = 30)
{
    partials(true);
}

/* The memory map changes under a stack end the program already knows:
 * first elsewhere (the end stays the end: partial copies up to it), then the
 * guard page above the thread's stack turns readable, and the samples after
 * that copy on into the memory above (16 KiB in full), not up to the end
 * found before. */
static void guard_opened(bool compat)
{
    struct wl w;
    struct wl_ready r;
    struct tally before = {0}, mid = {0}, after = {0};
    long end;

    spawn_arg(&w, "top", "0", &before.want);
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 499, .stack_size = 16384, .compat = compat});
    start(c, before.want.pid);
    for (end = now_ms() + 400; now_ms() < end;)
        cr_assert_geq(ss_capture_poll(c, 50, on_sample, &before), 0);
    cr_assert_eq(wl_send(&w, "map\n"), 0);
    cr_assert_eq(wl_ready(&w, &r, 5000), 0, "capture_workload top: no answer to map");
    mid.want = before.want;
    mid.after_ns = now_ns();
    for (end = now_ms() + 300; now_ms() < end;)
        cr_assert_geq(ss_capture_poll(c, 50, on_sample, &mid), 0);
    cr_assert_eq(wl_send(&w, "open\n"), 0);
    cr_assert_eq(wl_ready(&w, &r, 5000), 0, "capture_workload top: no answer to open");
    after.want = before.want;
    after.want.top = 0;
    after.after_ns = now_ns();
    run(c, 400, &after);
    cr_log_info("%s: before %ld samples (%ld partial), after a map change elsewhere %ld (%ld "
                "partial), after the guard opened %ld (%ld full)",
                compat ? "compat" : "ringbuf", before.target, before.partial, mid.target,
                mid.partial, after.target, after.full);
    cr_expect_geq(before.target, 10);
    cr_expect_eq(before.partial, before.target);
    cr_expect_eq(before.len_bad, 0);
    cr_expect_geq(mid.target, 5);
    cr_expect_eq(mid.partial, mid.target);
    cr_expect_eq(mid.len_bad, 0);
    cr_expect_geq(after.target, 10);
    cr_expect_eq(after.full, after.target, "%ld of %ld samples after the change still partial",
                 after.partial, after.target);
    cr_expect_eq(after.pat_bad, 0);
    ss_capture_close(c);
    wl_stop(&w);
}

Test(capture, guard_opened, .timeout = 30)
{
    guard_opened(false);
}
Test(capture, guard_opened_compat, .timeout = 30)
{
    guard_opened(true);
}

/* Samples that interrupt a system call: the ring buffer variant still gets
 * the user registers (the pattern is where user sp says); compat skips. */
static void kernel_mode(bool compat)
{
    struct wl w;
    struct tally t = {0};
    struct ss_capture_stats st;

    spawn(&w, "syscall", &t.want);
    struct ss_capture *c = open_capture((struct ss_capture_opts){.freq_hz = 499, .compat = compat});
    start(c, t.want.pid);
    run(c, 600, &t);
    ss_capture_stats(c, &st);
    cr_log_info("%s: %ld samples, %ld kernel, %lu skipped", compat ? "compat" : "ringbuf", t.target,
                t.kernel, st.skipped);
    cr_expect_eq(t.user_regs_bad, 0, "samples with non-user registers: %ld", t.user_regs_bad);
    cr_expect_eq(t.pat_bad, 0);
    if (compat) {
        cr_expect_eq(t.kernel, 0);
        cr_expect_geq(st.skipped, 10);
    } else {
        cr_expect_geq(t.kernel, 10, "kernel-mode samples with user regs: %ld", t.kernel);
        cr_expect_eq(st.skipped, 0);
    }
    cr_expect_eq(st.seen, st.emitted + st.skipped + st.dropped);
    ss_capture_close(c);
    wl_stop(&w);
}

Test(capture, kernel_mode_user_regs, .timeout = 30)
{
    kernel_mode(false);
}
Test(capture, kernel_mode_compat_skips, .timeout = 30)
{
    kernel_mode(true);
}

static volatile int self_spin;
static void *spin_self(void *arg)
{
    (void)arg;
    while (self_spin)
        ;
    return NULL;
}

/* -a: every process, never the profiler itself. */
static void system_wide(bool compat)
{
    struct wl a, b;
    struct wl_ready rb;
    struct tally t = {0};
    struct ss_capture_stats st;
    pthread_t th;

    spawn(&a, "deep", &t.want);
    spawn(&b, "deep", &rb);
    t.other = rb.pid;
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 499, .system_wide = true, .compat = compat});
    start(c, 0);
    self_spin = 1;
    cr_assert_eq(pthread_create(&th, NULL, spin_self, NULL), 0);
    run(c, 600, &t);
    self_spin = 0;
    pthread_join(th, NULL);
    cr_expect_geq(t.target, 10, "samples of workload A: %ld", t.target);
    cr_expect_geq(t.other_n, 10, "samples of workload B: %ld", t.other_n);
    cr_expect_eq(t.self_n, 0, "samples of the profiler itself: %ld", t.self_n);
    cr_expect_eq(t.pat_bad, 0);
    cr_expect_eq(t.user_regs_bad, 0, "samples with non-user registers: %ld", t.user_regs_bad);
    ss_capture_stats(c, &st);
    if (!compat) /* kernel threads are not selected, user tasks always have user regs */
        cr_expect_eq(st.skipped, 0, "skipped: %lu", st.skipped);
    ss_capture_close(c);
    wl_stop(&a);
    wl_stop(&b);
}

Test(capture, system_wide, .timeout = 30)
{
    system_wide(false);
}
Test(capture, system_wide_compat, .timeout = 30)
{
    system_wide(true);
}

/* A tiny buffer that is not read while samples arrive fast: drops are
 * counted, and every record is accounted for. */
static void drops(bool compat)
{
    struct wl w;
    struct tally t = {0};
    struct ss_capture_stats st;

    spawn(&w, "deep", &t.want);
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 4000, .compat = compat, .ringbuf_bytes = 64 * 1024});
    start(c, t.want.pid);
    usleep(400 * 1000);
    run(c, 100, &t);
    ss_capture_stats(c, &st);
    cr_log_info("%s: seen %lu emitted %lu dropped %lu delivered %ld", compat ? "compat" : "ringbuf",
                st.seen, st.emitted, st.dropped, t.total);
    cr_expect_gt(st.dropped, 0);
    cr_expect_gt(t.total, 0);
    cr_expect_eq(st.emitted, (uint64_t)t.total);
    cr_expect_eq(st.seen, st.emitted + st.dropped + st.skipped);
    ss_capture_close(c);
    wl_stop(&w);
}

Test(capture, drops_counted, .timeout = 30)
{
    drops(false);
}
Test(capture, drops_counted_compat, .timeout = 30)
{
    drops(true);
}

/* A selected process forks a busy child: with follow_children the child is
 * sampled, without it not. */
static void follow(bool compat, bool on)
{
    struct wl w;
    struct wl_ready parent, child;
    struct tally t = {0};
    pid_t pids[16];

    spawn(&w, "fork", &parent);
    struct ss_capture *c = open_capture(
        (struct ss_capture_opts){.freq_hz = 499, .compat = compat, .follow_children = on});
    start(c, parent.pid);
    cr_assert_eq(wl_send(&w, "go\n"), 0);
    cr_assert_eq(wl_ready(&w, &child, 5000), 0, "no ready line from the child");
    cr_assert_neq(child.pid, parent.pid);
    t.want = child; /* sampled from birth: check what follows its ready line */
    t.after_ns = now_ns();
    t.child = child.pid;
    int n = ss_capture_pids(c, pids, 16);
    run(c, 600, &t);
    cr_log_info("%s follow=%d: %ld child samples", compat ? "compat" : "ringbuf", on, t.child_n);
    if (on) {
        cr_expect_eq(n, 2, "selected pids: %d", n);
        cr_expect_geq(t.child_n, 20, "samples of the forked child: %ld", t.child_n);
        cr_expect_eq(t.pat_bad, 0);
        cr_expect_eq(t.ip_out, 0);
    } else {
        cr_expect_eq(n, 1);
        cr_expect_eq(t.child_n, 0, "child sampled without follow_children");
    }
    ss_capture_close(c);
    wl_stop(&w);
}

Test(capture, follow_children, .timeout = 30)
{
    follow(false, true);
}
Test(capture, follow_children_compat, .timeout = 30)
{
    follow(true, true);
}
Test(capture, no_follow_without_option, .timeout = 30)
{
    follow(false, false);
}
Test(capture, no_follow_without_option_compat, .timeout = 30)
{
    follow(true, false);
}
