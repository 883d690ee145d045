/* unwind/luajit/names.h: naming what the LuaJIT walker found: a walk
 * frame's text (names.c) and the pseudo frame of a VM state (vmstate.c). */
#ifndef SS_LJ_NAMES_H
#define SS_LJ_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"
#include "unwind/luajit/frames.h"
#include "unwind/luajit/runtime.h"

/* Pseudo frame naming G's VM state ([GC], [JIT compiler], [trace exit])
 * for a sample whose natives[0..i) are C frames above VM/trace frame i (or
 * whose VM frame i is the trace exit handler): from the functions that
 * switch vmstate when known (stfn.c), else from the sample's own
 * G->vmstate (its window), else none. */
bool ss_lj_vmstate_frame(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                         const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr);

/* Fill fr (kind SS_FRAME_LUA) for walk frame i. */
void ss_lj_frame_text(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_walk *w,
                      unsigned i, struct ss_frame *fr);

#endif
