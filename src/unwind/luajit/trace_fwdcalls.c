/* unwind/luajit/trace_fwdcalls.c: which machine call out of a snapshot's
 * code is which IR call, and which recorded bytecode call made it, for the
 * IR-call helpers that no snapshot after them shows (issue 32); the frames
 * each was made in then come from the forward replay (trace_fwd.c). Owns
 * the helper table (lj_ircall.h names) and the per-range matching.
 *
 * What LuaJIT guarantees (lj_ffrecord.c, lj_ircall.h, lj_opt_fold.c,
 * lj_opt_dce.c, lj_asm.c; checked in Debian 12's and 13's trees):
 *  - the helpers here are CCI_T: their CALLLs are guards, so side effects
 *    (ir_sideeff): never DCE'd (dce_propagate) or skipped by the assembler,
 *    never CSE'd (LJFOLD(CALLL): emit or constant-fold into a BUFPUT), and
 *    each assembles to one direct call of lj_ir_callinfo[op2].func. No
 *    other IR calls them (asm_bufput/asm_tostr call lj_strfmt_putint,
 *    _putnum, _int, _num, _char, lj_buf_putstr: none of these). The
 *    machine code of a snapshot's IR range is that range's, in IR order.
 *    So when the range's mcode calls these functions in exactly the order
 *    (function by function) its IR holds CALLLs of them, the k-th call is
 *    the k-th CALLL's;
 *  - string.rep: lj_buf_putstr_rep, table.concat: lj_buf_puttab; the
 *    replay stops at the path's first call of that builtin, which made the
 *    range's first CALLL of it (trace_fwd.c);
 *  - string.format (recff_string_format/recff_format): one BUFHDR (RESET
 *    of the global tmpbuf, emitted unconditionally, never CSE'd:
 *    bufhdr_merge) and then per format spec a BUFPUT or one CALLL of
 *    lj_strfmt_putf{xint,num_int,num_uint,num,str,char} or _putquoted
 *    whose first argument is the chain so far (CARG(CARG(chain, sf), arg)),
 *    so each CALLL leads back through op1 to its own call's BUFHDR
 *    (bufput_bufstr may turn a later BUFHDR into an APPEND linked to an
 *    earlier chain: the first BUFHDR met is still the CALLL's own). A
 *    BUFHDR left with no put is NOP'd by DCE, so the range's BUFHDRs are
 *    counted only up to the CALLL's with no NOP before: the nth BUFHDR is
 *    then the nth buffer operation recorded from the range's start. The
 *    replay passes no bytecode that records one but string.format calls
 *    (trace_fwd.c), so the CALLL's is the path's nth string.format call;
 *  - an FFI call through a mutable upvalue: the range's one CALLXS and its
 *    one indirect call (trace_irfacts.c).
 * The loop's copy (after IR LOOP) keeps only some snapshots: left out. */
#include <stdlib.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/trace_int.h"
#include "unwind/luajit/vmsyms.h"

/* lj_ircall.h names: [0, NREP) string.rep's and table.concat's, the rest
 * string.format's */
static const char *const hname[SS_LJ_FWD_NH] = {
    "lj_buf_putstr_rep",     "lj_buf_puttab",          "lj_strfmt_putfxint",
    "lj_strfmt_putfnum_int", "lj_strfmt_putfnum_uint", "lj_strfmt_putfnum",
    "lj_strfmt_putfstr",     "lj_strfmt_putfchar",     "lj_strfmt_putquoted"};
enum { NREP = 2, NFMT = SS_LJ_FWD_NH - NREP, MAXC = 64 };
/* lj_ir.h IRDEF of the 2.1 trees with CALLXS = 99 */
enum {
    IR_NOP = 12,
    IR_KGC = 24,
    IR_BUFHDR = 85,
    IR_BUFPUT = 86,
    IR_CALLL = 97,
    IR_CALLXS = 99,
    IR_CARG = 100
};

void ss_lj_fwd_find(void *detcache, const struct ss_elf *e, struct ss_lj_fwd *out)
{
    ss_lj_ircall_fns(detcache, e, hname, SS_LJ_FWD_NH, out->id, out->fn);
}

void ss_lj_fwd_setup(struct ss_lj_runtime *rt, const struct ss_lj_fwd *f)
{
    for (unsigned h = 0; h < SS_LJ_FWD_NH; h++) {
        rt->fwd_id[h] = f->id[h];
        rt->fwd_fn[h] = f->fn[h] ? f->fn[h] + rt->bias : 0;
    }
}

static const uint8_t *ins(const struct ss_lj_fwdin *in, uint32_t r)
{
    return in->ib + (size_t)(r - REF_BIAS) * 8;
}

/* string.rep's or table.concat's (h) first CALLL of the range, when the
 * mcode calls the helper as often as the IR holds guarded CALLLs of it */
static void rep_tab(struct ss_lj_fwd_w *w, const struct ss_lj_fwdin *in, uint32_t i, uint32_t r0,
                    uint32_t r1, unsigned h, csh cs, cs_insn *ci, const uint8_t *mc)
{
    const struct ss_lj_runtime *rt = in->rt;
    uint32_t end[8], c = 0, nc = 0;
    uint8_t which[8];
    if (!rt->fwd_fn[h]) return;
    int ne = ss_lj_mcode_calls_to(cs, ci, mc, in->snaps[i].mcofs, in->snaps[i + 1].mcofs,
                                  in->t->mcode, &rt->fwd_fn[h], 1, end, which, 8);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *q = ins(in, r);
        if (q[5] != IR_CALLL || u16at(q + 2) != rt->fwd_id[h]) continue;
        if (!(q[4] & 0x80)) nc = 99; /* (IRT_GUARD: CCI_T) */
        if (!nc++) c = r;
    }
    if (ne > 0 && (uint32_t)ne == nc) ss_lj_fwd_replay(w, i, c, h, 0, end[0]);
}

/* The BUFHDR CALLL c's chain starts at, 0 none in [r0, c) */
static uint32_t chain_hdr(const struct ss_lj_fwdin *in, uint32_t r0, uint32_t c)
{
    uint32_t r = c;
    for (unsigned n = 0; n < 4096 && r >= r0 && r < in->nins; n++) {
        const uint8_t *q = ins(in, r);
        if (q[5] == IR_BUFHDR) return r;
        if (q[5] != IR_CARG && q[5] != IR_CALLL && q[5] != IR_BUFPUT) return 0;
        uint32_t p = u16at(q);
        if (p >= r) return 0;
        r = p;
    }
    return 0;
}

/* string.format's helper calls of the range, each at its nth call */
static void fmt(struct ss_lj_fwd_w *w, const struct ss_lj_fwdin *in, uint32_t i, uint32_t r0,
                uint32_t r1, csh cs, cs_insn *ci, const uint8_t *mc)
{
    const struct ss_lj_runtime *rt = in->rt;
    uint32_t end[MAXC], c[MAXC], nc = 0;
    uint8_t which[MAXC], hk[MAXC];
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *q = ins(in, r);
        if (q[5] != IR_CALLL) continue;
        unsigned k = 0;
        while (k < NFMT && (!rt->fwd_fn[NREP + k] || u16at(q + 2) != rt->fwd_id[NREP + k]))
            k++;
        if (k == NFMT) continue;
        if (!(q[4] & 0x80) || nc == MAXC) return; /* (IRT_GUARD: CCI_T) */
        c[nc] = r, hk[nc++] = (uint8_t)k;
    }
    if (!nc) return;
    int ne = ss_lj_mcode_calls_to(cs, ci, mc, in->snaps[i].mcofs, in->snaps[i + 1].mcofs,
                                  in->t->mcode, &rt->fwd_fn[NREP], NFMT, end, which, MAXC);
    if (ne < 0 || (uint32_t)ne != nc) return;
    for (uint32_t j = 0; j < nc; j++)
        if (which[j] != hk[j]) return;
    for (uint32_t j = 0; j < nc; j++) {
        uint32_t h = chain_hdr(in, r0, c[j]), nth = 0;
        for (uint32_t r = r0; h && r <= h; r++) {
            uint8_t o = ins(in, r)[5];
            nth += o == IR_BUFHDR;
            if (o == IR_NOP) h = 0;
        }
        if (h) ss_lj_fwd_replay(w, i, c[j], SS_FWD_FMT, nth, end[j]);
    }
}

void ss_lj_fwd_calls(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t, const uint8_t *kb,
                     uint32_t nk, const uint8_t *ib, uint32_t nins, const uint8_t *sb,
                     const uint32_t *map, const struct tsnap *snaps, const struct tframe *fr,
                     csh cs, cs_insn *ci, const uint8_t *mc)
{
    const struct lj_layout *lay = rt->lay;
    if (rt->arch->a64 || lay->ir_callxs != IR_CALLXS || lay->ir_kgc != IR_KGC || !lay->gc64 ||
        !lay->ff)
        return;
    struct ss_lj_fwdin in = {.rt = rt,
                             .m = m,
                             .t = t,
                             .kb = kb,
                             .ib = ib,
                             .sb = sb,
                             .nk = nk,
                             .nins = nins,
                             .loop = nins,
                             .map = map,
                             .snaps = snaps,
                             .fr = fr};
    for (uint32_t r = REF_BIAS; r < nins && in.loop == nins; r++)
        if (ins(&in, r)[5] == lay->ir_loop) in.loop = r;
    struct ss_lj_fwd_w *w = ss_lj_fwd_new(&in);
    if (!w) return;
    for (uint32_t i = 0; i + 1 < t->nsnap; i++) {
        const struct tsnap *s = &snaps[i];
        uint32_t r0 = u16at(sb + (size_t)i * lay->snap_size + lay->snap_ref);
        uint32_t r1 = u16at(sb + (size_t)(i + 1) * lay->snap_size + lay->snap_ref);
        if (r0 < REF_BIAS || r1 <= r0 || r1 > in.loop || !s->n || s->ncut || s->nret ||
            snaps[i + 1].mcofs <= s->mcofs)
            continue;
        for (unsigned h = 0; h < NREP; h++)
            rep_tab(w, &in, i, r0, r1, h, cs, ci, mc);
        fmt(w, &in, i, r0, r1, cs, ci, mc);
        /* the range's one CALLXS, its one indirect call (trace_irfacts.c) */
        uint32_t c = 0, nc = 0, end;
        for (uint32_t r = r0; r < r1; r++)
            if (ins(&in, r)[5] == IR_CALLXS && !nc++) c = r;
        if (nc == 1 &&
            (end = ss_lj_mcode_regcall(cs, ci, mc, s->mcofs, snaps[i + 1].mcofs, t->mcode)))
            ss_lj_fwd_replay(w, i, c, SS_FWD_XS, 0, end);
    }
    ss_lj_fwd_free(w);
}
