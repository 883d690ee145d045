/* unwind/walk.c: the walk of one sample (ss_unwind, include/stacksnap/unwind.h),
 * in the order a sample goes: the process's bundle the sample's intake
 * readied (procs.c, ss_unwinder_intake: no process is made or freed here); the answer of an earlier
 * walk with the same inputs (replay's memo, memo.h); else the user frames: the native walk of the
 * snapshot (native.h) with the LuaJIT adapter (lua.h) asked at the leaf and at each frame in
 * anonymous code, its Lua frames spliced in, all named (symbolize/), walked again on the new view
 * when the maps were re-read during the walk; the kernel frames (kernel.c); the walk kept for the
 * memo. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "process/perfmap.h"
#include "process/process.h"
#include "symbolize/symbolize.h"
#include "unwind/lua.h"
#include "unwind/lua_runtimes.h"
#include "unwind/memo.h"
#include "unwind/procs.h"
#include "unwind/unwinder.h"

_Static_assert(SS_READ_REWALK == -ERESTART, "the capture format's marker is -ERESTART");

/* What the walk of out cut or stepped over, counted (ss_stack_facts). */
static void count_facts(struct ss_unwinder *u, const struct ss_stack *out)
{
    unsigned n = ss_stack_unproven(out), f = ss_stack_facts(out);
    u->st.lua_unproven += n;
    u->st.lua_unproven_samples += n > 0;
    u->st.truncated += (f & SS_SF_TRUNCATED) != 0;
    u->st.trace_cut += (f & SS_SF_TRACE_CUT) != 0;
    u->st.scan_stale += (f & SS_SF_STALE) != 0;
    u->st.nocfi += (f & SS_SF_NOCFI) != 0;
    u->st.nocfi_root += (f & SS_SF_NOCFI_ROOT) != 0;
}

void ss_unwind_start(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out)
{
    memset(out, 0, sizeof(*out));
    out->pid = s->pid;
    out->tid = s->tid;
    out->cpu = s->cpu;
    out->time_ns = s->time_ns;
    out->weight = s->weight;
    out->frames = u->out;
    u->st.samples++;
}

void ss_unwind_comm(struct ss_stack *out, const struct ss_uproc *up)
{
    const char *comm = ss_proc_comm(up->proc); /* (snprintf cost 1 % of a LuaJIT replay) */
    size_t cl = strnlen(comm, sizeof(out->comm) - 1);
    memcpy(out->comm, comm, cl);
    out->comm[cl] = 0;
}

/* The frames of an earlier walk with the same inputs (replay's memo,
 * memo.h), n of them, into out. */
static void answered(struct ss_unwinder *u, struct ss_stack *out, const struct ss_frame *f,
                     unsigned n, uint8_t tr)
{
    out->frames = (struct ss_frame *)f; /* the memo's own copy: valid until the next call on u */
    out->nframes = n;
    out->trunc = tr;
    u->st.frames += n;
    u->st.trunc[tr]++;
    u->st.memo_hits++;
    count_facts(u, out);
}

/* The native walk from nf[0] (max frames at most), held at anonymous code
 * when hold is set. */
static unsigned native_run(struct ss_uproc *up, struct ss_native_frame *nf, unsigned max, bool hold,
                           enum ss_trunc *why, bool *held)
{
    return hold ? ss_native_unwind_held(up->np, nf, max, why, held)
                : ss_native_unwind(up->np, nf, max, why);
}

/* The native frames of the sample into u->nf, the LuaJIT adapter (l, when
 * the process runs LuaJIT) asked at the leaf and at each frame the walk
 * holds at (lua.h): where it knows the code, the walk goes on from the
 * caller of the VM frame it names; where it does not, as a plain walk
 * would, so the frames are those of plain walks. */
static unsigned native_frames(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_sample *s,
                              struct ss_luaproc *l, bool hold, enum ss_trunc *why)
{
    struct ss_native_frame *nf = u->nf;
    unsigned max = u->o.max_frames, n;
    bool held = false;
    ss_native_frame_from_sample(&nf[0], s->regs);
    uint64_t cfa = l ? ss_lua_vm_frame(l, up, nf, 0, SS_LUA_LEAF, s) : 0;
    if (cfa && max >= 2 && ss_lua_vm_caller(up, cfa, &nf[1])) {
        nf[0].cfa = cfa;
        n = 1 + native_run(up, &nf[1], max - 1, hold, why, &held);
    } else if (l && ss_lua_in_trace(l, up, &nf[0])) {
        /* trace code the Lua walk could not claim: its caller is the VM's
         * frame, which it could not find; a scan would take stale return
         * addresses of earlier calls (the trace's spill slots reuse that
         * stack): the stack ends here, truncated */
        ss_lua_native_leaf(l);
        nf[0].flags |= SS_NF_TRACE_CUT;
        *why = SS_TRUNC_NOINFO;
        return 1;
    } else {
        if (l) ss_lua_native_leaf(l);
        n = native_run(up, nf, max, hold, why, &held);
    }
    for (unsigned k = 1; hold && k <= n && k < max; k++) {
        if (k == n) {
            /* the walk ended at a return address it would not take (JIT
             * code in a mapping it does not know as executable): take it
             * only if the hook knows it */
            struct ss_native_frame tmp;
            enum ss_trunc w2;
            memset(&tmp, 0, sizeof(tmp));
            if (*why != SS_TRUNC_BADIP || ss_native_step(up->np, &nf[n - 1], &tmp, &w2) ||
                !ss_nf_ip(&tmp) || !(tmp.regs.valid & SS_DBIT(SS_DR_SP)))
                break;
            nf[n] = tmp;
            if (!(cfa = ss_lua_vm_frame(l, up, nf, k, SS_LUA_END, s))) {
                /* code the hook does not know (a process gone before its
                 * walk: its JIT code is in no mapping the side band told):
                 * step over it as code without CFI (native_scan.c); not
                 * trace code (see the leaf's) */
                if (!ss_proc_anon_code(up->proc, ss_nf_ip(&tmp)) || n + 1 > max) break;
                if (ss_lua_in_trace(l, up, &tmp)) {
                    nf[n - 1].flags |= SS_NF_TRACE_CUT; /* it returns into trace code */
                    break;
                }
                n = ss_native_unwind_on(up->np, nf, n + 1, max, why, &held);
                continue;
            }
            n++;
        } else if (!(cfa = ss_lua_vm_frame(l, up, nf, k, SS_LUA_FRAME, s))) {
            /* not the hook's code: the step the held walk left out (but
             * over trace code it could not claim: truncated, as at the leaf) */
            if (held && k == n - 1 && ss_lua_in_trace(l, up, &nf[k])) {
                nf[k].flags |= SS_NF_TRACE_CUT;
                break;
            }
            if (held && k == n - 1) n = ss_native_unwind_on(up->np, nf, n, max, why, &held);
            continue;
        }
        held = false;
        nf[k].cfa = cfa;
        if (k + 1 >= max || !ss_lua_vm_caller(up, cfa, &nf[k + 1])) {
            *why = k + 1 >= max ? SS_TRUNC_DEPTH : SS_TRUNC_SNAPSHOT;
            return k + 1;
        }
        n = k + 1 + native_run(up, &nf[k + 1], max - k - 1, true, why, &held);
    }
    return n;
}

/* A frame in code without CFI that the native walk stepped over
 * (native_scan.c): its perf-map name (or symbol), else "[jit] MODULE" by the
 * mapping's basename, "[jit] [anon]" for anonymous memory. */
static void name_jit(struct ss_strpool *pool, struct ss_frame *f)
{
    f->flags |= SS_FF_NOCFI;
    if (f->name) return;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base && base[1] ? base + 1 : f->module;
    char buf[300];
    snprintf(buf, sizeof(buf), "[jit] %.280s", base && *base ? base : "[anon]");
    f->name = ss_strpool_intern(pool, buf);
    f->sym_offset = 0;
}

/* The n output frames into u->out: native ones symbolized, the Lua ones
 * as the adapter made them. A perf map re-read while naming (a JIT frame missed): the
 * whole sample named again with the new map, the one the capture records
 * for it. */
void ss_unwind_name(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_luaproc *l,
                    unsigned n)
{
    struct ss_native_frame *nf = u->nf;
    uint32_t pmv = ss_perfmap_version(up->pm);
    for (int pass = 0; pass < 2; pass++) {
        int32_t prev = -1; /* the native frame u->out[i - 1] names */
        for (unsigned i = 0; i < n; i++) {
            const struct ss_frame *own = NULL;
            int32_t k = l ? ss_lua_item(l, i, &own) : (int32_t)i;
            bool exact = k >= 0 && (nf[k].flags & (SS_NF_EXACT | SS_NF_SIGNAL)) != 0;
            if (k >= 0 && prev >= 0 && ss_nf_ip(&nf[k]) == ss_nf_ip(&nf[prev]) &&
                exact == ((nf[prev].flags & (SS_NF_EXACT | SS_NF_SIGNAL)) != 0))
                u->out[i] = u->out[i - 1]; /* recursion: what the cache would give again */
            else if (k >= 0) {
                ss_symbolize_native(up->syms, u->strs, up->proc, ss_nf_ip(&nf[k]), exact,
                                    &u->out[i]);
                if (nf[k].flags & SS_NF_JIT) name_jit(u->strs, &u->out[i]);
            } else
                u->out[i] = *own;
            if (k >= 0) { /* what the walk cut or refused there (ss_stack_facts) */
                u->out[i].flags &= (uint8_t) ~(SS_FF_TRACE_CUT | SS_FF_STALE);
                u->out[i].flags |= (uint8_t)((nf[k].flags & SS_NF_TRACE_CUT ? SS_FF_TRACE_CUT : 0) |
                                             (nf[k].flags & SS_NF_STALE ? SS_FF_STALE : 0));
            }
            if (k >= 0 && l) ss_lua_rename(l, u->strs, u->out, i, n);
            prev = k;
        }
        if (ss_perfmap_version(up->pm) == pmv) break;
        pmv = ss_perfmap_version(up->pm);
    }
}

/* One walk of the user frames into u->out: the native frames with the
 * Lua ones at their VM frames; returns their number (0: out of memory). */
static unsigned user_walk(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_sample *s,
                          enum ss_trunc *why)
{
    bool hold = false;
    struct ss_luaproc *l = ss_lua_begin(u, up, &hold);
    unsigned nn = native_frames(u, up, s, l, hold, why);
    unsigned n = l ? ss_lua_splice(l, u, up, s, nn) : nn;
    if (l) ss_lua_plan_early(u, l); /* before the names: the first walk loads their tables */
    if (ss_unwinder_reserve(u, n) < 0) return 0;
    ss_unwind_name(u, up, l, n);
    return n;
}

/* The user frames into u->out, walked again on the new view when the
 * maps were re-read during the walk; *gen: the generation it began on. */
static unsigned user_frames(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_sample *s,
                            uint64_t *gen, enum ss_trunc *why)
{
    /* frames above the leaf from an earlier walk with the same inputs
     * (native_memo.c): exact, and off where every frame is to be walked */
    ss_nproc_set_memo(up->np, u->state[0] && !u->no_memo);
    *gen = ss_proc_generation(up->proc);
    unsigned nn = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            /* An address missed: walk again on the new view only, which
             * is what the capture records and what replay will use, so
             * live and replay stay identical. */
            *why = SS_TRUNC_NONE;
            if (u->o.record) u->o.record(u->o.record_ctx, s->pid, 0, NULL, 0, SS_READ_REWALK);
        }
        nn = user_walk(u, up, s, why);
        if (ss_proc_generation(up->proc) == *gen) break;
    }
    return nn;
}

void ss_unwind_finish(struct ss_unwinder *u, struct ss_stack *out, unsigned n, enum ss_trunc why)
{
    out->frames = u->out;
    out->nframes = n;
    out->trunc = (uint8_t)why;
    u->st.frames += n;
    u->st.trunc[why]++;
}

int ss_unwind(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out)
{
    ss_unwind_start(u, s, out);
    int code;
    struct ss_uproc *up = ss_procs_ready(u, s, &code);
    if (!up) {
        u->st.errors++;
        out->trunc = SS_TRUNC_ERROR;
        return code;
    }
    ss_unwind_comm(out, up);
    struct ss_memo_walk w = {.state = {u->state[0], u->state[1]}, .log = &u->track};
    enum ss_trunc why = SS_TRUNC_NONE;
    unsigned nn = 0;
    if (s->regs[SS_REG_IP] || s->regs[SS_REG_SP] || !s->nkernel) { /* else compat: kernel alone */
        uint64_t calls = up->mem.n_target_calls;
        uint8_t tr;
        const struct ss_frame *f = ss_memo_answer(up, s, u->state[0] && !u->no_memo, &w, &nn, &tr);
        if (f) {
            answered(u, out, f, nn, tr);
            return 0;
        }
        nn = user_frames(u, up, s, &w.gen, &why);
        up->mem.track = NULL;
        u->read_walks += up->mem.n_target_calls != calls;
        if (nn == 0 && u->o.max_frames) {
            out->trunc = SS_TRUNC_ERROR;
            return -ENOMEM;
        }
    }
    (void)ss_unwinder_reserve(u, (size_t)nn + SS_KSTACK_MAX); /* else no kernel frames */
    nn = ss_unwind_kernel(u, s, nn);
    ss_unwind_finish(u, out, nn, why);
    ss_memo_keep(up, s, &w, u->out, nn, (uint8_t)why);
    count_facts(u, out);
    return 0;
}

unsigned ss_stack_unproven(const struct ss_stack *st)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < st->nframes; i++)
        n += st->frames[i].unproven;
    return n;
}

unsigned ss_stack_facts(const struct ss_stack *st)
{
    unsigned f = st->trunc != SS_TRUNC_NONE ? SS_SF_TRUNCATED : 0;
    for (uint32_t i = 0; i < st->nframes; i++) {
        const struct ss_frame *fr = &st->frames[i];
        if (fr->kind == SS_FRAME_PSEUDO && fr->unproven) f |= SS_SF_TRUNCATED; /* [truncated] */
        if (fr->flags & SS_FF_TRACE_CUT) f |= SS_SF_TRACE_CUT;
        if (fr->flags & SS_FF_STALE) f |= SS_SF_STALE;
        if (fr->flags & SS_FF_NOCFI) f |= SS_SF_NOCFI;
    }
    if ((f & SS_SF_NOCFI) && !(f & SS_SF_TRUNCATED)) f |= SS_SF_NOCFI_ROOT;
    return f;
}

int ss_unwind_twice(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out,
                    void (*between)(void *ctx), void *ctx)
{
    int code;
    struct ss_uproc *up = ss_procs_taken(u, s, &code); /* ss_unwind takes it */
    if (up) {
        enum ss_trunc why = SS_TRUNC_NONE;
        (void)user_walk(u, up, s, &why);
    }
    between(ctx);
    /* the second walk's reads are not all the sample's: no memo */
    u->no_memo = true;
    int r = ss_unwind(u, s, out);
    u->no_memo = false;
    return r;
}
