/* unwind/lua.h: the LuaJIT adapter of the walk (lua.c), called by walk.c:
 * it finds the VM frames under LuaJIT's interpreter and trace code, whose
 * frames the native walk can neither step through nor name, and splices
 * the Lua frames they run in among the native ones. The runtimes it walks
 * are lua_runtimes.h's.
 *
 * walk.c asks it about the leaf and about each frame at which the native
 * walk holds (ss_native_unwind_held: a frame in anonymous code, before
 * libunwind would guess there) or ends on a return address it would not
 * take. Where it knows the frame's code, it answers the CFA of the VM
 * frame that code runs on and the VM frame's caller, and the native walk
 * goes on from there; where it does not, the native walk goes on as a
 * plain one would (ss_native_unwind_on). After the native walk its frames
 * are spliced in among the native ones (a VM frame becomes the Lua frames
 * it runs), and a native frame may be named more closely by the frame
 * after it. */
#ifndef SS_UNWIND_LUA_H
#define SS_UNWIND_LUA_H

#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/unwind.h"
#include "unwind/native.h"

struct ss_unwinder;
struct ss_uproc;
struct ss_strpool;
struct ss_luaproc;

enum ss_lua_at {
    SS_LUA_LEAF,  /* nf[0], the sample's leaf */
    SS_LUA_FRAME, /* a frame the native walk reached (and held at, or went on from) */
    SS_LUA_END,   /* nf[k]: the return address the native walk would not take */
};

/* Per sample, before the native walk: the LuaJIT state of up (NULL:
 * nothing to do here); *hold: hold the native walk at anonymous code. */
struct ss_luaproc *ss_lua_begin(struct ss_unwinder *u, struct ss_uproc *up, bool *hold);
/* The CFA of the VM frame under nf[k]'s code, 0: none known. */
uint64_t ss_lua_vm_frame(struct ss_luaproc *l, struct ss_uproc *up, struct ss_native_frame *nf,
                         unsigned k, enum ss_lua_at at, const struct ss_sample *s);
/* Is nf's ip in trace code of a runtime of l, or in an anonymous mapping
 * that holds some (a LuaJIT mcode area), after ss_lua_vm_frame asked about
 * nf and found no VM frame: trace code it could not claim? */
bool ss_lua_in_trace(const struct ss_luaproc *l, struct ss_uproc *up,
                     const struct ss_native_frame *nf);
/* The leaf stays native (a VM frame found there could not be left). */
void ss_lua_native_leaf(struct ss_luaproc *l);
/* The caller of the VM frame whose CFA is cfa, into *f. */
bool ss_lua_vm_caller(struct ss_uproc *up, uint64_t cfa, struct ss_native_frame *f);
/* After the native walk of nn frames (u->nf): the number of output frames,
 * the native ones and the Lua ones (nn: native alone). */
unsigned ss_lua_splice(struct ss_luaproc *l, struct ss_unwinder *u, struct ss_uproc *up,
                       const struct ss_sample *s, unsigned nn);
/* The same for a walk whose registers are not this build's (foreign.c: an
 * arm64 capture on x86-64): regs, the sample's in its architecture's
 * numbering; fill(ctx, i, n) describes native frame i (ip, cfa, signal and
 * the VM's registers there, have bits), zeroed before. */
struct ss_lj_native;
typedef void (*ss_lua_fill_fn)(void *ctx, unsigned i, struct ss_lj_native *n);
unsigned ss_lua_splice_with(struct ss_luaproc *l, struct ss_unwinder *u, struct ss_uproc *up,
                            const uint64_t *regs, unsigned nn, ss_lua_fill_fn fill, void *ctx);
/* For walks whose registers are not this build's (foreign.c), regs and
 * known (bit i: regs[i]) in their architecture's numbering: the CFA of the
 * VM frame under a leaf at ip (ss_lua_vm_frame's SS_LUA_LEAF: the
 * interpreter's, or (traces) the trace's that called the VM helper the leaf
 * is in, or the trace's the leaf is in; 0: none); the CFA of the VM frame
 * under native frame k in trace code at ip (exact: ip is the interrupted
 * instruction), its token kept for the splice (ss_lua_token); whether look
 * is in trace code (ss_lua_in_trace). */
uint64_t ss_lua_vm_leaf_regs(struct ss_luaproc *l, struct ss_uproc *up, uint64_t ip,
                             const uint64_t *regs, uint64_t known, uint64_t time_ns);
uint64_t ss_lua_trace_regs(struct ss_luaproc *l, struct ss_uproc *up, unsigned k, uint64_t ip,
                           bool exact, const uint64_t *regs, uint64_t known, uint64_t time_ns);
bool ss_lua_in_trace_at(const struct ss_luaproc *l, struct ss_uproc *up, uint64_t look);
uint32_t ss_lua_token(const struct ss_luaproc *l, unsigned k);
/* Output frame i: the native frame's index, or -1 and *own the Lua one. */
int32_t ss_lua_item(const struct ss_luaproc *l, unsigned i, const struct ss_frame **own);
/* Output frame out[i] (of n), a native one named: name it more closely by
 * the Lua frame after it, if that says more. */
void ss_lua_rename(const struct ss_luaproc *l, struct ss_strpool *pool, struct ss_frame *out,
                   unsigned i, unsigned n);

#endif
