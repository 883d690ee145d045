/* unwind/luajit/trace_mcalls.c: the calls of one trace's machine code, and
 * what each backend's call emission proves about them (issue 32, issue 33:
 * the forward replay's calls, trace_fwdcalls.c, on x86-64 and on arm64).
 * Owns the decoders of both architectures into one list of calls (struct
 * ss_lj_mcalls), the arm64 constant tracking (also trace_calls.c's), and
 * the two questions asked of a snapshot's code: which calls go to given
 * helpers, and which one is the indirect FFI call.
 *
 * x86-64 (LuaJIT 2.1, lj_emit_x86.h emit_call, lj_asm_x86.h asm_callx;
 * checked in Debian 12's and 13's trees): the assembler's own calls are
 * `call rel32`, or `call rax` when far (target not shown); an FFI call is
 * `call rel32` to a near constant, else through a non-scratch register
 * (rbx, rbp, r12-r15), which nothing else calls through.
 *
 * arm64 (lj_emit_arm64.h emit_call, emit_loadk, emit_kdelta; lj_asm.c
 * ra_allock; lj_asm_arm64.h asm_callx, asm_gencall; checked in Debian 12's
 * tree and its arm64 luajit): every call is `bl imm26` within +-128 MiB
 * (the mcode area is placed near the VM: the usual case), else `blr xN`.
 * An assembler call (emit_call) makes xN (x8-x28) hold its target as a
 * constant (ra_allock: one already held, or emit_loadk: movz/movn+movk,
 * orr of a bitmask, or emit_kdelta's mov/add/sub from another constant's
 * register or GL); an FFI call to a constant is emit_call's too; one to a
 * computed function (asm_callx) is `blr xN` with xN (x8-x28) that IR
 * value. So a call's target is known when it is a `bl`, or a `blr` whose
 * register the straight-line scan below saw set to a constant (movz/mov
 * immediate, movk on a known value, mov or add/sub immediate of a known
 * register); any other write forgets it, and a call keeps only x19-x28.
 * That scan is the code's first execution (trace code runs straight from
 * its start: guards leave, the loop's back edge is last); a later
 * iteration's blr reads the same register, which emit_call keeps holding
 * its one target (LuaJIT's own correctness), and asm_callx's register holds
 * an IR value whose definition (a load, a move, a reload: never a constant)
 * precedes the call in the scan (SSA order; a loop-invariant one in the
 * pre-roll, kept in its register all through the loop), so the scan never
 * takes it for a constant. A `blr` of a register not known is thus either
 * an FFI call of a computed function or an assembler call whose constant
 * the scan did not follow (from GL, an IR constant's load): not told apart.
 */
#include <stdlib.h>

#include "unwind/luajit/trace_int.h"

static bool x64_ffireg(unsigned r)
{
    return r == X86_REG_RBX || r == X86_REG_RBP || r == X86_REG_R12 || r == X86_REG_R13 ||
           r == X86_REG_R14 || r == X86_REG_R15;
}

/* (trace_int.h) */
unsigned ss_lj_a64_xreg(unsigned r)
{
    if (r >= ARM64_REG_X0 && r <= ARM64_REG_X28) return r - ARM64_REG_X0;
    if (r >= ARM64_REG_W0 && r <= ARM64_REG_W28) return r - ARM64_REG_W0;
    return 32;
}

/* (trace_int.h) */
void ss_lj_a64_track(csh cs, const cs_insn *ci, struct ss_lj_a64k *st)
{
    const cs_arm64 *a = &ci->detail->arm64;
    const cs_arm64_op *o0 = a->op_count ? &a->operands[0] : NULL;
    const cs_arm64_op *o1 = a->op_count >= 2 ? &a->operands[1] : NULL;
    const cs_arm64_op *o2 = a->op_count == 3 ? &a->operands[2] : NULL;
    unsigned d =
        o0 && o0->type == ARM64_OP_REG && o0->reg >= ARM64_REG_X0 && o0->reg <= ARM64_REG_X28
            ? o0->reg - ARM64_REG_X0
            : 32;
    bool imm = d < 32 && a->op_count == 2 && o1->type == ARM64_OP_IMM;
    unsigned sh = o1 && o1->shift.type == ARM64_SFT_LSL ? o1->shift.value : 0;
    bool was = d < 32 && (st->known >> d & 1);
    /* the source of a register move or add/sub immediate, when known */
    unsigned s = d < 32 && o1 && o1->type == ARM64_OP_REG && o1->shift.type == ARM64_SFT_INVALID &&
                         ss_lj_a64_xreg(o1->reg) < 32 && o1->reg >= ARM64_REG_X0 &&
                         o1->reg <= ARM64_REG_X28
                     ? ss_lj_a64_xreg(o1->reg)
                     : 32;
    uint64_t sv = s < 32 && (st->known >> s & 1) ? st->val[s] : 0;
    bool sk = s < 32 && (st->known >> s & 1);
    cs_regs rr, rw;
    uint8_t nr = 0, nw = 0;
    if (cs_regs_access(cs, ci, rr, &nr, rw, &nw)) {
        st->known = 0;
        return;
    }
    for (uint8_t i = 0; i < nw; i++)
        if (ss_lj_a64_xreg(rw[i]) < 32) st->known &= ~(1u << ss_lj_a64_xreg(rw[i]));
    /* (capstone names a movz "mov" when it shows the value whole) */
    if (imm && sh < 64 && (ci->id == ARM64_INS_MOVZ || ci->id == ARM64_INS_MOV)) {
        st->val[d] = (uint64_t)o1->imm << sh;
        st->known |= 1u << d;
    } else if (imm && sh < 64 && ci->id == ARM64_INS_MOVK && was) {
        st->val[d] = (st->val[d] & ~(0xffffull << sh)) | ((uint64_t)o1->imm & 0xffff) << sh;
        st->known |= 1u << d;
    } else if (sk && a->op_count == 2 && ci->id == ARM64_INS_MOV) { /* emit_kdelta: mov */
        st->val[d] = sv;
        st->known |= 1u << d;
    } else if (sk && o2 && o2->type == ARM64_OP_IMM && o2->imm >= 0 &&
               (ci->id == ARM64_INS_ADD || ci->id == ARM64_INS_SUB)) { /* emit_kdelta */
        unsigned s2 = o2->shift.type == ARM64_SFT_LSL ? o2->shift.value : 0;
        if (o2->shift.type != ARM64_SFT_INVALID && o2->shift.type != ARM64_SFT_LSL) return;
        if (s2 > 12) return;
        uint64_t k = (uint64_t)o2->imm << s2;
        st->val[d] = ci->id == ARM64_INS_ADD ? sv + k : sv - k;
        st->known |= 1u << d;
    }
}

/* arm64: every bl/blr of the whole code, in order (above) */
static void scan_a64(csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t sz,
                     struct ss_lj_mcalls *l, uint32_t cap)
{
    struct ss_lj_a64k st = {0};
    const uint8_t *p = mc;
    size_t len = sz;
    uint64_t at = mcode;
    while (len && l->n < cap && cs_disasm_iter(cs, &p, &len, &at, ci)) {
        const cs_arm64_op *o0 = ci->detail->arm64.op_count ? &ci->detail->arm64.operands[0] : NULL;
        struct ss_lj_mcall c = {.at = (uint32_t)(ci->address - mcode),
                                .end = (uint32_t)(at - mcode),
                                .kind = SS_MC_EITHER};
        if (ci->id == ARM64_INS_BL && o0 && o0->type == ARM64_OP_IMM) {
            c.tgt = (uint64_t)o0->imm, c.kind = SS_MC_DIRECT;
        } else if (ci->id == ARM64_INS_BLR && o0 && o0->type == ARM64_OP_REG &&
                   ss_lj_a64_xreg(o0->reg) < 29 && (st.known >> ss_lj_a64_xreg(o0->reg) & 1)) {
            c.tgt = st.val[ss_lj_a64_xreg(o0->reg)], c.kind = SS_MC_DIRECT;
        } else if (ci->id != ARM64_INS_BLR && ci->id != ARM64_INS_BL) {
            ss_lj_a64_track(cs, ci, &st);
            continue;
        }
        l->c[l->n++] = c;
        st.known &= 0x1ff80000u; /* a call keeps x19..x28 only */
    }
    l->decoded = (uint32_t)(at - mcode);
}

/* x86-64: every call of the whole code, in order (above) */
static void scan_x64(csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t sz,
                     struct ss_lj_mcalls *l, uint32_t cap)
{
    const uint8_t *p = mc;
    size_t len = sz;
    uint64_t at = mcode;
    while (len && l->n < cap && cs_disasm_iter(cs, &p, &len, &at, ci)) {
        if (ci->id != X86_INS_CALL) continue;
        const cs_x86_op *op = &ci->detail->x86.operands[0];
        struct ss_lj_mcall c = {.at = (uint32_t)(ci->address - mcode),
                                .end = (uint32_t)(at - mcode),
                                .kind = SS_MC_UNKNOWN};
        if (ci->detail->x86.op_count == 1 && op->type == X86_OP_IMM)
            c.tgt = (uint64_t)op->imm, c.kind = SS_MC_DIRECT;
        else if (ci->detail->x86.op_count == 1 && op->type == X86_OP_REG && x64_ffireg(op->reg))
            c.kind = SS_MC_FFIREG;
        else if (ci->detail->x86.op_count == 1 && op->type == X86_OP_REG && op->reg == X86_REG_RAX)
            c.kind = SS_MC_FAR;
        l->c[l->n++] = c;
    }
    l->decoded = (uint32_t)(at - mcode);
}

/* (trace_int.h) */
int ss_lj_mcalls_scan(bool a64, csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t sz,
                      struct ss_lj_mcalls *l)
{
    uint32_t cap = sz / 4 + 1;
    *l = (struct ss_lj_mcalls){0};
    if (!(l->c = malloc(cap * sizeof(*l->c)))) return -1;
    if (a64)
        scan_a64(cs, ci, mc, mcode, sz, l, cap);
    else
        scan_x64(cs, ci, mc, mcode, sz, l, cap);
    return 0;
}

/* (trace_int.h) */
int ss_lj_mcode_calls_to(const struct ss_lj_mcalls *l, uint32_t lo, uint32_t hi, const uint64_t *fn,
                         unsigned nfn, uint32_t *end, uint8_t *which, unsigned cap)
{
    int n = 0;
    if (hi > l->decoded) return -1;
    for (uint32_t j = 0; j < l->n; j++) {
        const struct ss_lj_mcall *c = &l->c[j];
        if (c->at < lo || c->at >= hi) continue;
        if (c->kind == SS_MC_FFIREG) continue; /* an FFI call */
        if (c->kind != SS_MC_DIRECT) return -1;
        unsigned k = 0;
        while (k < nfn && (!fn[k] || c->tgt != fn[k]))
            k++;
        if (k == nfn) continue;
        if ((unsigned)n < cap) end[n] = c->end, which[n] = (uint8_t)k;
        n++;
    }
    return n;
}

/* (trace_int.h) */
uint32_t ss_lj_mcode_regcall(const struct ss_lj_mcalls *l, uint32_t lo, uint32_t hi)
{
    uint32_t end = 0, n = 0;
    if (hi > l->decoded) return 0;
    for (uint32_t j = 0; j < l->n; j++) {
        const struct ss_lj_mcall *c = &l->c[j];
        if (c->at < lo || c->at >= hi) continue;
        if (c->kind == SS_MC_UNKNOWN) return 0;
        if (c->kind == SS_MC_FFIREG || c->kind == SS_MC_EITHER) end = c->end, n++;
    }
    return n == 1 ? end : 0;
}
