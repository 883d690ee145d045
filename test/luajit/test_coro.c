/* test/luajit/test_coro.c: coroutines and FFI callbacks, recorded with real
 * BPF and unwound live (ljrec.h), on Debian's luajit (JIT off):
 *  - producer/consumer (co.lua): a sample in a coroutine shows the
 *    coroutine's frames on top of the chain that resumed it
 *    (coroutine.resume / coroutine.wrap in the resumer, also a coroutine
 *    resumed inside another one), exactly, with lines;
 *  - FFI callback (ffi_cb.lua): Lua -> ffi.C.qsort -> libc -> Lua
 *    comparator: the caller's Lua frames, libc's native frames and the
 *    callback's Lua frames in order;
 *  - the nested resumer read late: co.lua's relay (resumed by
 *    coroutine.wrap, resuming a producer) walked after it moved on is a
 *    cut, never the producer's frames on the wrap frame.
 * The build matrix (test_matrix.c) runs the same cases on every build. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ljcheck.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"

Test(luajit_coro, producer_consumer_resume_chain)
{
    static struct ljc c;
    ljc_case_coro(&c, DIR "co.lua");
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "co.lua", NULL};
    ljc_run("debian luajit co.lua", argv, NULL, 2.5, &c);
}

Test(luajit_coro, ffi_callback_through_qsort)
{
    static struct ljc c;
    ljc_case_ffi(&c, DIR "ffi_cb.lua");
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "ffi_cb.lua", NULL};
    ljc_run("debian luajit ffi_cb.lua", argv, NULL, 2.5, &c);
}

/* A thread between the main thread and the running coroutine (co.lua's
 * relay: resumed by coroutine.wrap, resuming a producer) is in no memory
 * window of the sample (plan.c: the main thread's stack and cur_L's are):
 * it is read live. A walk after it moved on (the producer yielded, relay
 * runs on) fails its checks (L->cframe is no longer the sampled VM
 * entry's): its frames are not proven, and the chain says so, main's
 * frames, lj_ff_coroutine_resume, [truncated], the producer's. CI-3's
 * ASan run of luajit_matrix had 11 of 539 samples so (an unwinder fallen
 * behind under load). Here the reader falls behind on purpose: after a
 * sample in the nested producer it waits until the process has used 200 ms
 * more CPU (a producer's run is ~30 ms of it; at most 3 s) before it
 * unwinds the samples queued behind it, until one of them is such a cut
 * (at most 4 waits). No sample may be wrong. */
static long cpu_ms(uint32_t pid)
{
    char path[64], b[1024];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(b, 1, sizeof(b) - 1, f);
    fclose(f);
    b[n] = 0;
    const char *q = strrchr(b, ')');
    unsigned long ut, stt; /* fields 14 and 15, after the comm's ')' */
    if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt) != 2)
        return -1;
    return (long)((ut + stt) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

static void wait_after_nested(struct ljc *c, const struct ss_stack *st, int hit)
{
    if (hit != 4 || c->cuts[4] || c->after_n >= 4) return;
    c->after_n++;
    long t0 = cpu_ms(st->pid);
    for (int i = 0; i < 300; i++) {
        usleep(10000);
        long t = cpu_ms(st->pid);
        if (t0 >= 0 && t >= 0 && t - t0 >= 200) return;
        if (t0 < 0 && i == 29) return; /* CPU time unknown: 300 ms */
    }
}

Test(luajit_coro, nested_resumer_read_late)
{
    static struct ljc c;
    ljc_case_coro(&c, DIR "co.lua");
    c.after = wait_after_nested;
    c.cut_pct = 25; /* a wait cuts the rest of a producer's run (23-54 of ~1000 here) */
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "co.lua", NULL};
    ljc_run("debian luajit co.lua, reader late", argv, NULL, 2.5, &c);
    cr_log_info("reader late: %u waits, nested %u exact, %u cut", c.after_n, c.hits[4], c.cuts[4]);
    cr_expect(c.cuts[4] > 0, "no nested sample cut after %u waits of the reader (%u nested exact)",
              c.after_n, c.hits[4]);
    cr_expect_eq(c.judged, c.exact + c.cut, "%u wrong; first:\n%s", c.judged - c.exact - c.cut,
                 c.bad);
}
