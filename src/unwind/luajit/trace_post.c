/* unwind/luajit/trace_post.c: the exact frames at a side-effecting call
 * out of a trace (issue 32): the snapshot after the call proven the
 * call's own (post_call), directly or, where it is the comparison's that
 * follows the call, with the CALL's callee proven the FFI function the
 * IR calls. */
#include <stdlib.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/trace_int.h"

/* ---- exact frames at a side-effecting call (issue 32) ----
 *
 * The mcode is in IR order: snapshot i's code [mcofs_i, mcofs_i+1) is that
 * of IR [ref_i, ref_i+1) (lj_asm.c asm_snap_prev, asm_snap_fixup_mcofs).
 * An FFI call (CALLXS: crec_call) or another call with side effects
 * (CALLS: lj_ir_call) sets needsnap, so a snapshot S is taken at the start
 * of the next bytecode, in the frame that made the call and before
 * anything else is recorded: S's frames are the frames at the call. S can
 * later be replaced by a snapshot that merges it (lj_snap_add: no guard
 * since S), and that one may stand in other frames. post_call proves that
 * snapshot i+1 is S, or a merge whose frames are on the stack at the call:
 *  (a) the bytecode right before its pc is a CALL/CALLM (the call's);
 *  (b) all IR between the call and ref_i+1 is the result's conversion (a
 *      sunk CNEWI, a CONV of it): the bytecodes after the call emitted
 *      nothing, so a merge came from a trigger that emits nothing;
 *  (c) where that CALL has results, the snapshot's slot A of it holds the
 *      call's result or its conversion;
 *  (d) its pc is no branch target of its function and no comparison: it
 *      is not a comparison's snapshot (rec_comp_fixup moves that pc to the
 *      untaken target; rec_mm_comp_cdata keeps the comparison's).
 * The other snapshots taken with no IR before them (lj_record.c,
 * lj_crecord.c, lj_ffrecord.c: every lj_snap_add and needsnap) fail (a) or
 * (d) (loops, ITERN, a pcall's callee, ...) or stand in fewer frames that
 * were all there (a pcall's return, the loop's or a return-to-lower-frame
 * snapshot at the trace's base). A comparison's snapshot is left out
 * because it can stand in a frame called after the call with no IR (a
 * constant function) that compares a value handed through.
 * The call's machine code is the last call in snapshot i's code (what the
 * IR after it assembles to has none); xret is the offset just past it. */
static bool bc_at(const struct lj_proto *p, const struct lj_layout *lay, uint32_t i, uint32_t *ins)
{
    if (i >= p->sizebc) return false;
    *ins = lj_u32(p->blob + lay->pt_size + (size_t)i * 4);
    return true;
}

/* Is bytecode index x the target of a jump in p? (The J* loop variants
 * carry a trace number: their targets follow FORI or a JMP, never a CALL.) */
static uint32_t jumps_to(const struct lj_proto *p, const struct lj_layout *lay, uint32_t x,
                         uint32_t *from)
{
    uint32_t ins, n = 0;
    for (uint32_t i = 0; i < p->sizebc; i++) {
        bc_at(p, lay, i, &ins);
        unsigned op = ins & 0xff;
        bool jmp = op == BC_UCLO || op == BC_ISNEXT || op == BC_FORI || op == BC_JFORI ||
                   op == BC_FORL || op == BC_IFORL || op == BC_ITERL || op == BC_IITERL ||
                   op == BC_LOOP || op == BC_ILOOP || op == BC_JMP;
        if (jmp && (int64_t)i + 1 + (int64_t)(ins >> 16) - 0x8000 == (int64_t)x) n++, *from = i;
    }
    return n;
}

static bool jump_target(const struct lj_proto *p, const struct lj_layout *lay, uint32_t x)
{
    uint32_t from;
    return jumps_to(p, lay, x, &from) != 0;
}

/* The CALL before a comparison whose taken-path fall-through left the
 * snapshot at x, the JMP's target (rec_comp_fixup: the untaken target),
 * 0 none. Every arrival at x must come through that comparison right
 * after the CALL: x is the target of that JMP only and cannot be fallen
 * into (a JMP or return before it, itself no comparison's JMP), the JMP
 * and the comparison are no jump targets. */
static uint32_t call_before_jump(const struct lj_proto *p, const struct lj_layout *lay, uint32_t x)
{
    uint32_t j = 0, ins, cmp, call, prev, prev2 = 0xff;
    if (x < 2 || jumps_to(p, lay, x, &j) != 1 || j < 2 || !bc_at(p, lay, j, &ins) ||
        (ins & 0xff) != BC_JMP || !bc_at(p, lay, j - 1, &cmp) || (cmp & 0xff) > BC_ISNEP ||
        !bc_at(p, lay, j - 2, &call) || ((call & 0xff) != 65 && (call & 0xff) != 66) ||
        jump_target(p, lay, j) || jump_target(p, lay, j - 1) || !bc_at(p, lay, x - 1, &prev))
        return 0;
    if (x >= 2) bc_at(p, lay, x - 2, &prev2);
    unsigned po = prev & 0xff;
    bool closed = (po >= BC_RETM && po <= BC_RET1) || (po == BC_JMP && (prev2 & 0xff) > BC_ISF);
    return closed ? j - 2 : 0;
}

/* Is bytecode index x the target of a branch in p, or a comparison? */
static bool branch_target(const struct lj_proto *p, const struct lj_layout *lay, uint32_t x)
{
    uint32_t ins;
    return !bc_at(p, lay, x, &ins) || (ins & 0xff) <= BC_ISNEP || jump_target(p, lay, x);
}

/* End offset of the last call instruction in mcode [lo, hi), 0 none or the
 * bytes do not decode to exactly [lo, hi). */
static uint32_t last_call(bool a64, csh cs, cs_insn *ci, const uint8_t *mc, uint32_t lo,
                          uint32_t hi)
{
    const uint8_t *b = mc + lo;
    size_t len = hi - lo;
    uint64_t at = lo;
    uint32_t end = 0;
    while (len && cs_disasm_iter(cs, &b, &len, &at, ci))
        if (a64 ? ci->id == ARM64_INS_BL || ci->id == ARM64_INS_BLR : ci->id == X86_INS_CALL)
            end = (uint32_t)at;
    return len ? 0 : end;
}

/* ---- the callee of a CALL proven an FFI function ----
 *
 * Where the snapshot after the call is a comparison's (`C.f(...) == 0`,
 * `p == nil`: rec_comp_prep merges the call's snapshot, rec_comp_fixup
 * moves its pc to the untaken target), its frames are the call's when the
 * CALL right before the comparison called the C function itself: its pc
 * (the fall-through after the comparison's JMP, no jump target) arises only
 * from that comparison, reached only from that CALL's return (no jump
 * target either), and (b) leaves no other CALLXS between c and the
 * snapshot, so c is that CALL's. (A constant Lua function called there
 * could instead call the C function and hand the result back, with no IR:
 * a frame that was not on the stack at c.) Proven statically in the
 * calling prototype: in the straight line before the CALL (no jump
 * target, no branch), its function slot was last written by
 * `TGETS A B "name"`, and B by `UGET B uv`; the upvalue of the frame's
 * closure (a constant of the snapshot) is immutable (never assigned: its
 * value is the one it had then) and holds an FFI namespace (userdata of
 * type UDTYPE_FFI_CLIB, whose metatable Lua code cannot change), whose
 * symbol cache maps "name" to a cdata at the address c calls. */
enum { UD_PAYLOAD = 48, UDTYPE_FFI_CLIB = 2, CD_PAYLOAD = 16, NODE_SIZE = 24 };
enum { TAB_NODE = 40, TAB_HMASK = 52, GCT_CDATA = 10, GCT_TAB = 11, GCT_UDATA = 12 };
#define ITYPE_STR 0x1fffbull   /* ~LJ_TSTR, top 17 bits of a GC64 TValue */
#define ITYPE_CDATA 0x1fff5ull /* ~LJ_TCDATA */
#define ITYPE_UDATA 0x1fff3ull /* ~LJ_TUDATA */

/* Index of the instruction before `before` that last wrote slot, on the
 * straight line leading to it; -1 when not provable. */
static int64_t writer(const struct lj_proto *p, const struct lj_layout *lay, uint32_t before,
                      uint32_t slot)
{
    enum { MOV = 18, KNIL = 44, UGET = 45, USETP = 49, UCLO = 50, GSET = 55, TSETV = 60 };
    uint32_t ins;
    for (uint32_t j = before; j-- > 0 && before - j <= 256;) {
        if (jump_target(p, lay, j + 1) || !bc_at(p, lay, j, &ins)) return -1;
        unsigned op = ins & 0xff, a = (ins >> 8) & 0xff;
        if (op == 65 || op == 66) { /* CALLM, CALL: results from A on */
            if (slot >= a) return -1;
        } else if (op == KNIL) {
            if (slot >= a && slot <= ins >> 16) return -1;
        } else if ((op > UGET && op <= USETP) || op == GSET || (op >= TSETV && op <= 64)) {
            continue; /* stores: no slot written */
        } else if (op >= MOV && op <= 64 && op != UCLO) {
            if (a == slot) return j; /* writes A only */
        } else {
            return -1; /* a branch, loop, return, ... */
        }
    }
    return -1;
}

/* The closure of the innermost frame of snapshot a (index ai): the KGC
 * function constant in its function slot (baseslot - 2), 0 none. */
static uint64_t frame_fn(const struct lj_layout *lay, const uint8_t *kb, uint32_t nk,
                         const uint8_t *sb, const uint32_t *map, const struct tsnap *a, uint32_t ai)
{
    uint32_t nent = sb[(size_t)ai * lay->snap_size + lay->snap_nent];
    const uint32_t *mp = map + a->mapofs;
    if (a->maplen < nent + 2) return 0;
    uint32_t slot = mp[nent] & 0xff;
    for (uint32_t e = 0; e < nent; e++) {
        uint32_t ref = mp[e] & 0xffff;
        if ((mp[e] >> 24) != slot || (mp[e] & (SNAP_FRAME | SNAP_CONT)) || ref < nk ||
            ref + 1 >= REF_BIAS)
            continue;
        const uint8_t *k = kb + (size_t)(ref - nk) * 8;
        if (k[5] == lay->ir_kgc && (k[4] & 0x1f) == LJ_GCT_FUNC) return lj_u64(k + 8);
    }
    return 0;
}

/* The constant address CALLXS c calls (op2, or CARG(func, ...)), 0 none. */
static uint64_t call_target(const struct lj_layout *lay, const uint8_t *kb, uint32_t nk,
                            const uint8_t *ib, uint32_t nins, uint32_t c)
{
    uint32_t f = u16at(ib + (size_t)(c - REF_BIAS) * 8 + 2);
    if (f >= REF_BIAS && f < nins && ib[(size_t)(f - REF_BIAS) * 8 + 5] == lay->ir_callxs + 1)
        f = u16at(ib + (size_t)(f - REF_BIAS) * 8);
    return ss_lj_trace_kaddr(lay, kb, nk, f);
}

/* Did the CALL at xcall of prototype pt (p), run by closure fn, call the
 * FFI function at target? (above) */
static bool ffi_callee(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_proto *p,
                       uint64_t pt, uint64_t fn, uint32_t xcall, uint64_t target)
{
    enum { TGETS = 57, UGET = 45 };
    const struct lj_layout *lay = rt->lay;
    uint32_t ins, tg, ug;
    if (!fn || !target || !lay->gc64 || !bc_at(p, lay, xcall, &ins)) return false;
    int64_t j = writer(p, lay, xcall, (ins >> 8) & 0xff);
    if (j < 0 || !bc_at(p, lay, (uint32_t)j, &tg) || (tg & 0xff) != TGETS) return false;
    int64_t u = writer(p, lay, (uint32_t)j, tg >> 24);
    if (u < 0 || !bc_at(p, lay, (uint32_t)u, &ug) || (ug & 0xff) != UGET) return false;
    uint32_t uv = ug >> 16, kidx = (tg >> 16) & 0xff;
    /* the key: kgc[~kidx] below the prototype's k */
    uint64_t k = lj_u64(p->blob + lay->pt_k), at = k - (uint64_t)(kidx + 1) * 8;
    if (kidx >= p->sizekgc || at < pt + lay->pt_size || at + 8 > pt + p->sizept) return false;
    uint64_t key = ITYPE_STR << 47 | lj_u64(p->blob + (at - pt));
    /* the closure runs pt; its upvalue uv */
    uint8_t fb[64], uvb[64], ud[UD_PAYLOAD + 16], tb[64], cd[CD_PAYLOAD + 8];
    uint64_t uva = 0, tv = 0;
    if (lay->fn_size > sizeof(fb) || ss_mem_read(m, fn, fb, lay->fn_size) ||
        fb[lay->gct] != LJ_GCT_FUNC || fb[lay->fn_ffid] != 0 ||
        lj_u64(fb + lay->fn_pc) != pt + lay->pt_size || uv >= fb[lay->fn_ffid + 1] ||
        ss_mem_read(m, fn + lay->fn_uvptr + (uint64_t)uv * 8, &uva, 8))
        return false;
    if (lay->uv_v + 8 > sizeof(uvb) || ss_mem_read(m, uva, uvb, lay->uv_v + 8) ||
        uvb[lay->gct] != LJ_GCT_UPVAL || !uvb[lay->gct + 2] /* immutable */ ||
        ss_mem_read(m, lj_u64(uvb + lay->uv_v), &tv, 8) || tv >> 47 != ITYPE_UDATA)
        return false;
    if (ss_mem_read(m, tv & LJ_GCVMASK, ud, sizeof(ud)) || ud[lay->gct] != GCT_UDATA ||
        ud[lay->gct + 1] != UDTYPE_FFI_CLIB)
        return false;
    uint64_t cache = lj_u64(ud + UD_PAYLOAD + 8);
    if (ss_mem_read(m, cache, tb, TAB_HMASK + 4) || tb[lay->gct] != GCT_TAB) return false;
    uint32_t nn = lj_u32(tb + TAB_HMASK) + 1;
    if (!nn || nn > 1024) return false;
    uint8_t *nodes = malloc((size_t)nn * NODE_SIZE);
    if (!nodes || ss_mem_read(m, lj_u64(tb + TAB_NODE), nodes, (size_t)nn * NODE_SIZE)) {
        free(nodes);
        return false;
    }
    uint64_t val = 0;
    for (uint32_t n = 0; n < nn && !val; n++)
        if (lj_u64(nodes + (size_t)n * NODE_SIZE + 8) == key)
            val = lj_u64(nodes + (size_t)n * NODE_SIZE);
    free(nodes);
    return val >> 47 == ITYPE_CDATA && !ss_mem_read(m, val & LJ_GCVMASK, cd, sizeof(cd)) &&
           cd[lay->gct] == GCT_CDATA && lj_u64(cd + CD_PAYLOAD) == target;
}

void ss_lj_post_call(struct ss_lj_runtime *rt, struct ss_mem *m, const uint8_t *kb, uint32_t nk,
                     const uint8_t *ib, uint32_t nins, const uint8_t *sb, const uint32_t *map,
                     struct tsnap *snaps, uint32_t i, const struct tframe *fr, csh cs, cs_insn *ci,
                     const uint8_t *mc)
{
    enum { CALLM = 65, CALL = 66, RID_SUNK = 0xfd, RID_SINK = 0xfe };
    const struct lj_layout *lay = rt->lay;
    struct tsnap *b = &snaps[i], *a = &snaps[i + 1];
    uint32_t r0 = u16at(sb + (size_t)i * lay->snap_size + lay->snap_ref);
    uint32_t r1 = u16at(sb + (size_t)(i + 1) * lay->snap_size + lay->snap_ref);
    uint32_t all = a->n + a->nret;
    if (r0 < REF_BIAS || r1 <= r0 || r1 > nins || all < 1 || a->ncut || a->mcofs <= b->mcofs)
        return;
    uint32_t c = 0, okref[8], nok = 0;
    for (uint32_t r = r0; r < r1; r++) {
        uint8_t o = ib[(size_t)(r - REF_BIAS) * 8 + 5];
        if (o == lay->ir_callxs || o == lay->ir_calls) c = r;
    }
    if (!c) return;
    okref[nok++] = c;
    for (uint32_t r = c + 1; r < r1; r++) { /* (b) */
        const uint8_t *q = ib + (size_t)(r - REF_BIAS) * 8;
        uint32_t op1 = u16at(q), op2 = u16at(q + 2);
        bool conv = q[5] == lay->ir_conv && op1 == okref[nok - 1];
        /* sunk (marked SUNK by the assembler): no code */
        bool box = q[5] == lay->ir_cnewi && op2 == okref[nok - 1] &&
                   (q[6] == RID_SINK || q[6] == RID_SUNK);
        if ((!conv && !box) || nok == 8) return;
        okref[nok++] = r;
    }
    /* (a), (d): the innermost frame's pc (fr: snapshot pc + 4) */
    const struct tframe *f = &fr[a->first + all - 1];
    const struct lj_proto *p = f->pt ? ss_lj_proto(rt, m, f->pt, NULL) : NULL;
    uint64_t bc = f->pt + lay->pt_size;
    if (!p || f->pc < bc + 8 || (f->pc - bc) % 4) return;
    if (ss_lj_callers_at_calls(rt, m, fr + a->first, all)) return;
    uint32_t x = (uint32_t)((f->pc - 4 - bc) / 4), call, xcall = 0, ins;
    if (!bc_at(p, lay, x - 1, &call)) return;
    if (((call & 0xff) == CALL || (call & 0xff) == CALLM) && !jump_target(p, lay, x))
        xcall = x - 1; /* the snapshot stands right after the call */
    else if (x >= 3 && (call & 0xff) == BC_JMP && bc_at(p, lay, x - 2, &ins) &&
             (ins & 0xff) <= BC_ISNEP && !jump_target(p, lay, x) && !jump_target(p, lay, x - 2) &&
             bc_at(p, lay, x - 3, &call) && ((call & 0xff) == CALL || (call & 0xff) == CALLM))
        xcall = x - 3; /* a comparison's, fixed up to its untaken fall-through */
    else
        xcall = call_before_jump(p, lay, x); /* ... or to its untaken jump target */
    if (!xcall) return;
    bool ok = xcall == x - 1 && !branch_target(p, lay, x);
    if (ok && call >> 24 != 1) { /* (c): B - 1 results; slot baseslot + A (pcbase: baseslot - 2) */
        const uint8_t *ap = sb + (size_t)(i + 1) * lay->snap_size;
        uint32_t nent = ap[lay->snap_nent];
        const uint32_t *mp = map + a->mapofs;
        if (a->maplen < nent + 2) return;
        uint32_t slot = (mp[nent] & 0xff) + 2 + ((call >> 8) & 0xff);
        bool held = false;
        for (uint32_t e = 0; e < nent; e++)
            if ((mp[e] >> 24) == slot && !(mp[e] & (SNAP_FRAME | SNAP_CONT)))
                for (uint32_t k = 0; k < nok; k++)
                    held |= (mp[e] & 0xffff) == okref[k];
        ok = held;
    }
    /* else the callee must be proven the FFI function c calls (above) */
    if (!ok && (ib[(size_t)(c - REF_BIAS) * 8 + 5] != lay->ir_callxs ||
                !ffi_callee(rt, m, p, f->pt, frame_fn(lay, kb, nk, sb, map, a, i + 1), xcall,
                            call_target(lay, kb, nk, ib, nins, c))))
        return;
    b->xret = last_call(rt->arch->a64, cs, ci, mc, b->mcofs, a->mcofs);
    b->xpc = b->xret ? bc + (uint64_t)(xcall + 1) * 4 : 0;
    if (b->xret) rt->st.trace_xcalls++;
}
