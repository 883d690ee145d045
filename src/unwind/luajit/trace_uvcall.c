/* unwind/luajit/trace_uvcall.c: what a trace's IR proves about a mutable
 * upvalue read in it and about an FFI call through one (issue 32:
 * lua-resty-core keeps C functions in upvalues assigned at run time, e.g.
 * base64.lua's ngx_lua_ffi_encode_base64, so the trace loads the callee's
 * address at run time). Used by trace_fwd.c's forward replay.
 *
 * What LuaJIT 2.1 guarantees (lj_record.c rec_upvalue, lj_opt_fold.c
 * cse_uref, lj_opt_mem.c lj_opt_fwd_uload, lj_crecord.c crec_call,
 * lj_asm_x86.h asm_callx; checked in Debian 12's and 13's trees):
 *  - a UGET of a closed upvalue in a frame whose closure the trace holds
 *    as a constant K records UREFC(K, uv) (folded into the one UREFC of
 *    that upvalue object: cse_uref), then ULOAD of it, which with no USTORE
 *    in the trace is the earlier ULOAD of that UREFC if there is one (CSE),
 *    else a new one; an open one records a UREFO (a guard: never dropped);
 *  - so where the IR before ref c holds no USTORE and no UREFO, and one
 *    ULOAD of UREFC(K, uv), every UGET uv in K's frames recorded before c
 *    gave that ULOAD, and its IR type is the type the value had there;
 *  - a call of a cdata function records CALLXS with the callee
 *    FLOAD(slot's ref, cdata.ptr) (p64; wrapped in CARG for varargs); a
 *    CALLXS is never CSE'd, folded or dropped;
 *  - asm_callx calls a callee that is not a near constant through a
 *    non-scratch register (call rbx/rbp/r12-r15); nothing else in x86-64
 *    trace code calls through those (emit_call's far calls use rax). */
#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/trace_int.h"

// clang-format off
enum { IR_KGC = 24, IR_UREFO = 60, IR_UREFC = 61, IR_ULOAD = 68, IR_FLOAD = 69, IR_USTORE = 76,
       IR_CALLXS = 99, IR_CARG = 100, IRT_FUNC = 8, IRT_P64 = 9, IRT_CDATA = 10 };
// clang-format on

static const uint8_t *ins(const uint8_t *kb, uint32_t nk, const uint8_t *ib, uint32_t ref)
{
    return ref >= REF_BIAS ? ib + (size_t)(ref - REF_BIAS) * 8 : kb + (size_t)(ref - nk) * 8;
}

uint32_t ss_lj_uv_load(const uint8_t *kb, uint32_t nk, const uint8_t *ib, uint32_t c, uint64_t fn,
                       uint32_t uv)
{
    uint32_t got = 0, n = 0;
    for (uint32_t r = REF_BIAS; r < c; r++) {
        const uint8_t *q = ins(kb, nk, ib, r);
        if (q[5] == IR_USTORE || q[5] == IR_UREFO) return 0;
        if (q[5] != IR_ULOAD) continue;
        uint32_t u = u16at(q);
        if (u < REF_BIAS || u >= r) return 0;
        const uint8_t *x = ins(kb, nk, ib, u);
        uint32_t k = u16at(x);
        if (x[5] != IR_UREFC || (uint32_t)(u16at(x + 2) >> 8) != uv || k < nk || k + 1 >= REF_BIAS)
            continue;
        const uint8_t *kq = ins(kb, nk, ib, k);
        if (kq[5] != IR_KGC || (kq[4] & 0x1f) != IRT_FUNC || lj_u64(ins(kb, nk, ib, k + 1)) != fn)
            continue;
        got = r, n++;
    }
    return n == 1 ? got : 0;
}

bool ss_lj_callxs_through(const uint8_t *ib, uint32_t c, uint32_t u)
{
    const uint8_t *q = ib + (size_t)(c - REF_BIAS) * 8;
    if (q[5] != IR_CALLXS || u < REF_BIAS || u >= c ||
        (ib[(size_t)(u - REF_BIAS) * 8 + 4] & 0x1f) != IRT_CDATA)
        return false;
    uint32_t f = u16at(q + 2);
    if (f < REF_BIAS || f >= c) return false;
    if (ib[(size_t)(f - REF_BIAS) * 8 + 5] == IR_CARG) f = u16at(ib + (size_t)(f - REF_BIAS) * 8);
    if (f < REF_BIAS || f >= c) return false;
    const uint8_t *x = ib + (size_t)(f - REF_BIAS) * 8;
    return x[5] == IR_FLOAD && (x[4] & 0x1f) == IRT_P64 && u16at(x) == u;
}

uint32_t ss_lj_mcode_regcall(csh cs, cs_insn *ci, const uint8_t *mc, uint32_t lo, uint32_t hi,
                             uint64_t mcode)
{
    const uint8_t *p = mc + lo;
    size_t len = hi - lo;
    uint64_t at = mcode + lo;
    uint32_t end = 0, n = 0;
    while (len && cs_disasm_iter(cs, &p, &len, &at, ci)) {
        if (ci->id != X86_INS_CALL) continue;
        const cs_x86_op *op = &ci->detail->x86.operands[0];
        if (ci->detail->x86.op_count != 1) return 0;
        if (op->type != X86_OP_REG) continue;
        unsigned r = op->reg;
        if (r == X86_REG_RBX || r == X86_REG_RBP || r == X86_REG_R12 || r == X86_REG_R13 ||
            r == X86_REG_R14 || r == X86_REG_R15)
            end = (uint32_t)(at - mcode), n++;
    }
    return len || n != 1 ? 0 : end;
}
