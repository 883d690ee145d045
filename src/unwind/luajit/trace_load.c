/* unwind/luajit/trace_load.c: decoding a trace once — its snapshots, the
 * frames each snapshot map restores (GC64 KNUM links, non-GC64 trailing
 * links), their prototypes among the trace's constants, the side-effecting
 * calls after which the next snapshot's frames are exact (trace_post.c), and
 * for builds without SnapShot.mcofs one pseudo snapshot (see trace.c). */
#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/trace_int.h"

/* The trace's register numbers (RID_*) -> sample register numbers of the
 * VM's architecture (ljregs.h), 0xff for none: x86-64's 16 GPRs in perf's
 * order (rsp never holds BASE); arm64's RID_X0..RID_X30 are xN
 * (lj_target_arm64.h; 31 is sp, FPRs follow). */
static uint8_t rid_reg(const struct lj_arch *a, uint8_t r)
{
    /* perf_event_x86_regs: ax bx cx dx si di bp sp ip flags cs ss ds es fs gs r8..r15 */
    static const uint8_t x64[16] = {0, 2, 3, 1, 0xff, 6, 4, 5, 16, 17, 18, 19, 20, 21, 22, 23};
    if (a->a64) return r <= 30 ? r : 0xff;
    return r < 16 ? x64[r] : 0xff;
}

/* ---- decoding (once per trace) ---- */

struct kbuf {
    const uint8_t *ir; /* IR slots [nk, REF_BIAS] */
    uint32_t nk;
};

static const uint8_t *irslot(const struct kbuf *k, uint32_t ref)
{
    if (ref < k->nk || ref > REF_BIAS) return NULL;
    return k->ir + (size_t)(ref - k->nk) * 8;
}

/* 64-bit value of KNUM constant ref (stored in the slot after it). */
static bool knum(const struct lj_layout *lay, const struct kbuf *k, uint32_t ref, uint64_t *v)
{
    const uint8_t *a = irslot(k, ref), *b = irslot(k, ref + 1);
    if (!a || !b || ref + 1 >= REF_BIAS || a[5] != lay->ir_knum) return false;
    *v = lj_u64(b);
    return true;
}

struct ptset {
    uint64_t pt[TC_MAXPT], lo[TC_MAXPT], hi[TC_MAXPT]; /* bytecode (lo, hi] in pc terms */
    unsigned n;
};

static uint64_t pt_of(const struct ptset *ps, uint64_t pc)
{
    for (unsigned i = 0; i < ps->n; i++)
        if (pc > ps->lo[i] && pc <= ps->hi[i]) return ps->pt[i];
    return 0;
}

/* Add prototype pt; false when it cannot be read. */
static bool pt_add(struct ss_lj_runtime *rt, struct ss_mem *m, struct ptset *ps, uint64_t pt)
{
    for (unsigned i = 0; i < ps->n; i++)
        if (ps->pt[i] == pt) return true;
    if (ps->n == TC_MAXPT) return true;
    const struct lj_proto *p = ss_lj_proto(rt, m, pt, NULL);
    if (!p) return false;
    uint64_t bc = pt + rt->lay->pt_size;
    ps->pt[ps->n] = pt;
    ps->lo[ps->n] = bc;
    ps->hi[ps->n] = bc + (uint64_t)p->sizebc * 4;
    ps->n++;
    return true;
}

/* Candidate prototypes: the start prototype and every KGC closure/proto
 * (all alive as long as the trace is). False when a read failed. */
static bool candidates(struct ss_lj_runtime *rt, struct ss_mem *m, const struct trace *t,
                       const struct kbuf *k, struct ptset *ps)
{
    const struct lj_layout *lay = rt->lay;
    uint64_t fns[TC_MAXPT];
    unsigned nf = 0;
    bool ok = true;
    ps->n = 0;
    ok &= pt_add(rt, m, ps, lj_ref(lay, t->hdr + lay->T_startpt));
    for (uint32_t ref = k->nk; ref < REF_BIAS; ref++) {
        const uint8_t *ir = irslot(k, ref);
        if (ir[5] != lay->ir_kgc) continue;
        uint64_t gc =
            lay->gc64 ? (ref + 1 < REF_BIAS ? lj_u64(irslot(k, ref + 1)) : 0) : lj_u32(ir);
        unsigned irt = ir[4] & 0x1f;
        if (irt == LJ_GCT_PROTO)
            ok &= pt_add(rt, m, ps, gc);
        else if (irt == LJ_GCT_FUNC && nf < TC_MAXPT)
            fns[nf++] = gc;
        if (lay->gc64) ref++; /* 64-bit constants take two slots */
    }
    if (!nf || !ok) return ok;
    struct ss_iov iov[TC_MAXPT];
    uint8_t hb[TC_MAXPT][64];
    for (unsigned i = 0; i < nf; i++)
        iov[i] = (struct ss_iov){.addr = fns[i], .dst = hb[i], .len = lay->fn_size};
    rt->st.rounds++;
    if (ss_mem_readv(m, iov, (int)nf)) return false;
    for (unsigned i = 0; i < nf; i++) {
        if (iov[i].err) return false;
        if (hb[i][lay->gct] != LJ_GCT_FUNC || hb[i][lay->fn_ffid] != 0) continue;
        uint64_t pc = lj_ref(lay, hb[i] + lay->fn_pc);
        if (pc > lay->pt_size) ok &= pt_add(rt, m, ps, pc - lay->pt_size);
    }
    return ok;
}

/* Frames of one GC64 snapshot, outermost first; n = 0 when unusable. */
static unsigned frames_gc64(const struct lj_layout *lay, const struct kbuf *k,
                            const struct ptset *ps, const uint32_t *map, uint32_t nent,
                            uint32_t maplen, struct tframe *fr)
{
    if (maplen < nent + 2) return 0;
    uint64_t pcbase = map[nent] | (uint64_t)map[nent + 1] << 32;
    unsigned n = 1;
    memset(&fr[0], 0, sizeof(fr[0]));
    for (uint32_t i = 0; i < nent; i++) {
        uint32_t e = map[i], s = e >> 24;
        if (!(e & SNAP_FRAME) || s < 2) continue;
        uint64_t link;
        if (!knum(lay, k, e & 0xffff, &link)) return 0;
        uint64_t callerpc;
        if ((link & 3) == LJ_FRAME_LUA) {
            callerpc = link;
        } else if ((link & 7) == LJ_FRAME_VARG) {
            continue; /* the same function, moved above its varargs */
        } else if ((link & 7) == LJ_FRAME_CONT) {
            /* continuation pc: the SNAP_CONT slot two below the link */
            callerpc = 0;
            for (uint32_t j = 0; j < i; j++)
                if ((map[j] >> 24) == s - 2 && (map[j] & SNAP_CONT) &&
                    !knum(lay, k, map[j] & 0xffff, &callerpc))
                    return 0;
            if (!callerpc) return 0;
        } else {
            return 0;
        }
        if (n == TC_MAXFR) return 0;
        fr[n - 1].pc = callerpc;
        fr[n] = (struct tframe){.link = link};
        n++;
    }
    fr[n - 1].pc = (pcbase >> 8) + 4;
    /* the frame at the trace's base may be one no constant names (a side
     * trace's outermost frame): frames.c resolves it live, checking pc */
    for (unsigned i = 0; i < n; i++)
        if (!(fr[i].pt = pt_of(ps, fr[i].pc)) && i) return 0;
    return n;
}

/* Non-GC64: the map ends with the current pc and the frame links,
 * innermost first (SNAP_MKPC / SNAP_MKFTSZ words). */
static unsigned frames_gc32(const struct ptset *ps, const uint32_t *map, uint32_t nent,
                            uint32_t maplen, struct tframe *fr)
{
    struct tframe tmp[TC_MAXFR];
    if (maplen < nent + 1) return 0;
    unsigned n = 1;
    tmp[0] = (struct tframe){.pc = (uint64_t)map[nent] + 4};
    for (uint32_t i = nent + 1; i < maplen; i++) {
        uint32_t w = map[i];
        uint64_t callerpc;
        if ((w & 3) == LJ_FRAME_LUA) {
            callerpc = w;
        } else if ((w & 7) == LJ_FRAME_VARG) {
            continue;
        } else if ((w & 7) == LJ_FRAME_CONT && i + 1 < maplen) {
            callerpc = map[++i];
        } else {
            return 0;
        }
        if (n == TC_MAXFR) return 0;
        tmp[n - 1].link = w;
        tmp[n++] = (struct tframe){.pc = callerpc};
    }
    for (unsigned i = 0; i < n; i++) {
        fr[i] = tmp[n - 1 - i];
        if (!(fr[i].pt = pt_of(ps, fr[i].pc)) && i) return 0;
    }
    return n;
}

/* Is the frame's snapshot pc a return (RETM/RET/RET0/RET1, lj_bc.h; the
 * same numbers in every tree here)? The code after such a snapshot (taken
 * while recording the return, e.g. by the profiler's 'f' mode) is the
 * return and the caller's code: the caller is the frame that runs. */
static bool at_return(struct ss_lj_runtime *rt, struct ss_mem *m, const struct tframe *f)
{
    const struct lj_proto *p = ss_lj_proto(rt, m, f->pt, NULL);
    uint64_t bc = f->pt + rt->lay->pt_size;
    if (!p || f->pc < bc + 4 || f->pc > bc + (uint64_t)p->sizebc * 4) return false;
    unsigned op = p->blob[rt->lay->pt_size + (f->pc - 4 - bc)];
    return op >= BC_RETM && op <= BC_RET1;
}

/* Soundness (issue 32): each caller frame of a snapshot linked to the frame
 * above by a Lua link stands right after a call (its pc is that link). Returns how many inner
 * frames lie above the innermost caller that does not (to be dropped). */
uint32_t ss_lj_callers_at_calls(struct ss_lj_runtime *rt, struct ss_mem *m, const struct tframe *fr,
                                uint32_t n)
{
    for (uint32_t j = n > 1 ? n - 1 : 0; j-- > 0;) {
        const struct lj_proto *p = fr[j].pt ? ss_lj_proto(rt, m, fr[j].pt, NULL) : NULL;
        uint64_t bc = fr[j].pt + rt->lay->pt_size;
        if (!p || (fr[j + 1].link & 3) != LJ_FRAME_LUA)
            continue; /* unnamed base frame
(frames.c checks it live), or a metamethod's continuation */
        if (fr[j].pc < bc + 4 || fr[j].pc > bc + (uint64_t)p->sizebc * 4 ||
            !lj_bc_is_call(lj_u32(p->blob + rt->lay->pt_size + (fr[j].pc - 4 - bc))))
            return n - 1 - j;
    }
    return 0;
}

/* Traces compiled while LuaJIT's own profiler runs (-jp, jit.profile) check
 * for a pending profiler hook where the recorded code enters or leaves a
 * function (lj_record.c rec_profile_ins/ret, lj_asm_x86.h asm_prof: GC64
 * "test byte [DISPATCH+hookmask], HOOK_PROFILE; jnz exit", non-GC64 the
 * same on the absolute address of G->hookmask; lj_asm_arm64.h asm_prof:
 * "ldrb w30, [x22, #hookmask]; tst w30, #HOOK_PROFILE; b.ne exit"). Where
 * the loop optimisation dropped the snapshot that followed such a check (a
 * return), the code after the check belongs to the next snapshot's frames.
 * Marks, per snapshot, the first check inside its code. */
static bool prof_at(bool a64, bool gc64, const uint8_t *mc, uint32_t sz, uint32_t o)
{
    if (!a64) {
        /* test byte [r14+disp32], imm8 / test byte [disp32], imm8 */
        static const uint8_t pat64[3] = {0x41, 0xf6, 0x86}, pat32[3] = {0xf6, 0x04, 0x25};
        const uint8_t *pat = gc64 ? pat64 : pat32;
        return o + 14 <= sz && !memcmp(mc + o, pat, 3) && mc[o + 7] == 0x80 && mc[o + 8] == 0x0f &&
               mc[o + 9] == 0x85;
    }
    if ((o & 3) || o + 12 > sz) return false;
    uint32_t a = lj_u32(mc + o), b = lj_u32(mc + o + 4), c = lj_u32(mc + o + 8);
    return (a & 0xffc003ffu) == 0x394002deu && /* ldrb w30, [x22, #imm12] */
           (b & 0xff8003ffu) == 0x720003dfu && /* ands wzr, w30, #imm (tst) */
           (c & 0xff00001fu) == 0x54000001u;   /* b.ne */
}

static bool prof_checks(bool a64, bool gc64, const uint8_t *mc, uint32_t sz, struct tsnap *snaps,
                        uint32_t nsnap)
{
    bool any = false;
    for (uint32_t o = 0; o < sz; o++) {
        if (!prof_at(a64, gc64, mc, sz, o)) continue;
        uint32_t lo = 0, hi = nsnap; /* snapshot whose code holds o */
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (snaps[mid].mcofs <= o)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo && lo < nsnap && o > snaps[lo - 1].mcofs && !snaps[lo - 1].prof)
            snaps[lo - 1].prof = o;
        any = true;
    }
    return any;
}

/* A decoded trace is loaded; a good one takes over the decoded arrays
 * (the caller frees whatever is left in them). */
static void finish(struct ss_lj_runtime *rt, struct trace *t, bool bad, uint32_t **map,
                   struct tsnap **snaps, struct tframe **fr)
{
    rt->st.trace_loads++;
    t->loaded = true;
    t->bad = bad;
    if (bad) return;
    t->map = *map, t->snaps = *snaps, t->fr = *fr;
    *map = NULL, *snaps = NULL, *fr = NULL;
}

/* Read and decode snapshots, map and constants of t (header already read).
 * A trace that cannot be decoded is marked bad (known, no frames); when a
 * read fails it stays unloaded and is tried again on a later sample. */
void ss_lj_trace_load(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t)
{
    const struct lj_layout *lay = rt->lay;
    const uint8_t *h = t->hdr;
    uint32_t nsnapmap = lj_u32(h + lay->T_nsnapmap);
    uint32_t nk = lj_u32(h + lay->T_nk);
    uint64_t ir = lj_u64(h + lay->T_ir), snap = lj_u64(h + lay->T_snap);
    uint64_t snapmap = lj_u64(h + lay->T_snapmap);
    if (t->nsnap > TC_MAXSNAP || nsnapmap > TC_MAXMAP || nk > REF_BIAS || REF_BIAS - nk > TC_MAXK ||
        !ir || !snap || !snapmap) {
        t->loaded = t->bad = true;
        return;
    }
    size_t klen = (size_t)(REF_BIAS + 1 - nk) * 8;
    uint8_t *sb = malloc((size_t)t->nsnap * lay->snap_size);
    uint8_t *kb = malloc(klen);
    uint32_t *map = malloc((size_t)nsnapmap * 4 + 4);
    struct tsnap *snaps = calloc(t->nsnap, sizeof(*snaps));
    struct tframe *fr = malloc((size_t)t->nsnap * TC_MAXFR * sizeof(*fr));
    struct ptset *ps = malloc(sizeof(*ps));
    uint8_t *mc = malloc(t->szmcode);
    /* no mcofs: the instructions too, to place the snapshots (guards.c) */
    bool by_guards = !lay->snap_mcofs || (!lay->gc64 && rt->check_guards);
    /* and for the exact frames at calls (post_call) */
    bool xcalls = lay->gc64 && lay->snap_mcofs && lay->ir_callxs;
    uint32_t nins = lj_u32(h + lay->T_nins);
    uint8_t *ib = NULL;
    struct ss_lj_guard *g = NULL;
    uint32_t *refs = NULL, *starts = NULL;
    bool bad = true;
    if (!sb || !kb || !map || !snaps || !fr || !ps || !mc) goto fail;
    if (rt->arch->a64) { /* guards.c reads x86-64's guards only: arm64 traces need mcofs */
        if (!lay->snap_mcofs) goto done;
        by_guards = false;
    }
    if (xcalls && (nins <= REF_BIAS || nins - REF_BIAS > TC_MAXINS)) xcalls = false;
    if (xcalls && !(ib = malloc((size_t)(nins - REF_BIAS) * 8))) goto fail;
    if (by_guards) {
        if (nins <= REF_BIAS || nins - REF_BIAS > TC_MAXINS) goto done;
        if (!ib) ib = malloc((size_t)(nins - REF_BIAS) * 8);
        g = malloc(sizeof(*g) * TC_MAXGUARDS);
        refs = malloc(sizeof(*refs) * t->nsnap);
        starts = malloc(sizeof(*starts) * t->nsnap);
        if (!ib || !g || !refs || !starts) goto fail;
    }
    struct ss_iov iov[5] = {
        {.addr = snap, .dst = sb, .len = (size_t)t->nsnap * lay->snap_size},
        {.addr = snapmap, .dst = map, .len = (size_t)nsnapmap * 4},
        {.addr = ir + (uint64_t)nk * 8, .dst = kb, .len = klen},
        {.addr = t->mcode, .dst = mc, .len = t->szmcode},
        {.addr = ir + (uint64_t)REF_BIAS * 8, .dst = ib, .len = (size_t)(nins - REF_BIAS) * 8},
    };
    int niov = by_guards || xcalls ? 5 : 4;
    rt->st.rounds++;
    if (ss_mem_readv(m, iov, niov)) goto fail;
    for (int i = 0; i < niov; i++)
        if (iov[i].err) goto fail;
    if (by_guards) {
        rt->st.rounds += 2;
        int ng = ss_lj_guards(m, t->mcode, mc, t->szmcode, t->nsnap, g, TC_MAXGUARDS);
        if (ng < 0) goto fail;
        for (uint32_t i = 0; i < t->nsnap; i++)
            refs[i] = u16at(sb + (size_t)i * lay->snap_size + lay->snap_ref);
        ss_lj_guard_starts(lay, g, (uint32_t)ng, mc, t->szmcode, ib, nins,
                           lj_u32(h + lay->T_mcloop), refs, t->nsnap, starts);
        t->by_guards = true;
    }
    struct kbuf k = {.ir = kb, .nk = nk};
    const uint8_t *irb = irslot(&k, REF_BIAS);
    if (irb[5] != lay->ir_base) goto done; /* opcode table check */
    /* IR(REF_BASE)->r: the register BASE lives in for the whole trace; the
     * assembler resets it to RID_INIT when the trace modifies it (RETF) or
     * anything else writes it (lj_asm_x86.h asm_head_root_base). ->s: its
     * spill slot. */
    t->base_reg = rid_reg(rt->arch, irb[6]);
    t->base_spill = irb[7];
    if (!candidates(rt, m, t, &k, ps)) goto fail;
    uint32_t used = 0;
    for (uint32_t i = 0; i < t->nsnap; i++) {
        const uint8_t *sp = sb + (size_t)i * lay->snap_size;
        struct tsnap *ts = &snaps[i];
        ts->mapofs = lj_u32(sp);
        ts->mcofs =
            lay->snap_mcofs ? u16at(sp + lay->snap_mcofs) * rt->arch->mcode_unit : starts[i];
        if (by_guards) ts->gofs = starts[i];
        uint32_t nent = sp[lay->snap_nent];
        uint32_t end = i + 1 < t->nsnap ? lj_u32(sp + lay->snap_size) : nsnapmap;
        if (ts->mapofs > end || end > nsnapmap || (i && ts->mcofs < snaps[i - 1].mcofs)) goto done;
        ts->maplen = end - ts->mapofs;
        ts->first = used;
        const uint32_t *mp = map + ts->mapofs;
        ts->n = lay->gc64 ? frames_gc64(lay, &k, ps, mp, nent, ts->maplen, fr + used)
                          : frames_gc32(ps, mp, nent, ts->maplen, fr + used);
        /* (the returning frame stays stored after the n frames: the code
         * before this snapshot ran in it, trace_check.c compares it) */
        if (ts->n > 1 && at_return(rt, m, &fr[used + ts->n - 1])) ts->n--, ts->nret = 1;
        uint32_t all = ts->n + ts->nret;
        ts->ncut = ss_lj_callers_at_calls(rt, m, fr + used, ts->n);
        ts->n -= ts->ncut;
        used += all;
    }
    csh cs;
    if (xcalls && (rt->arch->a64 ? cs_open(CS_ARCH_ARM64, CS_MODE_ARM, &cs)
                                 : cs_open(CS_ARCH_X86, CS_MODE_64, &cs)) == CS_ERR_OK) {
        cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON); /* call operands (trace_fwd.c) */
        cs_insn *ci = cs_malloc(cs);
        for (uint32_t i = 0; ci && i + 1 < t->nsnap; i++)
            ss_lj_post_call(rt, m, kb, nk, ib, nins, sb, map, snaps, i, fr, cs, ci, mc);
        t->ncalls = ss_lj_trace_loop_calls(rt->arch->a64, lay, kb, nk, ib, nins, mc, t->mcode,
                                           t->szmcode, sb, snaps, t->nsnap, &t->calls);
        /* (after: adds to t->calls) */
        if (ci) ss_lj_fwd_calls(rt, m, t, kb, nk, ib, nins, sb, map, snaps, fr, cs, ci, mc);
        if (ci) cs_free(ci, 1);
        cs_close(&cs);
    }
    t->profiled = prof_checks(rt->arch->a64, lay->gc64, mc, t->szmcode, snaps, t->nsnap);
    bad = false;
done:
    finish(rt, t, bad, &map, &snaps, &fr);
fail:
    free(sb);
    free(kb);
    free(ps);
    free(mc);
    free(map);
    free(snaps);
    free(fr);
    free(ib);
    free(g);
    free(refs);
    free(starts);
}
