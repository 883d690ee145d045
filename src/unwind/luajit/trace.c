/* unwind/luajit/trace.c: samples in JIT-compiled trace machine code.
 *
 * Where a trace runs: on the C stack frame of the VM entry that entered it.
 * x86-64 JLOOP/JFUNC save r12/r13 and lower rsp by trace_sp_bias (16), the
 * trace's head subtracts spadjust, so inside trace code
 *     VM frame CFA = rsp + trace_sp_bias + spadjust + vm_cfa_off
 * (vm_x64.dasc BC_JLOOP, lj_asm.c asm_head_root/asm_head_side). A C function
 * called from a trace has the trace's rsp as its CFA.
 *
 * Which trace: an index per runtime of the traces seen so far, sorted by
 * mcode address. A hit is re-validated on every sample in one batched read:
 * J->trace[traceno] must still be this GCtrace and its header (everything
 * but GC links and counters) and the chosen snapshot and its map slice must
 * be byte-identical to what was decoded, so a flushed trace, or a number or
 * mcode area reused by another trace, can never lend its frames. A miss asks
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
 *
 * Builds whose SnapShot has no mcofs (Tarantool 2.6) cannot tell which
 * snapshot an ip belongs to: such a trace gets one pseudo snapshot over all
 * its code with one frame, its start prototype at its start pc (the line a
 * sample shows), and no inlined frames. Only when that is certain to be the
 * frame at jit_base: traces that never move BASE below their start frame
 * (no IR_RETF) and whose start pc the function at jit_base runs (frames.c);
 * never a partial stack from them (the frame proves nothing without the
 * walk). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/lj_internal.h"

#define REF_BIAS 0x8000u
#define SNAP_FRAME 0x10000u
#define SNAP_CONT 0x20000u
#define TC_MAX 1024             /* traces indexed per runtime */
#define TC_MAXSNAP 8192         /* snapshots per trace */
#define TC_MAXMAP (1u << 20)    /* snapshot map entries per trace */
#define TC_MAXK 65536u          /* IR constant slots per trace */
#define TC_MAXFR LJ_TRACE_MAXFR /* Lua frames per snapshot */
#define TC_MAXPT 128            /* candidate prototypes per trace */
#define TC_MAXARR 65536u        /* J->trace entries read on a refresh */
#define TC_HDR 128
#define TC_REFRESH_NS 20000000ull /* sample time between two full refreshes */
#define IR_RETF 11       /* lj_ir.h IRDEF: ABC 10, RETF 11, NOP 12, BASE 13 (every tree here) */
#define TC_MAXINS 65536u /* IR instructions read for the RETF check (no-mcofs builds) */

/* x86 register numbers (RID_*) -> enum ss_reg */
static const uint8_t x86_to_ss[16] = {
    SS_REG_AX, SS_REG_CX, SS_REG_DX,  SS_REG_BX,  SS_REG_SP,  SS_REG_BP,  SS_REG_SI,  SS_REG_DI,
    SS_REG_R8, SS_REG_R9, SS_REG_R10, SS_REG_R11, SS_REG_R12, SS_REG_R13, SS_REG_R14, SS_REG_R15};

struct tframe {
    uint64_t pc;   /* current pc, next-instruction convention (as frames.c) */
    uint64_t link; /* this frame's link as the snapshot restores it */
    uint64_t pt;   /* prototype holding pc */
};

struct tsnap {
    uint32_t mcofs, mapofs, maplen; /* map slice [mapofs, mapofs + maplen) */
    uint32_t prof;                  /* mcode offset of a profiler check inside, 0 none */
    uint32_t first, n;              /* frames [first, first + n), outermost first */
};

struct trace {
    uint64_t G, T, mcode;
    uint32_t szmcode, traceno, spadjust;
    uint8_t base_reg;   /* ss_reg holding BASE all through the trace, 0xff none */
    uint8_t base_spill; /* IR(REF_BASE)->s: BASE's spill slot (4-byte units), 0 none */
    bool loaded, bad;
    bool nosnap; /* no SnapShot.mcofs: one pseudo snapshot, start frame only */
    uint8_t hdr[TC_HDR];
    uint32_t nsnap;
    struct tsnap *snaps;
    uint32_t *map; /* whole snapshot map as loaded */
    struct tframe *fr;
};

struct lj_tcache {
    struct trace *t; /* sorted by mcode */
    unsigned n;
    uint64_t refresh_ns; /* sample time of the last full refresh */
    uint64_t arr_G, arr; /* J->trace array address seen last, per G */
    uint32_t token;
    struct ss_lj_tsample cur;
};

static void trace_clear(struct trace *t)
{
    free(t->snaps);
    free(t->map);
    free(t->fr);
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

/* Header bytes that never change during a trace's life: type byte, nsnap,
 * nins; ir .. mcloop; spadjust, traceno; root (not the GC link, nchild,
 * link/nextroot/nextside or the GC mark). */
static bool same_hdr(const struct lj_layout *lay, const uint8_t *a, const uint8_t *b)
{
    return !memcmp(a + lay->gct, b + lay->gct, lay->T_nins + 4 - lay->gct) &&
           !memcmp(a + lay->T_ir, b + lay->T_ir, lay->T_mcode + 12 - lay->T_ir) &&
           !memcmp(a + lay->T_spadjust, b + lay->T_spadjust, 4) &&
           !memcmp(a + lay->T_root, b + lay->T_root, 2);
}

static uint16_t u16at(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
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
    for (unsigned i = 0; i < n; i++)
        if (!(fr[i].pt = pt_of(ps, fr[i].pc))) return 0;
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
        if (!(fr[i].pt = pt_of(ps, fr[i].pc))) return 0;
    }
    return n;
}

/* Is the frame's snapshot pc a return (RETM/RET/RET0/RET1, lj_bc.h; the
 * same numbers in every tree here)? The code after such a snapshot (taken
 * while recording the return, e.g. by the profiler's 'f' mode) is the
 * return and the caller's code: the caller is the frame that runs. */
static bool at_return(struct ss_lj_runtime *rt, struct ss_mem *m, const struct tframe *f)
{
    enum { BC_RETM = 73, BC_RET1 = 76 };
    const struct lj_proto *p = ss_lj_proto(rt, m, f->pt, NULL);
    uint64_t bc = f->pt + rt->lay->pt_size;
    if (!p || f->pc < bc + 4 || f->pc > bc + (uint64_t)p->sizebc * 4) return false;
    unsigned op = p->blob[rt->lay->pt_size + (f->pc - 4 - bc)];
    return op >= BC_RETM && op <= BC_RET1;
}

/* Traces compiled while LuaJIT's own profiler runs (-jp, jit.profile) check
 * for a pending profiler hook where the recorded code enters or leaves a
 * function (lj_record.c rec_profile_ins/ret, lj_asm_x86.h asm_prof: GC64
 * "test byte [DISPATCH+hookmask], HOOK_PROFILE; jnz exit"). Where the
 * loop optimisation dropped the snapshot that followed such a check (a
 * return), the code after the check belongs to the next snapshot's frames.
 * Marks, per snapshot, the first check inside its code. */
static void prof_checks(const uint8_t *mc, uint32_t sz, struct tsnap *snaps, uint32_t nsnap)
{
    static const uint8_t pat[3] = {0x41, 0xf6, 0x86}; /* test byte [r14+disp32], imm8 */
    for (uint32_t o = 0; o + 14 <= sz; o++) {
        if (memcmp(mc + o, pat, 3) || mc[o + 7] != 0x80 || mc[o + 8] != 0x0f || mc[o + 9] != 0x85)
            continue;
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
    }
}

/* No SnapShot.mcofs (see the top of the file): one pseudo snapshot over
 * the whole trace, its start frame only; bad when the trace moves BASE
 * below its start frame (IR_RETF) or its start pc is not in its start
 * prototype. */
static void load_nosnap(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t)
{
    const struct lj_layout *lay = rt->lay;
    const uint8_t *h = t->hdr;
    uint32_t nins = lj_u32(h + lay->T_nins);
    uint64_t ir = lj_u64(h + lay->T_ir);
    uint64_t startpt = lj_ref(lay, h + lay->T_startpt), startpc = lj_ref(lay, h + lay->T_startpc);
    bool bad = true;
    uint8_t *ib = NULL;
    struct tsnap *snaps = NULL;
    struct tframe *fr = NULL;
    uint32_t *map = NULL;
    struct ptset *ps = NULL;
    if (nins <= REF_BIAS || nins - REF_BIAS > TC_MAXINS || !ir || !startpt || !startpc) goto done;
    ib = malloc((size_t)(nins - REF_BIAS) * 8);
    snaps = calloc(1, sizeof(*snaps));
    fr = calloc(1, sizeof(*fr));
    map = calloc(1, 4);
    ps = malloc(sizeof(*ps));
    if (!ib || !snaps || !fr || !map || !ps) goto fail;
    rt->st.rounds++;
    if (ss_mem_read(m, ir + (uint64_t)REF_BIAS * 8, ib, (size_t)(nins - REF_BIAS) * 8)) goto fail;
    if (ib[5] != lay->ir_base) goto done; /* opcode table check */
    for (uint32_t i = 1; i < nins - REF_BIAS; i++)
        if (ib[(size_t)i * 8 + 5] == IR_RETF) goto done;
    t->base_reg = ib[6] < 16 && ib[6] != 4 ? x86_to_ss[ib[6]] : 0xff;
    t->base_spill = ib[7];
    ps->n = 0;
    if (!pt_add(rt, m, ps, startpt)) goto fail;
    fr[0] = (struct tframe){.pc = startpc + 4, .pt = startpt};
    if (ps->n != 1 || pt_of(ps, fr[0].pc) != startpt) goto done;
    snaps[0] = (struct tsnap){.n = 1};
    t->nsnap = 1;
    t->nosnap = true;
    bad = false;
done:
    rt->st.trace_loads++;
    t->loaded = true;
    t->bad = bad;
    if (!bad) {
        t->map = map, t->snaps = snaps, t->fr = fr;
        map = NULL, snaps = NULL, fr = NULL;
    }
fail:
    free(ib);
    free(ps);
    free(map);
    free(snaps);
    free(fr);
}

/* Read and decode snapshots, map and constants of t (header already read).
 * A trace that cannot be decoded is marked bad (known, no frames); when a
 * read fails it stays unloaded and is tried again on a later sample. */
static void load(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t)
{
    const struct lj_layout *lay = rt->lay;
    const uint8_t *h = t->hdr;
    uint32_t nsnapmap = lj_u32(h + lay->T_nsnapmap);
    uint32_t nk = lj_u32(h + lay->T_nk);
    uint64_t ir = lj_u64(h + lay->T_ir), snap = lj_u64(h + lay->T_snap);
    uint64_t snapmap = lj_u64(h + lay->T_snapmap);
    if (!lay->snap_mcofs) {
        load_nosnap(rt, m, t);
        return;
    }
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
    bool bad = true;
    if (!sb || !kb || !map || !snaps || !fr || !ps || !mc) goto fail;
    struct ss_iov iov[4] = {
        {.addr = snap, .dst = sb, .len = (size_t)t->nsnap * lay->snap_size},
        {.addr = snapmap, .dst = map, .len = (size_t)nsnapmap * 4},
        {.addr = ir + (uint64_t)nk * 8, .dst = kb, .len = klen},
        {.addr = t->mcode, .dst = mc, .len = t->szmcode},
    };
    rt->st.rounds++;
    if (ss_mem_readv(m, iov, 4) || iov[0].err || iov[1].err || iov[2].err || iov[3].err) goto fail;
    struct kbuf k = {.ir = kb, .nk = nk};
    const uint8_t *irb = irslot(&k, REF_BIAS);
    if (irb[5] != lay->ir_base) goto done; /* opcode table check */
    /* IR(REF_BASE)->r: the register BASE lives in for the whole trace; the
     * assembler resets it to RID_INIT when the trace modifies it (RETF) or
     * anything else writes it (lj_asm_x86.h asm_head_root_base). ->s: its
     * spill slot. */
    t->base_reg = irb[6] < 16 && irb[6] != 4 ? x86_to_ss[irb[6]] : 0xff;
    t->base_spill = irb[7];
    if (!candidates(rt, m, t, &k, ps)) goto fail;
    uint32_t used = 0;
    for (uint32_t i = 0; i < t->nsnap; i++) {
        const uint8_t *sp = sb + (size_t)i * lay->snap_size;
        struct tsnap *ts = &snaps[i];
        ts->mapofs = lj_u32(sp);
        ts->mcofs = u16at(sp + lay->snap_mcofs);
        uint32_t nent = sp[lay->snap_nent];
        uint32_t end = i + 1 < t->nsnap ? lj_u32(sp + lay->snap_size) : nsnapmap;
        if (ts->mapofs > end || end > nsnapmap || (i && ts->mcofs < snaps[i - 1].mcofs)) goto done;
        ts->maplen = end - ts->mapofs;
        ts->first = used;
        const uint32_t *mp = map + ts->mapofs;
        ts->n = lay->gc64 ? frames_gc64(lay, &k, ps, mp, nent, ts->maplen, fr + used)
                          : frames_gc32(ps, mp, nent, ts->maplen, fr + used);
        if (ts->n > 1 && at_return(rt, m, &fr[used + ts->n - 1])) ts->n--;
        used += ts->n;
    }
    if (lay->gc64) prof_checks(mc, t->szmcode, snaps, t->nsnap);
    bad = false;
done:
    rt->st.trace_loads++;
    t->loaded = true;
    t->bad = bad;
    if (!bad) {
        t->map = map, t->snaps = snaps, t->fr = fr;
        map = NULL, snaps = NULL, fr = NULL;
    }
fail:
    free(sb);
    free(kb);
    free(ps);
    free(mc);
    free(map);
    free(snaps);
    free(fr);
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
                same_hdr(lay, tc->t[at].hdr, nt.hdr))
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
    char why[160];
    return G > 4096 && !(G & 7) &&
           ss_lj_layout_verify(&rt->info, m, G, dispatch, &got, why, sizeof(why)) == 0 &&
           ss_lj_check_G(rt, m, G, dispatch);
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
    for (unsigned i = 0; r14 && rt->info.gc64 && i < ss_lj_nlayouts; i++) {
        const struct lj_layout *lay = &ss_lj_layouts[i];
        uint64_t G = r14 - (uint64_t)(int64_t)lay->g2disp;
        if (lay->gc64 && !lay->nojit && try_G(rt, m, G, r14)) return gs[0] = G, 1;
    }
    unsigned gct = rt->info.gc64 ? 9 : 5, glref = rt->info.gc64 ? 16 : 8;
    unsigned cfl = rt->info.gc64 ? 16 : 24, tries = 0; /* cframe SAVE_L (layout.c cf_L) */
    for (uint64_t c = rsp + 16; c < rsp + 16 + 4096 && tries < 4; c += 16) {
        uint64_t ret = 0, L = 0;
        const uint64_t cfa = c + rt->info.vm_cfa_off;
        if (ss_mem_read(m, cfa - 8, &ret, 8) || ss_mem_read(m, c + cfl, &L, 8)) break;
        if (!rt->info.gc64) L = (uint32_t)L;
        if (ret < 4096 || ret >= (1ull << 47) || ss_lj_in_vm(rt, ret) || L < 4096 || (L & 7) ||
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

/* Snapshot index for mcode offset ofs: largest mcofs <= ofs. */
static int snap_at(const struct trace *t, uint64_t ofs)
{
    uint32_t lo = 0, hi = t->nsnap;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->snaps[mid].mcofs <= ofs)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int)lo - 1;
}

/* Re-validate entry i for this sample and read the per-sample state (one
 * batched read): J->trace array pointer and slot, the trace header,
 * the snapshot and its map slice, G->jit_base and G->vmstate, and the
 * headers of the snapshot's prototypes. */
static int validate(struct ss_lj_runtime *rt, struct ss_mem *m, int idx, uint64_t look,
                    struct ss_lj_tsample *cur)
{
    const struct lj_layout *lay = rt->lay;
    struct lj_tcache *tc = rt->tc;
    struct trace *t = &tc->t[idx];
    if (!t->loaded) load(rt, m, t);
    if (!t->loaded) return -EIO;
    if (t->bad) return -ENOENT; /* kept: known, but no frames from it */
    int si = snap_at(t, look - t->mcode);
    if (si >= 0 && t->snaps[si].prof && look - t->mcode >= t->snaps[si].prof &&
        (uint32_t)si + 1 < t->nsnap)
        si++; /* past a profiler check: see prof_checks */
    if (si < 0 || !t->snaps[si].n) return -ENOENT;
    const struct tsnap *ts = &t->snaps[si];
    uint64_t G = t->G, jt = G + (uint64_t)(int64_t)lay->g2j + lay->J_trace;
    unsigned rs = lay->gc64 ? 8 : 4;
    if (tc->arr_G != G) tc->arr_G = G, tc->arr = 0;
    uint8_t hdr[TC_HDR], sn[16], slot[8] = {0}, arrp[8];
    uint64_t jit_base = 0;
    int32_t vmstate = 0;
    uint32_t *map = malloc((size_t)ts->maplen * 4 + 4);
    if (!map) return -ENOMEM;
    struct ss_iov iov[7 + TC_MAXFR];
    int nv = 0;
    iov[nv++] = (struct ss_iov){.addr = t->T, .dst = hdr, .len = lay->T_size};
    iov[nv++] = (struct ss_iov){.addr = jt, .dst = arrp, .len = 8};
    iov[nv++] = (struct ss_iov){.addr = G + lay->G_jit_base, .dst = &jit_base, .len = rs};
    iov[nv++] = (struct ss_iov){.addr = G + lay->G_vmstate, .dst = &vmstate, .len = 4};
    if (!t->nosnap) {
        iov[nv++] =
            (struct ss_iov){.addr = lj_u64(t->hdr + lay->T_snap) + (uint64_t)si * lay->snap_size,
                            .dst = sn,
                            .len = lay->snap_size};
        iov[nv++] =
            (struct ss_iov){.addr = lj_u64(t->hdr + lay->T_snapmap) + (uint64_t)ts->mapofs * 4,
                            .dst = map,
                            .len = (size_t)ts->maplen * 4};
    }
    if (tc->arr)
        iov[nv++] =
            (struct ss_iov){.addr = tc->arr + (uint64_t)t->traceno * rs, .dst = slot, .len = rs};
    uint8_t(*ph)[112] = malloc(sizeof(*ph) * ts->n);
    if (!ph) {
        free(map);
        return -ENOMEM;
    }
    for (uint32_t i = 1; i < ts->n; i++) /* inlined frames' prototypes */
        iov[nv++] =
            (struct ss_iov){.addr = t->fr[ts->first + i].pt, .dst = ph[i], .len = lay->pt_size};
    rt->st.rounds++;
    int rc = ss_mem_readv(m, iov, nv);
    for (int i = 0; i < nv && !rc; i++)
        if (iov[i].err) rc = -EIO;
    if (rc) goto out;
    rc = -ESTALE; /* from here on: read fine, but not the trace we decoded */
    uint64_t arr = lj_u64(arrp);
    if (arr != tc->arr) { /* first use or the array moved: read the slot */
        tc->arr = arr;
        rt->st.rounds++;
        if (ss_mem_read(m, arr + (uint64_t)t->traceno * rs, slot, rs)) {
            tc->arr = 0;
            rc = -EIO;
            goto out;
        }
    }
    if ((lay->gc64 ? lj_u64(slot) : lj_u32(slot)) != t->T || !same_hdr(lay, hdr, t->hdr)) goto out;
    if (!t->nosnap && (lj_u32(sn) != ts->mapofs || u16at(sn + lay->snap_mcofs) != ts->mcofs ||
                       memcmp(map, t->map + ts->mapofs, (size_t)ts->maplen * 4)))
        goto out;
    memset(cur, 0, sizeof(*cur));
    cur->G = G;
    cur->jit_base = lay->gc64 ? jit_base : (uint32_t)jit_base;
    cur->vmstate = vmstate;
    cur->spadjust = t->spadjust;
    cur->mcode = t->mcode;
    cur->base_reg = t->base_reg;
    cur->base_spill = t->base_spill;
    cur->traceno = t->traceno;
    cur->nosnap = t->nosnap;
    cur->nframes = ts->n;
    for (uint32_t i = 0; i < ts->n; i++) {
        const struct tframe *f = &t->fr[ts->first + i];
        cur->pc[i] = f->pc;
        cur->link[i] = f->link;
        cur->pt[i] = f->pt;
        cur->proto[i] = i ? ss_lj_proto(rt, m, f->pt, ph[i]) : NULL;
        if (i && !cur->proto[i]) {
            rc = -EIO;
            goto out;
        }
    }
    rc = 0;
out:
    free(ph);
    free(map);
    return rc;
}

int ss_lj_trace_lookup(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t look, uint64_t r14,
                       uint64_t rsp, uint64_t now_ns, struct ss_lj_tsample *cur)
{
    struct lj_tcache *tc;
    uint64_t gs[LJ_MAX_GS];
    if (rt->disabled || !(tc = tc_get(rt))) return -ENOENT;
    int idx = tc_find(tc, look), rc = -ENOENT;
    if (idx >= 0 && (rc = validate(rt, m, idx, look, cur)) == 0) goto found;
    if (idx >= 0 && rc != -ESTALE) return rc;   /* known trace, no frames (or no reads) */
    if (idx >= 0) tc_remove(tc, (unsigned)idx); /* flushed or replaced: look again */
    unsigned ng = gstates(rt, m, r14, rsp, gs);
    if (!rt->lay || rt->lay->nojit) return -ENOENT;
    for (unsigned g = 0; g < ng; g++) {
        idx = discover(rt, m, gs[g], look, now_ns);
        if (idx >= 0 && validate(rt, m, idx, look, cur) == 0) goto found;
    }
    return -ENOENT;
found:
    rt->st.trace_samples++;
    return 0;
}

/* ---- the VM frame under a trace, and its frames ---- */

/* A candidate CFA is plausible when the snapshot shows a return address
 * outside the VM below it and a pointer-shaped SAVE_L in its cframe; the
 * walk then checks SAVE_L->cframe == this cframe. */
static bool plausible(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t cfa)
{
    const struct lj_layout *lay = rt->lay;
    uint64_t ret = 0, L = 0;
    uint64_t cframe = cfa - rt->info.vm_cfa_off;
    if (ss_mem_read(m, cfa - 8, &ret, 8) || ss_mem_read(m, cframe + lay->cf_L, &L, 8)) return false;
    if (!lay->gc64) L = (uint32_t)L;
    return ret > 4096 && ret < (1ull << 47) && !ss_lj_in_vm(rt, ret) && L > 4096 && !(L & 7);
}

uint64_t ss_lj_trace_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *m,
                         uint64_t ip, bool exact, const uint64_t *regs, uint32_t known,
                         uint64_t time_ns, uint32_t *token)
{
    uint64_t look = exact ? ip : ip - 1, rsp = regs[SS_REG_SP];
    uint64_t r14 = (known >> SS_REG_R14 & 1) ? regs[SS_REG_R14] : 0;
    *token = 0;
    if (!(known >> SS_REG_SP & 1)) return 0;
    for (uint32_t i = 0; i < nrts; i++) {
        struct ss_lj_runtime *rt = rts[i];
        struct ss_lj_tsample cur;
        if (!rt || ss_lj_trace_lookup(rt, m, look, r14, rsp, time_ns, &cur)) continue;
        /* BASE as sampled: the register the trace keeps it in, its spill
         * slot, or (leaf only) RID_BASE = rdx, where it arrives and is
         * reloaded after calls. Each is a candidate the walk verifies; the
         * fallback is G->jit_base as read now. */
        uint64_t v = 0;
        if (cur.base_reg != 0xff && (known >> cur.base_reg & 1))
            cur.base = regs[cur.base_reg];
        else if (cur.base_spill && !ss_mem_read(m, rsp + 4u * cur.base_spill, &v, 8))
            cur.base = v;
        else if (exact && (known >> SS_REG_DX & 1))
            cur.base = regs[SS_REG_DX];
        uint64_t base = rsp + rt->lay->trace_sp_bias + rt->info.vm_cfa_off;
        /* the head's "sub rsp, spadjust" (the trace's first instruction)
         * and the tail's "add rsp, spadjust; jmp" run with rsp unadjusted */
        uint64_t c1 = base + cur.spadjust, c2 = base;
        if (exact && ip == cur.mcode) c1 = base, c2 = base + cur.spadjust;
        uint64_t cfa = plausible(rt, m, c1) ? c1 : plausible(rt, m, c2) ? c2 : 0;
        if (!cfa) continue;
        struct lj_tcache *tc = rt->tc;
        tc->cur = cur;
        if (++tc->token > 0x0fffffffu) tc->token = 1;
        *token = tc->token | (i + 1) << 28; /* runtime index in the top bits */
        return cfa;
    }
    return 0;
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
    /* BASE: the sampled register, else jit_base (0 once the trace exited) */
    uint64_t bases[2] = {cur->base, cur->jit_base != cur->base ? cur->jit_base : 0};
    int rc = -ESTALE;
    for (unsigned b = 0; b < 2 && rc; b++) {
        if (!bases[b]) continue;
        struct lj_start st = {.L = L,
                              .cframe = cframe,
                              .top = true,
                              .newest = true,
                              .base = bases[b],
                              .pc = cur->pc[0]};
        rc = ss_lj_walk_thread(rt, m, &st, w);
    }
    if (rc) return rc;
    /* the frame at jit_base must run the snapshot's outermost pc (frames.c
     * checked it against the function found there) */
    if (!w->n || w->f[0].ffid != 0 || w->f[0].pc != cur->pc[0]) {
        w->n = 0;
        return -ESTALE;
    }
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
