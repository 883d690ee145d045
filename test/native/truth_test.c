/* test/native/truth_test.c: ground truth for native unwinding. Each
 * workload (PIE and non-PIE builds, -O2, no frame pointers) spins in
 * nw_spin under a known chain; it is sampled with the real BPF capture and
 * every sample is unwound live. At least 99% of the samples whose leaf is
 * nw_spin must show exactly the expected chain down to main and the libc
 * start frames (or start_thread/clone3 for threads); the rule-cache walk
 * must equal libunwind's own walk on every sample, and an offline unwinder
 * built from the process's maps text and files (the replay path) must give
 * the same frames. Also: the frame cap, a snapshot cut short, and garbage
 * stacks end walks cleanly with the right reason. */
#include <errno.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stacksnap/unwind.h"
#include "unwind/native.h"
#include "unwind/procs.h"
#include "unwind/unwinder.h"

#define START "main;__libc_start_call_main;__libc_start_main;_start"

static const char *bins[] = {"native_workload_pie", "native_workload_nopie"};

static void expect_leaf(const char *mode, const char *leaf, const char *const *patterns, int npat,
                        bool per_tid)
{
    for (int b = 0; b < 2; b++) {
        struct nw_proc p;
        cr_assert_eq(nw_start(&p, bins[b], mode), 0, "starting %s %s", bins[b], mode);
        struct nw_tally t = {0};
        struct nw_opts o = {.leaf = leaf,
                            .seconds = 1.5,
                            .min_leaf = 300,
                            .max_seconds = 8,
                            .freq = 999,
                            .compare_modes = true,
                            .compare_replay = true,
                            .per_tid = per_tid};
        int rc = nw_sample(p.pid, &o, NULL, &t);
        nw_stop(&p);
        cr_assert_eq(rc, 0);
        nw_dump(&t, 4);
        long ok = 0;
        for (int i = 0; i < npat; i++) {
            long n = nw_count_matching(&t, patterns[i]);
            if (npat > 1)
                cr_expect_geq(n, 20, "%s %s: thread chain %d seen %ld times", bins[b], mode, i, n);
            ok += n;
        }
        cr_log_info("%s %s: %ld/%ld leaf samples match, %ld/%ld walks equal libunwind's, "
                    "%ld/%ld equal offline replay",
                    bins[b], mode, ok, t.leaf_samples, t.compared_modes - t.mismatch_modes,
                    t.compared_modes, t.compared_replay - t.mismatch_replay, t.compared_replay);
        cr_expect_geq(t.leaf_samples, 200, "%s %s: only %ld samples in nw_spin", bins[b], mode,
                      t.leaf_samples);
        cr_expect_geq(ok * 100, t.leaf_samples * 99, "%s %s: %ld of %ld match", bins[b], mode, ok,
                      t.leaf_samples);
        /* Same bytes, same walk: the only allowed difference is a sample taken
         * just after a dlopen, which each unwinder's process view may see
         * before or after its own refresh of the mappings. */
        long slack = t.compared_modes / 100;
        cr_expect_leq(t.mismatch_modes, slack, "%s %s: rule cache and libunwind disagree on %ld",
                      bins[b], mode, t.mismatch_modes);
        cr_expect_leq(t.mismatch_replay, slack, "%s %s: %ld of %ld replayed walks differ", bins[b],
                      mode, t.mismatch_replay, t.compared_replay);
        if (per_tid)
            cr_expect_leq(t.tid_chain_bad * 100, t.leaf_samples, "%s: a thread changed chains",
                          bins[b]);
        nw_tally_free(&t);
    }
}

static void expect(const char *mode, const char *const *patterns, int npat, bool per_tid)
{
    expect_leaf(mode, "nw_spin", patterns, npat, per_tid);
}

Test(truth, recursion_200_deep)
{
    const char *pat[] = {"nw_spin;rec*201;run_recurse;" START};
    expect("recurse", pat, 1, false);
}

Test(truth, qsort_callback)
{
    const char *pat[] = {"nw_spin;nw_cmp;+libc.so.6;run_qsort;" START};
    expect("qsort", pat, 1, false);
}

Test(truth, signal_handler)
{
    const char *pat[] = {"nw_spin;nw_handler;__restore_rt;sig_inner;sig_outer;run_signal;" START};
    expect("signal", pat, 1, false);
}

Test(truth, signal_in_syscall)
{
    const char *pat[] = {"nw_spin;nw_handler;__restore_rt;+libc.so.6;sys_writer;run_sigsys;" START};
    expect("sigsys", pat, 1, false);
}

Test(truth, dlopen_library)
{
    const char *pat[] = {"nw_spin;nw_cb;dl_inner;dl_outer;run_dlopen;" START};
    expect("dlopen", pat, 1, false);
}

Test(truth, threads)
{
    const char *pat[] = {
        "nw_spin;t0_a;t0_entry;start_thread;clone3",
        "nw_spin;t1_b;t1_a;t1_entry;start_thread;clone3",
        "nw_spin;t2_c;t2_b;t2_a;t2_entry;start_thread;clone3",
        "nw_spin;t3_d;t3_c;t3_b;t3_a;t3_entry;start_thread;clone3",
    };
    expect("threads", pat, 4, true);
}

Test(truth, debug_frame_only_function)
{
    const char *pat[] = {"nw_spin;df_middle;run_dframe;" START};
    expect("dframe", pat, 1, false);
}

Test(truth, vdso)
{
    const char *pat[] = {"+[vdso];+libc.so.6;vdso_loop;run_vdso;" START};
    expect_leaf("vdso", "+[vdso]", pat, 1, false);
}

Test(truth, generated_code_without_cfi)
{
    /* one frame for the code without CFI (native_scan.c; DESIGN.md) */
    const char *pat[] = {"nw_spin;[jit] [anon];run_jit;" START};
    expect("jit", pat, 1, false);
}

/* Registers a stack scan leaves as the code without CFI had them are
 * marked lost (unwind/native.h: ss_nregs.lost) at the frame it reaches
 * (run_jit, over the generated code: its rbp from the frame pointer's
 * chain), never gained by a CFI step above, and no frame of a walk without
 * a scan has any. */
struct lost {
    struct ss_unwinder *u;
    long scanned, marked, grew, clean, dirty, reloaded;
};

static void each_lost(void *ctx, const struct ss_sample *s, const struct ss_stack *st)
{
    (void)s;
    struct lost *l = ctx;
    const struct ss_native_frame *nf = l->u->nf;
    const uint64_t callee = SS_DBIT(SS_DR_RBX) | SS_DBIT(SS_DR_R12) | SS_DBIT(SS_DR_R13) |
                            SS_DBIT(SS_DR_R14) | SS_DBIT(SS_DR_R15);
    uint32_t k = 0;
    while (k < st->nframes && !(nf[k].flags & SS_NF_NOCFI))
        k++;
    if (k == st->nframes) {
        bool any = false;
        for (uint32_t i = 0; i < st->nframes; i++)
            any |= nf[i].regs.lost != 0;
        l->clean += !any;
        l->dirty += any;
        return;
    }
    l->scanned++;
    uint64_t want = nf[k].regs.valid & callee;
    l->marked += (nf[k].regs.lost & (callee | SS_DBIT(SS_DR_RBP))) == want;
    bool grew = false, reloaded = false;
    for (uint32_t i = k + 1; i < st->nframes; i++) {
        grew |= (nf[i].regs.lost & ~nf[i - 1].regs.lost) != 0;
        reloaded |= (nf[i - 1].regs.lost & ~nf[i].regs.lost & callee) != 0;
    }
    l->grew += grew;
    l->reloaded += reloaded;
}

Test(truth, registers_lost_to_the_scan)
{
    struct lost l = {0};
    struct ss_err err = {0};
    cr_assert_eq(ss_unwinder_new(&l.u, NULL, &err), 0);
    struct nw_proc p;
    cr_assert_eq(nw_start(&p, bins[1], "jit"), 0);
    struct nw_tally t = {0};
    struct nw_opts o = {.leaf = "nw_spin",
                        .seconds = 1,
                        .min_leaf = 200,
                        .max_seconds = 6,
                        .freq = 999,
                        .each = each_lost,
                        .each_ctx = &l};
    int rc = nw_sample(p.pid, &o, l.u, &t);
    nw_stop(&p);
    cr_assert_eq(rc, 0);
    cr_log_info("over the generated code: %ld walks, %ld with rbx, r12-r15 lost there, %ld with "
                "a lost one gained above, %ld with one reloaded above; %ld walks without a scan, "
                "%ld with a lost register",
                l.scanned, l.marked, l.grew, l.reloaded, l.clean, l.dirty);
    cr_expect_geq(l.scanned, 200);
    cr_expect_eq(l.marked, l.scanned);
    cr_expect_eq(l.grew, 0);
    cr_expect_gt(l.reloaded, 0, "no CFI rule above the scan loaded a lost register");
    cr_expect_eq(l.dirty, 0);
    nw_tally_free(&t);
    ss_unwinder_free(l.u);
}

Test(truth, after_exec)
{
    const char *pat[] = {"nw_spin;rec*201;run_recurse;" START};
    expect("exec", pat, 1, false);
}

/* ---- how walks end ---- */
struct ends {
    struct ss_unwinder *capped, *plain;
    long depth_ok, depth_bad, snap_ok, snap_bad, garbage, garbage_bounded, untaken_bad;
    unsigned seed;
};

static void each(void *ctx, const struct ss_sample *s, const struct ss_stack *st)
{
    struct ends *e = ctx;
    if (!st->nframes || !st->frames[0].name || strcmp(st->frames[0].name, "nw_spin")) return;
    struct ss_stack out;
    /* frame cap */
    ss_unwinder_intake(e->capped, s);
    if (ss_unwind(e->capped, s, &out) == 0 && out.nframes == 50 && out.trunc == SS_TRUNC_DEPTH)
        e->depth_ok++;
    else
        e->depth_bad++;
    /* a sample not taken in (ss_unwinder_intake): refused, not walked */
    if (ss_unwind(e->capped, s, &out) != -EINVAL || out.nframes || out.trunc != SS_TRUNC_ERROR)
        e->untaken_bad++;
    /* a snapshot that ends inside the recursion */
    struct ss_sample cut = *s;
    cut.stack_len = 1024;
    ss_unwinder_intake(e->plain, &cut);
    if (ss_unwind(e->plain, &cut, &out) == 0 && out.trunc == SS_TRUNC_SNAPSHOT &&
        out.nframes > 10 && out.nframes < 201)
        e->snap_ok++;
    else
        e->snap_bad++;
    /* garbage: random words, every few samples */
    if (e->garbage < 100) {
        static uint8_t junk[16384];
        for (uint32_t i = 0; i < s->stack_len; i++) {
            e->seed = e->seed * 1103515245u + 12345u;
            /* mix plausible stack and code pointers into the noise */
            junk[i] = (uint8_t)(e->seed >> 16);
        }
        for (uint32_t i = 0; i + 8 <= s->stack_len; i += 64) {
            uint64_t v = (i & 64) ? s->regs[SS_REG_SP] + (e->seed % 4096)
                                  : s->regs[SS_REG_IP] - (e->seed % 512);
            memcpy(junk + i, &v, 8);
        }
        struct ss_sample g = *s;
        g.stack = junk;
        ss_unwinder_intake(e->plain, &g);
        if (ss_unwind(e->plain, &g, &out) == 0 && out.nframes >= 1 && out.nframes <= 512)
            e->garbage_bounded++;
        e->garbage++;
    }
}

Test(truth, walk_ends)
{
    struct ends e = {.seed = 42};
    struct ss_err err = {0};
    struct ss_unwinder_opts capped = {.max_frames = 50};
    cr_assert_eq(ss_unwinder_new(&e.capped, &capped, &err), 0);
    cr_assert_eq(ss_unwinder_new(&e.plain, NULL, &err), 0);
    struct nw_proc p;
    cr_assert_eq(nw_start(&p, bins[0], "recurse"), 0);
    struct nw_tally t = {0};
    struct nw_opts o = {.leaf = "nw_spin",
                        .seconds = 1,
                        .min_leaf = 200,
                        .max_seconds = 6,
                        .freq = 999,
                        .each = each,
                        .each_ctx = &e};
    int rc = nw_sample(p.pid, &o, NULL, &t);
    /* the process's state goes when the process does */
    ss_unwinder_gc(e.plain);
    cr_expect(ss_unwinder_proc(e.plain, p.pid, false, NULL), "gc dropped a live process");
    nw_stop(&p);
    ss_unwinder_gc(e.plain);
    cr_expect_null(ss_unwinder_proc(e.plain, p.pid, false, NULL), "gc kept an exited process");
    cr_assert_eq(rc, 0);
    cr_log_info("cap: %ld ok %ld bad; cut snapshot: %ld ok %ld bad; garbage: %ld/%ld bounded",
                e.depth_ok, e.depth_bad, e.snap_ok, e.snap_bad, e.garbage_bounded, e.garbage);
    cr_expect_geq(e.depth_ok, 200);
    cr_expect_eq(e.depth_bad, 0);
    cr_expect_eq(e.untaken_bad, 0, "a sample not taken in was walked");
    cr_expect_geq(e.snap_ok, 200);
    cr_expect_eq(e.snap_bad, 0);
    cr_expect_eq(e.garbage_bounded, e.garbage);
    cr_expect_eq(t.trunc[SS_TRUNC_NONE], t.samples);
    struct ss_unwinder_stats st;
    ss_unwinder_stats(e.plain, &st);
    cr_log_info("plain unwinder: %lu samples, %lu rule steps, %lu libunwind steps",
                (unsigned long)st.samples, (unsigned long)st.rule_steps,
                (unsigned long)st.unw_steps);
    nw_tally_free(&t);
    ss_unwinder_free(e.capped);
    ss_unwinder_free(e.plain);
}
