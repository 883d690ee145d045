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
 * there is no label: G->vmstate read milliseconds after the sample names
 * whatever the VM does then, not what it did at the sample. */
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/names.h"

#define MAX_CHECK 64

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

/* G->vmstate as of the sample, when it names a state (not the
 * interpreter, C or a trace) and the sample holds it. Tarantool's fork
 * numbers its states LFUNC, FFUNC, CFUNC after INTERP (lay->vmst_shift):
 * those run Lua or C code (upstream's C), the later ones move down. */
static bool by_sample(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                      struct ss_frame *fr)
{
    const uint8_t *p = G ? ss_mem_peek_sample(m, G + rt->lay->G_vmstate, 4) : NULL;
    if (!p) return false;
    int32_t v = (int32_t)lj_u32(p), sh = rt->lay->vmst_shift;
    if (v < -1 && sh) v = v >= -2 - sh ? -2 : v + sh;
    return pseudo(fr, state_name(v));
}

bool ss_lj_vmstate_frame(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                         const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr)
{
    if (!rt->lay || i > MAX_CHECK) return false;
    if (i > 0 && rt->info.nstfn && by_symbols(rt, natives, i, fr)) return true;
    if (i > 0 && !rt->info.nstfn) {
        /* the walk's G, else the only one known (the walk may have failed) */
        if (by_sample(rt, m, G ? G : rt->ngs == 1 ? rt->gs[0] : 0, fr)) return true;
    }
    /* the VM frame itself in the trace exit handler: a leaf there */
    uint64_t at = natives[i].ip - rt->bias;
    if (rt->info.exit_lo && at >= rt->info.exit_lo && at < rt->info.exit_ret)
        return pseudo(fr, state_name(~3));
    return false;
}
