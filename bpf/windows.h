/* bpf/windows.h: BPF side only: the plans map and applying a process's plan
 * (snapshot.h: struct ss_plan) to a record. Shared by both program variants;
 * the includer defines SS_PROBE_READ.
 *
 * One static subprogram copies one window, called once per window: its code
 * is in the program once (the verifier still checks it per call), so eight
 * windows cost a few instructions each in size. No loops, no tail calls.
 * Bounds are checked against constants only (older verifiers learn nothing
 * from comparing two variables): len <= SS_EV_WIN_LEN_MAX and
 * dst <= SS_EV_WIN_BYTES - SS_EV_WIN_LEN_MAX. */
#ifndef STACKSNAP_BPF_WINDOWS_H
#define STACKSNAP_BPF_WINDOWS_H

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, __u32);
    __type(value, struct ss_plan);
} plans SEC(".maps");

/* What every window of one sample shares; on the caller's stack, passed by
 * pointer so that each call site is three instructions. */
struct win_ctx {
    const struct ss_plan *p;
    struct ss_event *e;
    __u8 *area; /* SS_EV_WIN_BYTES bytes */
    __u64 ip;
    __u64 prev; /* the window before (or the chain it ends) copied */
    __u32 i;    /* the next window */
};

/* Window c->i of c->p into c->area, then the next one. A failed load or copy leaves SS_WERR_FAULT
 * in the record, where user space counts it. Only w, o and c live across
 * the helper calls (the callee-saved registers); the rest is re-read. */
static __noinline int copy_window(struct win_ctx *c)
{
    const struct ss_win *w;
    struct ss_ev_win *o;
    __u64 a, len, dst;
    __u32 k, i = c->i++;

    if (i >= SS_EV_WIN_MAX || i >= c->p->nwin) return 0;
    w = &c->p->win[i];
    o = &c->e->win[i];
    barrier_var(w); /* kept in a register, not rebuilt from p and i */
    barrier_var(o);
    o->len = 0;
    o->err = SS_WERR_SKIP;
    if ((w->flags & SS_WIN_UNLESS_PREV) && c->prev) return 0;
    c->prev = 0;
    if (c->ip - w->ip_lo >= w->ip_span) return 0; /* SS_WIN_IF_IP */
    a = w->addr;                                  /* 0 for a register anchor (the loader's) */
    if (w->reg < SS_PT_NREGS) a += c->e->regs[w->reg];
#pragma unroll
    for (k = 0; k < 2; k++) {
        if (k >= w->nload) break;
        if (SS_PROBE_READ(&a, sizeof(a), (void *)(a + w->off[k]))) goto fault;
        a &= w->mask[k];
        if (!a) return 0;
    }
    a += w->off[2];
    len = w->len;
    dst = w->dst;
    if (len > SS_EV_WIN_LEN_MAX || dst > SS_EV_WIN_BYTES - SS_EV_WIN_LEN_MAX) return 0;
    /* the checked registers themselves, not copies spilled before (5.10) */
    barrier_var(len);
    barrier_var(dst);
    if (SS_PROBE_READ(c->area + dst, len, (void *)a)) {
        /* Partly unreadable: its start in a page not present (below the
         * start of a Lua stack): from the next page on. */
        __u64 skip = -a & 4095;
        if (skip >= len) goto fault;
        a += skip;
        len = (len - skip) & (SS_EV_WIN_LEN_MAX - 1); /* (the verifier's bound) */
        if (SS_PROBE_READ(c->area + dst, len, (void *)a)) goto fault;
    }
    o->addr = a;
    o->len = len;
    o->dst = dst;
    o->err = 0;
    c->prev = 1;
    return 0;
fault:
    o->err = SS_WERR_FAULT;
    return 0;
}

/* Four windows a call: two calls copy all SS_EV_WIN_MAX (each call site
 * costs instructions; the verifier still checks every path). */
static __noinline int copy_windows4(struct win_ctx *c)
{
    copy_window(c);
    copy_window(c);
    copy_window(c);
    copy_window(c);
    return 0;
}
_Static_assert(SS_EV_WIN_MAX == 8, "two calls of copy_windows4");

/* The windows of plan p into area; e->nwin says how many were applied. */
static __always_inline void apply_plan(const struct ss_plan *p, struct ss_event *e, __u8 *area)
{
    struct win_ctx c = {.p = p, .e = e, .area = area, .ip = e->regs[SS_PT_IP]};
    __u32 n = p->nwin;

    e->nwin = n; /* at most SS_EV_WIN_MAX: the loader's check (and user space's) */
    copy_windows4(&c);
    copy_windows4(&c);
}

#endif
