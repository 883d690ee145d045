/* unwind/luajit/trace_calls.c: a loop's copy of a call out of a trace
 * (issue 32). A root trace that loops holds its recorded iteration twice:
 * the pre-roll, with a snapshot wherever the recording took one, and the
 * loop's copy after IR LOOP, made by lj_opt_loop.c loop_unroll, which
 * re-emits every recorded instruction in order and keeps a copied snapshot
 * only where a guard needs one. Both run the same bytecode path, so a call
 * in the copy is made in the same frames as its pre-roll original; the
 * snapshots around the copy (often the loop's own and one after the whole
 * body) do not show them.
 *
 * Which call is which: FFI calls (IR CALLXS) go to lj_ir_emit, never folded
 * or CSE'd (lj_opt_fold.c), and the assembler never drops them (side
 * effects), so the k-th CALLXS after LOOP is the copy of the k-th before it;
 * the two must call the same function (op2: one constant, or neither). In
 * the machine code each snapshot's code is that of its IR range, in IR order
 * (lj_asm.c asm_snap_prev/asm_snap_fixup_mcofs). In x86-64 mcode a CALLXS is
 * a direct `call rel32` to its constant target when it is in +-2 GB, else
 * `call REG` with REG callee-saved (lj_asm_x86.h asm_callx: "non-scratch
 * register for indirect calls"); the assembler's own calls (emit_call) are
 * direct, or `call rax` when far. So the FFI calls of a snapshot's code are
 * its `call REG` (REG not rax) and its direct calls to one of the trace's
 * CALLXS targets; when their number is that of the range's CALLXS they
 * match in order (each direct one checked against its IR target).
 *
 * The result: for each copy's call whose original is matched too, the
 * offset just past it and the offset just past the original. A sample in
 * the callee (return address the copy's) is taken as one at the original's
 * (trace_check.c), whose frames are exact where the snapshot after it is
 * its own (trace_load.c post_call), else the proven ones as everywhere. */
#include <capstone/capstone.h>
#include <stdlib.h>

#include "unwind/luajit/trace_int.h"

struct xcall {
    uint32_t ref;    /* IR ref */
    uint16_t fn;     /* op2: the function, a constant ref (< REF_BIAS) or an IR one */
    uint64_t target; /* its constant address, 0 not constant */
    uint32_t end;    /* mcode offset just past its call, 0 not matched */
};

/* 64-bit KINT64 (value in the next slot on GC64) or 32-bit KINT constant. */
uint64_t ss_lj_trace_kaddr(const struct lj_layout *lay, const uint8_t *kb, uint32_t nk,
                           uint32_t ref)
{
    if (ref < nk || ref >= REF_BIAS) return 0;
    const uint8_t *k = kb + (size_t)(ref - nk) * 8;
    if (k[5] == lay->ir_knum + 1 && lay->gc64 && ref + 1 < REF_BIAS) return lj_u64(k + 8);
    if (k[5] == lay->ir_kgc - 1) return lj_u32(k); /* IRIns.i overlaps op1/op2 */
    return 0;
}

/* The scan of one trace's calls (arm64's: the constants it follows, below). */
struct cscan {
    uint32_t pos;        /* mcode offset scanned up to */
    struct ss_lj_a64k k; /* the registers' known constants (trace_mcalls.c) */
    bool bad;            /* undecodable code: no more matches */
};

static bool ffi_reg(unsigned r)
{
    return r == X86_REG_RBX || r == X86_REG_RBP || r == X86_REG_R12 || r == X86_REG_R13 ||
           r == X86_REG_R14 || r == X86_REG_R15;
}

/* The calls of x86-64 mcode [lo, hi) that are FFI calls: end offsets and
 * targets (0: a register's) in order; -1 on code LuaJIT's x86-64 backend
 * does not emit there. */
static int ffi_calls_x64(csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t lo,
                         uint32_t hi, const struct xcall *all, uint32_t nall, uint32_t *end,
                         uint64_t *tgt, struct cscan *st)
{
    const uint8_t *p = mc + lo;
    size_t len = hi - lo;
    uint64_t at = mcode + lo;
    int n = 0;
    (void)st;
    while (len && cs_disasm_iter(cs, &p, &len, &at, ci)) {
        if (ci->id != X86_INS_CALL) continue;
        const cs_x86_op *op = &ci->detail->x86.operands[0];
        uint64_t t = 0;
        if (ci->detail->x86.op_count != 1) return -1;
        if (op->type == X86_OP_REG && ffi_reg(op->reg)) {
            t = 0;
        } else if (op->type == X86_OP_IMM) {
            bool ffi = false;
            for (uint32_t i = 0; i < nall && !ffi; i++)
                ffi = all[i].target == (uint64_t)op->imm;
            if (!ffi) continue; /* the assembler's own call */
            t = (uint64_t)op->imm;
        } else if (op->type == X86_OP_REG && op->reg == X86_REG_RAX) {
            continue; /* emit_call's far form */
        } else {
            return -1; /* not a call LuaJIT's x86-64 backend emits */
        }
        if (n == 64) return -1;
        tgt[n] = t;
        end[n++] = (uint32_t)(at - mcode);
    }
    return len ? -1 : n;
}
/* arm64: a call's target as trace_mcalls.c follows it (there: why it is
 * the call's on every iteration). A call is an FFI call when its target is
 * one of the trace's CALLXS targets, the assembler's own when it is
 * another constant; a `blr` whose register holds no known constant fails
 * the range (-1). The constants are followed through the whole code in
 * order (st: the scan so far; ranges come in mcode order). */
static int ffi_calls_a64(csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t lo,
                         uint32_t hi, const struct xcall *all, uint32_t nall, uint32_t *end,
                         uint64_t *tgt, struct cscan *st)
{
    if (st->bad || st->pos > lo) return -1;
    const uint8_t *p = mc + st->pos;
    size_t len = hi - st->pos;
    uint64_t at = mcode + st->pos;
    int n = 0, rc = 0;
    while (len && cs_disasm_iter(cs, &p, &len, &at, ci)) {
        const cs_arm64_op *o0 = ci->detail->arm64.op_count ? &ci->detail->arm64.operands[0] : NULL;
        bool mine = ci->address >= mcode + lo; /* (before lo: constants only) */
        uint64_t t = 0;
        if (ci->id == ARM64_INS_BL && o0 && o0->type == ARM64_OP_IMM) {
            t = (uint64_t)o0->imm;
        } else if (ci->id == ARM64_INS_BLR && o0 && o0->type == ARM64_OP_REG &&
                   ss_lj_a64_xreg(o0->reg) < 29 && (st->k.known >> ss_lj_a64_xreg(o0->reg) & 1)) {
            t = st->k.val[ss_lj_a64_xreg(o0->reg)];
        } else if (ci->id == ARM64_INS_BLR || ci->id == ARM64_INS_BL) {
            rc = mine ? -1 : rc; /* a call whose target is not known */
        } else {
            ss_lj_a64_track(cs, ci, &st->k);
            continue;
        }
        bool ffi = false;
        for (uint32_t i = 0; t && i < nall && !ffi; i++)
            ffi = all[i].target == t;
        if (ffi && mine && n < 64) {
            tgt[n] = t;
            end[n++] = (uint32_t)(at - mcode);
        } else if (ffi && mine) {
            rc = -1;
        }
        st->k.known &= 0x1ff80000u; /* a call keeps x19..x28 only */
    }
    st->pos = (uint32_t)(at - mcode);
    if (len) st->bad = true;
    return len || rc ? -1 : n;
}

/* Match the CALLXS of IR [r0, r1) (xs[a, b)) to the calls in mcode [lo, hi). */
static void match_range(bool a64, csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode,
                        uint32_t lo, uint32_t hi, struct xcall *xs, uint32_t a, uint32_t b,
                        const struct xcall *all, uint32_t nall, struct cscan *st)
{
    uint32_t end[64];
    uint64_t tgt[64];
    if (a == b || b - a > 64) return;
    int n = a64 ? ffi_calls_a64(cs, ci, mc, mcode, lo, hi, all, nall, end, tgt, st)
                : ffi_calls_x64(cs, ci, mc, mcode, lo, hi, all, nall, end, tgt, st);
    if (n < 0 || (uint32_t)n != b - a) return;
    for (int i = 0; i < n; i++)
        if (tgt[i] && tgt[i] != xs[a + i].target) return;
    for (int i = 0; i < n; i++)
        xs[a + i].end = end[i];
}

uint32_t ss_lj_trace_loop_calls(bool a64, const struct lj_layout *lay, const uint8_t *kb,
                                uint32_t nk, const uint8_t *ib, uint32_t nins, const uint8_t *mc,
                                uint64_t mcode, uint32_t szmcode, const uint8_t *sb,
                                const struct tsnap *snaps, uint32_t nsnap, struct tcall **out)
{
    *out = NULL;
    if (!lay->ir_callxs || nins <= REF_BIAS || !nsnap) return 0;
    uint32_t loop = 0, nx = 0, npre = 0;
    for (uint32_t r = REF_BIAS; r < nins; r++) {
        const uint8_t *q = ib + (size_t)(r - REF_BIAS) * 8;
        if (q[5] == lay->ir_loop && !loop) loop = r;
        if (q[5] == lay->ir_callxs) nx++, npre += !loop;
    }
    if (!loop || !npre || nx != 2 * npre || npre > 4096) return 0;
    struct xcall *xs = calloc(nx, sizeof(*xs));
    struct tcall *tc = calloc(npre, sizeof(*tc));
    uint32_t nt = 0;
    csh cs;
    if (!xs || !tc ||
        (a64 ? cs_open(CS_ARCH_ARM64, CS_MODE_ARM, &cs) : cs_open(CS_ARCH_X86, CS_MODE_64, &cs)) !=
            CS_ERR_OK)
        goto out;
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *ci = cs_malloc(cs);
    struct cscan st = {0};
    uint32_t n = 0;
    for (uint32_t r = REF_BIAS; r < nins; r++) {
        const uint8_t *q = ib + (size_t)(r - REF_BIAS) * 8;
        if (q[5] != lay->ir_callxs) continue;
        uint32_t f = u16at(q + 2);
        /* varargs: CARG(func, ...) */
        if (f >= REF_BIAS && f < nins && ib[(size_t)(f - REF_BIAS) * 8 + 5] == lay->ir_callxs + 1)
            f = u16at(ib + (size_t)(f - REF_BIAS) * 8);
        xs[n++] = (struct xcall){
            .ref = r, .fn = (uint16_t)f, .target = ss_lj_trace_kaddr(lay, kb, nk, f)};
    }
    for (uint32_t k = 0; k < npre; k++) { /* the copy calls what its original called */
        const struct xcall *p = &xs[k], *c = &xs[npre + k];
        if ((p->fn < REF_BIAS || c->fn < REF_BIAS) && p->fn != c->fn) goto done;
    }
    /* each snapshot's IR range and code */
    for (uint32_t i = 0, a = 0; ci && i < nsnap; i++) {
        uint32_t r0 = u16at(sb + (size_t)i * lay->snap_size + lay->snap_ref);
        uint32_t r1 =
            i + 1 < nsnap ? u16at(sb + (size_t)(i + 1) * lay->snap_size + lay->snap_ref) : nins;
        uint32_t lo = snaps[i].mcofs, hi = i + 1 < nsnap ? snaps[i + 1].mcofs : szmcode;
        while (a < nx && xs[a].ref < r0)
            a++;
        uint32_t b = a;
        while (b < nx && xs[b].ref < r1)
            b++;
        if (lo < hi && hi <= szmcode)
            match_range(a64, cs, ci, mc, mcode, lo, hi, xs, a, b, xs, nx, &st);
        a = b;
    }
    for (uint32_t k = 0; k < npre; k++)
        if (xs[k].end && xs[npre + k].end)
            tc[nt++] = (struct tcall){.end = xs[npre + k].end, .alias = xs[k].end};
done:
    if (ci) cs_free(ci, 1);
    cs_close(&cs);
out:
    free(xs);
    if (!nt) {
        free(tc);
        return 0;
    }
    *out = tc; /* in mcode order: the copy's calls are */
    return nt;
}
