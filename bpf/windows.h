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

/* Window i of plan p into area (SS_EV_WIN_BYTES bytes) of record e. prev:
 * whether the window before (or the chain it ends, SS_WIN_UNLESS_PREV)
 * copied; returns the same for the next one. A failed load or copy leaves
 * SS_WERR_FAULT in the record, where user space counts it. */
static __noinline int copy_window(const struct ss_plan *p, __u32 i, struct ss_event *e, __u8 *area,
                                  int prev)
{
    const struct ss_win *w;
    struct ss_ev_win *o;
    __u64 a, len, dst, ip;

    if (i >= SS_EV_WIN_MAX || i >= p->nwin) return prev;
    w = &p->win[i];
    o = &e->win[i];
    o->len = 0;
    o->err = SS_WERR_SKIP;
    if ((w->flags & SS_WIN_UNLESS_PREV) && prev) return prev;
    ip = e->regs[SS_PT_IP];
    if ((w->flags & SS_WIN_IF_IP) && (ip < w->ip_lo || ip >= w->ip_hi)) return 0;
    if (w->reg == SS_WIN_ABS)
        a = w->addr;
    else if (w->reg < SS_PT_NREGS)
        a = e->regs[w->reg];
    else
        return 0;
    if (w->nload >= 1) {
        if (SS_PROBE_READ(&a, sizeof(a), (void *)(a + w->off[0]))) goto fault;
        a &= w->mask[0];
        if (!a) return 0;
    }
    if (w->nload >= 2) {
        if (SS_PROBE_READ(&a, sizeof(a), (void *)(a + w->off[1]))) goto fault;
        a &= w->mask[1];
        if (!a) return 0;
    }
    a += w->off[2];
    len = w->len;
    dst = w->dst;
    if (len > SS_EV_WIN_LEN_MAX || dst > SS_EV_WIN_BYTES - SS_EV_WIN_LEN_MAX) return 0;
    /* the checked registers themselves, not copies spilled before (5.10) */
    barrier_var(len);
    barrier_var(dst);
    if (SS_PROBE_READ(area + dst, len, (void *)a)) {
        /* Partly unreadable (e.g. its start below a mapping): its end only. */
        __u64 clamp = w->clamp;
        if (!clamp || clamp > SS_EV_WIN_LEN_MAX || clamp >= len) goto fault;
        barrier_var(clamp);
        a += len - clamp;
        if (SS_PROBE_READ(area + dst, clamp, (void *)a)) goto fault;
        len = clamp;
    }
    o->addr = a;
    o->len = len;
    o->dst = dst;
    o->err = 0;
    return 1;
fault:
    o->err = SS_WERR_FAULT;
    return 0;
}

/* The windows of plan p into area; e->nwin says how many were applied. */
static __always_inline void apply_plan(const struct ss_plan *p, struct ss_event *e, __u8 *area)
{
    __u32 n = p->nwin;
    int prev = 0;

    e->nwin = n < SS_EV_WIN_MAX ? n : SS_EV_WIN_MAX;
#pragma unroll
    for (__u32 i = 0; i < SS_EV_WIN_MAX; i++)
        prev = copy_window(p, i, e, area, prev);
}

#endif
