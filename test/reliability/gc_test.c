/* test/reliability/gc_test.c: per-process unwinder state is freed when a
 * process exits. A live unwinder learns about many short-lived processes
 * (first sample of a pid creates its state: mappings, opened files,
 * libunwind address space, caches); after they exit, ss_unwinder_gc frees
 * all of it, keeps the processes that still run, and the unwinder's memory
 * stays flat over hundreds of processes. A pid reused by a new process gets
 * a new description serial, so a capture writes a new process record. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl.h"
#include "stacksnap/unwind.h"

/* A child that sleeps until killed. */
static pid_t park(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
        for (;;)
            pause();
    }
    return pid;
}

static void sample_of(struct ss_unwinder *u, pid_t pid)
{
    static uint8_t stack[256];
    struct ss_sample s = {.pid = (uint32_t)pid, .tid = (uint32_t)pid, .stack = stack};
    s.regs[SS_REG_IP] = 0x1000; /* not mapped: the walk ends at once */
    s.regs[SS_REG_SP] = 0x7ffd00000000ull;
    s.stack_len = s.stack_req = sizeof(stack);
    struct ss_stack st;
    ss_unwinder_intake(u, &s);
    ss_unwind(u, &s, &st);
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(gc, exited_processes_are_freed_live_ones_kept, .timeout = 120)
{
    struct ss_unwinder *u;
    struct ss_err err = {0};
    struct ss_unwinder_opts o = {0};
    cr_assert_eq(ss_unwinder_new(&u, &o, &err), 0, "%s", err.msg);
    struct ss_unwinder_pdesc pd;
    pid_t keep = park();
    sample_of(u, keep);
    cr_assert_eq(ss_unwinder_describe(u, (uint32_t)keep, &pd, NULL, NULL), 0);

    long rss_warm = 0;
    const int rounds = 400;
    for (int i = 0; i < rounds; i++) {
        pid_t pid = park();
        sample_of(u, pid);
        cr_assert_eq(ss_unwinder_describe(u, (uint32_t)pid, &pd, NULL, NULL), 0,
                     "no state for pid %d after its first sample", pid);
        cr_assert_gt(pd.nmaps, 3);
        reap(pid);
        if (i % 50 == 49) {
            usleep(120000); /* past the exec/exit check rate limit */
            ss_unwinder_gc(u);
            cr_assert_eq(ss_unwinder_describe(u, (uint32_t)pid, &pd, NULL, NULL), -ESRCH,
                         "pid %d exited but its state survived ss_unwinder_gc", pid);
            cr_assert_eq(ss_unwinder_describe(u, (uint32_t)keep, &pd, NULL, NULL), 0,
                         "ss_unwinder_gc dropped a process that still runs");
            if (i == 99) rss_warm = rl_status_kib(getpid(), "RssAnon");
        }
    }
    usleep(120000);
    ss_unwinder_gc(u);
    struct ss_unwinder_stats st;
    ss_unwinder_stats(u, &st);
    long rss_end = rl_status_kib(getpid(), "RssAnon");
    cr_log_info("gc: %d processes, %llu files still open, RSS %ld KiB after 100, %ld KiB after %d",
                rounds, (unsigned long long)st.files, rss_warm, rss_end, rounds);
    /* one process state costs ~1 MiB (libunwind cache, rule and symbol
     * caches): 300 leaked states would be hundreds of MiB */
    if (!RL_ASAN)
        cr_expect_lt(rss_end - rss_warm, 16 * 1024, "RSS grew from %ld to %ld KiB", rss_warm,
                     rss_end);
    reap(keep);
    ss_unwinder_free(u);
}

Test(gc, reused_pid_gets_a_new_generation, .timeout = 60)
{
    /* pid reuse cannot be forced; what matters is that a state freed and
     * created again for the same pid never reports the old generation */
    struct ss_unwinder *u;
    struct ss_err err = {0};
    struct ss_unwinder_opts o = {0};
    cr_assert_eq(ss_unwinder_new(&u, &o, &err), 0, "%s", err.msg);
    pid_t pid = park();
    sample_of(u, pid);
    struct ss_unwinder_pdesc a, b;
    cr_assert_eq(ss_unwinder_describe(u, (uint32_t)pid, &a, NULL, NULL), 0);
    ss_unwinder_forget(u, (uint32_t)pid); /* as if it exited and was collected */
    sample_of(u, pid);                    /* "a new process" with the same pid */
    cr_assert_eq(ss_unwinder_describe(u, (uint32_t)pid, &b, NULL, NULL), 0);
    cr_assert(a.serial != b.serial || a.generation != b.generation,
              "a new state for pid %d reports the serial/generation of the old one (%llu/%llu)",
              pid, (unsigned long long)a.serial, (unsigned long long)a.generation);
    reap(pid);
    ss_unwinder_free(u);
}
