/* unwind/luajit/trace_irfacts.c: what a trace's IR proves about values
 * trace_fwd.c's forward replay reads: functions the trace guards (a base
 * frame's slot, env[k1][k2] of a known closure), mutable upvalues, and the
 * FFI call through one (issue 32: lua-resty-core keeps C functions in
 * upvalues assigned at run time, e.g. base64.lua's
 * ngx_lua_ffi_encode_base64, so the trace loads the callee's address at
 * run time).
 *
 * Upvalues and FFI calls (LuaJIT 2.1, lj_record.c rec_upvalue,
 * lj_opt_fold.c cse_uref, lj_opt_mem.c lj_opt_fwd_uload, lj_crecord.c
 * crec_call; checked in Debian 12's and 13's trees):
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
 *    CALLXS is never CSE'd, folded or dropped; its machine call, of a
 *    function not constant, is the one ss_lj_mcode_regcall finds
 *    (trace_mcalls.c: x86-64's and arm64's asm_callx). */
#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/trace_int.h"

const uint8_t *ss_lj_ir_ins(const struct ss_lj_irv *w, uint32_t ref)
{
    return ref >= REF_BIAS ? w->ib + (size_t)(ref - REF_BIAS) * 8
                           : w->kb + (size_t)(ref - w->nk) * 8;
}

uint64_t ss_lj_ir_kgc(const struct ss_lj_irv *w, uint32_t ref, unsigned irt)
{
    if (ref < w->nk || ref + 1 >= REF_BIAS) return 0;
    const uint8_t *q = ss_lj_ir_ins(w, ref);
    return q[5] == IR_KGC && (q[4] & 0x1f) == irt ? lj_u64(ss_lj_ir_ins(w, ref + 1)) : 0;
}

#define irq ss_lj_ir_ins
#define kgc ss_lj_ir_kgc

/* The function the trace guards base slot s to hold since the base last
 * moved: EQ(SLOAD #s, constant) before the call (one, never two), 0 none. */
uint64_t ss_lj_ir_slot_fn(const struct ss_lj_irv *w, uint32_t s)
{
    uint64_t got = 0;
    for (uint32_t r = w->lastretf + 1; r < w->c; r++) {
        const uint8_t *q = irq(w, r);
        uint32_t o1 = (uint32_t)(q[0] | q[1] << 8);
        if (q[5] != IR_EQ || (q[4] & 0x1f) != IRT_FUNC || o1 <= w->lastretf || o1 >= r ||
            irq(w, o1)[5] != IR_SLOAD || (uint32_t)(irq(w, o1)[0] | irq(w, o1)[1] << 8) != s)
            continue;
        uint64_t f = kgc(w, (uint32_t)(q[2] | q[3] << 8), IRT_FUNC);
        if (!f || (got && got != f)) return 0;
        got = f;
    }
    return got;
}

/* Does HLOAD ref load a value of type irt (not nil: no __index) with
 * constant key key (HREFK of the table's node, or HREF) from the env of
 * closure fn, or (fn 0) from any table, whose ref goes to *tab? */
static bool load_of(const struct ss_lj_irv *w, uint32_t ref, uint64_t key, unsigned irt,
                    uint64_t fn, uint32_t *tab)
{
    if (ref < REF_BIAS || ref >= w->c) return false;
    const uint8_t *h = irq(w, ref), *x;
    if (h[5] != IR_HLOAD || (h[4] & 0x1f) != irt) return false;
    uint32_t xr = (uint32_t)(h[0] | h[1] << 8), t;
    if (xr < REF_BIAS || xr >= ref) return false;
    x = irq(w, xr);
    uint32_t o1 = (uint32_t)(x[0] | x[1] << 8), o2 = (uint32_t)(x[2] | x[3] << 8);
    if (x[5] == IR_HREFK) {
        const uint8_t *ks = o2 >= w->nk && o2 < REF_BIAS ? irq(w, o2) : NULL;
        if (!ks || ks[5] != IR_KSLOT || kgc(w, (uint32_t)(ks[0] | ks[1] << 8), IRT_STR) != key)
            return false;
        if (o1 < REF_BIAS || o1 >= xr || irq(w, o1)[5] != IR_FLOAD) return false; /* the node */
        t = (uint32_t)(irq(w, o1)[0] | irq(w, o1)[1] << 8);
    } else if (x[5] == IR_HREF) {
        if (kgc(w, o2, IRT_STR) != key) return false;
        t = o1;
    } else {
        return false;
    }
    if (!fn) {
        *tab = t;
        return true;
    }
    const uint8_t *e = t >= REF_BIAS && t < ref ? irq(w, t) : NULL;
    return e && e[5] == IR_FLOAD && e[2] == IRFL_FUNC_ENV && e[3] == 0 &&
           kgc(w, (uint32_t)(e[0] | e[1] << 8), IRT_FUNC) == fn;
}

/* The function the range's IR guards env(fn)[k1][k2] to be, before the
 * call c (one, never two), 0 none. */
uint64_t ss_lj_ir_guarded(const struct ss_lj_irv *w, uint64_t fn, uint64_t k1, uint64_t k2)
{
    uint64_t got = 0;
    for (uint32_t r = w->r0; r < w->c; r++) {
        const uint8_t *q = irq(w, r);
        if (q[5] != IR_EQ || (q[4] & 0x1f) != IRT_FUNC) continue;
        uint32_t h2 = (uint32_t)(q[0] | q[1] << 8);
        uint64_t f = kgc(w, (uint32_t)(q[2] | q[3] << 8), IRT_FUNC);
        uint32_t t = 0;
        if (!f || h2 < REF_BIAS || h2 >= r || !load_of(w, h2, k2, IRT_FUNC, 0, &t) ||
            !load_of(w, t, k1, IRT_TAB, fn, &t))
            continue;
        if (got && got != f) return 0;
        got = f;
    }
    return got;
}

uint32_t ss_lj_uv_load(const struct ss_lj_irv *w, uint64_t fn, uint32_t uv)
{
    uint32_t got = 0, n = 0;
    for (uint32_t r = REF_BIAS; r < w->c; r++) {
        const uint8_t *q = irq(w, r);
        if (q[5] == IR_USTORE || q[5] == IR_UREFO) return 0;
        if (q[5] != IR_ULOAD) continue;
        uint32_t u = u16at(q);
        if (u < REF_BIAS || u >= r) return 0;
        const uint8_t *x = irq(w, u);
        uint32_t k = u16at(x);
        if (x[5] != IR_UREFC || (uint32_t)(u16at(x + 2) >> 8) != uv || k < w->nk ||
            k + 1 >= REF_BIAS)
            continue;
        if (kgc(w, k, IRT_FUNC) != fn) continue;
        got = r, n++;
    }
    return n == 1 ? got : 0;
}

bool ss_lj_callxs_through(const struct ss_lj_irv *w, uint32_t u)
{
    const uint8_t *ib = w->ib;
    uint32_t c = w->c;
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
