/* unwind/luajit/vmstate.c: the pseudo frame that names what the VM was
 * doing when the sample hit C code it called: "[GC]", "[JIT compiler]"
 * (recording, optimising, assembling a trace) or "[trace exit]", the states
 * LuaJIT's own profiler separates (G->vmstate: -3 GC, -4 exit, -5 record,
 * -6 optimise, -7 assemble; >= 0 a trace, -1 interpreter, -2 C).
 *
 * When the functions that switch vmstate are known (ss_lj_elfinfo.stfn:
 * symbols, or their code in stripped GC64 builds, stfn.c) the sampled call
 * chain decides alone: the innermost of its C frames inside such a function
 * names the state. Exact, and replayable.
 *
 * Otherwise the sample's own G->vmstate, in its window on the global state
 * (plan.c), names the state: exact too (stripped builds of either layout,
 * GC64 or not, whose state functions are not found).
 *
 * Without that window (--no-lua-window, captures made before the windows)
 * vmstate is read live, milliseconds after the sample. It
 * is trusted only when the sampled call chain above the VM frame is still on
 * the stack: the return address of every C frame above it must be unchanged
 * at the same stack slot, read both before and after vmstate in the same
 * process_vm_readv (a hot loop leaves and re-enters the same calls within
 * microseconds: one read after vmstate let GC steps in between be labelled
 * as the allocation they interrupted), and the slot below the leaf's stack
 * pointer must not hold a return address into the leaf's code (the leaf
 * went on to call something). Then the target is still inside those calls
 * and the state is the one they run in. */
#include <string.h>

#include "unwind/luajit/lj_internal.h"

#define MAX_CHECK 64
#define LEAF_MAX 1024

static const char *state_name(int32_t st)
{
    switch (st) {
    case -3:
        return "[GC]";
    case -4:
        return "[trace exit]";
    case -5:
    case -6:
    case -7:
        return "[JIT compiler]";
    default:
        return NULL;
    }
}

static bool pseudo(struct ss_frame *fr, const char *name)
{
    memset(fr, 0, sizeof(*fr));
    fr->kind = SS_FRAME_PSEUDO;
    fr->name = name;
    return name != NULL;
}

/* The state of the innermost C frame inside a state-switching function. */
static bool by_symbols(const struct ss_lj_runtime *rt, const struct ss_lj_native *natives,
                       uint32_t i, struct ss_frame *fr)
{
    for (uint32_t k = 0; k < i; k++) {
        /* a return address may sit right past a call that ends its function */
        uint64_t pc = natives[k].ip - rt->bias - (k > 0 && !natives[k].signal);
        for (uint32_t j = 0; j < rt->info.nstfn; j++) {
            const struct ss_lj_stfn *f = &rt->info.stfn[j];
            if (pc >= f->lo && pc < f->hi) return pseudo(fr, state_name(~(int32_t)f->state));
        }
    }
    return false;
}

/* G->vmstate as of the sample: 1 labelled, 0 no state to label (the
 * interpreter, C, a trace), -1 the sample does not hold it. */
static int by_sample(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                     struct ss_frame *fr)
{
    const uint8_t *p = G ? ss_mem_peek_sample(m, G + rt->lay->G_vmstate, 4) : NULL;
    if (!p) return -1;
    return pseudo(fr, state_name((int32_t)lj_u32(p))) ? 1 : 0;
}

/* The live check of stripped builds whose state functions are unknown. */
static bool by_live(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t sp,
                    const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr)
{
    const struct lj_layout *lay = rt->lay;
    if (!G || sp < 16) return false;
    /* iov: return slots (i), vmstate, return slots again (i), below, leaf */
    struct ss_iov iov[2 * MAX_CHECK + 3];
    uint64_t ret[2][MAX_CHECK], below = 0;
    int32_t st = 0;
    for (uint32_t k = 0; k < i; k++) {
        if (natives[k].cfa < 16) return false;
        for (int r = 0; r < 2; r++)
            iov[k + (uint32_t)r * (i + 1)] =
                (struct ss_iov){.addr = natives[k].cfa - 8, .dst = &ret[r][k], .len = 8};
    }
    iov[i] = (struct ss_iov){.addr = G + lay->G_vmstate, .dst = &st, .len = 4};
    /* the slot a call from the sampled leaf would push its return address to */
    iov[2 * i + 1] = (struct ss_iov){.addr = sp - 8, .dst = &below, .len = 8};
    /* the leaf's own frame, to compare with the snapshot */
    uint8_t live[LEAF_MAX];
    const uint8_t *snap = NULL;
    size_t flen = natives[0].cfa > sp ? natives[0].cfa - sp : 0;
    if (flen > LEAF_MAX) flen = LEAF_MAX;
    if (!flen || !(snap = ss_mem_peek_snap(m, sp, flen))) return false;
    if (m->track) ss_mem_track_snap(m->track, m, sp, flen); /* replay's memo (memory.h) */
    iov[2 * i + 2] = (struct ss_iov){.addr = sp, .dst = live, .len = flen};
    /* the return addresses must come from the live stack, not the
     * snapshot: hide the snapshot layer for this one read */
    size_t snap_len = m->snap_len;
    m->snap_len = 0;
    rt->st.rounds++;
    int rc = ss_mem_readv(m, iov, (int)(2 * i + 3));
    m->snap_len = snap_len;
    if (rc || iov[i].err || !state_name(st)) return false;
    for (uint32_t k = 0; k < i; k++)
        for (int r = 0; r < 2; r++)
            if (iov[k + (uint32_t)r * (i + 1)].err || ret[r][k] != natives[k + 1].ip) return false;
    /* A return address into the leaf's code right below its frame: the
     * leaf may have called deeper since the sample (say, a string function
     * calling into the GC), and the state would be the callee's. It may
     * also be left over from an earlier call: either way, no label. */
    uint64_t leaf = natives[0].ip;
    if (!iov[2 * i + 1].err && below > leaf - 0x10000 && below < leaf + 0x10000) return false;
    /* and the leaf's frame must hold what it held at the sample */
    if (iov[2 * i + 2].err || memcmp(live, snap, flen)) return false;
    return pseudo(fr, state_name(st));
}

bool ss_lj_vmstate_frame(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G, uint64_t sp,
                         const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr)
{
    if (!rt->lay || i > MAX_CHECK) return false;
    if (i > 0 && rt->info.nstfn && by_symbols(rt, natives, i, fr)) return true;
    if (i > 0 && !rt->info.nstfn) {
        /* the walk's G, else the only one known (the walk may have failed) */
        int s = by_sample(rt, m, G ? G : rt->ngs == 1 ? rt->gs[0] : 0, fr);
        if (s > 0 || (s < 0 && by_live(rt, m, G, sp, natives, i, fr))) return true;
    }
    /* the VM frame itself in the trace exit handler: a leaf there */
    uint64_t at = natives[i].ip - rt->bias;
    if (rt->info.exit_lo && at >= rt->info.exit_lo && at < rt->info.exit_ret)
        return pseudo(fr, state_name(~3));
    return false;
}
