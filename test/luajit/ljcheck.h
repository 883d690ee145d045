/* test/luajit/ljcheck.h: ground-truth checks shared by the LuaJIT tests
 * that record real processes with real BPF (ljrec.h): a workload runs, every
 * sample is unwound at once, and the samples whose innermost Lua frame is a
 * known leaf must show exactly one of the expected Lua chains, with the
 * expected native frame right below the outermost Lua frame, or that chain
 * cut in the middle: a [truncated] frame where the frames of a thread
 * walked live after it moved on are left out (splice.c: a VM frame not
 * walked under a newer entry's Lua frames), the expected chain's root part
 * below it and its leaf part above (a cut, not a wrong sample). */
#ifndef LJCHECK_H
#define LJCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "ljrec.h"

#define LJC_MAXWANT 8

struct ljc {
    /* what to expect */
    const char *want[LJC_MAXWANT]; /* Lua-only chains, root first ("NAME (CHUNK:LINE);...") */
    const char *below;             /* native frame right below the outermost Lua frame */
    bool gaps;                     /* native frames allowed between Lua frames */
    /* extra per-sample check of judged samples (NULL = none); false = not exact */
    bool (*extra)(const struct ss_stack *st, const char *folded);
    /* called after each judged sample with the expected chain it showed
     * exactly, -1 if none (NULL = none; after_n is its own) */
    void (*after)(struct ljc *c, const struct ss_stack *st, int hit);
    unsigned after_n;
    unsigned min_judged;          /* default 60 */
    unsigned exact_pct;           /* exact or cut, default 98 */
    unsigned cut_pct;             /* cut at most, default 10 */
    unsigned coverage_pct;        /* samples with Lua frames, default 85 */
    unsigned each_pct;            /* every chain gets >= this % of judged, default 5 */
    const char *layout;           /* expected layout name (NULL: any) */
    const char *root;             /* run in a namespaced chroot of this root (NULL: host) */
    bool derived;                 /* the layout must come from facts derived from the code */
    char wbuf[LJC_MAXWANT][1024]; /* storage for want[] built by the ljc_case_* */
    /* results */
    unsigned hits[LJC_MAXWANT], cuts[LJC_MAXWANT];
    unsigned samples, lua, judged, exact, cut;
    char bad[2048];
    struct ljr_stats st;
};

/* Judge one recorded stack (an ljr_fn; ctx is struct ljc). */
void ljc_on(void *ctx, const struct ss_stack *st, const char *folded);

/* Run argv for seconds and assert the expectations in c (criterion). The
 * label names the build in messages. */
void ljc_run(const char *label, char *const argv[], const char *ldp, double seconds, struct ljc *c);

/* The ground-truth workloads of test/luajit/ (line numbers are part of the
 * expectation). script is the path the process runs; the chunk name is the
 * same path. */
/* w.lua (w_tt.lua for Tarantool: one line lower): main -> a -> b -> c -> leaf. */
void ljc_case_chain(struct ljc *c, const char *script, bool tarantool);
/* n.lua: obj:method -> M.run, reps -> string.rep (builtin). */
void ljc_case_names(struct ljc *c, const char *script);
/* co.lua: consumer, resume/wrap/nested resume chains into the producers. */
void ljc_case_coro(struct ljc *c, const char *script);
/* ffi_cb.lua: Lua -> qsort (libc) -> FFI callback -> Lua; natives between. */
void ljc_case_ffi(struct ljc *c, const char *script);

/* Frame texts of a stack as ljrec prints them, leaf first (i = 0 leaf). */
void ljc_frame(const struct ss_stack *st, unsigned i, char *buf, size_t cap);

#endif
