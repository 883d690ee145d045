/* unwind/luajit/thread_read.c: the reads of one thread walk (frames.c),
 * batched, each from where the walk needs it (view: the sample's copies,
 * the process, either): the lua_State header and the stack below BASE in
 * one round (with the collector's state when live, gc.c), checked against
 * the start before any frame is walked; the cframes as the chain reaches
 * them. Everything bounded (bytes) and validated (tags, ranges). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/thread_read.h"
#include "unwind/luajit/ljregs.h"

#define STACK_WINDOW 16384u
#define STACK_MAX (256u * 1024u)

int ss_lj_view_read(struct ss_mem *m, enum view_src src, uint64_t a, void *dst, size_t len)
{
    struct ss_iov v = {
        .addr = a, .dst = dst, .len = len, .live = src == VIEW_LIVE, .sample = src == VIEW_SAMPLE};
    int rc = ss_mem_readv(m, &v, 1);
    return v.err ? v.err : rc;
}

void *ss_lj_scratch(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return *buf;
    uint8_t *b = realloc(*buf, n);
    if (!b) return NULL;
    *buf = b;
    *cap = n;
    return b;
}

/* Room for n bytes at s->buf; what it held is kept. */
static uint8_t *sb_room(struct stackbuf *s, size_t n)
{
    return ss_lj_scratch(&s->buf, &s->cap, n);
}

void ss_lj_read_cframe(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t a, struct cfr *c)
{
    const struct lj_layout *lay = rt->lay;
    uint8_t b[96];
    /* the cframe up to its last field read (arm64's is 208 bytes; these
     * sit in its first 48) */
    uint32_t len = lay->cf_prev + 8;
    if (lay->cf_nres + 4 > len) len = lay->cf_nres + 4;
    if (lay->cf_pc + 8 > len) len = lay->cf_pc + 8;
    memset(c, 0, sizeof(*c));
    c->addr = a;
    if (!a || (a & 7) || len > sizeof(b) || ss_lj_view_read(m, VIEW_ANY, a, b, len)) return;
    c->prev = lj_u64(b + lay->cf_prev) & ~(uint64_t)3;
    c->nres = (int32_t)lj_u32(b + lay->cf_nres);
    c->pc = lj_ref(lay, b + lay->cf_pc);
    c->ok = true;
}

/* Read [lo, hi) of the stack into s (bounded): all of it live when live,
 * else the part the sample copied (its window around BASE) from there, only
 * what lies below it live, the copy cut at the window when the older frames
 * below moved since the sample (memory.h: ss_mem_read_span). */
static int read_stack(struct ss_mem *m, struct stackbuf *s, uint64_t lo, uint64_t hi, bool live)
{
    if (hi - lo > STACK_MAX) lo = hi - STACK_MAX;
    uint8_t *b = sb_room(s, hi - lo + SS_MEM_SEAM);
    if (!b) return -ENOMEM;
    struct ss_mem_track *track = m->track;
    uint64_t from;
    int rc = ss_mem_read_span(m, &lo, hi, b, live, &s->src, &from);
    /* the sample's part: logged slot by slot as sb_u64 reads it (memo) */
    s->track = NULL;
    if (s->src >= 0) {
        s->track = track;
        s->m = m;
        s->src_lo = from;
        s->src_hi = hi;
    }
    if (rc) return rc;
    s->lo = lo;
    s->hi = hi;
    s->live_hi = live ? hi : from > lo ? from : lo;
    return 0;
}

/* Is cframe `to` reached from `from` through cframes that own no Lua frame
 * (nres < 0: lj_vm_cpcall's, e.g. the snapshot restore of a trace exit or
 * the trace compiler, entered again since the sample)? */
static bool cpcalls_over(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t from, uint64_t to)
{
    for (int k = 0; k < 4 && from && from < to; k++) {
        struct cfr c;
        ss_lj_read_cframe(rt, m, from, &c);
        if (!c.ok || c.nres >= 0) return false;
        from = c.prev;
    }
    return from == to;
}

/* The batch of a thread's first round: live, the GC state first (where the
 * proof of the thread's objects starts, resolve.c), then the lua_State's
 * header into Lb (from the sample: at its verified size, the window holds
 * exactly that much; live: 112 bytes, enough for any) and, without the
 * sample's windows, a window of the stack below the sampled BASE into s (as
 * before the windows existed, so that older captures replay as recorded).
 * n: the batch's length; gi, li, wi: the parts' places (gi, wi -1: none). */
struct first_round {
    struct ss_iov iov[3];
    int n, gi, li, wi;
    uint64_t win_lo, win_hi;
};

static int first_round(struct ss_lj_runtime *rt, const struct lj_start *st, struct stackbuf *s,
                       bool live, uint8_t *Lb, struct lj_thread *t, struct first_round *r)
{
    memset(r, 0, sizeof(*r));
    r->gi = r->wi = -1;
    if (!t->sampled && rt->ngs && rt->lay) {
        r->iov[r->n] = ss_lj_gc_iov(rt, rt->gs[0], t->ep);
        if (r->iov[r->n].len) r->gi = r->n++;
    }
    size_t lsz = t->sampled && rt->lay && rt->lay->sizeof_L >= 64 && rt->lay->sizeof_L <= 112
                     ? rt->lay->sizeof_L
                     : 112;
    r->li = r->n;
    r->iov[r->n++] = (struct ss_iov){.addr = st->L, .dst = Lb, .len = lsz, .live = live};
    if (!t->sampled && st->top && st->base > STACK_WINDOW && !(st->base & 7)) {
        uint64_t lo = st->base - STACK_WINDOW;
        /* the stack start seen last time for this thread bounds the window
         * (validated against the lua_State read in the same batch) */
        const struct lj_lstack *ls = &rt->lstack[(st->L >> 4) % LJ_LSTACK_SLOTS];
        if (ls->L == st->L && ls->stack < st->base && ls->stack > lo) lo = ls->stack;
        r->win_lo = lo;
        r->win_hi = st->base + 16;
        uint8_t *b = sb_room(s, r->win_hi - r->win_lo);
        if (!b) return -ENOMEM;
        r->wi = r->n;
        r->iov[r->n++] = (struct ss_iov){.addr = lo, .dst = b, .len = r->win_hi - lo, .live = live};
    }
    return 0;
}

/* The header's facts into t, checked: a thread of a known global state,
 * its stack in bounds, its newest cframe the sampled VM entry's (or only
 * protected C calls newer), base on its stack. */
static int header(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                  const uint8_t *Lb, bool live, struct lj_thread *t)
{
    unsigned gct = rt->info.gc64 ? 9 : 5;
    if (Lb[gct] != LJ_GCT_THREAD) return -EINVAL;
    t->G = rt->info.gc64 ? lj_u64(Lb + 16) : lj_u32(Lb + 8);
    if (!ss_lj_check_G(rt, m, t->G)) return -ENOENT;
    const struct lj_layout *lay = rt->lay; /* known once G is */
    t->stack = lj_ref(lay, Lb + lay->L_stack);
    uint64_t ssize = lj_u32(Lb + lay->L_stacksize);
    if (!t->stack || (t->stack & 7) || ssize < 8 || ssize > (1u << 20)) return -EINVAL;
    uint64_t shi = t->stack + ssize * 8;
    if (!t->sampled)
        rt->lstack[(st->L >> 4) % LJ_LSTACK_SLOTS] = (struct lj_lstack){st->L, t->stack};
    t->cframe = lj_u64(Lb + lay->L_cframe) & ~(uint64_t)3;
    if ((st->top || st->newest) && t->cframe != st->cframe &&
        (st->top || !cpcalls_over(rt, m, t->cframe, st->cframe)))
        return -ESTALE;
    /* a walk from RB takes no other base: L->base is the frame of the last
     * C call, which may be newer than the sample (BC_FUNCC keeps L in RB) */
    if ((st->top || st->use_base) && st->base > t->stack + 8 && st->base < shi && !(st->base & 7))
        t->base = st->base;
    else if (st->use_base)
        return -EINVAL;
    else
        t->base = lj_u64(Lb + lay->L_base);
    if (t->base <= t->stack || t->base >= shi || (t->base & 7)) return -EINVAL;
    if (live && m->nwin) { /* the sample's copy of the header, if it has one */
        uint8_t sb[8], ss[8];
        size_t rl = lay->gc64 ? 8 : 4;
        int rb = ss_lj_view_read(m, VIEW_SAMPLE, st->L + lay->L_base, sb, rl);
        int rs = ss_lj_view_read(m, VIEW_SAMPLE, st->L + lay->L_stack, ss, rl);
        if ((!rb && !(st->top || st->use_base) && lj_ref(lay, sb) != t->base) ||
            (!rs && lj_ref(lay, ss) != t->stack))
            return -ESTALE;
        /* without the sample's L->base, only the registers at the VM frame
         * tie the live frames to the sample (the checks of the top frame
         * in frames.c): no PC or KBASE, no proof */
        if (rb && !st->top && !st->use_base && !(st->pc && (st->kbase || !rt->arch->funcc_kbase)))
            return -ESTALE;
    }
    return 0;
}

int ss_lj_read_thread(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                      struct stackbuf *s, bool live, struct lj_thread *t)
{
    uint8_t Lb[128];
    struct first_round r;
    memset(t, 0, sizeof(*t));
    t->sampled = m->nwin && !live;
    memset(Lb, 0, sizeof(Lb));
    int rc = first_round(rt, st, s, live, Lb, t, &r);
    if (rc) return rc;
    rt->st.rounds++;
    rc = ss_mem_readv(m, r.iov, r.n);
    if (rc || r.iov[r.li].err) {
        s->bad_L += !rc;
        return rc ? rc : r.iov[r.li].err;
    }
    if ((rc = header(rt, m, st, Lb, live, t))) return rc;
    t->hdr_live = live || !ss_mem_peek_sample(m, st->L, r.iov[r.li].len);
    if (r.gi >= 0 && !r.iov[r.gi].err && t->G == rt->gs[0]) t->elen = r.iov[r.gi].len;
    uint64_t stack = t->stack, base = t->base;
    if (t->sampled) {
        /* [stack, base]: the sample's copy around BASE, the rest (deep
         * stacks) read live (read_stack) */
        ss_lj_need(rt, m, t->G, st->L, base - stack);
        rt->st.rounds++;
        return read_stack(m, s, stack, base + 16, false);
    }
    if (r.wi >= 0 && !r.iov[r.wi].err && r.win_lo <= base && r.win_hi >= base) {
        /* the window is used only if it holds base (a BASE register from a
         * torn state may be anywhere: the extension below would span the
         * distance, gigabytes); extend it downwards with one more read */
        s->lo = r.win_lo;
        s->hi = s->live_hi = r.win_hi;
        uint64_t lo = base - stack > STACK_MAX ? base - STACK_MAX : stack;
        if (r.win_lo > stack && lo < r.win_lo) {
            size_t old = r.win_hi - r.win_lo, add = r.win_lo - lo;
            uint8_t *b = sb_room(s, old + add);
            if (!b) return -ENOMEM;
            memmove(b + add, b, old);
            rt->st.rounds++;
            rc = ss_lj_view_read(m, live ? VIEW_LIVE : VIEW_ANY, lo, b, add);
            if (rc) return rc;
            s->lo = lo;
        }
        return 0;
    }
    rt->st.rounds++;
    return read_stack(m, s, stack, base + 8, live);
}
