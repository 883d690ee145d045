/* unwind/luajit/trace.c: samples in JIT-compiled trace machine code.
 *
 * Where a trace runs: on the C stack frame of the VM entry that entered it.
 * x86-64 JLOOP/JFUNC save r12/r13 and lower rsp by trace_sp_bias (16), the
 * trace's head subtracts spadjust, so inside trace code
 *     VM frame CFA = rsp + trace_sp_bias + spadjust + vm_cfa_off
 * (vm_x64.dasc BC_JLOOP, lj_asm.c asm_head_root/asm_head_side). A C function
 * called from a trace has the trace's rsp as its CFA. arm64's JLOOP lowers
 * sp by 16 too (SPS_FIXED), and its traces never touch x29, the VM frame's
 * frame pointer: CFA = x29 + 16 where x29 is known, checked against sp.
 *
 * Which trace: an index per runtime of the traces seen so far, sorted by
 * mcode address. A hit is re-validated on every sample (trace_check.c):
 * J->trace[traceno] must still be this GCtrace (the sample's J->trace
 * window) and its header (everything but GC links and counters) and the
 * chosen snapshot and its map slice must be byte-identical to what was
 * decoded (one batched read, or no read while the GC generation they were
 * proven in lasts), so a flushed trace, or a number or mcode area reused by
 * another trace, can never lend its frames. A miss asks
 * G->vmstate (the running trace) and then, rate-limited, the whole J->trace
 * array.
 *
 * Which frames: the snapshot with the largest mcofs <= ip - mcode (what
 * lj_trace_unwind does). Its map holds every frame the trace has inlined
 * above the frame at G->jit_base: GC64 frame-link slots are SNAP_FRAME
 * entries whose ref is a KNUM constant with the link (return pc, or
 * delta|CONT with the continuation pc two slots lower, or delta|VARG); the
 * innermost pc follows the entries ((pc << 8) | baseslot). Non-GC64 maps end
 * with the pc and the links, innermost first. Each frame's prototype is the
 * one whose bytecode holds its pc, among the trace's KGC constants (closures
 * and prototypes: a live trace keeps them alive) and its start prototype.
 * The frame at jit_base and everything below it is walked live by frames.c,
 * which checks that the function there runs the snapshot's outermost pc.
 * Of the snapshot's inlined frames only those proven at ip are given
 * (trace_check.c proven: the ones the next snapshot shows too); the others
 * are counted (ss_lj_tsample.unproven -> ss_frame.unproven), never shown.
 * All of a snapshot's frames are given at an FFI call the snapshot after
 * which is proven the call's own (trace_load.c post_call), and at the copy
 * of such a call in the trace's loop (trace_calls.c).
 *
 * Builds whose SnapShot has no mcofs (Tarantool 2.6) get each snapshot's
 * start placed from the guards that branch to its exit stub and the loop
 * start (guards.c); ss_lj_runtime_check_guards measures that placement
 * against mcofs where both exist. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/trace_int.h"
static void trace_clear(struct trace *t)
{
    free(t->snaps);
    free(t->map);
    free(t->fr);
    free(t->calls);
    free(t->fwd);
    free(t->fwdfr);
    memset(t, 0, sizeof(*t));
}

void ss_lj_trace_free(struct ss_lj_runtime *rt)
{
    struct lj_tcache *tc = rt->tc;
    if (!tc) return;
    for (unsigned i = 0; i < tc->n; i++)
        trace_clear(&tc->t[i]);
    free(tc->t);
    free(tc);
    rt->tc = NULL;
}

static struct lj_tcache *tc_get(struct ss_lj_runtime *rt)
{
    if (!rt->tc) {
        rt->tc = calloc(1, sizeof(*rt->tc));
        if (rt->tc && !(rt->tc->t = calloc(TC_MAX, sizeof(struct trace)))) {
            free(rt->tc);
            rt->tc = NULL;
        }
    }
    return rt->tc;
}

/* Index of the trace whose mcode holds ip, or -1. */
static int tc_find(const struct lj_tcache *tc, uint64_t ip)
{
    unsigned lo = 0, hi = tc->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (tc->t[mid].mcode <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return -1;
    const struct trace *t = &tc->t[lo - 1];
    return ip < t->mcode + t->szmcode ? (int)lo - 1 : -1;
}

static void tc_remove(struct lj_tcache *tc, unsigned i)
{
    trace_clear(&tc->t[i]);
    memmove(&tc->t[i], &tc->t[i + 1], (tc->n - i - 1) * sizeof(tc->t[0]));
    tc->n--;
    memset(&tc->t[tc->n], 0, sizeof(tc->t[0]));
}

/* Insert a header-only entry (drops every entry whose code overlaps). */
static int tc_insert(struct lj_tcache *tc, const struct trace *nt)
{
    for (unsigned i = 0; i < tc->n;) {
        const struct trace *t = &tc->t[i];
        if (t->mcode < nt->mcode + nt->szmcode && nt->mcode < t->mcode + t->szmcode)
            tc_remove(tc, i);
        else
            i++;
    }
    if (tc->n == TC_MAX) tc_remove(tc, tc->n / 2);
    unsigned i = 0;
    while (i < tc->n && tc->t[i].mcode < nt->mcode)
        i++;
    memmove(&tc->t[i + 1], &tc->t[i], (tc->n - i) * sizeof(tc->t[0]));
    tc->t[i] = *nt;
    tc->n++;
    return (int)i;
}

/* Fill a header-only entry from header bytes; false if not a trace. */
static bool from_hdr(const struct lj_layout *lay, uint64_t G, uint64_t T, uint32_t n,
                     const uint8_t *h, struct trace *t)
{
    memset(t, 0, sizeof(*t));
    if (h[lay->gct] != LJ_GCT_TRACE || u16at(h + lay->T_traceno) != n || n == 0) return false;
    t->G = G;
    t->T = T;
    t->traceno = n;
    t->mcode = lj_u64(h + lay->T_mcode);
    t->szmcode = lj_u32(h + lay->T_szmcode);
    t->spadjust = u16at(h + lay->T_spadjust);
    t->nsnap = u16at(h + lay->T_nsnap);
    if (!t->mcode || !t->szmcode || t->szmcode > (1u << 24) || !t->nsnap) return false;
    memcpy(t->hdr, h, lay->T_size);
    return true;
}

/* ---- finding the trace of an ip ---- */

/* J->trace array address and size for G (one read). */
static bool jtrace(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t *arr,
                   uint32_t *size, int32_t *vmstate)
{
    const struct lj_layout *lay = rt->lay;
    uint8_t jb[16];
    struct ss_iov iov[2] = {
        {.addr = G + (uint64_t)(int64_t)lay->g2j + lay->J_trace, .dst = jb, .len = 16},
        {.addr = G + lay->G_vmstate, .dst = vmstate, .len = 4},
    };
    rt->st.rounds++;
    if (ss_mem_readv(m, iov, 2) || iov[0].err || iov[1].err) return false;
    *arr = lj_u64(jb);
    *size = lj_u32(jb + (lay->J_sizetrace - lay->J_trace));
    return *arr && *size && *size <= TC_MAXARR;
}

/* Read the headers of trace numbers [lo, hi) of J->trace (array at arr)
 * and index them. Returns the index of the one holding ip, or -1. */
static int index_range(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t arr,
                       uint32_t lo, uint32_t hi, uint64_t ip)
{
    const struct lj_layout *lay = rt->lay;
    struct lj_tcache *tc = rt->tc;
    unsigned rs = lay->gc64 ? 8 : 4;
    int found = -1;
    enum { CH = 128 };
    uint8_t refs[CH * 8];
    uint8_t(*hb)[TC_HDR] = malloc(CH * TC_HDR);
    if (!hb) return -1;
    for (uint32_t b = lo; b < hi; b += CH) {
        uint32_t cnt = hi - b < CH ? hi - b : CH;
        rt->st.rounds++;
        if (ss_mem_read(m, arr + (uint64_t)b * rs, refs, (size_t)cnt * rs)) break;
        struct ss_iov iov[CH];
        uint32_t num[CH];
        int nv = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            uint64_t T = lay->gc64 ? lj_u64(refs + i * 8) : lj_u32(refs + i * 4);
            if (!T || b + i == 0) continue;
            num[nv] = b + i;
            iov[nv] = (struct ss_iov){.addr = T, .dst = hb[nv], .len = lay->T_size};
            nv++;
        }
        if (!nv) continue;
        rt->st.rounds++;
        if (ss_mem_readv(m, iov, nv)) break;
        for (int i = 0; i < nv; i++) {
            struct trace nt;
            if (iov[i].err || !from_hdr(lay, G, iov[i].addr, num[i], hb[i], &nt)) continue;
            int at = tc_find(tc, nt.mcode);
            if (at >= 0 && tc->t[at].T == nt.T && tc->t[at].mcode == nt.mcode &&
                ss_lj_trace_same_hdr(lay, tc->t[at].hdr, nt.hdr))
                continue; /* already known, keep its decoded data */
            tc_insert(tc, &nt);
        }
    }
    free(hb);
    found = tc_find(tc, ip);
    return found;
}

/* Look ip up in G's traces: the running trace first, then (rate-limited)
 * every trace. Index of the entry, or -1. */
/* Look ip up in G's traces: the running trace first, then (at most every
 * TC_REFRESH_NS of sample time) every trace. Index of the entry, or -1.
 * State changes only after successful reads, and the rate limit runs on
 * sample time, so a replay that looks up more than the live walk did (its
 * mapping list can be older) cannot change later results. */
static int discover(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t ip,
                    uint64_t now_ns)
{
    struct lj_tcache *tc = rt->tc;
    uint64_t arr;
    uint32_t size;
    int32_t vms;
    if (!jtrace(rt, m, G, &arr, &size, &vms)) return -1;
    if (vms > 0 && (uint32_t)vms < size) {
        int i = index_range(rt, m, G, arr, (uint32_t)vms, (uint32_t)vms + 1, ip);
        if (i >= 0) return i;
    }
    if (tc->refresh_ns && now_ns - tc->refresh_ns < TC_REFRESH_NS) return -1;
    tc->refresh_ns = now_ns ? now_ns : 1;
    return index_range(rt, m, G, arr, 1, size, ip);
}

/* Probe G (no side effects unless it verifies). */
static bool try_G(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t dispatch)
{
    const struct lj_layout *got = NULL;
    struct lj_layout tmp;
    bool derived;
    char why[160];
    return G > 4096 && !(G & 7) &&
           ss_lj_layout_verify(&rt->info, m, G, dispatch, &tmp, &got, &derived, why, sizeof(why)) ==
               0 &&
           ss_lj_check_G(rt, m, G);
}

/* Global states to search: the verified ones; before any walk verified one
 * (a program that runs in traces from the start): r14 - G2DISP (GC64 keeps
 * DISPATCH in r14 on trace), else the SAVE_L of a plausible VM frame above
 * the trace's rsp (its stack adjustment is not known yet) -> L->glref. */
static unsigned gstates(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t r14, uint64_t rsp,
                        uint64_t *gs)
{
    unsigned n = 0;
    for (unsigned i = 0; i < rt->ngs; i++)
        gs[n++] = rt->gs[i];
    if (n || rt->disabled) return n;
    const struct ss_lj_derived *dv = &rt->info.derived;
    if (rt->arch->gl_is_g && r14 && rt->info.gc64 && try_G(rt, m, r14, 0)) return gs[0] = r14, 1;
    if (!rt->arch->gl_is_g && r14 && rt->info.gc64 && ss_lj_layout_derivable(&rt->info) &&
        rt->info.exit_lo && try_G(rt, m, r14 - (uint64_t)(int64_t)dv->g2disp, r14))
        return gs[0] = r14 - (uint64_t)(int64_t)dv->g2disp, 1;
    for (unsigned i = 0; !rt->arch->gl_is_g && r14 && rt->info.gc64 && i < ss_lj_nlayouts; i++) {
        const struct lj_layout *lay = &ss_lj_layouts[i];
        uint64_t G = r14 - (uint64_t)(int64_t)lay->g2disp;
        if (lay->gc64 && !lay->nojit && try_G(rt, m, G, r14)) return gs[0] = G, 1;
    }
    unsigned gct = rt->info.gc64 ? 9 : 5, glref = rt->info.gc64 ? 16 : 8;
    unsigned cfl = rt->info.gc64 ? 16 : 24, tries = 0; /* cframe SAVE_L (layout.c cf_L) */
    if (dv->have & SS_LJ_D_ENTRY) glref = dv->L_glref, cfl = dv->cf_L;
    for (uint64_t c = rsp + 16; c < rsp + 16 + 4096 && tries < 4; c += 16) {
        uint64_t ret = 0, L = 0;
        const uint64_t cfa = c + rt->info.vm_cfa_off;
        if (ss_mem_read(m, cfa - 8, &ret, 8) || ss_mem_read(m, c + cfl, &L, 8)) break;
        if (!rt->info.gc64) L = (uint32_t)L;
        if (ret < 4096 || ret >= rt->arch->va_end || ss_lj_in_vm(rt, ret) || L < 4096 || (L & 7) ||
            ret + (64u << 20) < rt->vm_lo || ret > rt->vm_hi + (64u << 20))
            continue; /* (no underflow: a non-PIE VM sits below 64 MiB) */
        tries++;
        uint8_t lb[24];
        if (ss_mem_read(m, L, lb, sizeof(lb)) || lb[gct] != LJ_GCT_THREAD) continue;
        uint64_t G = rt->info.gc64 ? lj_u64(lb + glref) : lj_u32(lb + glref);
        if (try_G(rt, m, G, 0)) return gs[0] = G, 1;
    }
    return 0;
}

int ss_lj_trace_lookup(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t look, uint64_t r14,
                       uint64_t rsp, uint64_t now_ns, struct ss_lj_tsample *cur)
{
    struct lj_tcache *tc;
    uint64_t gs[LJ_MAX_GS];
    if (rt->disabled || !(tc = tc_get(rt))) return -ENOENT;
    int idx = tc_find(tc, look), rc = -ENOENT;
    if (idx >= 0 && (rc = ss_lj_trace_validate(rt, m, idx, look, cur)) == 0) goto found;
    if (idx >= 0 && rc != -ESTALE) return rc;   /* known trace, no frames (or no reads) */
    if (idx >= 0) tc_remove(tc, (unsigned)idx); /* flushed or replaced: look again */
    unsigned ng = gstates(rt, m, r14, rsp, gs);
    if (!rt->lay || rt->lay->nojit) return -ENOENT;
    for (unsigned g = 0; g < ng; g++) {
        idx = discover(rt, m, gs[g], look, now_ns);
        if (idx >= 0 && ss_lj_trace_validate(rt, m, idx, look, cur) == 0) goto found;
    }
    return -ENOENT;
found:
    rt->st.trace_samples++;
    return 0;
}

/* ---- the VM frame under a trace, and its frames ---- */

/* *d = *s as far as s's frames go (no reader looks past nframes). */
static void ss_lj_tsample_copy(struct ss_lj_tsample *d, const struct ss_lj_tsample *s)
{
    size_t n = s->nframes <= LJ_TRACE_MAXFR ? s->nframes : LJ_TRACE_MAXFR;
    memcpy(d, s, offsetof(struct ss_lj_tsample, pc));
    memcpy(d->pc, s->pc, n * sizeof(s->pc[0]));
    memcpy(d->link, s->link, n * sizeof(s->link[0]));
    memcpy(d->pt, s->pt, n * sizeof(s->pt[0]));
    memcpy(d->proto, s->proto, n * sizeof(s->proto[0]));
}

/* A candidate CFA is plausible when the snapshot shows a return address
 * below it and a pointer-shaped SAVE_L in its cframe; the walk then checks
 * SAVE_L->cframe == this cframe. The return address is outside the VM,
 * except for a coroutine's VM entry, which the resume and wrap fast
 * functions call from inside the VM. Returns 0 (not plausible), 1 (return
 * address outside the VM) or 2 (inside: a coroutine's). */
static int plausible(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t cfa)
{
    const struct lj_layout *lay = rt->lay;
    uint64_t ret = 0, L = 0;
    uint64_t cframe = cfa - rt->info.vm_cfa_off;
    if (ss_mem_read(m, cfa - 8, &ret, 8) || ss_mem_read(m, cframe + lay->cf_L, &L, 8)) return 0;
    if (!lay->gc64) L = (uint32_t)L;
    if (ret <= 4096 || ret >= rt->arch->va_end || L <= 4096 || (L & 7)) return 0;
    return ss_lj_in_vm(rt, ret) ? 2 : 1;
}

bool ss_lj_trace_plausible(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t cfa)
{
    return plausible(rt, m, cfa) == 1;
}

uint64_t ss_lj_trace_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *m,
                         uint64_t ip, bool exact, const uint64_t *regs, uint64_t known,
                         uint64_t time_ns, uint32_t *token)
{
    uint64_t look = exact ? ip : ip - 1;
    *token = 0;
    for (uint32_t i = 0; i < nrts; i++) {
        struct ss_lj_runtime *rt = rts[i];
        struct ss_lj_tsample cur;
        if (!rt) continue;
        const struct lj_arch *a = rt->arch; /* regs: numbered as its architecture's */
        if (!(known >> a->sp & 1)) continue;
        uint64_t rsp = regs[a->sp], r14 = (known >> a->disp & 1) ? regs[a->disp] : 0;
        if (ss_lj_trace_lookup(rt, m, look, r14, rsp, time_ns, &cur)) continue;
        /* BASE as sampled: the register the trace keeps it in, its spill
         * slot, or (leaf only) RID_BASE = rdx, where it arrives and is
         * reloaded after calls. Each is a candidate the walk verifies; the
         * fallback is G->jit_base. When that is the sample's (its window),
         * it is BASE (set on trace entry, and by every RETF that moves
         * BASE: lj_asm_x86.h asm_retf) and goes before the rdx guess. */
        uint64_t v = 0;
        if (cur.base_reg != 0xff && (known >> cur.base_reg & 1))
            cur.base = regs[cur.base_reg];
        else if (cur.base_spill && !ss_mem_read(m, rsp + 4u * cur.base_spill, &v, 8))
            cur.base = v;
        else if (exact && (known >> a->base & 1) && cur.jit_base_sampled && cur.jit_base)
            cur.guess = regs[a->base];
        else if (exact && (known >> a->base & 1))
            cur.base = regs[a->base];
        uint64_t base = rsp + rt->lay->trace_sp_bias + rt->info.vm_cfa_off;
        /* the head's "sub rsp, spadjust" (the trace's first instruction)
         * and the tail's "add rsp, spadjust; jmp" run with rsp unadjusted */
        uint64_t c1 = base + cur.spadjust, c2 = base;
        if (exact && ip == cur.mcode) c1 = base, c2 = base + cur.spadjust;
        uint64_t cfa = 0;
        /* arm64: traces never write x29 (RSET_FIXED holds RID_FP), so it is
         * the VM frame's (CFA - 16) all through the trace and in what it
         * calls; the sp-based CFA is a check: from the cframe itself (the
         * tail's "add sp, sp, #spadjust + 16; b ->vm_exit_interp") up to
         * the trace's whole adjustment (a side trace's head runs on its
         * parent's, which is no larger). */
        if (a->a64 && (known >> a->fp & 1)) {
            uint64_t fp = regs[a->fp] + LJ_A64_CFA_FP;
            if (fp < rsp + rt->info.vm_cfa_off || fp > c1 || (fp & 15) || !plausible(rt, m, fp))
                continue;
            cfa = fp;
        }
        if (!cfa) {
            int p1 = plausible(rt, m, c1), p2 = plausible(rt, m, c2);
            cfa = p1 == 1   ? c1
                  : p2 == 1 ? c2 /* outside the VM first, */
                  : p1 == 2 ? c1
                  : p2 == 2 ? c2 /* then a coroutine's trace */
                            : 0;
        }
        if (!cfa) continue;
        struct lj_tcache *tc = rt->tc;
        ss_lj_tsample_copy(&tc->cur, &cur);
        if (++tc->token > 0x0fffffffu) tc->token = 1;
        *token = tc->token | (i + 1) << 28; /* runtime index in the top bits */
        return cfa;
    }
    return 0;
}

bool ss_lj_in_trace(struct ss_lj_runtime *const *rts, uint32_t nrts, uint64_t look, uint64_t lo,
                    uint64_t hi)
{
    for (uint32_t i = 0; i < nrts; i++) {
        const struct lj_tcache *tc = rts[i] ? rts[i]->tc : NULL;
        if (!tc) continue;
        if (tc_find(tc, look) >= 0) return true;
        unsigned a = 0, b = tc->n; /* the first trace at or above lo */
        while (a < b) {
            unsigned mid = (a + b) / 2;
            if (tc->t[mid].mcode < lo)
                a = mid + 1;
            else
                b = mid;
        }
        if (a < tc->n && tc->t[a].mcode < hi) return true;
    }
    return false;
}

const struct ss_lj_tsample *ss_lj_trace_sample(struct ss_lj_runtime *const *rts, uint32_t nrts,
                                               uint32_t token, struct ss_lj_runtime **rt)
{
    uint32_t i = (token >> 28) - 1;
    *rt = NULL;
    if (!token || i >= nrts || !rts[i] || !rts[i]->tc) return NULL;
    if (rts[i]->tc->token != (token & 0x0fffffffu)) return NULL;
    *rt = rts[i];
    return &rts[i]->tc->cur;
}

int ss_lj_trace_walk(struct ss_lj_runtime *rt, struct ss_mem *m, const struct ss_lj_tsample *cur,
                     uint64_t L, uint64_t cframe, struct lj_walk *w)
{
    const struct lj_layout *lay = rt->lay;
    /* BASE: the sampled register, else jit_base (the sample's, or read
     * live: 0 once the trace exited), else a leaf's rdx (the guess), else
     * the BASE the last good trace walk of L had. A
     * live or remembered BASE is trusted as far as jit_base ever was: the
     * frame there must run the trace's start prototype (checked below and
     * by frames.c), and the callers are read live. */
    unsigned slot = (unsigned)(L >> 4) % LJ_TBASE_SLOTS;
    uint64_t last = rt->tbase[slot].L == L ? rt->tbase[slot].base : 0;
    uint64_t bases[4] = {cur->base, cur->jit_base, cur->guess, last}, used = 0;
    int rc = -ESTALE;
    for (unsigned b = 0; b < 4 && rc; b++) {
        bool tried = false;
        for (unsigned k = 0; k < b; k++)
            tried |= bases[k] == bases[b];
        if (!bases[b] || tried) continue;
        struct lj_start st = {.L = L,
                              .cframe = cframe,
                              .top = true,
                              .newest = true,
                              .base = bases[b],
                              .pc = cur->pc[0]};
        rc = ss_lj_walk_thread(rt, m, &st, w);
        used = bases[b];
    }
    if (rc) return rc;
    /* the frame at BASE must run the snapshot's outermost pc (frames.c
     * checked it against the function found there) */
    if (!w->n || w->f[0].ffid != 0 || w->f[0].pc != cur->pc[0]) {
        w->n = 0;
        return -ESTALE;
    }
    /* callers read live (no window of the sample had them: a walk seconds
     * late under emulation) are those of the sample only while the frame
     * at BASE still runs a trace: G->jit_base, read now, must be it (once
     * the trace exits, the interpreter reuses those slots: os.clock in the
     * slot of a returned caller, seen in the arm64 VM). Only the header's
     * and the frames' slots count: the function and prototype objects a
     * walk reads live are proven by the collector's state (resolve.c); a
     * check on any live read rejected ~60% of the windowed trace walks of
     * nginx's request coroutine in the arm64 VM. (x86-64 too, in
     * principle: not measured there yet.) */
    uint64_t jb = 0;
    if (rt->arch->a64 && w->live_slots &&
        (ss_mem_read_target(m, cur->G + lay->G_jit_base, &jb, lay->gc64 ? 8 : 4) || jb != used)) {
        w->n = 0;
        return -ESTALE;
    }
    rt->tbase[slot].L = L;
    rt->tbase[slot].base = used;
    w->unproven += cur->unproven;
    unsigned k = cur->nframes - 1;
    if (w->n + k > LJ_MAX_FRAMES) {
        w->n = LJ_MAX_FRAMES - k;
        w->truncated = true;
    }
    memmove(&w->f[k], &w->f[0], w->n * sizeof(w->f[0]));
    for (unsigned j = 0; j < k; j++) {
        unsigned s = cur->nframes - 1 - j; /* innermost first */
        struct lj_wframe *wf = &w->f[j];
        memset(wf, 0, sizeof(*wf));
        wf->ftsz = (int64_t)cur->link[s];
        wf->pt = cur->pt[s];
        wf->pc = cur->pc[s];
        wf->fnpc = cur->pt[s] + lay->pt_size;
        /* the prototype cache may have reused the entry during the walk */
        wf->proto = cur->proto[s] && cur->proto[s]->addr == cur->pt[s]
                        ? cur->proto[s]
                        : ss_lj_proto(rt, m, cur->pt[s], NULL);
        if (!wf->proto) {
            w->n = 0;
            return -ESTALE;
        }
        wf->seg = w->f[k].seg;
    }
    w->n += k;
    return 0;
}
