/* test/capture/procev_test.c: process markers (fork, exec, exit) with real
 * BPF, both programs. The test process forks a child that spins in
 * pev_before_exec, then execs capture_workload (which spins in ss_spin).
 * Nothing is polled until the exec is long done, the way a busy agent lags
 * behind its samples; then the samples and markers are unwound in stream
 * order. With markers, the child's pre-exec samples are walked with a copy
 * of its parent's view (pev_before_exec) and the post-exec ones with the
 * new image's (ss_spin); without markers, the pre-exec samples get the
 * maps /proc shows after the exec and lose their names (the control). The
 * exit marker comes after the child's last sample and frees its view. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stacksnap/capture.h"
#include "stacksnap/unwind.h"

struct run {
    struct ss_capture *cap;
    struct ss_unwinder *u;
    bool markers;
    pid_t child;
    /* stream order: phase 0 before the child's exec marker, 1 after, 2 after its exit */
    int phase;
    unsigned forks, execs, exits;
    unsigned n[3], before_named[3], after_named[3]; /* per phase */
};

static bool has_frame(const struct ss_stack *st, const char *name)
{
    for (uint32_t i = 0; i < st->nframes; i++)
        if (st->frames[i].name && !strcmp(st->frames[i].name, name)) return true;
    return false;
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct run *r = ctx;
    struct ss_stack st;
    if (s->pid != (uint32_t)r->child) return;
    ss_unwinder_intake(r->u, s);
    int rc = ss_unwind(r->u, s, &st);
    r->n[r->phase]++;
    if (rc < 0) return;
    r->before_named[r->phase] += has_frame(&st, "pev_before_exec");
    r->after_named[r->phase] += has_frame(&st, "ss_spin");
}

static void on_event(void *ctx, const struct ss_proc_event *ev)
{
    struct run *r = ctx;
    if (ev->pid != (uint32_t)r->child) return;
    if (ev->kind == SS_PROC_FORK) {
        cr_expect_eq(ev->ppid, (uint32_t)getpid());
        cr_expect_eq(r->n[0] + r->n[1], 0, "a sample of the child before its fork marker");
        r->forks++;
    } else if (ev->kind == SS_PROC_EXEC) {
        r->execs++;
        r->phase = 1;
    } else if (ev->kind == SS_PROC_EXIT) {
        r->exits++;
        r->phase = 2;
    }
    ss_unwinder_proc_event(r->u, ev);
}

__attribute__((noinline)) void pev_before_exec(void);
__attribute__((noinline)) void pev_before_exec(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do { /* 300 ms of CPU */
        for (volatile int i = 0; i < 10000; i++)
            ;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 300);
}

static void poll_all(struct run *r, int rounds)
{
    for (int i = 0; i < rounds; i++)
        cr_assert_geq(ss_capture_poll(r->cap, 10, on_sample, r), 0);
}

static void run_one(bool compat, bool markers)
{
    struct run r = {.markers = markers};
    struct ss_capture_opts o = {.freq_hz = 199,
                                .stack_size = 8192,
                                .compat = compat,
                                .follow_children = true,
                                .ringbuf_bytes = 32u << 20,
                                .proc_event = markers ? on_event : NULL,
                                .proc_event_arg = &r};
    struct ss_err err = {0};
    cr_assert_eq(ss_capture_open(&r.cap, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_is_compat(r.cap), compat);
    struct ss_unwinder_opts uo = {0};
    cr_assert_eq(ss_unwinder_new(&r.u, &uo, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_add_pid(r.cap, getpid(), &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_start(r.cap, &err), 0, "%s", err.msg);
    poll_all(&r, 2); /* our own start-up samples out of the way */

    int p[2];
    cr_assert_eq(pipe(p), 0);
    r.child = fork();
    cr_assert_geq(r.child, 0);
    if (r.child == 0) {
        dup2(p[1], 1);
        close(p[0]);
        pev_before_exec();
        execl(SS_BINARY_DIR "/capture_workload", "capture_workload", "main", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* The child spins 300 ms, execs and spins on (its ready line says so):
     * poll nothing until then, and 500 ms more. */
    char line[256];
    ssize_t got = read(p[0], line, sizeof(line));
    close(p[0]);
    cr_assert_gt(got, 0, "capture_workload did not start");
    usleep(500 * 1000);
    poll_all(&r, 5);
    unsigned pre = r.n[0], post = r.n[1];
    kill(r.child, SIGKILL);
    waitpid(r.child, NULL, 0);
    for (int i = 0; i < 100 && markers && !r.exits; i++)
        poll_all(&r, 1);
    struct ss_capture_stats cs;
    ss_capture_stats(r.cap, &cs);
    cr_log_info("%s, markers %s: child samples %u before its exec marker (%u in pev_before_exec, "
                "%u in ss_spin), %u after (%u in ss_spin); %llu markers, %llu dropped",
                compat ? "compat" : "ring buffer", markers ? "on" : "off", r.n[0],
                r.before_named[0], r.after_named[0], r.n[1], r.after_named[1],
                (unsigned long long)cs.markers, (unsigned long long)cs.dropped);
    cr_assert_eq(cs.dropped, 0);
    if (markers) {
        cr_assert_eq(r.forks, 1);
        cr_assert_eq(r.execs, 1);
        cr_assert_eq(r.exits, 1);
        cr_assert_geq(pre, 20, "only %u samples of the child before its exec", pre);
        cr_assert_geq(post, 10, "only %u samples of the child after its exec", post);
        /* a few samples fall inside execve itself (user regs of the old
         * image, memory of the new one): named execve, not pev_before_exec */
        cr_assert_geq(r.before_named[0] * 10, pre * 8, "%u of %u pre-exec samples named",
                      r.before_named[0], pre);
        cr_assert_eq(r.after_named[0], 0);
        cr_assert_geq(r.after_named[1] * 10, post * 9, "%u of %u post-exec samples named",
                      r.after_named[1], post);
        cr_assert_eq(r.before_named[1], 0);
        cr_assert_eq(r.n[2], 0, "%u samples of the child after its exit marker", r.n[2]);
        struct ss_unwinder_pdesc pd;
        cr_assert_eq(ss_unwinder_describe(r.u, (uint32_t)r.child, &pd, NULL, NULL), -ESRCH,
                     "the exited child's view is still there");
    } else {
        /* the control: all of the child's samples walked with the exec'd
         * image's maps; the pre-exec ones cannot name pev_before_exec */
        cr_assert_eq(cs.markers, 0);
        cr_assert_geq(pre, 40, "only %u samples of the child", pre);
        cr_assert_lt(r.before_named[0] * 10, pre, "%u of %u pre-exec samples named without markers",
                     r.before_named[0], pre);
    }
    ss_unwinder_free(r.u);
    ss_capture_close(r.cap);
}

Test(procev, fork_exec_exit, .timeout = 30)
{
    run_one(false, true);
}

Test(procev, fork_exec_exit_compat, .timeout = 30)
{
    run_one(true, true);
}

Test(procev, control_without_markers, .timeout = 30)
{
    run_one(false, false);
}
