/* unwind/luajit/splice.c: merge Lua frames into a native frame list.
 *
 * For every native frame whose ip lies in a LuaJIT VM range, its cframe
 * sits at CFA - CFRAME_SIZE and holds SAVE_L, the lua_State that VM entry
 * runs. Each lua_State is walked once per sample (frames.c); its frames are
 * split into segments by the cframes their C/CP frames consume, and the
 * segment whose cframe is this VM frame's cframe replaces the VM frame.
 * C functions called from Lua (ffid 1) are left out of the Lua segment:
 * their native frames already sit above the VM frame. A VM frame whose
 * state cannot be walked or matched stays a native frame (counted in
 * out->vm_failed), so a sample never gets garbage Lua frames; under the
 * Lua frames of a newer entry it is a cut, marked [truncated]. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"
#include "unwind/luajit/names.h"

#define MAX_THREADS LJ_SPLICE_THREADS

struct thr {
    uint64_t L;
    int rc;
    struct lj_walk *w;
};

static struct ss_lj_runtime *find_rt(struct ss_lj_runtime *const *rts, uint32_t nrts, uint64_t ip)
{
    for (uint32_t i = 0; i < nrts; i++)
        if (rts[i] && ss_lj_in_vm(rts[i], ip)) return rts[i];
    return NULL;
}

static int push(struct ss_lj_out *out, int32_t native, const struct ss_frame *fr)
{
    if (out->n >= out->cap) return -ENOSPC;
    struct ss_lj_item *it = &out->items[out->n++];
    it->native = native;
    it->cf = 0;
    if (fr)
        it->lua = *fr;
    else
        memset(&it->lua, 0, sizeof(it->lua));
    return 0;
}

/* A [truncated] frame: the chain is cut there, one frame counted as left
 * out (issue 32: a cut chain says it is cut). */
static int push_cut(struct ss_lj_out *out)
{
    if (out->n >= out->cap) return -ENOSPC;
    struct ss_lj_item *it = &out->items[out->n++];
    memset(it, 0, sizeof(*it));
    it->native = -1;
    it->lua.kind = SS_FRAME_PSEUDO;
    it->lua.name = "[truncated]";
    it->lua.unproven = 1;
    return 0;
}

/* Emit segment seg of walk w; false when the segment is not in the walk. */
static int emit_segment(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_walk *w,
                        uint64_t cframe, struct ss_lj_out *out, bool *found)
{
    unsigned seg;
    *found = false;
    for (seg = 0; seg < w->nsegs; seg++)
        if (w->seg_cframe[seg] == cframe) break;
    if (seg == w->nsegs) return 0;
    *found = true;
    for (unsigned i = 0; i < w->n; i++) {
        const struct lj_wframe *wf = &w->f[i];
        if (wf->seg != seg || (wf->ftsz & 7) == LJ_FRAME_VARG || wf->ffid == 1) continue;
        if (out->n >= out->cap) return -ENOSPC;
        struct ss_lj_item *it = &out->items[out->n++]; /* the text goes there directly */
        it->native = -1;
        it->cf = wf->ffid > 1 ? wf->cf : 0;
        ss_lj_frame_text(rt, m, w, i, &it->lua);
        if (i == 0) it->lua.unproven = w->unproven < 255 ? (uint8_t)w->unproven : 255;
        out->lua_frames++;
    }
    /* a walk cut short (frame cap, stack unreadable below) in this segment:
     * its chain does not reach the segment's root, and says so (issue 32):
     * a [truncated] root, counted as one frame left out */
    if (w->truncated && w->n && w->f[w->n - 1].seg == seg) return push_cut(out);
    return 0;
}

/* A walk that names a prototype without a chunk name read objects from
 * freed memory (runtime.c: cn_bad): none of its frames is kept (rl_torn
 * caught such walks mixing frames of several generations). */
static bool torn(const struct lj_walk *w)
{
    for (unsigned i = 0; i < w->n; i++)
        if (w->f[i].ffid == 0 && w->f[i].proto && w->f[i].proto->cn_bad) return true;
    return false;
}

/* Whether the cframe of a VM frame owns Lua frames: nres < 0 marks
 * lj_vm_cpcall's (the trace compiler, the parser, lua_cpcall), whose C
 * callee runs on the frames of an older entry. Unreadable: assume it does. */
static bool owns_frames(struct ss_lj_runtime *rt, struct ss_mem *mem, uint64_t cframe)
{
    int32_t nres = 0;
    return !rt->lay || ss_mem_read(mem, cframe + rt->lay->cf_nres, &nres, 4) || nres >= 0;
}

/* PC and KBASE (rbx, r15; 0 unknown) that must fit the thread's top frame,
 * walking from VM frame natives[i]. A cpcall cframe owns no Lua frame and
 * its rbx is no Lua PC: the top frame is then the one of the next VM frame
 * down the native chain whose cframe owns frames, checked with its
 * registers. *lost: PC or KBASE there were lost to a stack scan below
 * (ss_lj_native.lost; they are 0 then). */
static void top_regs(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs,
                     const struct ss_lj_native *natives, uint32_t n, uint32_t i, uint64_t *pc,
                     uint64_t *kbase, uint64_t *rb, bool *lost)
{
    *pc = *kbase = *rb = 0;
    *lost = false;
    if (!rt->lay) return;
    for (uint32_t j = i; j < n; j++) {
        const struct ss_lj_native *nf = &natives[j];
        bool top = j == 0 && !nf->signal;
        if (nf->trace || !ss_lj_in_vm(rt, top || nf->signal ? nf->ip : nf->ip - 1)) continue;
        if (nf->cfa <= rt->info.vm_cfa_off) return;
        if (!owns_frames(rt, mem, nf->cfa - rt->info.vm_cfa_off)) continue;
        if (top) {
            *pc = regs[rt->arch->pc];
            *kbase = regs[rt->arch->kbase];
            return;
        }
        *lost = (nf->lost & (SS_LJ_HAVE_RBX | SS_LJ_HAVE_R15)) != 0;
        if (nf->have & SS_LJ_HAVE_RBX) *pc = nf->rbx;
        if (nf->have & SS_LJ_HAVE_R15) *kbase = nf->r15;
        if (nf->have & SS_LJ_HAVE_RBP) *rb = nf->rbp;
        return;
    }
}

/* Walk thread L from the VM frame natives[i] (cframe), taken to be L's
 * newest VM entry: validated against L->cframe and the PC register. */
static int walk_vm(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs,
                   const struct ss_lj_native *natives, uint32_t n, uint32_t i, uint64_t L,
                   uint64_t cframe, uint64_t resumed, struct lj_walk *w)
{
    const struct ss_lj_native *nf = &natives[i];
    bool top = i == 0 && !nf->signal, had_lay = rt->lay != NULL;
    uint64_t pc = 0, kbase = 0, rb = 0;
    bool lost = false;
    if (!top) top_regs(rt, mem, regs, natives, n, i, &pc, &kbase, &rb, &lost);
    struct lj_start st = {
        .L = L,
        .cframe = cframe,
        .top = top,
        .newest = true,
        .base = top ? regs[rt->arch->base] : 0,
        .pc = top ? regs[rt->arch->pc] : pc,
        .kbase = kbase,
        .rb = rb,
        .resumed = resumed,
        .regs_lost = lost,
    };
    int rc = ss_lj_walk_thread(rt, mem, &st, w);
    /* The process's first walk verified the layout (frames.c: the thread's
     * G): the registers at the VM frame were not known before it (top_regs
     * needs the cframe's layout), and a walk without them checks no top
     * frame against the sample (a live stack of later calls, named over
     * the sampled C function: ffi.meta.__index over lj_cf_ffi_meta___call).
     * Walked again with them. */
    if (!top && !had_lay && rt->lay) {
        top_regs(rt, mem, regs, natives, n, i, &st.pc, &st.kbase, &st.rb, &st.regs_lost);
        rc = ss_lj_walk_thread(rt, mem, &st, w);
    }
    return rc;
}

int ss_lj_splice(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                 const uint64_t *regs, const struct ss_lj_native *natives, uint32_t n,
                 struct ss_lj_out *out)
{
    struct thr th[MAX_THREADS];
    unsigned nth = 0, cpcalls = 0; /* VM frames of cframes that own no Lua frame */
    int rc = 0;
    out->n = out->lua_frames = out->vm_frames = out->vm_failed = 0;
    for (uint32_t k = 0; k < nrts; k++) /* prototypes used by this splice stay put */
        if (rts[k]) rts[k]->epoch++;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const struct ss_lj_native *nf = &natives[i];
        /* return addresses point after the call: look up ip - 1 */
        uint64_t look = (i == 0 || nf->signal) ? nf->ip : nf->ip - 1;
        struct ss_lj_runtime *rt = NULL;
        const struct ss_lj_tsample *ts = NULL; /* JIT trace frame (trace.c) */
        if (nf->trace)
            ts = ss_lj_trace_sample(rts, nrts, nf->trace, &rt);
        else
            rt = find_rt(rts, nrts, look);
        if (!rt) {
            rc = push(out, (int32_t)i, NULL);
            continue;
        }
        out->vm_frames++;
        bool done = false;
        uint64_t cframe = nf->cfa - rt->info.vm_cfa_off;
        uint64_t L = 0;
        unsigned cfl = rt->info.gc64 ? 16 : 24;
        if (!rt->disabled && nf->cfa > rt->info.vm_cfa_off &&
            ss_mem_read(mem, cframe + cfl, &L, 8) == 0) {
            if (!rt->info.gc64) L = (uint32_t)L;
            struct thr *t = NULL;
            for (unsigned k = 0; k < nth; k++)
                if (th[k].L == L) t = &th[k];
            if (!t && nth < MAX_THREADS) {
                t = &th[nth++];
                t->L = L;
                if (!rt->walks[nth - 1]) rt->walks[nth - 1] = malloc(sizeof(*t->w));
                t->w = rt->walks[nth - 1];
                t->rc = -ENOMEM;
                if (t->w && ts)
                    t->rc = ss_lj_trace_walk(rt, mem, ts, L, cframe, t->w);
                else if (t->w)
                    t->rc = walk_vm(rt, mem, regs, natives, n, i, L, cframe,
                                    nth > 1 ? th[nth - 2].L : 0, t->w);
                if (t->rc == 0 && torn(t->w)) t->rc = -ESTALE;
            }
            /* The newest VM entry that owns Lua frames: protected C calls
             * (cpcall, nres < 0) newer than it run C code on its frames */
            bool owns = ts || owns_frames(rt, mem, cframe);
            bool newest = owns && out->vm_frames - cpcalls == 1;
            if (!owns) cpcalls++;
            /* C code above it: name the VM state ([GC], [JIT compiler], ...)
             * between that code and the Lua frames */
            struct ss_frame ps;
            if (newest &&
                ss_lj_vmstate_frame(rt, mem, t && t->rc == 0 ? t->w->G : 0, natives, i, &ps) &&
                (rc = push(out, -1, &ps)))
                break;
            if (t && t->rc == 0 && rt->lay &&
                (rc = emit_segment(rt, mem, t->w, cframe, out, &done)))
                break;
        }
        if (!done) {
            out->vm_failed++;
            /* Lua frames of newer VM entries are out already, leafward of
             * this one: the frames that made their calls (a coroutine's
             * resumer, a C function's Lua callers) are this entry's, not
             * walked. They must not hang under this VM frame as if it
             * called them (issue 32; seen in the arm64 VM: a coroutine's
             * frames right under the main thread's wrap_aux, the resumer's
             * read after it moved on): the chain is cut between them. */
            if (out->lua_frames && (rc = push_cut(out))) break;
            rc = push(out, (int32_t)i, NULL);
        }
    }
    return rc;
}
