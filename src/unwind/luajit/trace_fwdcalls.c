/* unwind/luajit/trace_fwdcalls.c: which machine call out of a snapshot's
 * code is which IR call, and which recorded bytecode call made it, for the
 * IR-call helpers that no snapshot after them shows (issue 32); the frames
 * each was made in then come from the forward replay (trace_fwd.c). Owns
 * the helper table (lj_ircall.h names), the per-range matching and the
 * loop copy's string.format helper calls.
 *
 * What LuaJIT guarantees (lj_ffrecord.c, lj_ircall.h, lj_ir.h, lj_opt_fold.c,
 * lj_opt_dce.c, lj_opt_loop.c, lj_trace.c, lj_asm.c; checked in Debian 12's
 * and 13's trees):
 *  - the helpers here are CCI_T: their CALLLs carry a weak guard (CALLL is
 *    LW), never CSE'd (LJFOLD(CALLL): emit, or constant-fold into a
 *    BUFPUT); one the assembler keeps is one direct call of
 *    lj_ir_callinfo[op2].func, but a weak guard is no side effect
 *    (ir_sideeff), so one whose result nothing uses is left out (seen: the
 *    second of two equal %q formats, its BUFSTR CSE'd). No other IR calls
 *    them (asm_bufput/asm_tostr call lj_strfmt_putint, _putnum, _int, _num,
 *    _char, lj_buf_putstr: none of these). The machine code of a snapshot's
 *    IR range is that range's, in IR order. So the range's calls of them
 *    are its CALLLs' calls, in order, some perhaps left out: when they are
 *    exactly as many, helper by helper in the same order, the k-th call is
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
 *    earlier chain: the first BUFHDR met is still the CALLL's own). Only
 *    DCE removes a BUFHDR (a chain whose result is unused: lj_ir_nop), and
 *    it runs only when a trace ends looping to itself (lj_trace.c), so the
 *    range's BUFHDRs are counted up to the CALLL's only when every NOP
 *    before lies inside another's recording (inside): then the nth BUFHDR
 *    is the nth buffer operation recorded from the range's start. The replay passes no bytecode
 * that records one but calls of string.format, string.rep and table.concat that record exactly one
 * (trace_fwd.c), so the CALLL's is the path's nth such call;
 *  - an FFI call through a mutable upvalue: the range's one CALLXS and its
 *    one indirect call (trace_irfacts.c).
 * The loop's copy (after IR LOOP) keeps only some snapshots: its calls of
 * string.format's helpers are mapped to the pre-roll's they copy
 * (loop_alias), others left out. */
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/trace_int.h"
#include "unwind/luajit/vmsyms.h"

/* lj_ircall.h names: [0, NREP) string.rep's and table.concat's, the rest
 * string.format's */
static const char *const hname[SS_LJ_FWD_NH] = {
    "lj_buf_putstr_rep",     "lj_buf_puttab",          "lj_strfmt_putfxint",
    "lj_strfmt_putfnum_int", "lj_strfmt_putfnum_uint", "lj_strfmt_putfnum",
    "lj_strfmt_putfstr",     "lj_strfmt_putfchar",     "lj_strfmt_putquoted"};
enum { NREP = 2, NFMT = SS_LJ_FWD_NH - NREP, MAXC = 64 };

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

/* (trace_int.h) */
bool ss_lj_fmt_plain_s(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t s, bool *plain)
{
    const struct lj_layout *lay = rt->lay;
    uint32_t len = 0;
    char b[256];
    *plain = false;
    if (!s || ss_mem_read(m, s + lay->str_len, &len, 4) || !len || len > sizeof(b) ||
        ss_mem_read(m, s + lay->str_data, b, len))
        return false;
    for (uint32_t i = 0; i < len; i++) {
        if (b[i] != '%' || (i + 1 < len && b[i + 1] == '%')) {
            i += b[i] == '%';
            continue;
        }
        uint32_t at = ++i;
        for (; i < len && b[i] && strchr("-+ #0123456789.", b[i]); i++)
            ;
        if (i < len && b[i] == 's' && i == at) *plain = true;
    }
    return true;
}

/* string.rep's or table.concat's (h) first CALLL of the range, when the
 * mcode calls the helper as often as the IR holds guarded CALLLs of it */
static void rep_tab(struct ss_lj_fwd_w *w, const struct ss_lj_fwdin *in, uint32_t i, uint32_t r0,
                    uint32_t r1, unsigned h)
{
    const struct ss_lj_runtime *rt = in->rt;
    uint32_t end[8], c = 0, nc = 0;
    uint8_t which[8];
    if (!rt->fwd_fn[h]) return;
    int ne = ss_lj_mcode_calls_to(in->mcalls, in->snaps[i].mcofs, in->snaps[i + 1].mcofs,
                                  &rt->fwd_fn[h], 1, end, which, 8);
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

/* The string.format helper CALLLs of IR [r0, r1) matched to their calls
 * in mcode [lo, hi) (above): ends into end[] (by IR order from at), helper
 * indexes into hk[]; how many CALLLs, -1 when they do not match (then the
 * ends stay 0) or more than cap. */
static int fmt_calls(const struct ss_lj_fwdin *in, uint32_t r0, uint32_t r1, uint32_t lo,
                     uint32_t hi, uint32_t *c, uint32_t *end, uint8_t *hk, uint32_t cap)
{
    const struct ss_lj_runtime *rt = in->rt;
    uint32_t nc = 0, e[MAXC];
    uint8_t which[MAXC];
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *q = ins(in, r);
        if (q[5] != IR_CALLL) continue;
        unsigned k = 0;
        while (k < NFMT && (!rt->fwd_fn[NREP + k] || u16at(q + 2) != rt->fwd_id[NREP + k]))
            k++;
        if (k == NFMT) continue;
        if (!(q[4] & 0x80) || nc == cap || nc == MAXC) return -1; /* (IRT_GUARD: CCI_T) */
        c[nc] = r, end[nc] = 0, hk[nc++] = (uint8_t)k;
    }
    if (!nc) return 0;
    int ne = lo < hi
                 ? ss_lj_mcode_calls_to(in->mcalls, lo, hi, &rt->fwd_fn[NREP], NFMT, e, which, MAXC)
                 : -1;
    if (ne < 0 || (uint32_t)ne != nc) return -1;
    for (uint32_t j = 0; j < nc; j++)
        if (which[j] != hk[j]) return -1;
    for (uint32_t j = 0; j < nc; j++)
        end[j] = e[j];
    return (int)nc;
}

/* Is NOP r inside the recording of the buffer operation of BUFHDR hh (the
 * last before it, 0 none)? When the first put after r (before h) is a
 * BUFPUT or CALLL of hh's chain, or a BUFSTR of it (op1: its last put): one
 * ff's recording emits its IR in one piece and its one BUFHDR first (a
 * later one's puts all chain through its own BUFHDR; a BUFSTR is emitted
 * on its own chain's put: bufstr_kfold_cse folds one with none, and the
 * APPEND one it rewrites CSEs to the BUFSTR before, fright of
 * bufput_append), so IR between hh and that put is hh's, and r no BUFHDR.
 * (Only string.format, string.rep and table.concat record BUFHDRs there:
 * the replay passes no other bytecode that records one.) */
static bool inside(const struct ss_lj_fwdin *in, uint32_t r0, uint32_t hh, uint32_t r, uint32_t h)
{
    for (uint32_t x = r + 1; hh && x < h; x++) {
        uint8_t o = ins(in, x)[5];
        if (o == IR_BUFHDR) return false;
        if (o == IR_BUFPUT || o == IR_CALLL) return chain_hdr(in, r0, x) == hh;
        if (o == IR_BUFSTR) return chain_hdr(in, r0, u16at(ins(in, x))) == hh;
    }
    return false;
}

/* string.format's helper calls of the range, each at its nth call */
static void fmt(struct ss_lj_fwd_w *w, const struct ss_lj_fwdin *in, uint32_t i, uint32_t r0,
                uint32_t r1)
{
    uint32_t end[MAXC], c[MAXC];
    uint8_t hk[MAXC];
    int nc = fmt_calls(in, r0, r1, in->snaps[i].mcofs, in->snaps[i + 1].mcofs, c, end, hk, MAXC);
    for (int j = 0; j < nc; j++) {
        uint32_t h = chain_hdr(in, r0, c[j]), nth = 0, last = 0;
        for (uint32_t r = r0; h && r <= h; r++) {
            uint8_t o = ins(in, r)[5];
            if (o == IR_BUFHDR) nth++, last = r;
            if (o == IR_NOP && !inside(in, r0, last, r, h)) h = 0; /* (a BUFHDR DCE'd: above) */
        }
        if (h) ss_lj_fwd_replay(w, i, c[j], SS_FWD_FMT, nth, end[j]);
    }
}

static int by_end(const void *a, const void *b)
{
    const struct tcall *x = a, *y = b;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The loop's copy of string.format's helper calls, as trace_calls.c does
 * for FFI calls: lj_opt_loop.c loop_unroll re-emits every pre-roll
 * instruction in order through FOLD, which may turn a CALLL of these into
 * a BUFPUT (constant arguments) but never makes one of anything else, so
 * the copy's CALLLs of them are a subsequence of the pre-roll's: the same
 * helper sequence, as long, is the pre-roll's one by one. A copy's call
 * matched in its range and its original matched in its own: t->calls
 * (sorted by end) gets the copy's end with the original's as its alias. */
static void loop_alias(const struct ss_lj_fwdin *in)
{
    const struct lj_layout *lay = in->rt->lay;
    struct trace *t = in->t;
    enum { CAP = 512 };
    uint32_t *c = malloc(CAP * 2 * sizeof(*c)), *end = malloc(CAP * 2 * sizeof(*end)), n = 0,
             npre = 0;
    uint8_t hk[CAP * 2];
    if (!c || !end || in->loop >= in->nins) goto out;
    for (uint32_t i = 0; i < t->nsnap; i++) {
        uint32_t r0 = u16at(in->sb + (size_t)i * lay->snap_size + lay->snap_ref);
        uint32_t r1 = i + 1 < t->nsnap
                          ? u16at(in->sb + (size_t)(i + 1) * lay->snap_size + lay->snap_ref)
                          : in->nins;
        uint32_t lo = in->snaps[i].mcofs, hi = i + 1 < t->nsnap ? in->snaps[i + 1].mcofs : 0;
        if (i + 1 == t->nsnap) hi = t->szmcode;
        if (r0 < REF_BIAS || r1 < r0 || r1 > in->nins || hi > t->szmcode) goto out;
        int k = fmt_calls(in, r0, r1, lo, hi, c + n, end + n, hk + n, CAP * 2 - n);
        if (k < 0) { /* unmatched: count them all the same */
            for (uint32_t r = r0; r < r1 && n < CAP * 2; r++) {
                const uint8_t *q = ins(in, r);
                for (unsigned h = NREP; q[5] == IR_CALLL && h < SS_LJ_FWD_NH; h++)
                    if (in->rt->fwd_fn[h] && u16at(q + 2) == in->rt->fwd_id[h])
                        c[n] = r, end[n] = 0, hk[n++] = (uint8_t)(h - NREP);
            }
            continue;
        }
        n += (uint32_t)k;
    }
    for (uint32_t j = 0; j < n; j++)
        npre += c[j] < in->loop;
    if (!npre || n != 2 * npre || n >= CAP * 2) goto out;
    for (uint32_t j = 0; j < npre; j++)
        if (hk[j] != hk[npre + j]) goto out;
    uint32_t add = 0;
    for (uint32_t j = 0; j < npre; j++)
        add += end[j] && end[npre + j];
    struct tcall *nc = add ? realloc(t->calls, (t->ncalls + add) * sizeof(*nc)) : NULL;
    if (!nc) goto out;
    t->calls = nc;
    for (uint32_t j = 0; j < npre; j++)
        if (end[j] && end[npre + j])
            t->calls[t->ncalls++] = (struct tcall){.end = end[npre + j], .alias = end[j]};
    qsort(t->calls, t->ncalls, sizeof(*t->calls), by_end);
out:
    free(c);
    free(end);
}

void ss_lj_fwd_calls(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t, const uint8_t *kb,
                     uint32_t nk, const uint8_t *ib, uint32_t nins, const uint8_t *sb,
                     const uint32_t *map, const struct tsnap *snaps, const struct tframe *fr,
                     csh cs, cs_insn *ci, const uint8_t *mc)
{
    const struct lj_layout *lay = rt->lay;
    struct ss_lj_mcalls mcalls;
    if (lay->ir_callxs != IR_CALLXS || lay->ir_kgc != IR_KGC || !lay->gc64 || !lay->ff ||
        ss_lj_mcalls_scan(rt->arch->a64, cs, ci, mc, t->mcode, t->szmcode, &mcalls))
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
                             .fr = fr,
                             .mcalls = &mcalls};
    for (uint32_t r = REF_BIAS; r < nins && in.loop == nins; r++)
        if (ins(&in, r)[5] == lay->ir_loop) in.loop = r;
    struct ss_lj_fwd_w *w = ss_lj_fwd_new(&in);
    if (!w) goto out;
    for (uint32_t i = 0; i + 1 < t->nsnap; i++) {
        const struct tsnap *s = &snaps[i];
        uint32_t r0 = u16at(sb + (size_t)i * lay->snap_size + lay->snap_ref);
        uint32_t r1 = u16at(sb + (size_t)(i + 1) * lay->snap_size + lay->snap_ref);
        if (r0 < REF_BIAS || r1 <= r0 || r1 > in.loop || !s->n || s->ncut || s->nret ||
            snaps[i + 1].mcofs <= s->mcofs)
            continue;
        for (unsigned h = 0; h < NREP; h++)
            rep_tab(w, &in, i, r0, r1, h);
        fmt(w, &in, i, r0, r1);
        /* the range's one CALLXS, its one indirect call (trace_irfacts.c) */
        uint32_t c = 0, nc = 0, end;
        for (uint32_t r = r0; r < r1; r++)
            if (ins(&in, r)[5] == IR_CALLXS && !nc++) c = r;
        if (nc == 1 && (end = ss_lj_mcode_regcall(&mcalls, s->mcofs, snaps[i + 1].mcofs)))
            ss_lj_fwd_replay(w, i, c, SS_FWD_XS, 0, end);
    }
    ss_lj_fwd_free(w);
    loop_alias(&in);
out:
    free(mcalls.c);
}
