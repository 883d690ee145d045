/* unwind/luajit/vmstate.c: the pseudo frame that names what the VM was
 * doing when the sample hit C code it called: "[GC]", "[JIT compiler]"
 * (recording, optimising, assembling a trace) or "[trace exit]", the states
 * LuaJIT's own profiler separates (G->vmstate: -3 GC, -4 exit, -5 record,
 * -6 optimise, -7 assemble; >= 0 a trace, -1 interpreter, -2 C).
 *
 * vmstate is read live, milliseconds after the sample. It is trusted only
 * when the sampled call chain above the VM frame is still on the stack: the
 * return address of every C frame above it must be unchanged at the same
 * stack slot (read live, past the sample's snapshot). Then the target is
 * still inside those calls and the state is the one they run in. */
#include <string.h>

#include "unwind/luajit/lj_internal.h"

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

bool ss_lj_vmstate_frame(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G,
                         const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr)
{
    const struct lj_layout *lay = rt->lay;
    if (!lay || !G || i == 0 || i > MAX_CHECK) return false;
    struct ss_iov iov[MAX_CHECK + 1];
    uint64_t ret[MAX_CHECK];
    int32_t st = 0;
    iov[0] = (struct ss_iov){.addr = G + lay->G_vmstate, .dst = &st, .len = 4};
    for (uint32_t k = 0; k < i; k++) {
        if (natives[k].cfa < 16) return false;
        iov[k + 1] = (struct ss_iov){.addr = natives[k].cfa - 8, .dst = &ret[k], .len = 8};
    }
    /* the return addresses must come from the live stack, not the
     * snapshot: hide the snapshot layer for this one read */
    size_t snap_len = m->snap_len;
    m->snap_len = 0;
    rt->st.rounds++;
    int rc = ss_mem_readv(m, iov, (int)i + 1);
    m->snap_len = snap_len;
    if (rc || iov[0].err || !state_name(st)) return false;
    for (uint32_t k = 0; k < i; k++)
        if (iov[k + 1].err || ret[k] != natives[k + 1].ip) return false;
    memset(fr, 0, sizeof(*fr));
    fr->kind = SS_FRAME_PSEUDO;
    fr->name = state_name(st);
    return true;
}
