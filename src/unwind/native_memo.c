/* unwind/native_memo.c: the memo of native walks above the leaf (see
 * native_int.h).
 *
 * From the leaf's caller (frame 1) on, a walk by cached rules is a function
 * of frame 1 (ip, sp, flags, which registers are known), of the values of
 * the registers that a rule takes as its CFA base while they still hold
 * frame 1's value, of the stack bytes the rules load, and of the process
 * view (its generation). A walk that used only rules is kept with those
 * inputs; a later walk with the same frame 1 whose inputs are all equal gets
 * its frames without a step: the same ips, CFAs, flags and loaded
 * registers, and in each frame the registers that were carried unchanged
 * from frame 1 set from this walk's frame 1. The frames are then exactly
 * those the steps would have made. Most samples of a program differ only in
 * the leaf (its ip, its scratch registers): the frames above it repeat. */
#include <stdlib.h>
#include <string.h>

#include "memory/memory.h"
#include "process/process.h"
#include "unwind/native_int.h"

#define NM_SLOTS 64  /* direct-mapped by frame 1's ip and sp */
#define NM_REPLACE 4 /* misses in a row before another walk takes a slot */
#define NM_MAX_BYTES 65536

struct ss_nmemo_ent {
    uint64_t ip, sp, gen;
    uint32_t valid, flags, max;
    uint32_t deps, allregs; /* registers compared; every CFA base register */
    uint64_t depval[SS_DR_COUNT];
    uint64_t lo, hi;    /* stack bytes [lo, hi) (addresses) the rules loaded */
    unsigned n, misses; /* frames from frame 1 on */
    enum ss_trunc why;
    /* in the same allocation: n frames, n carried masks, hi - lo bytes */
    struct ss_native_frame *frames;
    uint32_t *carried;
    uint8_t *bytes;
};

struct ss_nmemo {
    struct ss_nmemo_ent *slot[NM_SLOTS];
    uint32_t *carried; /* the log's per-frame masks (cap entries) */
    unsigned cap;
    uint64_t hits;
};

void ss_nmemo_free(struct ss_nmemo *m)
{
    if (!m) return;
    for (unsigned i = 0; i < NM_SLOTS; i++)
        free(m->slot[i]);
    free(m->carried);
    free(m);
}

uint64_t ss_nmemo_hits(const struct ss_nmemo *m)
{
    return m ? m->hits : 0;
}

static unsigned slot_of(const struct ss_native_frame *f)
{
    uint64_t h = (ss_nf_ip(f) * 0x9e3779b97f4a7c15ull) ^ (ss_nf_sp(f) * 0xc2b2ae3d27d4eb4full);
    return (unsigned)(h >> 58) % NM_SLOTS;
}

unsigned ss_nmemo_find(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                       enum ss_trunc *why)
{
    struct ss_nmemo *m = np->nmemo;
    const struct ss_native_frame *f1 = &out[0];
    if (!m) return 0;
    struct ss_nmemo_ent *e = m->slot[slot_of(f1)];
    if (!e) return 0;
    const struct ss_mem *mem = np->mem;
    bool same =
        e->ip == ss_nf_ip(f1) && e->sp == ss_nf_sp(f1) && e->flags == f1->flags &&
        e->valid == f1->regs.valid && e->max == max && e->gen == ss_proc_generation(np->proc) &&
        (e->hi == e->lo || (e->lo >= mem->snap_base && e->hi <= mem->snap_base + mem->snap_len));
    for (unsigned d = 0; same && d < SS_DR_COUNT; d++)
        if ((e->deps >> d & 1) && f1->regs.r[d] != e->depval[d]) same = false;
    if (same && e->hi > e->lo &&
        memcmp(mem->snap + (e->lo - mem->snap_base), e->bytes, e->hi - e->lo))
        same = false;
    if (!same) {
        e->misses++;
        return 0;
    }
    e->misses = 0;
    /* the registers whose value in frame 1 differs from the kept walk's:
     * set in every frame that carried them */
    struct ss_nregs r1 = f1->regs;
    uint32_t diff = 0;
    for (unsigned d = 0; d < SS_DR_COUNT; d++)
        if (r1.r[d] != e->frames[0].regs.r[d]) diff |= 1u << d;
    memcpy(out, e->frames, e->n * sizeof(*out));
    for (unsigned i = 0; diff && i < e->n; i++)
        for (uint32_t c = e->carried[i] & diff; c; c &= c - 1) {
            unsigned d = (unsigned)__builtin_ctz(c);
            out[i].regs.r[d] = r1.r[d];
        }
    if (mem->track) { /* the whole walk's log (memo.c) sees these inputs */
        mem->track->dregs |= e->allregs;
        if (e->hi > e->lo) ss_mem_track_snap(mem->track, mem, e->hi - 1, 1);
    }
    m->hits++;
    *why = e->why;
    return e->n;
}

int ss_nmemo_log_start(struct ss_nproc *np, const struct ss_native_frame *f1, unsigned max)
{
    struct ss_nmemo *m = np->nmemo;
    if (!m && !(m = np->nmemo = calloc(1, sizeof(*m)))) return -1;
    struct ss_nmemo_ent *e = m->slot[slot_of(f1)];
    if (e && e->misses < NM_REPLACE) return -1; /* the slot's walk still repeats */
    if (m->cap < max) {
        uint32_t *c = realloc(m->carried, max * sizeof(*c));
        if (!c) return -1;
        m->carried = c;
        m->cap = max;
    }
    struct ss_nmemo_log *l = &np->nlog;
    memset(l, 0, sizeof(*l));
    l->on = true;
    l->carried = f1->regs.valid;
    l->lo = UINT64_MAX;
    l->gen = ss_proc_generation(np->proc);
    m->carried[0] = l->carried;
    return 0;
}

void ss_nmemo_log_step(struct ss_nproc *np, unsigned k)
{
    struct ss_nmemo_log *l = &np->nlog;
    if (l->on && k < np->nmemo->cap) np->nmemo->carried[k] = l->carried;
}

void ss_nmemo_log_end(struct ss_nproc *np, const struct ss_native_frame *out, unsigned n,
                      unsigned max, enum ss_trunc why)
{
    struct ss_nmemo_log *l = &np->nlog;
    struct ss_nmemo *m = np->nmemo;
    bool keep = l->on && !l->opaque && n >= 1 && n <= m->cap &&
                l->gen == ss_proc_generation(np->proc) && why != SS_TRUNC_SNAPSHOT &&
                why != SS_TRUNC_ERROR && why != SS_TRUNC_NOINFO;
    l->on = false;
    if (!keep) return;
    const struct ss_mem *mem = np->mem;
    uint64_t lo = l->lo, hi = l->hi;
    if (hi <= lo) lo = hi = 0;
    if (hi - lo > NM_MAX_BYTES ||
        (hi > lo && (lo < mem->snap_base || hi > mem->snap_base + mem->snap_len)))
        return;
    size_t sz = sizeof(struct ss_nmemo_ent) + n * sizeof(*out) + n * sizeof(uint32_t) + (hi - lo);
    struct ss_nmemo_ent *e = malloc(sz);
    if (!e) return;
    memset(e, 0, sizeof(*e));
    e->frames = (struct ss_native_frame *)(void *)(e + 1);
    e->carried = (uint32_t *)(void *)(e->frames + n);
    e->bytes = (uint8_t *)(e->carried + n);
    memcpy(e->frames, out, n * sizeof(*out));
    memcpy(e->carried, m->carried, n * sizeof(uint32_t));
    if (hi > lo) memcpy(e->bytes, mem->snap + (lo - mem->snap_base), hi - lo);
    const struct ss_native_frame *f1 = &out[0];
    e->ip = ss_nf_ip(f1);
    e->sp = ss_nf_sp(f1);
    e->flags = f1->flags;
    e->valid = f1->regs.valid;
    e->max = max;
    e->gen = l->gen;
    e->deps = l->deps;
    e->allregs = l->allregs;
    for (unsigned d = 0; d < SS_DR_COUNT; d++)
        if (e->deps >> d & 1) e->depval[d] = f1->regs.r[d];
    e->lo = lo;
    e->hi = hi;
    e->n = n;
    e->why = why;
    unsigned s = slot_of(f1);
    free(m->slot[s]);
    m->slot[s] = e;
}
