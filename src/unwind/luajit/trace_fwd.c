/* unwind/luajit/trace_fwd.c: the forward replay of the bytecode from the
 * snapshot before a call out of trace code that no snapshot after it shows
 * (issue 32): the frames the call was made in. Which call to stop at comes
 * from trace_fwdcalls.c (which machine call is which IR call, and which
 * recorded bytecode call made that IR call).
 *
 * What the recorder guarantees (LuaJIT 2.1, lj_record.c, lj_snap.c;
 * checked in Debian 12's and 13's trees): snapshot i's code is that of IR
 * [ref_i, ref_i+1) (trace_post.c), and that IR was recorded while the
 * recorder ran the bytecode from snapshot i's pc up to snapshot i+1's: a
 * path that starts at snapshot i's pc in its frames, in IR order.
 * The replay walks the path from snapshot i's pc over bytecodes that
 * cannot branch, call or invoke a metamethod in ways it cannot see: moves
 * and constants, arithmetic on slots proven numbers, LEN of strings,
 * immutable upvalues of a known closure (the value the recorder
 * specialised to), mutable ones (their IR load: trace_irfacts.c), IST/ISF
 * on values whose truth is proven (constants, IR types), base-frame slots whose function the trace
 * guards (EQ(SLOAD #s, constant)), GGET k1 + TGETS k2 chains that end in a call whose callee the
 * trace's IR guards (EQ of HLOAD(HREF[K](..env.., k1))[k2] against a function constant: both loads
 * non-nil, so no __index), calls of proven Lua closures (frames pushed) and returns to frames it
 * knows. It stops at the call the caller asks for (trace_fwdcalls.c): the first call of
 * string.rep / table.concat (their range's first CALLL is that call's; it passes the other one's
 * calls and string.format's without a plain %s, which make no CALLL of either), the nth of the
 * calls of string.format, string.rep and table.concat that record one BUFHDR each (it passes no
 * other bytecode that records one), the CALL of a mutable upvalue's cdata (SS_FWD_XS). The sampled
 * call is made in the replay's frames with the caller standing at that CALL; at a CALLT of
 * string.format, the tail call replaced the caller's frame (the interpreter's ins_callt): the
 * frames below it, their innermost at the CALL that called it (one passed returns its string).
 * Anything else (a branch, CAT, an unproven operand or callee, a return
 * below the trace's base frame, a snapshot but the first whose pc a comparison or loop may have
 * fixed up to the branch not taken, unless it is needsnap's after a comparison that fell through)
 * leaves today's proven prefix. Types come from the snapshot's IR refs, or, for the base frame's
 * slots it does not list, from the trace's SLOADs of them since the last RETF (a slot the path
 * reads is live, so not purged from the snapshot if the trace wrote it). x86-64 GC64 builds whose
 * IR numbering is 2.1's. */
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/trace_int.h"

static const char *const hff[2] = {"string.rep", "table.concat"};

#define NSLOT 512u
#define TAG_FUNC 0x1fff7ull
#define TAG_TAB 0x1fff4ull
#define TAG_STR 0x1fffbull

/* what a slot holds at recording time */
enum { F_UNK, F_LAZY, F_NUM, F_NUMV, F_KSTR, F_STR, F_STRV, F_TAB, F_FN, F_PRI, F_G1, F_G2, F_UV };
/* (F_NUMV, F_STRV: no IR constant; F_FN: v the closure; F_PRI: v 1 + its
 * IR type (nil, false, true), 0 not known; F_G1/F_G2: the value of GGET k1
 * / its TGETS k2 in closure v's environment; F_UV: upvalue k1 of closure
 * v, a mutable one: trace_uvcall.c) */
struct fact {
    uint8_t k;
    uint64_t v, k1, k2;
};

struct wf {
    uint64_t pt, fn, link; /* prototype, closure (0 not known), frame link */
    uint32_t base, idx;    /* slot 0 (snapshot numbering), current instruction */
    uint32_t *bc, sizebc;
    uint64_t *kgc; /* kgc[i]: the constant ~i */
    uint32_t sizekgc;
    uint8_t nparams;
};

struct ss_lj_fwd_w {
    struct ss_lj_fwdin in;
    struct ss_lj_runtime *rt;
    struct ss_mem *m;
    struct ss_lj_irv ir; /* the IR, r0 and c (trace_irfacts.c) */
    uint32_t nins;
    struct fact f[NSLOT];
    struct wf fr[TC_MAXFR];
    uint32_t nf, pending;
    uint32_t nth, nbuf; /* SS_FWD_FMT: the buffer operation sought, those passed */
    bool tail;          /* the call reached is a CALLT */
};

static const uint8_t *irq(const struct ss_lj_fwd_w *w, uint32_t ref)
{
    return ss_lj_ir_ins(&w->ir, ref);
}

static uint64_t kgc(const struct ss_lj_fwd_w *w, uint32_t ref, unsigned irt)
{
    return ss_lj_ir_kgc(&w->ir, ref, irt);
}

static struct fact of_type(unsigned irt, bool k)
{
    struct fact f = {.k = F_UNK};
    if (irt == IRT_NUM || (irt >= IRT_I8 && irt <= IRT_U32)) f.k = k ? F_NUM : F_NUMV;
    if (irt == IRT_STR) f.k = k ? F_KSTR : F_STRV;
    if (irt == IRT_TAB) f.k = F_TAB;
    if (irt <= IRT_TRUE) f.k = F_PRI, f.v = irt + 1;
    return f;
}

/* the fact of snapshot ref ref */
static struct fact of_ref(const struct ss_lj_fwd_w *w, uint32_t ref)
{
    if (ref < w->ir.nk || ref >= w->nins) return (struct fact){.k = F_UNK};
    const uint8_t *q = irq(w, ref);
    unsigned irt = q[4] & 0x1f;
    if (ref >= REF_BIAS) return of_type(irt, false);
    if (q[5] == IR_KGC && irt == IRT_FUNC) return (struct fact){.k = F_FN, .v = kgc(w, ref, irt)};
    if (q[5] == IR_KGC && irt == IRT_STR) return (struct fact){.k = F_KSTR, .v = kgc(w, ref, irt)};
    return of_type(irt, true);
}

static struct fact get(struct ss_lj_fwd_w *w, uint32_t s)
{
    if (s >= NSLOT) return (struct fact){.k = F_UNK};
    if (w->f[s].k != F_LAZY) return w->f[s];
    /* a base-frame slot the trace had not written: what its SLOADs since
     * the base last moved loaded (each the same type), a function as
     * guarded */
    int irt = -1;
    for (uint32_t r = w->ir.lastretf + 1; r < w->ir.c; r++) {
        const uint8_t *q = irq(w, r);
        if (q[5] != IR_SLOAD || (uint32_t)(q[0] | q[1] << 8) != s) continue;
        if (irt >= 0 && irt != (q[4] & 0x1f)) irt = 0xff;
        if (irt != 0xff) irt = q[4] & 0x1f;
    }
    w->f[s] = irt >= 0 && irt != 0xff ? of_type((unsigned)irt, false) : (struct fact){.k = F_UNK};
    if (irt == IRT_FUNC && (w->f[s].v = ss_lj_ir_slot_fn(&w->ir, s))) w->f[s].k = F_FN;
    return w->f[s];
}

/* Set slot s; a pending table load there may not be dropped. */
static bool set(struct ss_lj_fwd_w *w, uint32_t s, struct fact f)
{
    if (s >= NSLOT || w->f[s].k == F_G1 || w->f[s].k == F_G2) return false;
    w->f[s] = f;
    return true;
}

static bool isnum(struct fact f)
{
    return f.k == F_NUM || f.k == F_NUMV;
}

/* closure fn's header into fb (fn_size bytes): a function */
static bool closure(struct ss_lj_fwd_w *w, uint64_t fn, uint8_t *fb)
{
    const struct lj_layout *lay = w->rt->lay;
    return fn && lay->fn_size <= 64 && !ss_mem_read(w->m, fn, fb, lay->fn_size) &&
           fb[lay->gct] == LJ_GCT_FUNC;
}

/* Immutable upvalue uv of Lua closure fn: its value never changed, so it
 * is the one the recorder specialised to (lj_record.c rec_upvalue). */
static struct fact upvalue(struct ss_lj_fwd_w *w, uint64_t fn, uint32_t uv)
{
    const struct lj_layout *lay = w->rt->lay;
    struct fact no = {.k = F_UNK};
    uint8_t fb[64], uvb[64];
    uint64_t uva = 0, tv = 0;
    if (!closure(w, fn, fb) || fb[lay->fn_ffid] != 0 || uv >= fb[lay->fn_ffid + 1] ||
        ss_mem_read(w->m, fn + lay->fn_uvptr + (uint64_t)uv * 8, &uva, 8) ||
        lay->uv_v + 8 > sizeof(uvb) || ss_mem_read(w->m, uva, uvb, lay->uv_v + 8) ||
        uvb[lay->gct] != LJ_GCT_UPVAL || !uvb[lay->gct + 2] /* immutable */ ||
        ss_mem_read(w->m, lj_u64(uvb + lay->uv_v), &tv, 8))
        return no;
    if (tv >> 47 == TAG_FUNC) return (struct fact){.k = F_FN, .v = tv & LJ_GCVMASK};
    if (tv >> 47 == TAG_TAB) return (struct fact){.k = F_TAB};
    if (tv >> 47 == TAG_STR) return (struct fact){.k = F_KSTR};
    return no;
}

static void wf_free(struct wf *f)
{
    free(f->bc);
    free(f->kgc);
    f->bc = NULL, f->kgc = NULL;
}

/* Copy prototype f->pt's bytecode and GC constants. */
static bool wf_load(struct ss_lj_fwd_w *w, struct wf *f)
{
    const struct lj_layout *lay = w->rt->lay;
    const struct lj_proto *p = ss_lj_proto(w->rt, w->m, f->pt, NULL);
    if (!p || !p->sizebc || p->sizebc > 65536 || p->sizekgc > 65536 ||
        lay->pt_size + (size_t)p->sizebc * 4 > p->sizept)
        return false;
    uint64_t k = lj_u64(p->blob + lay->pt_k);
    if (k < f->pt + lay->pt_size + (uint64_t)p->sizekgc * 8 || k > f->pt + p->sizept) return false;
    f->sizebc = p->sizebc, f->sizekgc = p->sizekgc;
    f->nparams = p->blob[lay->pt_sizebc - 2];
    f->bc = malloc((size_t)p->sizebc * 4);
    f->kgc = malloc((size_t)p->sizekgc * 8 + 8);
    if (!f->bc || !f->kgc) return false;
    for (uint32_t i = 0; i < p->sizebc; i++)
        f->bc[i] = lj_u32(p->blob + lay->pt_size + (size_t)i * 4);
    for (uint32_t i = 0; i < p->sizekgc; i++)
        f->kgc[i] = lj_u64(p->blob + (k - (uint64_t)(i + 1) * 8 - f->pt));
    return true;
}

/* The name of builtin F, NULL for a Lua closure or unknown. */
static const char *ffname(struct ss_lj_fwd_w *w, uint64_t fn, bool *lua)
{
    const struct lj_layout *lay = w->rt->lay;
    uint8_t fb[64];
    *lua = false;
    if (!closure(w, fn, fb)) return NULL;
    unsigned id = fb[lay->fn_ffid];
    *lua = id == 0;
    return id > 1 && id - 2u < *lay->nff ? lay->ff[id - 2] : NULL;
}

/* Push the frame of Lua closure fn called by the top frame's CALL at A. */
static bool push(struct ss_lj_fwd_w *w, uint64_t fn, uint32_t a, uint32_t nargs)
{
    const struct lj_layout *lay = w->rt->lay;
    struct wf *c = &w->fr[w->nf - 1];
    uint8_t fb[64];
    if (w->nf == TC_MAXFR || !closure(w, fn, fb) || fb[lay->fn_ffid] != 0) return false;
    struct wf *f = &w->fr[w->nf];
    *f = (struct wf){.pt = lj_u64(fb + lay->fn_pc) - lay->pt_size, .fn = fn};
    f->link = c->pt + lay->pt_size + (uint64_t)(c->idx + 1) * 4;
    f->base = c->base + a + 2, f->idx = 1;
    w->nf++;
    if (!wf_load(w, f)) return false;
    unsigned op0 = f->bc[0] & 0xff;
    if (op0 < BC_FUNCF || op0 > BC_JFUNCF || f->base + 256 > NSLOT) return false; /* no varargs */
    for (uint32_t s = f->base; s < f->base + 256; s++) /* (a dropped pending load fails) */
        if (s >= f->base + nargs &&
            !set(w, s, (struct fact){.k = s < f->base + f->nparams ? F_PRI : F_UNK, .v = 1}))
            return false;
    return true;
}

/* Return from the top frame with n values from slot a up. */
static bool ret(struct ss_lj_fwd_w *w, uint32_t a, uint32_t n)
{
    if (w->nf < 2 || n > 8) return false;
    struct fact v[8];
    struct wf *f = &w->fr[w->nf - 1], *c = &w->fr[w->nf - 2];
    for (uint32_t i = 0; i < n; i++)
        v[i] = get(w, f->base + a + i);
    wf_free(f);
    w->nf--;
    uint32_t ins = c->idx < c->sizebc ? c->bc[c->idx] : 0, ca = (ins >> 8) & 0xff, nres = ins >> 24;
    if (((ins & 0xff) != BC_CALL && (ins & 0xff) != BC_CALLM) || !nres) return false;
    for (uint32_t s = c->base + ca; s < NSLOT; s++) { /* the callee's slots are dead */
        uint32_t i = s - c->base - ca;
        if (w->f[s].k == F_G1 || w->f[s].k == F_G2) return false;
        w->f[s] =
            i < nres - 1 ? (i < n ? v[i] : (struct fact){.k = F_PRI, .v = 1}) : (struct fact){0};
    }
    c->idx++;
    return true;
}

/* Is x truthy (1), falsy (0) or not known (-1) where the recorder saw it?
 * A mutable upvalue's by the type of the ULOAD it gave (trace_uvcall.c). */
static int truth(const struct ss_lj_fwd_w *w, struct fact x)
{
    if (x.k == F_UV) {
        uint32_t u = ss_lj_uv_load(&w->ir, x.v, (uint32_t)x.k1);
        if (!u) return -1;
        x = of_type(irq(w, u)[4] & 0x1f, false);
        if (x.k == F_UNK) return 1; /* cdata, userdata, ...: not nil or false */
    }
    if (x.k == F_PRI) return x.v ? x.v == 1 + IRT_TRUE : -1;
    return x.k >= F_NUM && x.k <= F_FN ? 1 : -1;
}

/* Does a call of builtin name with nargs arguments from A, not the one
 * sought, record exactly one BUFHDR (lj_ffrecord.c)? string.format
 * (recff_string_format: always one); string.rep with no separator (one
 * recff_bufhdr; with one, one or two); table.concat of a table. */
static bool bufop(struct ss_lj_fwd_w *w, const char *name, uint32_t A, uint32_t nargs)
{
    if (!strcmp(name, "string.format")) return nargs >= 1;
    if (!strcmp(name, "string.rep")) return nargs == 2;
    return !strcmp(name, "table.concat") && nargs >= 1 && get(w, A + 2).k == F_TAB;
}

/* Is a call of builtin name with nargs arguments from A a string.format
 * that makes no CALLL of lj_buf_putstr_rep (no plain %s) and none of
 * lj_buf_puttab (never)? */
static bool fmt_no_rep(struct ss_lj_fwd_w *w, const char *name, uint32_t A, uint32_t nargs)
{
    struct fact s = get(w, A + 2);
    bool plain;
    return !strcmp(name, "string.format") && nargs >= 1 && s.k == F_KSTR &&
           ss_lj_fmt_plain_s(w->rt, w->m, s.v, &plain) && !plain;
}

/* One instruction of the top frame: 1 done, 0 not provable, 2 the call of
 * kind h reached (SS_FWD_XS: the FFI call through an upvalue c is). */
static int step(struct ss_lj_fwd_w *w, unsigned h)
{
    struct wf *f = &w->fr[w->nf - 1];
    if (f->idx >= f->sizebc) return 0;
    uint32_t ins = f->bc[f->idx], op = ins & 0xff, a = (ins >> 8) & 0xff, b = ins >> 24;
    uint32_t c = (ins >> 16) & 0xff, d = ins >> 16, A = f->base + a;
    struct fact x = {.k = F_UNK};
    if (op == BC_MOV) {
        x = get(w, f->base + d);
        if (x.k == F_G1 || x.k == F_G2) return 0;
    } else if (op == BC_NOT || op == BC_KPRI) {
        x = (struct fact){.k = F_PRI, .v = op == BC_KPRI && d <= 2 ? d + 1 : 0};
    } else if (op == BC_UNM || op == BC_LEN) {
        x = get(w, f->base + d);
        if (op == BC_UNM ? !isnum(x) : x.k != F_KSTR && x.k != F_STR && x.k != F_STRV) return 0;
        x.k = x.k == F_NUMV || x.k == F_STRV ? F_NUMV : F_NUM;
    } else if (op >= BC_ADDVN && op <= BC_MODNV) { /* B op number constant */
        x = get(w, f->base + b);
        if (!isnum(x)) return 0;
    } else if (op >= BC_ADDVV && op <= BC_POW) {
        if (!isnum(get(w, f->base + b)) || !isnum(get(w, f->base + c))) return 0;
        x.k = F_NUM;
    } else if (op == BC_KSTR) {
        x = (struct fact){.k = F_KSTR, .v = d < f->sizekgc ? f->kgc[d] : 0};
    } else if (op == BC_KSHORT || op == BC_KNUM) {
        x.k = F_NUM;
    } else if (op == BC_KCDATA) {
        x.k = F_UNK;
    } else if (op == BC_KNIL) {
        for (uint32_t s = A; s <= f->base + d; s++)
            if (!set(w, s, (struct fact){.k = F_PRI, .v = 1})) return 0;
        f->idx++;
        return 1;
    } else if (op == BC_UGET) {
        if (!f->fn) return 0;
        if ((x = upvalue(w, f->fn, d)).k == F_UNK)
            x = (struct fact){.k = F_UV, .v = f->fn, .k1 = d};
    } else if (op == BC_GGET) {
        if (!f->fn || d >= f->sizekgc) return 0;
        x = (struct fact){.k = F_G1, .v = f->fn, .k1 = f->kgc[d]};
        w->pending++;
    } else if (op == BC_TGETS) {
        struct fact t = get(w, f->base + b);
        if (t.k != F_G1 || c >= f->sizekgc) return 0;
        x = (struct fact){.k = F_G2, .v = t.v, .k1 = t.k1, .k2 = f->kgc[c]};
        w->f[f->base + b].k = F_UNK; /* the chain goes on in A */
    } else if (op == BC_CALL || (op == BC_CALLT && h == SS_FWD_FMT && w->nf > 1)) {
        struct fact fn = get(w, A);
        if (fn.k == F_G2) {
            fn = (struct fact){.k = F_FN, .v = ss_lj_ir_guarded(&w->ir, fn.v, fn.k1, fn.k2)};
            w->f[A].k = F_UNK;
            w->pending--;
        }
        if (fn.k == F_UV) { /* the FFI call c through it, or not provable */
            uint32_t u = ss_lj_uv_load(&w->ir, fn.v, (uint32_t)fn.k1);
            return h == SS_FWD_XS && op == BC_CALL && u && ss_lj_callxs_through(&w->ir, u) ? 2 : 0;
        }
        bool lua;
        const char *name = fn.k == F_FN ? ffname(w, fn.v, &lua) : NULL;
        if (op == BC_CALLT) { /* string.format's, tail-called (above) */
            if (!name || strcmp(name, "string.format") || !d) return 0;
            if (++w->nbuf == w->nth) return w->tail = true, 2;
            /* another: the frame returns the string it makes */
            if (!bufop(w, name, A, d - 1) || !set(w, A, (struct fact){.k = F_STR})) return 0;
            return ret(w, a, 1) ? 1 : 0;
        }
        if (fn.k == F_FN && lua) return push(w, fn.v, a, c ? c - 1 : 0) ? 1 : 0;
        if (!name || !c || h == SS_FWD_XS) return 0;
        if (h == SS_FWD_FMT) { /* the nth buffer operation, a string.format */
            if (++w->nbuf == w->nth) return strcmp(name, "string.format") ? 0 : 2;
            if (!b || b > 2 || !bufop(w, name, A, c - 1)) return 0;
        } else if (!strcmp(name, hff[h])) {
            return 2;
        } else if (!b || b > 2 || (strcmp(name, hff[!h]) && !fmt_no_rep(w, name, A, c - 1))) {
            return 0; /* the other helper's builtin, a string.format: no call */
        }
        x.k = F_STR;
        if (b < 2) x.k = F_UNK;
    } else if (op == BC_RET0 || op == BC_RET1 || op == BC_RET) {
        return ret(w, a, op == BC_RET0 ? 0 : op == BC_RET1 ? 1 : (d ? d - 1 : 99)) ? 1 : 0;
    } else if (op == BC_JMP) {
        f->idx = f->idx + 1 + d - 0x8000;
        return 1;
    } else if (op == BC_IST || op == BC_ISF) { /* the JMP after it taken or not */
        int t = truth(w, get(w, f->base + d));
        if (t < 0 || f->idx + 1 >= f->sizebc || (f->bc[f->idx + 1] & 0xff) != BC_JMP) return 0;
        f->idx += (op == BC_IST) == (t == 1) ? 1 : 2;
        return 1;
    } else {
        return 0;
    }
    if (!set(w, A, x)) return 0;
    f->idx++;
    return 1;
}

/* Does the call the walk reached make helper h's CALLLs? (above; a
 * string.format's: its BUFHDR, trace_fwdcalls.c) */
static bool emits(struct ss_lj_fwd_w *w, unsigned h)
{
    if (w->pending || h >= SS_FWD_FMT) return !w->pending;
    const struct wf *f = &w->fr[w->nf - 1];
    uint32_t ins = f->bc[f->idx], A = f->base + ((ins >> 8) & 0xff),
             nargs = ((ins >> 16) & 0xff) - 1;
    struct fact s = get(w, A + 2), n = get(w, A + 3);
    bool str = s.k == F_KSTR || s.k == F_STR || s.k == F_STRV || isnum(s);
    bool sep = n.k == F_KSTR || n.k == F_STR || n.k == F_STRV || isnum(n);
    if (h == SS_FWD_REP) return nargs == 2 && str && isnum(n) && (n.k == F_NUMV || s.k == F_STRV);
    return s.k == F_TAB && (nargs == 1 || (nargs == 2 && sep));
}

/* Frames, slots and closures of snapshot si (of n frames fr) into w. */
static bool start(struct ss_lj_fwd_w *w, const uint8_t *sb, const uint32_t *map,
                  const struct tsnap *s, uint32_t si, const struct tframe *fr)
{
    const struct lj_layout *lay = w->rt->lay;
    uint32_t nent = sb[(size_t)si * lay->snap_size + lay->snap_nent], ls[TC_MAXFR], nl = 0;
    const uint32_t *mp = map + s->mapofs;
    if (s->maplen < nent + 2 || s->n > TC_MAXFR) return false;
    for (uint32_t e = 0; e < nent; e++)
        if ((mp[e] & SNAP_FRAME) && (mp[e] >> 24) >= 2) {
            if (nl == TC_MAXFR) return false;
            ls[nl++] = mp[e] >> 24;
        }
    if (nl + 1 != s->n || (nl ? ls[nl - 1] + 1 : 2) != (mp[nent] & 0xff) + 2) return false;
    for (uint32_t sl = 0; sl < NSLOT; sl++) /* the base frame's slots: its own */
        w->f[sl].k = sl >= 2 && (!nl || sl + 1 < ls[0]) ? F_LAZY : F_UNK;
    for (uint32_t e = 0; e < nent; e++)
        if (!(mp[e] & (SNAP_FRAME | SNAP_CONT))) w->f[mp[e] >> 24] = of_ref(w, mp[e] & 0xffff);
    for (uint32_t j = 0; j < s->n; j++) {
        struct wf *f = &w->fr[j];
        uint32_t base = j ? ls[j - 1] + 1 : 2;
        *f = (struct wf){.pt = fr[j].pt, .link = fr[j].link, .base = base};
        w->nf = j + 1;
        if (!f->pt || (j && (fr[j].link & 3)) || !wf_load(w, f)) return false;
        uint64_t bc = f->pt + lay->pt_size;
        if (fr[j].pc < bc + 4 || fr[j].pc > bc + (uint64_t)f->sizebc * 4) return false;
        f->idx = (uint32_t)((fr[j].pc - bc) / 4) - 1; /* caller frames: their CALL */
        if (j + 1 < s->n) {
            unsigned op = f->bc[f->idx] & 0xff;
            if (op != BC_CALL && op != BC_CALLM) return false;
        }
        /* the closure: the snapshot's constant in the function slot */
        for (uint32_t e = 0; e < nent; e++)
            if ((mp[e] >> 24) == base - 2 && !(mp[e] & (SNAP_FRAME | SNAP_CONT)))
                f->fn = kgc(w, mp[e] & 0xffff, IRT_FUNC);
    }
    /* the base frame's closure, else: the trace guards slot 0's function */
    if (!w->fr[0].fn) w->fr[0].fn = ss_lj_ir_slot_fn(&w->ir, 0);
    return true;
}

/* Was snapshot pc x of f's prototype made by a branch (a comparison's or
 * a loop's fixed-up exit, lj_record.c rec_comp_fixup/rec_for_loop)? Its
 * instruction before a jump, loop or comparison, or x a jump target. (Not
 * snapshot 0: where recording started, never merged, lj_snap_add.) */
static uint32_t jumps_to(const struct wf *f, uint32_t x)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->sizebc; i++) {
        unsigned op = f->bc[i] & 0xff;
        bool jmp = op == 50 || op == 72 || (op >= 77 && op <= 88);
        n += jmp && (int64_t)i + 1 + (int64_t)(f->bc[i] >> 16) - 0x8000 == (int64_t)x;
    }
    return n;
}

static bool fixed_up(const struct wf *f)
{
    uint32_t x = f->idx;
    unsigned prev = x ? f->bc[x - 1] & 0xff : 0;
    return !x || prev <= 17 || (prev >= 69 && prev <= 88) || jumps_to(f, x);
}

/* Does f's prototype loop (FORL .. JLOOP, a JMP back)? */
static bool loops(const struct wf *f)
{
    for (uint32_t i = 0; i < f->sizebc; i++) {
        unsigned op = f->bc[i] & 0xff;
        if ((op >= 79 && op <= 87) || (op == BC_JMP && f->bc[i] >> 16 < 0x8000)) return true;
    }
    return false;
}

/* Is snapshot i's pc x where the trace went on after the comparison C at
 * x-2 fell through its JMP (to t)? Then snapshot i-1 is C's, fixed up to t
 * (rec_comp_fixup), its IR C's guard alone, and i the one needsnap takes at
 * x. Else i could be C's own, fixed up to x, with the trace gone on at t.
 * Proven where the innermost frame and those above the base do not loop
 * and are i-1's (one activation each: none returned and was called again),
 * t > x and only C jumps to t: i-1's pc t is no state of that activation
 * (it reached C at x-2 < t after it), so a comparison's fixed up to t: C's
 * (another's right before a JMP jumps forward past t); its IR one
 * comparison guard (LT .. NE; not a call's EQ on a function). Left: a base
 * frame's inner loop unrolled with no IR that calls frame 1 again
 * (rec_loop_interp: root traces abort at inner loops but short ones). */
static bool fell_through(const struct ss_lj_fwd_w *w, const struct tsnap *s, const uint8_t *sb,
                         uint32_t i, const struct tframe *fr)
{
    const struct lj_layout *lay = w->rt->lay;
    const struct wf *f = &w->fr[w->nf - 1];
    const struct tsnap *p = s - 1;
    uint32_t x = f->idx, r0 = i ? u16at(sb + (size_t)(i - 1) * lay->snap_size + lay->snap_ref) : 0;
    if (!i || x < 2 || (f->bc[x - 1] & 0xff) != BC_JMP || (f->bc[x - 2] & 0xff) > 11 ||
        f->bc[x - 1] >> 16 <= 0x8000 || p->n != s->n || p->nret || p->ncut || w->ir.r0 != r0 + 1 ||
        loops(f))
        return false;
    for (uint32_t j = 1; j < w->nf; j++)
        if (loops(&w->fr[j])) return false;
    const uint8_t *g = irq(w, r0);
    if (g[5] > IR_EQ + 1 || !(g[4] & 0x80) || (g[4] & 0x1f) == IRT_FUNC) return false;
    uint32_t tx = x + (f->bc[x - 1] >> 16) - 0x8000; /* t */
    uint64_t t = f->pt + lay->pt_size + (uint64_t)(tx + 1) * 4;
    for (uint32_t j = 0; j < s->n; j++) {
        const struct tframe *a = &fr[p->first + j], *b = &fr[s->first + j];
        if (a->pt != b->pt || a->link != b->link || (j + 1 < s->n ? a->pc != b->pc : a->pc != t))
            return false;
    }
    return jumps_to(f, tx) == 1;
}

struct ss_lj_fwd_w *ss_lj_fwd_new(const struct ss_lj_fwdin *in)
{
    struct ss_lj_fwd_w *w = calloc(1, sizeof(*w));
    if (w) w->in = *in, w->rt = in->rt, w->m = in->m, w->nins = in->nins;
    return w;
}

void ss_lj_fwd_free(struct ss_lj_fwd_w *w)
{
    free(w);
}

/* t->fwd += the frames the replay reached, the call ending at end */
static void keep(struct ss_lj_fwd_w *w, uint32_t i, uint32_t end)
{
    const struct lj_layout *lay = w->rt->lay;
    struct trace *t = w->in.t;
    uint32_t n = w->nf - w->tail,
             cap = t->nfwd ? t->fwd[t->nfwd - 1].first + t->fwd[t->nfwd - 1].n : 0;
    if (!n || t->nfwd >= 256) return;
    struct tframe *nf = realloc(t->fwdfr, (size_t)(cap + n) * sizeof(*nf));
    struct tfwd *nw = nf ? realloc(t->fwd, (t->nfwd + 1) * sizeof(*nw)) : NULL;
    if (nf) t->fwdfr = nf;
    if (!nw) return;
    t->fwd = nw;
    t->fwd[t->nfwd++] = (struct tfwd){.si = i, .end = end, .first = cap, .n = n};
    for (uint32_t j = 0; j < n; j++) {
        const struct wf *f = &w->fr[j];
        t->fwdfr[cap++] = (struct tframe){
            .pc = f->pt + lay->pt_size + (uint64_t)(f->idx + 1) * 4, .link = f->link, .pt = f->pt};
    }
    w->rt->st.trace_fwd_calls++;
}

void ss_lj_fwd_replay(struct ss_lj_fwd_w *w, uint32_t i, uint32_t c, unsigned k, uint32_t nth,
                      uint32_t end)
{
    const struct lj_layout *lay = w->rt->lay;
    const struct ss_lj_fwdin *in = &w->in;
    const struct tsnap *s = &in->snaps[i];
    uint32_t r0 = u16at(in->sb + (size_t)i * lay->snap_size + lay->snap_ref);
    /* the base: where the last RETF before the range left it, and no
     * store, side effect or RETF before the call in the range */
    w->ir = (struct ss_lj_irv){
        .kb = in->kb, .ib = in->ib, .nk = in->nk, .r0 = r0, .c = c, .lastretf = REF_BIAS};
    w->pending = 0, w->nth = nth, w->nbuf = 0, w->tail = false;
    bool ok = true;
    for (uint32_t r = REF_BIAS; r < c && ok; r++) {
        uint8_t o = in->ib[(size_t)(r - REF_BIAS) * 8 + 5];
        if (o == IR_RETF && r < r0) w->ir.lastretf = r;
        ok = r < r0 || !(o == IR_RETF || o == IR_NEWREF || o == IR_CALLS || o == IR_CALLXS ||
                         (o >= IR_ASTORE && o <= IR_XSTORE));
    }
    int st = 0;
    if (ok && start(w, in->sb, in->map, s, i, in->fr + s->first) &&
        (!i || !fixed_up(&w->fr[w->nf - 1]) || fell_through(w, s, in->sb, i, in->fr)))
        for (unsigned n = 0; n < 512 && (st = step(w, k)) == 1; n++)
            ;
    if (st == 2 && emits(w, k)) keep(w, i, end);
    for (uint32_t j = 0; j < TC_MAXFR; j++)
        wf_free(&w->fr[j]);
    w->nf = 0;
}
