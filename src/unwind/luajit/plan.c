/* unwind/luajit/plan.c: the memory windows a LuaJIT runtime asks the BPF
 * program to copy at every sample (ss.h: struct ss_win_plan), so that the
 * Lua state the walker reads is the sample's, not what it became a few
 * milliseconds later. Chosen from the verified layout of the runtime's
 * global state; the kernel side learns nothing about LuaJIT.
 *
 *   0  the main lua_State and global_State up to jit_base (GG_State keeps
 *      them in that order): the collector's state, vmstate, cur_L,
 *      jit_base; fixed address. With the JIT, J->trace and J->sizetrace
 *      too (a window of their own: the fields between are cold lines)
 *      and, once samples ran in traces, the J->trace array itself up to
 *      the highest trace number they showed, one load: the slot of the
 *      sampled trace as of the sample (trace_check.c); not while window 2
 *      is in the plan (eight windows at most: the slot is read live then)
 *   1  the running lua_State's header: *(G + cur_L), one load
 *   2  the main thread's Lua stack below its L->base, one load: a coroutine
 *      resumed from the main thread (a request, a generator) runs on its
 *      own stack while the resumer's frames wait there; and the header of
 *      the function at that L->base, two loads (the frame's function slot,
 *      then the object): what resumed the coroutine, which the collector
 *      may free before the walk (coroutine.wrap makes one per call)
 *   3  the running Lua stack below BASE, the first of these that applies:
 *      a  BASE register (rdx) when the ip is in the VM's code
 *      b  G->jit_base when it is set (a trace, or C code called from one)
 *      c  cur_L->base (C code called from the interpreter), two loads
 *
 * Window 1 only while coroutines run (a sample of the last two epochs ran
 * one), window 2 only while a resumer waits on the main thread, both before
 * the first sizes are known.
 *
 * Sizes follow the stacks the samples show (struct lj_winneed): a window
 * costs kernel time at every sample, ~0.15 ns a byte written to the ring
 * buffer's cold lines and ~0.2 us a page the record touches (so they are
 * back to back, right after the copied stack). A stack window covers the
 * Lua stack the recent walks found below BASE plus LJ_NEED_MARGIN, at
 * least LJ_WIN_MIN, at most LJ_WIN_BELOW (40 frames of 24 slots: call sites
 * of real Lua code average 12 slots between frames, 90% are within 25), and
 * LJ_WIN_ABOVE above (the walk reads 16 bytes there; a trace's inlined
 * frames come from its snapshot). Until LJ_NEED_FIRST walks are in, the
 * windows are the largest. A deeper stack grows them at once; they shrink
 * when the wanted size is LJ_NEED_SLACK below the given one. One whose
 * start is not readable (the margin below a Lua stack's start, in a page
 * not present) is copied from its next page boundary on (bpf/windows.h):
 * a coroutine's stack at the start of an allocator's chunk stays whole in
 * its window (deep recursion in an nginx handler lost its bottom frames on
 * ~1% of the samples with the window's last half). Slots beyond a window
 * are read live and validated as before.
 * Prototypes, strings and traces do not change while
 * alive and stay live reads with their caches. */
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/runtime.h"

#define LJ_WIN_ABOVE 64u
/* (the largest sizes are whole units: plan keys hold units) */
#define LJ_WIN_BELOW ((SS_WIN_LEN_MAX - LJ_WIN_ABOVE) / LJ_WIN_UNIT * LJ_WIN_UNIT)
#define LJ_WIN_MAIN_ABOVE 64u
#define LJ_WIN_MAIN_MAX ((4096u - LJ_WIN_MAIN_ABOVE) / LJ_WIN_UNIT * LJ_WIN_UNIT)
#define LJ_WIN_MIN 512u
#define LJ_WIN_UNIT 256u /* sizes are multiples of this */
#define LJ_NEED_MARGIN 256u
#define LJ_NEED_SLACK 1024u
#define LJ_NEED_FIRST 64u
#define LJ_NEED_EPOCH 512u
#define LJ_TR_UNIT 16u   /* J->trace window sizes: multiples of this many slots */
#define LJ_TR_MAXB 2048u /* at most (the later windows' dst stay in bounds) */

void ss_lj_need(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G, uint64_t L,
                uint64_t below)
{
    const struct lj_layout *lay = rt->lay;
    unsigned w = lay->gc64 ? 8 : 4;
    const uint8_t *p = ss_mem_peek_sample(m, G + lay->G_cur_L, w);
    if (!p) return; /* the sample has no global state: nothing to go by */
    uint64_t cur = lay->gc64 ? lj_u64(p) : lj_u32(p);
    uint64_t mainL = G - lay->sizeof_L;
    int k = L == cur ? 0 : L == mainL ? 1 : -1;
    struct lj_winneed *n = &rt->need;
    if (k < 0) return; /* a coroutine that resumed the running one: read live */
    if (cur != mainL) n->coro = true;
    if (below > UINT32_MAX) below = UINT32_MAX;
    if (n->cur[k] < below) n->cur[k] = (uint32_t)below;
    if (k == 0 && ++n->walks >= LJ_NEED_EPOCH) {
        memcpy(n->prev, n->cur, sizeof(n->prev));
        memset(n->cur, 0, sizeof(n->cur));
        n->coro_prev = n->coro;
        n->coro = false;
        n->tr_prev = n->tr_cur;
        n->tr_cur = 0;
        n->walks = 0;
        n->epochs++;
    }
}

void ss_lj_need_trace(struct ss_lj_runtime *rt, uint32_t traceno)
{
    if (traceno < LJ_TR_MAXB / 4 && rt->need.tr_cur <= traceno) rt->need.tr_cur = traceno + 1;
}

/* J->trace slots (rs bytes each) the trace window should cover, in units
 * (0: none; a higher trace number's slot is read live). */
static uint32_t want_tr(const struct lj_winneed *n, unsigned rs)
{
    uint32_t s = n->tr_cur > n->tr_prev ? n->tr_cur : n->tr_prev;
    uint32_t u = (s + LJ_TR_UNIT - 1) / LJ_TR_UNIT, max = LJ_TR_MAXB / (LJ_TR_UNIT * rs);
    return u < max ? u : max;
}

/* Bytes below BASE the windows of stack k should cover (0: no window),
 * at most max. */
static uint32_t want(const struct lj_winneed *n, int k, uint32_t max)
{
    if (!n->epochs && n->walks < LJ_NEED_FIRST) return max; /* not known yet */
    uint32_t b = n->cur[k] > n->prev[k] ? n->cur[k] : n->prev[k];
    if (!b && k) return 0; /* no coroutine lately */
    b = (b + LJ_NEED_MARGIN + LJ_WIN_UNIT - 1) / LJ_WIN_UNIT * LJ_WIN_UNIT;
    return b < LJ_WIN_MIN ? LJ_WIN_MIN : b > max ? max : b;
}

/* Window 1, the running lua_State's header: only while coroutines run
 * (else it is the main thread's, in window 0), or when not known yet. */
static bool want_L(const struct lj_winneed *n)
{
    return (!n->epochs && n->walks < LJ_NEED_FIRST) || n->coro || n->coro_prev;
}

/* A plan's key: its global state (a user address, below 2^48), the two
 * stack sizes in units (below 2^5 and 2^4), the trace window's units
 * (below 2^6: bits 53-55 and 60-62) and whether window 1 is in it. */
static uint64_t key_of(uint64_t G, uint32_t below, uint32_t mainb, uint32_t tr, bool curL)
{
    return G | (uint64_t)(below / LJ_WIN_UNIT) << 48 | (uint64_t)(tr & 7) << 53 |
           (uint64_t)(mainb / LJ_WIN_UNIT) << 56 | (uint64_t)(tr >> 3) << 60 | (uint64_t)curL << 63;
}

static uint32_t key_tr(uint64_t key)
{
    return (uint32_t)(key >> 53 & 7) | (uint32_t)(key >> 60 & 7) << 3;
}

/* Is the given size good enough for the wanted one? */
static bool keeps(uint32_t given, uint32_t wanted)
{
    if (!given != !wanted) return false;
    return wanted <= given && wanted + LJ_NEED_SLACK > given;
}

/* The next window, at *d in the area (then *d moves past it, 8-aligned). */
static struct ss_win_spec *add(struct ss_win_plan *p, uint16_t *d, uint16_t len)
{
    struct ss_win_spec *w = &p->w[p->n++];
    memset(w, 0, sizeof(*w));
    w->reg = SS_WIN_ABS;
    w->dst = *d;
    w->len = len;
    *d = (uint16_t)((*d + len + 7) & ~7u);
    w->mask[0] = w->mask[1] = ~0ull;
    return w;
}

int ss_lj_runtime_plan(const struct ss_lj_runtime *rt, uint64_t have, struct ss_win_plan *p,
                       uint64_t *key)
{
    const struct lj_layout *lay = rt->lay;
    if (rt->disabled || !lay || !rt->ngs) return -1;
    uint64_t G = rt->gs[0];
    uint32_t L = lay->sizeof_L;
    if (L > 512 || G >> 48) return -1;
    uint32_t below = want(&rt->need, 0, LJ_WIN_BELOW);
    uint32_t mainb = want(&rt->need, 1, LJ_WIN_MAIN_MAX);
    bool curL = want_L(&rt->need);
    unsigned rs = lay->gc64 ? 8 : 4;
    uint32_t tr = lay->nojit ? 0 : want_tr(&rt->need, rs);
    uint32_t glen = L + lay->G_jit_base + (lay->gc64 ? 8 : 4);
    if (glen > 2048 || lay->G_cur_L > lay->G_jit_base || lay->G_vmstate > lay->G_jit_base)
        return -1;
    /* the windows before the stack's must leave its dst in bounds */
    uint32_t before = ((glen + 7) & ~7u) + 16 + (curL ? (L + 7) & ~7u : 0) +
                      (mainb ? mainb + LJ_WIN_MAIN_ABOVE : 0);
    while (tr && before + tr * LJ_TR_UNIT * rs > SS_WIN_AREA - SS_WIN_LEN_MAX)
        tr--;
    /* and at most SS_WIN_MAX windows: while a coroutine's resumer waits on
     * the main thread (two windows) the J->trace slot is read live */
    unsigned nwin = 1 + (lay->nojit ? 2 : 4) + (curL ? 1 : 0) + (mainb ? 2 : 0);
    if (nwin + 1 > SS_WIN_MAX) tr = 0;
    if ((have & ((1ull << 48) - 1)) == G &&
        keeps((uint32_t)(have >> 48 & 0x1f) * LJ_WIN_UNIT, below) &&
        keeps((uint32_t)(have >> 56 & 0xf) * LJ_WIN_UNIT, mainb) &&
        keeps(key_tr(have) * LJ_TR_UNIT * rs, tr * LJ_TR_UNIT * rs) && curL == have >> 63)
        return 0; /* the plan the caller has still fits: nothing to build */
    *key = key_of(G, below, mainb, tr, curL);
    memset(p, 0, sizeof(*p));
    /* GC64: 64-bit pointers; otherwise GCRef/MRef are 32 bits. */
    uint64_t ref = lay->gc64 ? ~0ull : 0xffffffffull;

    uint16_t d = 0; /* windows back to back: fewer pages of the buffer */
    struct ss_win_spec *w = add(p, &d, (uint16_t)glen);
    w->addr = G - L;
    if (!lay->nojit) { /* J->trace, J->sizetrace */
        w = add(p, &d, 16);
        w->addr = G + (uint64_t)(int64_t)lay->g2j + lay->J_trace;
    }
    if (tr) { /* the J->trace array (GCRef *: a host pointer) */
        w = add(p, &d, (uint16_t)(tr * LJ_TR_UNIT * rs));
        w->addr = G + (uint64_t)(int64_t)lay->g2j + lay->J_trace;
        w->nload = 1;
    }

    if (curL) {
        w = add(p, &d, (uint16_t)L);
        w->addr = G + lay->G_cur_L;
        w->nload = 1;
        w->mask[0] = ref;
    }

    if (mainb) {
        /* the function the main thread runs at its L->base: what resumed
         * the coroutine (coroutine.wrap makes one per call) */
        w = add(p, &d, (uint16_t)lay->fn_size);
        w->addr = G - L + lay->L_base;
        w->nload = 2;
        w->mask[0] = ref;
        w->off[1] = lay->gc64 ? -16 : -8;
        w->mask[1] = lay->gc64 ? LJ_GCVMASK : 0xffffffffull;
        uint16_t mlen = (uint16_t)(mainb + LJ_WIN_MAIN_ABOVE);
        w = add(p, &d, mlen); /* the main thread's stack */
        w->addr = G - L + lay->L_base;
        w->nload = 1;
        w->mask[0] = ref;
        w->off[2] = -(int64_t)mainb;
    }

    uint16_t dst = d, slen = (uint16_t)(below + LJ_WIN_ABOVE);
    w = add(p, &d, slen); /* a: BASE in the VM */
    w->reg = rt->arch->base;
    w->flags = SS_WIN_IF_IP;
    w->ip_lo = rt->vm_lo;
    w->ip_hi = rt->vm_hi;
    w->off[2] = -(int64_t)below;
    if (!lay->nojit) { /* b: G->jit_base */
        d = dst;       /* the same place: one of a, b, c is copied */
        w = add(p, &d, slen);
        w->flags = SS_WIN_UNLESS_PREV;
        w->addr = G + lay->G_jit_base;
        w->nload = 1;
        w->mask[0] = ref;
        w->off[2] = -(int64_t)below;
    }
    d = dst;
    w = add(p, &d, slen); /* c: cur_L->base */
    w->flags = SS_WIN_UNLESS_PREV;
    w->addr = G + lay->G_cur_L;
    w->nload = 2;
    w->mask[0] = w->mask[1] = ref;
    w->off[1] = lay->L_base;
    w->off[2] = -(int64_t)below;
    return 1;
}
