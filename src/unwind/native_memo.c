/* unwind/native_memo.c: the memo of native walks above the leaf (see
 * native_int.h).
 *
 * From the leaf's caller (frame 1) on, a walk by cached rules takes its
 * path (which rules, which CFAs, which ips, where it ends) from frame 1's
 * ip, sp, flags and known registers, from the values of the registers a
 * rule takes as its CFA base, from the stack slots of the return addresses,
 * and from the process view (its generation). A CFA base register holds
 * either frame 1's value (compared) or a value loaded from a stack slot
 * (that slot compared). The other registers the rules load (saved rbx,
 * r12-r15: the callers' variables) do not change the path, only the
 * register values of the frames. So a walk that used rules alone is kept as
 * its path: per frame the registers loaded and from where, its known
 * registers, sp, CFA and flags. A later walk with the same frame 1 and the
 * same path inputs gets the frames by applying that path as the rules would
 * (each frame starts from its callee's registers, loads its slots from this
 * sample's stack), without looking rules up or checking frames: the same
 * frames the steps would have made. */
#include <stdlib.h>
#include <string.h>

#include "memory/memory.h"
#include "process/process.h"
#include "unwind/native_int.h"

#define NM_SLOTS 64  /* direct-mapped by frame 1's ip and sp */
#define NM_REPLACE 4 /* misses in a row before another walk takes a slot */

struct nm_frame {
    uint64_t sp, cfa;
    uint64_t valid;
    uint32_t flags;
    uint64_t load;  /* registers loaded by the step that made this frame */
    uint32_t first; /* their addresses: loads[first..] in register order */
};

struct ss_nmemo_ent {
    uint64_t ip, sp, gen;
    uint64_t valid;
    uint32_t flags, max;
    uint64_t deps, allregs; /* frame 1 registers compared; every CFA base register */
    uint64_t depval[SS_DR_COUNT];
    uint64_t lo, hi; /* every slot loaded lies in [lo, hi) */
    unsigned n, nload, ndep, misses;
    enum ss_trunc why;
    /* in the same allocation */
    struct nm_frame *frames;      /* n */
    uint64_t *loads;              /* nload slot addresses */
    uint64_t *dep_addr, *dep_val; /* ndep slots compared, their values */
};

struct ss_nmemo {
    struct ss_nmemo_ent *slot[NM_SLOTS];
    struct nm_frame *fr; /* the log: per frame (cap) */
    uint64_t *loads, *deps;
    unsigned cap, lcap, dcap;
    uint64_t hits;
};

void ss_nmemo_free(struct ss_nmemo *m)
{
    if (!m) return;
    for (unsigned i = 0; i < NM_SLOTS; i++)
        free(m->slot[i]);
    free(m->fr);
    free(m->loads);
    free(m->deps);
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

static inline uint64_t snap_u64(const struct ss_mem *mem, uint64_t addr)
{
    uint64_t v;
    memcpy(&v, mem->snap + (addr - mem->snap_base), 8);
    return v;
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
        (e->hi == e->lo ||
         (e->lo >= mem->snap_base && e->hi <= mem->snap_base + mem->snap_len &&
          !(mem->snap_holes && ss_mem_snap_hole(mem, e->lo - mem->snap_base, e->hi - e->lo))));
    for (unsigned d = 0; same && d < SS_DR_COUNT; d++)
        if ((e->deps >> d & 1) && f1->regs.r[d] != e->depval[d]) same = false;
    uint64_t diff = 0;
    for (unsigned k = 0; same && k < e->ndep; k++)
        diff |= snap_u64(mem, e->dep_addr[k]) ^ e->dep_val[k];
    if (!same || diff) {
        e->misses++;
        return 0;
    }
    e->misses = 0;
    /* the path applied as apply_rule does (native.c) */
    out[0].cfa = e->frames[0].cfa;
    out[0].flags = e->frames[0].flags;
    for (unsigned i = 1; i < e->n; i++) {
        const struct nm_frame *p = &e->frames[i];
        struct ss_native_frame *c = &out[i];
        c->regs = out[i - 1].regs;
        c->regs.valid = p->valid;
        c->regs.lost &= p->valid & ~(p->load | SS_DBIT(SS_DR_SP)); /* as apply_rule */
        const uint64_t *a = e->loads + p->first;
        for (uint64_t l = p->load; l; l &= l - 1)
            c->regs.r[__builtin_ctzll(l)] = snap_u64(mem, *a++);
        c->regs.r[SS_DR_SP] = p->sp;
        c->cfa = p->cfa;
        c->flags = p->flags;
    }
    if (mem->track) { /* the whole walk's log (memo.c) sees these inputs */
        mem->track->dregs |= e->allregs;
        if (e->hi > e->lo) ss_mem_track_snap(mem->track, mem, e->hi - 1, 1);
    }
    m->hits++;
    *why = e->why;
    return e->n;
}

static bool grow(void *pp, unsigned *cap, unsigned need, size_t es)
{
    if (need <= *cap) return true;
    unsigned c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(*(void **)pp, c * es);
    if (!n) return false;
    *(void **)pp = n;
    *cap = c;
    return true;
}

int ss_nmemo_log_start(struct ss_nproc *np, const struct ss_native_frame *f1, unsigned max)
{
    struct ss_nmemo *m = np->nmemo;
    if (!m && !(m = np->nmemo = calloc(1, sizeof(*m)))) return -1;
    struct ss_nmemo_ent *e = m->slot[slot_of(f1)];
    if (e && e->misses < NM_REPLACE) return -1; /* the slot's walk still repeats */
    if (!grow(&m->fr, &m->cap, max, sizeof(*m->fr))) return -1;
    struct ss_nmemo_log *l = &np->nlog;
    memset(l, 0, sizeof(*l));
    l->on = true;
    l->carried = f1->regs.valid;
    l->lo = UINT64_MAX;
    l->gen = ss_proc_generation(np->proc);
    m->fr[0] = (struct nm_frame){0};
    return 0;
}

void ss_nmemo_log_rule(struct ss_nproc *np, const struct ss_nrule *r, uint64_t cfa)
{
    struct ss_nmemo_log *l = &np->nlog;
    struct ss_nmemo *m = np->nmemo;
    unsigned d0 = r->cfa_reg;
    l->allregs |= SS_DBIT(d0);
    if (l->carried >> d0 & 1) {
        l->deps |= SS_DBIT(d0);
    } else if (l->loaded >> d0 & 1) { /* its slot decides the CFA */
        if (!grow(&m->deps, &m->dcap, l->ndep + 1, sizeof(*m->deps))) l->oom = true;
        if (!l->oom) m->deps[l->ndep++] = l->src[d0];
    }
    uint64_t gone = (uint64_t)r->undef | SS_DBIT(SS_DR_SP), load = 0;
    for (int s = 0; s < SS_NRS_COUNT; s++) {
        int16_t off = r->off[s];
        if (off == SS_NR_SAME) continue;
        unsigned d = ss_nrs_dreg[s];
        gone |= SS_DBIT(d);
        if (off == SS_NR_UNDEF) continue;
        uint64_t a = cfa + off;
        if (a < l->lo) l->lo = a;
        if (a + 8 > l->hi) l->hi = a + 8;
        load |= SS_DBIT(d);
        l->src[d] = a;
        if (d == SS_DR_IP) { /* the return address decides the rest */
            if (!grow(&m->deps, &m->dcap, l->ndep + 1, sizeof(*m->deps))) l->oom = true;
            if (!l->oom) m->deps[l->ndep++] = a;
        }
    }
    /* this step's loads, in register order (as find applies them) */
    l->first = l->nload;
    for (uint64_t x = load; x && !l->oom; x &= x - 1) {
        if (!grow(&m->loads, &m->lcap, l->nload + 1, sizeof(*m->loads))) {
            l->oom = true;
            break;
        }
        m->loads[l->nload++] = l->src[__builtin_ctzll(x)];
    }
    l->load = load;
    l->carried &= ~gone;
    l->loaded = (l->loaded & ~gone) | load;
}

void ss_nmemo_log_step(struct ss_nproc *np, const struct ss_native_frame *f, unsigned k)
{
    struct ss_nmemo_log *l = &np->nlog;
    struct ss_nmemo *m = np->nmemo;
    if (!l->on || k >= m->cap) return;
    m->fr[k] = (struct nm_frame){.sp = ss_nf_sp(f),
                                 .valid = f->regs.valid,
                                 .flags = f->flags,
                                 .load = l->load,
                                 .first = l->first};
}

void ss_nmemo_log_end(struct ss_nproc *np, const struct ss_native_frame *out, unsigned n,
                      unsigned max, enum ss_trunc why)
{
    struct ss_nmemo_log *l = &np->nlog;
    struct ss_nmemo *m = np->nmemo;
    bool keep = l->on && !l->opaque && !l->oom && n >= 1 && n <= m->cap &&
                l->gen == ss_proc_generation(np->proc) && why != SS_TRUNC_SNAPSHOT &&
                why != SS_TRUNC_ERROR && why != SS_TRUNC_NOINFO;
    l->on = false;
    if (!keep) return;
    const struct ss_mem *mem = np->mem;
    uint64_t lo = l->lo, hi = l->hi;
    if (hi <= lo) lo = hi = 0;
    if (hi > lo && (lo < mem->snap_base || hi > mem->snap_base + mem->snap_len)) return;
    if (hi > lo && mem->snap_holes && ss_mem_snap_hole(mem, lo - mem->snap_base, hi - lo)) return;
    /* the loads of frames past the last one (the step that ended the walk)
     * are not applied; the dependencies of that step still count */
    unsigned nload =
        n > 1 ? m->fr[n - 1].first + (unsigned)__builtin_popcountll(m->fr[n - 1].load) : 0;
    size_t sz = sizeof(struct ss_nmemo_ent) + n * sizeof(struct nm_frame) +
                (nload + 2 * (size_t)l->ndep) * sizeof(uint64_t);
    struct ss_nmemo_ent *e = malloc(sz);
    if (!e) return;
    memset(e, 0, sizeof(*e));
    e->frames = (struct nm_frame *)(void *)(e + 1);
    e->loads = (uint64_t *)(void *)(e->frames + n);
    e->dep_addr = e->loads + nload;
    e->dep_val = e->dep_addr + l->ndep;
    memcpy(e->frames, m->fr, n * sizeof(*e->frames));
    /* the frames as the walk left them: stepping on from a frame by a file's
     * row marks it (SS_NF_FILE) */
    for (unsigned i = 0; i < n; i++) {
        e->frames[i].cfa = out[i].cfa;
        e->frames[i].flags = out[i].flags;
    }
    if (nload) memcpy(e->loads, m->loads, nload * sizeof(uint64_t)); /* m->loads may be NULL */
    for (unsigned k = 0; k < l->ndep; k++) {
        e->dep_addr[k] = m->deps[k];
        e->dep_val[k] = snap_u64(mem, m->deps[k]);
    }
    const struct ss_native_frame *f1 = &out[0];
    e->ip = ss_nf_ip(f1);
    e->sp = ss_nf_sp(f1);
    e->flags = f1->flags & ~(uint32_t)SS_NF_FILE; /* as the step below made it */
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
    e->nload = nload;
    e->ndep = l->ndep;
    e->why = why;
    unsigned s = slot_of(f1);
    free(m->slot[s]);
    m->slot[s] = e;
}
