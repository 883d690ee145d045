/* unwind/luajit/frames.c: walk the Lua frames of one lua_State from outside.
 *
 * Frame chain (lj_frame.h): the slot at base-1 is the frame link (GC64: base-2
 * holds the tagged function; non-GC64: one slot packs func ref | link).
 * link & 3 == 0: Lua frame, link is the return pc, previous frame is
 * f - (1 + FR2 + A(return pc[-1])) slots. Otherwise link & 7 is C, CONT,
 * VARG, CP, PCALL, PCALLH and the previous frame is f - (link & ~7) bytes.
 * C and CP frames (and FFI-callback continuations) consume one cframe of
 * the thread's chain (L->cframe, prev, ...); that splits the frames into
 * segments, one per VM entry (debug_framepc in lj_debug.c does the same).
 *
 * A walk in phases (walk_once): (1) the lua_State's header and the stack
 * below BASE (thread_read.c), (2) the frame chain over that copy, reading
 * cframes as segments begin, (3) function and prototype headers (resolve.c),
 * (4) each frame's pc, (5) the checks that the frames are the sampled
 * thread's. The A operand of each return pc's CALL comes from a cache
 * validated against the caller's prototype bytes after the walk; a miss
 * costs one extra read for that level. Everything is bounded (frames, bytes)
 * and validated (tags, ranges); a walk over garbage ends with an error or a
 * truncated list, never a crash. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unwind/luajit/frames.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/thread_read.h"
#include "unwind/luajit/ljregs.h"

static struct lj_insent *ins_slot(struct ss_lj_runtime *rt, uint64_t retpc)
{
    return &rt->ins[(retpc >> 2) % LJ_INS_SLOTS];
}

/* Make cf[seg] available (read lazily along the prev chain). */
static int next_cf(struct ss_lj_runtime *rt, struct ss_mem *m, struct cfr *cf, unsigned *ncf,
                   unsigned seg)
{
    if (seg >= LJ_MAX_SEGS) return -EINVAL;
    if (seg < *ncf) return 0;
    if (cf[seg - 1].ok && cf[seg - 1].prev)
        ss_lj_read_cframe(rt, m, cf[seg - 1].prev, &cf[seg]);
    else
        memset(&cf[seg], 0, sizeof(cf[seg]));
    *ncf = seg + 1;
    return 0;
}

/* The frame chain over the stack copy: fills w->f[].frame/fn/ftsz/seg. */
static int chain(struct ss_lj_runtime *rt, struct ss_mem *m, const struct stackbuf *s,
                 uint64_t stack, uint64_t base, uint64_t L, struct cfr *cf, unsigned *ncf,
                 struct lj_walk *w)
{
    const struct lj_layout *lay = rt->lay;
    const unsigned fr2 = lay->gc64 ? 1 : 0;
    uint64_t f = base - 8, bot = stack + 8 * fr2;
    unsigned seg = 0;
    w->n = 0;
    w->nsegs = 1;
    w->seg_cframe[0] = cf[0].addr;
    while (f > bot) {
        if (w->n >= LJ_MAX_FRAMES) {
            w->truncated = true;
            break;
        }
        uint64_t slot, fn;
        int64_t ftsz;
        if (!sb_u64(s, f, &slot)) {
            w->truncated = true;
            break;
        }
        if (lay->gc64) {
            uint64_t tv;
            if (!sb_u64(s, f - 8, &tv) || (tv >> 47) != LJ_GC64_FUNC_TAG) return -EINVAL;
            fn = tv & LJ_GCVMASK;
            ftsz = (int64_t)slot;
        } else {
            fn = (uint32_t)slot;
            ftsz = (int32_t)(uint32_t)(slot >> 32);
        }
        /* cpcall cframes (nres < 0) own no frame: pass those that are
         * newer than this frame. */
        while (cf[seg].ok && cf[seg].nres < 0 && f < stack + (uint64_t)(-(int64_t)cf[seg].nres)) {
            if (next_cf(rt, m, cf, ncf, ++seg)) return -EINVAL;
            w->seg_cframe[w->nsegs++] = cf[seg].addr;
        }
        struct lj_wframe *wf = &w->f[w->n++];
        memset(wf, 0, sizeof(*wf));
        wf->frame = f;
        wf->fn = fn;
        wf->ftsz = ftsz;
        wf->seg = (uint8_t)seg;
        uint64_t prev;
        if ((ftsz & 3) == LJ_FRAME_LUA) {
            uint64_t retpc = lay->gc64 ? (uint64_t)ftsz : (uint32_t)ftsz;
            if (retpc < 4096 || (retpc & 3)) return -EINVAL;
            if (retpc >> 47) return -EFAULT; /* no user address: what its read gives */
            struct lj_insent *ie = ins_slot(rt, retpc);
            if (ie->retpc != retpc) {
                uint32_t ins;
                rt->st.rounds++;
                if (ss_lj_view_read(m, VIEW_ANY, retpc - 4, &ins, 4)) return -EFAULT;
                ie->retpc = retpc;
                ie->ins = ins;
            }
            uint32_t a = (ie->ins >> 8) & 0xff;
            prev = f - 8 * (1 + fr2 + a);
        } else {
            uint64_t delta = (uint64_t)ftsz & ~(uint64_t)7;
            int typ = (int)(ftsz & 7);
            if (delta == 0 || delta > f - stack) return -EINVAL;
            prev = f - delta;
            bool consumes = typ == LJ_FRAME_C || typ == LJ_FRAME_CP;
            if (typ == LJ_FRAME_CONT) {
                uint64_t cv = 0;
                if (lay->gc64)
                    sb_u64(s, f - 24, &cv);
                else if (sb_u64(s, f - 8, &cv))
                    cv = (uint32_t)cv;
                consumes = cv == 1; /* LJ_CONT_FFI_CALLBACK */
            }
            if (consumes) {
                if (next_cf(rt, m, cf, ncf, ++seg)) return -EINVAL;
                w->seg_cframe[w->nsegs++] = cf[seg].addr;
            }
        }
        if (prev >= f || prev < stack) return -EINVAL;
        if (fn == L) /* dummy frame (lj_err_optype_call): not a function */
            w->n--;
        f = prev;
    }
    return 0;
}

/* A walk made again from live memory (the GC moved since the sample) names
 * what the thread runs now. Where the sample copied the thread (its
 * lua_State header, the stack windows) the live frames must be the
 * sample's: each frame's function and link slot that a window holds must
 * hold the same there, else the thread moved on (rl_torn: a resumer's
 * chain of the next generation under the sampled coroutine's frames). */
static bool live_is_sample(const struct ss_lj_runtime *rt, struct ss_mem *m,
                           const struct stackbuf *s, const struct lj_walk *w)
{
    const unsigned fr2 = rt->lay->gc64 ? 1 : 0;
    for (unsigned i = 0; i < w->n; i++)
        for (unsigned k = 0; k <= fr2; k++) {
            uint64_t a = w->f[i].frame - 8 * k, v, sv;
            if (!ss_lj_view_read(m, VIEW_SAMPLE, a, &sv, 8) && sb_u64(s, a, &v) && sv != v)
                return false;
        }
    return true;
}

/* Is pc (next instruction) inside p's bytecode? */
static bool pc_in(const struct ss_lj_runtime *rt, const struct lj_wframe *wf, uint64_t pc)
{
    if (!wf->proto) return false;
    uint64_t bc = wf->pt + rt->lay->pt_size;
    return pc > bc && pc <= bc + (uint64_t)wf->proto->sizebc * 4 && !(pc & 3);
}

/* Was fast function t entered through BC_FUNCC (a library function of C,
 * whose pc is the shared FUNCC instruction, where BC_FUNCC loads KBASE with
 * its lua_CFunction) rather than an ASM fast function's own bytecode? 1 yes,
 * 0 no (or the VM does not load KBASE so), -1 unreadable. */
static int entered_by_funcc(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_wframe *t)
{
    if (!rt->arch->funcc_kbase || !t->fnpc || (t->fnpc & 3)) return 0;
    struct lj_insent *ie = ins_slot(rt, t->fnpc + 4); /* (keyed by the pc after it) */
    if (ie->retpc != t->fnpc + 4) {
        uint32_t ins;
        rt->st.rounds++;
        if (ss_lj_view_read(m, VIEW_ANY, t->fnpc, &ins, 4)) return -1;
        ie->retpc = t->fnpc + 4;
        ie->ins = ins;
    }
    unsigned op = ie->ins & 0xff;
    return op == LJ_BC_FUNCC || op == LJ_BC_FUNCCW;
}

/* Current pc of every frame and validation of the cached CALL operands. */
static int frame_pcs(struct ss_lj_runtime *rt, const struct lj_start *st, struct cfr *cf,
                     struct lj_walk *w, const struct stackbuf *s, unsigned *cut)
{
    const struct lj_layout *lay = rt->lay;
    for (unsigned i = 0; i < w->n; i++) {
        struct lj_wframe *wf = &w->f[i];
        if (wf->ffid != 0) continue;
        /* A Lua function whose prototype cannot be read is not a frame we
         * can name: the stack was torn under us (never emit "?" frames). */
        if (!wf->proto) return -ESTALE;
        /* callee: nearest frame above that is not a VARG pseudo-frame */
        const struct lj_wframe *c = NULL;
        for (unsigned k = i; k-- > 0;)
            if ((w->f[k].ftsz & 7) != LJ_FRAME_VARG) {
                c = &w->f[k];
                break;
            }
        uint64_t pc = 0;
        if (!c && st->top) {
            /* The sampled frame: the PC register is exact, the stack slots
             * were read later. A function that is not the one PC runs in
             * took the slot after the sampled frame returned: stale. */
            uint64_t bc = wf->pt + lay->pt_size;
            if (pc_in(rt, wf, st->pc))
                pc = st->pc;
            else if (wf->proto && st->pc == bc) /* entering: PC at FUNCF */
                pc = bc + 4;
            else
                return -ESTALE;
        } else if (!c) {
            /* else SAVE_PC of the cframe this frame runs under (not
             * cf[0] when newer protected C calls own no frame) */
            const struct cfr *own = &cf[wf->seg];
            uint64_t bc = wf->pt + lay->pt_size;
            if (st->pc && pc_in(rt, wf, st->pc))
                pc = st->pc;
            else if (own->ok && pc_in(rt, wf, own->pc))
                pc = own->pc;
            else if (own->ok && wf->proto && own->pc == bc) /* entering: PC at FUNCF */
                pc = bc + 4;
            else
                return -ESTALE; /* no PC proves where it runs: no line 0 frames */
        } else if ((c->ftsz & 3) == LJ_FRAME_LUA) {
            pc = lay->gc64 ? (uint64_t)c->ftsz : (uint32_t)c->ftsz;
        } else if ((c->ftsz & 7) == LJ_FRAME_CONT) {
            uint64_t v = 0;
            if (lay->gc64)
                sb_u64(s, c->frame - 16, &v);
            else if (sb_u64(s, c->frame - 8, &v))
                v = v >> 32;
            pc = v;
        } else if (cf[wf->seg].ok) {
            pc = cf[wf->seg].pc;
        }
        wf->pc = pc_in(rt, wf, pc) ? pc : 0;
        /* A Lua-type link of the callee must point into this frame's
         * bytecode, right after the CALL whose A we used. */
        if (c && (c->ftsz & 3) == LJ_FRAME_LUA && wf->proto) {
            uint64_t retpc = wf->pc;
            struct lj_insent *ie = ins_slot(rt, retpc);
            uint64_t bc = wf->pt + lay->pt_size;
            if (!retpc || ie->retpc != retpc ||
                lj_u32(wf->proto->blob + lay->pt_size + (retpc - 4 - bc)) != ie->ins) {
                ie->retpc = 0;
                return -EAGAIN;
            }
            /* soundness (issue 32): a caller stands at a call; else the
             * frames above it are not proven: dropped and counted */
            if (!lj_bc_is_call(ie->ins)) *cut = i;
        }
    }
    return 0;
}

/* Is the walk w the sampled thread's? Checks of what the frames must show
 * against the sample's registers (st) and cframes (cf), after resolve.c
 * named them: 0, or -ESTALE when the thread moved on since the sample. */
static int fits_sample(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                       const struct cfr *cf, struct lj_walk *w)
{
    const struct lj_layout *lay = rt->lay;
    /* Headers kept by content (resolve.c): a function freed after the
     * sample and its memory reused by a closure seen there before would
     * name the frame; the sample's pc (a link, the PC register, a cframe's
     * saved PC) must lie in the prototype read. Else the sample cannot be
     * walked: the live stack has moved on (walks of it after a GC step
     * were where rl_torn found frames of other generations). */
    for (unsigned i = 0; w->by_content && i < w->n; i++)
        if (w->f[i].ffid == 0 && !w->f[i].pc) return -ESTALE;
    /* A C function or helper on top (not the sampled leaf): the PC register
     * recovered at the VM frame must fit the frame at L->base, else the
     * thread moved on since the sample (live reads are not atomic). */
    if (!st->top && st->newest && st->pc && w->n) {
        const struct lj_wframe *t = &w->f[0];
        bool ok = t->ffid == 0 ? pc_in(rt, t, st->pc) : st->pc == t->fnpc + 4;
        /* Fast functions reuse PC (coroutine.resume/wrap call vm_resume
         * with PC pointing into the stack): their SAVE_PC holds the
         * caller's return pc, which is this frame's link. A trace that
         * stitched the call (lj_ffrecord.c, recff_stitch) exits right into
         * the fast function, linked to a continuation frame: the link, and
         * so SAVE_PC, is that frame's delta (| FRAME_CONT). */
        bool stitched = (t->ftsz & 7) == LJ_FRAME_CONT;
        if (!ok && t->ffid > 1 && ((t->ftsz & 3) == LJ_FRAME_LUA || stitched) && cf[0].ok)
            ok = cf[0].pc == (lay->gc64 ? (uint64_t)t->ftsz : (uint32_t)t->ftsz);
        /* Every C function has the same PC (a shared FUNCC stub), so the
         * check above cannot tell load from collectgarbage. KBASE (r15) can:
         * BC_FUNCC loads it with the lua_CFunction it calls (vm_x64.dasc:
         * mov KBASEa, CFUNC:RB->f), while ASM fast functions calling C
         * helpers (and FUNCCW) keep the KBASE of the nearest Lua frame
         * below, its prototype's k. Anything else: the thread moved on.
         * After a stitched trace's exit KBASE is not loaded for the frame
         * below (vm_exit_interp goes to a fast function over a continuation
         * without it): nothing to compare for an ASM fast function. A C
         * function (ffid 1) is entered through BC_FUNCC there too, which
         * loads KBASE with its lua_CFunction: that must match (a thread read
         * after it moved on from one stitched C call to the next, e.g.
         * cjson.encode to cjson.decode, has the same continuation link and
         * so the same SAVE_PC). A library function of C (LJLIB_CF: ffi.*,
         * os.clock) runs through BC_FUNCC too, whatever its link: a
         * metamethod's continuation frame (ffi.meta.__index) looks like a
         * stitched exit, and the stale frame of one over a newer call of
         * ffi.string had passed unchecked. */
        int funcc = ok && t->ffid > 1 && st->kbase ? entered_by_funcc(rt, m, t) : 0;
        if (funcc < 0) return -ESTALE;
        if (funcc) {
            ok = st->kbase == t->cf;
        } else if (ok && t->ffid != 0 && st->kbase && (!stitched || t->ffid == 1)) {
            const struct lj_wframe *lf = NULL;
            for (unsigned k = 1; k < w->n && !lf; k++)
                if (w->f[k].ffid == 0 && w->f[k].proto) lf = &w->f[k];
            ok = st->kbase == t->cf ||
                 (lf && st->kbase == lj_ref(lay, lf->proto->sig + lay->pt_k)) || !lf;
        }
        if (!ok) return -ESTALE;
    }
    /* A thread waiting in coroutine.resume resumed the thread of the next
     * newer VM entry: its argument (BASE[0]) is that thread. Else this
     * walk's stack is not the sample's (rl_torn: the main thread read after
     * it moved on to the next generation's resume, under the sampled
     * coroutine of the one before). */
    if (st->resumed && w->n && w->f[0].ffid > 1 && w->f[0].ffid - 2u < *lay->nff &&
        !strcmp(lay->ff[w->f[0].ffid - 2], "coroutine.resume")) {
        uint64_t v = 0;
        if (!ss_lj_view_read(m, VIEW_ANY, w->f[0].frame + 8, &v, 8) &&
            (lay->gc64 ? v & LJ_GCVMASK : (uint32_t)v) != st->resumed)
            return -ESTALE;
    }
    /* A Lua frame on top that called a VM helper (FNEW's closure
     * allocation, a GC step, a metamethod lookup) runs with KBASE its
     * prototype's k; its pc alone cannot tell it from a prototype allocated
     * later over the sampled one's freed memory (rl_torn: a chunk's main
     * function at FNEW named as the next chunk's inner function). At the
     * entry (pc right after FUNCF: the hot call and the call hook run
     * before FUNCF loads KBASE) it is the caller's. */
    if (!st->top && st->newest && st->kbase && w->n && w->f[0].ffid == 0 && w->f[0].proto &&
        w->f[0].pc != w->f[0].pt + lay->pt_size + 4 &&
        st->kbase != lj_ref(lay, w->f[0].proto->sig + lay->pt_k))
        return -ESTALE;
    return 0;
}

/* One walk of the thread, in phases: the reads of its header and stack
 * (thread_read.c), the frame chain over that copy, the functions and
 * prototypes of its frames (resolve.c), their pcs, and the checks that
 * it is the sampled thread. */
static int walk_once(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                     struct lj_walk *w, struct stackbuf *s, bool live)
{
    struct lj_thread t;
    int rc = ss_lj_read_thread(rt, m, st, s, live, &t);
    if (rc) return rc;
    const struct lj_layout *lay = rt->lay;
    w->L = st->L;
    w->G = t.G;
    /* cframe chain: the current one (others are read as frames use them) */
    struct cfr cf[LJ_MAX_SEGS];
    memset(cf, 0, sizeof(cf));
    unsigned ncf = 1;
    ss_lj_read_cframe(rt, m, t.cframe, &cf[0]);
    if ((rc = chain(rt, m, s, t.stack, t.base, st->L, cf, &ncf, w))) return rc;
    w->live_slots = t.hdr_live || (w->n && w->f[w->n - 1].frame - (lay->gc64 ? 8 : 0) < s->live_hi);
    if (live && m->nwin && !live_is_sample(rt, m, s, w)) return -ESTALE;
    size_t elen = t.sampled ? ss_lj_gc_sample(rt, m, t.G, t.ep) : t.elen;
    if ((rc = ss_lj_resolve(rt, m, w, t.ep, elen))) return rc;
    /* Sampled in the VM between a frame's link and its function (call
     * setup or return): PC is the caller's return pc. The caller is the
     * frame that runs; the half-built or half-gone frame is dropped. */
    if (st->top && w->n > 1 && w->f[0].ffid == 0 && (w->f[0].ftsz & 3) == LJ_FRAME_LUA &&
        (lay->gc64 ? (uint64_t)w->f[0].ftsz : (uint32_t)w->f[0].ftsz) == st->pc &&
        !pc_in(rt, &w->f[0], st->pc)) {
        memmove(&w->f[0], &w->f[1], (w->n - 1) * sizeof(w->f[0]));
        w->n--;
    }
    unsigned cut = 0;
    if ((rc = frame_pcs(rt, st, cf, w, s, &cut))) return rc;
    if (cut) { /* the innermost caller not at a call: what is above it goes */
        memmove(&w->f[0], &w->f[cut], (w->n - cut) * sizeof(w->f[0]));
        w->n -= cut;
        w->unproven += cut;
    }
    if ((rc = fits_sample(rt, m, st, cf, w))) return rc;
    /* A builtin on top, read from the process (no copy of the thread in the
     * sample ties L->base to it), is proven only by PC and KBASE at the VM
     * frame (fits_sample). Where a stack scan below lost them (native_scan.c
     * stepped over code without CFI, and no CFI rule loaded them since),
     * nothing proves it: the builtins above the first Lua frame go, counted
     * (else a later call's metamethod is named over the sampled C
     * function). */
    if (st->regs_lost && !st->top && st->newest && !t.sampled && w->n && w->f[0].ffid > 1) {
        unsigned k = 0;
        while (k < w->n && w->f[k].ffid > 1 && w->f[k].seg == w->f[0].seg)
            k++;
        /* no Lua frame of the segment left to stand for its VM frame */
        if (k == w->n || w->f[k].ffid != 0 || w->f[k].seg != w->f[0].seg) return -ESTALE;
        memmove(&w->f[0], &w->f[k], (w->n - k) * sizeof(w->f[0]));
        w->n -= k;
        w->unproven += k;
    }
    return 0;
}

/* A walk found no lua_State where one must be. While no layout has ever
 * verified, 32 such failures turn Lua walking off with one diagnostic. */
static void note_bad_state(struct ss_lj_runtime *rt, uint64_t L, unsigned type_byte)
{
    if (rt->lay || rt->disabled || ++rt->bad_states < 32) return;
    rt->disabled = true;
    snprintf(rt->diag, sizeof(rt->diag),
             "pid %u: LuaJIT frames off: no known LuaJIT layout fits (%s%s): SAVE_L 0x%llx "
             "has type byte %u, not a lua_State, in %u VM frames",
             rt->pid, rt->info.version[0] ? rt->info.version : "unknown version",
             rt->info.gc64 ? " GC64" : " non-GC64", (unsigned long long)L, type_byte,
             rt->bad_states);
}

int ss_lj_walk_thread(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                      struct lj_walk *w)
{
    struct stackbuf s = {.buf = rt->sbuf, .cap = rt->sbuf_cap};
    int rc = -EINVAL;
    memset(w, 0, offsetof(struct lj_walk, f));
    if (st->L < 4096 || (st->L & 7) || rt->disabled) return -EINVAL;
    rt->st.walks++;
    bool live = false;
    for (int attempt = 0; attempt < 3; attempt++) {
        w->truncated = false;
        w->unproven = 0;
        rc = walk_once(rt, m, st, w, &s, live);
        if (rc == -ECANCELED) { /* the GC moved: the objects read may be gone */
            live = true;
            rc = -EAGAIN;
        }
        if (rc != -EAGAIN) break;
    }
    /* C called from an ASM fast function (math.sin -> sin): the VM did not
     * store L->base, but the fast function keeps its BASE in RB (rbp, C
     * callee-saved) across the call. Walk from there; the top frame must
     * then be a fast function whose pc is the PC register's (final check). */
    if ((rc == -ESTALE || rc == -EINVAL) && !st->top && st->rb && st->pc && st->kbase) {
        struct lj_start alt = *st;
        alt.base = st->rb;
        alt.use_base = true;
        w->truncated = false;
        w->unproven = 0;
        rc = walk_once(rt, m, &alt, w, &s, live);
        if (!rc && (!w->n || w->f[0].ffid <= 1)) rc = -ESTALE;
    }
    rt->sbuf = s.buf;
    rt->sbuf_cap = s.cap;
    for (unsigned i = 0; i < s.bad_L; i++) /* once a walk, as they failed */
        note_bad_state(rt, st->L, 0);
    if (rc) {
        w->n = 0;
        w->nsegs = 0;
        rt->st.bad_walks++;
    } else {
        rt->st.frames += w->n;
    }
    return rc;
}
