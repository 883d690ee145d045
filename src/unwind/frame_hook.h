/* unwind/frame_hook.h: how the walker of a runtime whose frames the native
 * walk can neither step through nor name (LuaJIT's VM and trace code: the
 * adapter in lua.c) plugs into the walk of a sample (walk.c).
 *
 * The walk asks the hook about the leaf and about each frame at which the
 * native walk holds (ss_native_unwind_held: a frame in anonymous code, before
 * libunwind would guess there) or ends on a return address it would not take.
 * Where the hook knows the frame's code, it answers the CFA of the VM frame
 * that code runs on and the VM frame's caller, and the native walk goes on
 * from there; where it does not, the native walk goes on as a plain one
 * would (ss_native_unwind_on). After the native walk the hook splices its
 * own frames in among the native ones (a VM frame becomes the Lua frames it
 * runs), and may name a native frame more closely by the frame after it. */
#ifndef SS_UNWIND_FRAME_HOOK_H
#define SS_UNWIND_FRAME_HOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/unwind.h"
#include "unwind/native.h"

struct ss_unwinder;
struct ss_uproc;
struct ss_strpool;

enum ss_hook_at {
    SS_HOOK_LEAF,  /* nf[0], the sample's leaf */
    SS_HOOK_FRAME, /* a frame the native walk reached (and held at, or went on from) */
    SS_HOOK_END,   /* nf[k]: the return address the native walk would not take */
};

struct ss_frame_hook {
    /* Per sample, before the native walk: the hook's state for up (NULL:
     * nothing to do here); *hold: hold the native walk at anonymous code. */
    void *(*begin)(struct ss_unwinder *u, struct ss_uproc *up, bool *hold);
    /* The CFA of the VM frame under nf[k]'s code, 0: none known. */
    uint64_t (*vm_frame)(void *st, struct ss_uproc *up, struct ss_native_frame *nf, unsigned k,
                         enum ss_hook_at at, const struct ss_sample *s);
    /* The leaf stays native (a VM frame found there could not be left). */
    void (*native_leaf)(void *st);
    /* The caller of the VM frame whose CFA is cfa, into *f. */
    bool (*vm_caller)(struct ss_uproc *up, uint64_t cfa, struct ss_native_frame *f);
    /* After the native walk of nn frames (u->nf): the number of output
     * frames, the native ones and the hook's own (nn: native alone). */
    unsigned (*splice)(void *st, struct ss_unwinder *u, struct ss_uproc *up,
                       const struct ss_sample *s, unsigned nn);
    /* Output frame i: the native frame's index, or -1 and *own the hook's. */
    int32_t (*item)(void *st, unsigned i, const struct ss_frame **own);
    /* Output frame out[i] (of n), a native one named: name it more closely
     * by the hook's frame after it, if that says more. */
    void (*rename)(void *st, struct ss_strpool *pool, struct ss_frame *out, unsigned i, unsigned n);
};

#endif
