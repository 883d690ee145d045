/* unwind/luajit/frames.h: the LuaJIT walker: the walk of one thread's
 * frames (frames.c, its reads thread_read.c), their function and prototype
 * headers (resolve.c), and the walk of a sample in trace code (trace.c,
 * exit.c, guards.c). */
#ifndef SS_LJ_FRAMES_H
#define SS_LJ_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"

#define LJ_MAX_FRAMES 256
#define LJ_MAX_SEGS 32

struct lj_wframe {
    uint64_t frame; /* address of the frame link slot (base - 8) */
    uint64_t fn;    /* GCfunc */
    int64_t ftsz;   /* link: return pc or delta|type */
    uint64_t pt;    /* prototype for Lua functions, else 0 */
    uint64_t pc;    /* current pc inside this frame (next instruction), 0 unknown */
    uint64_t fnpc;  /* GCfunc pc field (C/fast functions: their bytecode stub) */
    uint64_t cf;    /* C/fast functions: GCfuncC.f (0 for Lua functions) */
    uint8_t ffid;
    uint8_t seg; /* segment (cframe index) this frame belongs to */
    struct lj_proto *proto;
};

/* LuaJIT 2.1's opcodes of the C function entries (lj_bc.h) */
#define LJ_BC_FUNCC 95u
#define LJ_BC_FUNCCW 96u

/* Can a frame standing at instruction ins have a Lua frame above it, linked
 * to the next instruction (a frame link's return pc follows a call)?
 * CALLM, CALL, ITERC (lj_bc.h; the same numbers in every 2.1 tree). */

static inline bool lj_bc_is_call(uint32_t ins)
{
    unsigned op = ins & 0xff;
    return op == 65 || op == 66 || op == 69;
}

struct lj_walk {
    uint64_t L, G;
    unsigned n;
    /* resolve.c kept the headers by their content, not by the GC proof:
     * every Lua frame's pc must then lie in its prototype (frames.c) */
    bool by_content;
    unsigned unproven; /* frames above f[0] left out: not proven on the stack */
    /* the thread's header or a frame's slots came from the process, not
     * from the sample's copies (objects read live are proven apart) */
    bool live_slots;
    struct lj_wframe f[LJ_MAX_FRAMES];
    unsigned nsegs; /* cframes consumed + 1 */
    uint64_t seg_cframe[LJ_MAX_SEGS];
    bool truncated;
};

struct lj_start {
    uint64_t L;
    uint64_t cframe;   /* this VM frame's cframe (CFA - cfa_off) */
    bool top;          /* VM frame is the sampled leaf: base/pc are live registers */
    bool newest;       /* newest VM entry of this thread on the sampled stack */
    uint64_t base, pc; /* rdx/rbx when top; pc = recovered rbx otherwise (0 unknown) */
    uint64_t kbase;    /* r15 at the VM frame owning the top frame when not top (0 unknown) */
    uint64_t rb;       /* rbp there: BASE of an ASM fast function that called C (0 unknown) */
    bool use_base;     /* not top, but walk from base (validated like any non-top start) */
    uint64_t resumed;  /* thread of the next newer VM entry on the sampled stack (0: none) */
    bool regs_lost;    /* PC or KBASE at the VM frame were lost to a stack scan below it
                          (pc, kbase 0): no proof of the top frame, not merely none */
};

/* The function and prototype headers of w's frames (resolve.c): ffid,
 * fnpc, cf, pt and proto of each; -ECANCELED when the GC state moved since
 * sep (elen bytes of gc.c's collector state as of the walk's view of the
 * thread; 0: none, no proof), -EINVAL on a header that is no function. */
int ss_lj_resolve(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_walk *w, const uint8_t *sep,
                  size_t elen);
/* Room for n bytes of scratch at *buf (cap bytes now, grown and kept);
 * NULL on ENOMEM (thread_read.c). */
void *ss_lj_scratch(uint8_t **buf, size_t *cap, size_t n);

/* Walk all frames of thread st->L. 0 or negative errno (-EINVAL: state
 * not valid / inconsistent; the walk is then empty). */
int ss_lj_walk_thread(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                      struct lj_walk *w);

/* ---- traces (trace.c) ---- */

/* One sample in trace code, as trace.c validated it (frames outermost
 * first: [0] runs at G->jit_base, the rest are inlined above it). */
#define LJ_TRACE_MAXFR 48
struct lj_tcache;
struct ss_lj_tsample {
    uint64_t G, jit_base, mcode;
    uint64_t base;         /* BASE from the sampled register (0 unknown) */
    uint64_t guess;        /* rdx of a leaf, tried after a sampled jit_base (0 none) */
    bool jit_base_sampled; /* jit_base is the sample's (window), not a live read */
    uint8_t base_reg;      /* enum ss_reg holding BASE in this trace, 0xff none */
    uint8_t base_spill;    /* BASE's spill slot (4-byte units from the trace's rsp), 0 none */
    int32_t vmstate;
    uint32_t spadjust, traceno, nframes;
    uint32_t unproven; /* inner frames of the snapshot left out: not proven at ip (trace_check.c) */
    uint64_t pc[LJ_TRACE_MAXFR];   /* current pc, next-instruction convention */
    uint64_t link[LJ_TRACE_MAXFR]; /* frame link as the snapshot restores it */
    uint64_t pt[LJ_TRACE_MAXFR];
    struct lj_proto *proto[LJ_TRACE_MAXFR]; /* [0] unused (frames.c resolves it) */
};

/* A candidate VM-frame CFA: the snapshot shows a return address outside
 * the VM below it and a pointer-shaped SAVE_L in its cframe (walks then
 * check SAVE_L->cframe). Used by trace.c and exit.c. */
bool ss_lj_trace_plausible(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t cfa);

/* The trace whose machine code holds look (ip, or return address - 1) in
 * rt, validated for this sample, with the snapshot's frames. r14 (the
 * frame's r14: DISPATCH on GC64 traces, or 0) and rsp (the trace's stack
 * pointer) serve only to find G before any walk verified one; time_ns: the sample's time
 * (rate-limits full rescans of J->trace). 0, -ENOENT (not a usable trace), -EIO (reads failed),
 * -ESTALE (flushed or replaced). */
int ss_lj_trace_lookup(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t look, uint64_t r14,
                       uint64_t rsp, uint64_t time_ns, struct ss_lj_tsample *cur);
/* The sample stored by the ss_lj_trace_cfa call that returned token, or
 * NULL (rt is set to its runtime). */
const struct ss_lj_tsample *ss_lj_trace_sample(struct ss_lj_runtime *const *rts, uint32_t nrts,
                                               uint32_t token, struct ss_lj_runtime **rt);
/* Walk thread L for a trace sample: the live frames from jit_base down
 * (frames.c) under the snapshot's inlined frames. */
int ss_lj_trace_walk(struct ss_lj_runtime *rt, struct ss_mem *m, const struct ss_lj_tsample *cur,
                     uint64_t L, uint64_t cframe, struct lj_walk *w);
void ss_lj_trace_free(struct ss_lj_runtime *rt);

/* A guard in trace mcode: its offset and the exit (snapshot) it branches
 * to (guards.c, for builds without SnapShot.mcofs). */
struct ss_lj_guard {
    uint32_t ofs, exitno;
};
/* Guards of the trace mcode mc (sz bytes at mcode), sorted by offset; exit
 * stubs are read through m. Returns how many (<= cap), or -1. */
int ss_lj_guards(struct ss_mem *m, uint64_t mcode, const uint8_t *mc, uint32_t sz, uint32_t nsnap,
                 struct ss_lj_guard *out, uint32_t cap);
#define SS_IR_BIAS 0x8000u /* REF_BIAS: IR instructions from here, constants below */
/* Where each snapshot's code starts (a stand-in for SnapShot.mcofs): the
 * guards anchor the code of their IR instructions, T->mcloop the LOOP, and
 * offsets between anchors are spread over the IR instructions that emit
 * code. ir: the nins - SS_IR_BIAS instructions from REF_BIAS. */
void ss_lj_guard_starts(const struct lj_layout *lay, const struct ss_lj_guard *g, uint32_t ng,
                        const uint8_t *mc, uint32_t sz, const uint8_t *ir, uint32_t nins,
                        uint32_t mcloop, const uint32_t *snapref, uint32_t nsnap, uint32_t *starts);

#endif
