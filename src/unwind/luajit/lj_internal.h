/* unwind/luajit/lj_internal.h: shared internals of the LuaJIT walker:
 * per-build layout descriptors (layout.c), the runtime object and its caches
 * (runtime.c), the thread walker (frames.c) and function naming (names.c). */
#ifndef SS_LJ_INTERNAL_H
#define SS_LJ_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"

/* ---- layout descriptors (layout.c) ---- */

struct lj_layout {
    const char *name;
    bool gc64;
    bool nojit;                       /* LUAJIT_DISABLE_JIT: no jit_State (g2j, J_* unused) */
    uint32_t hints_req, hints_forbid; /* static hints (SS_LJ_HINT_*) */
    /* lua_State */
    uint32_t sizeof_L, L_glref, L_base, L_top, L_stack, L_cframe, L_stacksize;
    uint32_t gct; /* GCHeader type byte: 9 (GC64) / 5 */
    /* global_State */
    uint32_t G_vmstate, G_mainthref, G_strempty, G_cur_L, G_jit_base, G_size;
    /* GCState gc.total (gc.c reads the collector's state after it); 0: not
     * known (no proof that no GC ran between a sample and its walk) */
    uint32_t G_gc_total;
    int32_t g2disp, g2j;
    uint32_t J_trace, J_sizetrace;
    /* GCfunc */
    uint32_t fn_ffid, fn_pc, fn_uvptr, fn_size;
    uint32_t fn_cf; /* GCfuncC.f, the lua_CFunction (within fn_size) */
    /* GCproto */
    uint32_t pt_sizebc, pt_k, pt_sizekgc, pt_sizept, pt_sizeuv, pt_chunkname;
    uint32_t pt_firstline, pt_numline, pt_lineinfo, pt_uvinfo, pt_varinfo, pt_size;
    /* GCstr */
    uint32_t str_len, str_data;
    /* GCupval */
    uint32_t uv_v;
    /* cframe (x86-64 POSIX) */
    uint32_t cf_prev, cf_L, cf_pc, cf_nres, cf_size;
    /* GCtrace (issue 5) */
    uint32_t T_nsnap, T_ir, T_snap, T_snapmap, T_startpt, T_startpc, T_szmcode, T_mcode, T_mcloop,
        T_spadjust, T_traceno, T_root;
    uint32_t T_nins, T_nk, T_nsnapmap, T_size; /* T_size = sizeof(GCtrace) */
    /* SnapShot: size, first IR ref, mcode offset (0 = the build has no
     * mcofs), entry count */
    uint32_t snap_size, snap_ref, snap_mcofs, snap_nent;
    /* IR opcodes (lj_ir.h IRDEF) checked on every trace: ir[REF_BASE].o ==
     * ir_base, frame links are ir_knum constants; the ones that emit no
     * code (guards.c) */
    uint8_t ir_base, ir_kgc, ir_knum;
    uint8_t ir_nop, ir_loop, ir_use, ir_phi, ir_rename;
    /* side-effecting calls and their result's boxing/conversion (0 unknown:
     * no exact frames at calls out of traces, trace_load.c post_call) */
    uint8_t ir_cnewi, ir_conv, ir_calls, ir_callxs;
    /* x86-64: bytes JLOOP/JFUNC push below the cframe before entering a
     * trace (r12, r13); trace rsp = cframe - trace_sp_bias - spadjust */
    uint32_t trace_sp_bias;
    /* LJ_VMST_* states inserted after INTERP: 2 in Tarantool's fork (LFUNC,
     * FFUNC, CFUNC replace C; GC is 4 there, not 2), 0 upstream */
    uint8_t vmst_shift;
    /* fast-function names, index = ffid - 2 */
    const char *const *ff;
    const unsigned *nff;
};

/* Stored type bytes (gct = ~LJ_Txxx). */
enum {
    LJ_GCT_STR = 4,
    LJ_GCT_UPVAL = 5,
    LJ_GCT_THREAD = 6,
    LJ_GCT_PROTO = 7,
    LJ_GCT_FUNC = 8,
    LJ_GCT_TRACE = 9
};
#define LJ_GC64_FUNC_TAG 0x1fff7ull /* top 17 bits of a GC64 function TValue */
#define LJ_GCVMASK ((1ull << 47) - 1)

/* Frame types (lj_frame.h). */
enum {
    LJ_FRAME_LUA,
    LJ_FRAME_C,
    LJ_FRAME_CONT,
    LJ_FRAME_VARG,
    LJ_FRAME_LUAP,
    LJ_FRAME_CP,
    LJ_FRAME_PCALL,
    LJ_FRAME_PCALLH
};

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

extern const struct lj_layout ss_lj_layouts[];
extern const unsigned ss_lj_nlayouts;
extern const char *const ss_lj_ff_debian[], *const ss_lj_ff_openresty[],
                                                *const ss_lj_ff_tarantool[];
extern const unsigned ss_lj_ff_debian_n, ss_lj_ff_openresty_n, ss_lj_ff_tarantool_n;
extern const char *const ss_lj_ff_debian_nojit[], *const ss_lj_ff_openresty_nojit[];
extern const unsigned ss_lj_ff_debian_nojit_n, ss_lj_ff_openresty_nojit_n;
extern const char *const ss_lj_ff_ttfork[], *const ss_lj_ff_ttfork_nojit[];
extern const unsigned ss_lj_ff_ttfork_n, ss_lj_ff_ttfork_nojit_n;

/* Read a GCRef/MRef field (64-bit GC64, 32-bit otherwise) from a buffer. */
static inline uint64_t lj_ref(const struct lj_layout *lay, const uint8_t *p)
{
    if (lay->gc64) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        return v;
    }
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline uint64_t lj_u64(const uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
static inline uint32_t lj_u32(const uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* Verify a global state G: first the layout built from the facts derived
 * from the binary's code (into *scratch, or the table row it equals; then
 * *derived = true), else the table rows compatible with info. dispatch:
 * DISPATCH register value or 0. 0 or negative errno. */
int ss_lj_layout_verify(const struct ss_lj_elfinfo *info, struct ss_mem *m, uint64_t G,
                        uint64_t dispatch, struct lj_layout *scratch, const struct lj_layout **out,
                        bool *derived, char *why, size_t whylen);
/* The same, and (vm_hi != 0) the dispatch table at G + G2DISP must hold
 * addresses inside the VM code [vm_lo, vm_hi) (run-time addresses). */
int ss_lj_layout_verify_vm(const struct ss_lj_elfinfo *info, uint64_t vm_lo, uint64_t vm_hi,
                           struct ss_mem *m, uint64_t G, uint64_t dispatch,
                           struct lj_layout *scratch, const struct lj_layout **out, bool *derived,
                           char *why, size_t whylen);

/* Derived layouts (layout_derive.c): whether info's derived facts suffice;
 * the layout from them over template row t (sizeof_L: from the live state);
 * whether two layouts have the same facts (names and hints aside). */
bool ss_lj_layout_derivable(const struct ss_lj_elfinfo *info);
void ss_lj_layout_apply(const struct ss_lj_elfinfo *info, const struct lj_layout *t,
                        uint32_t sizeof_L, struct lj_layout *o);
bool ss_lj_layout_same(const struct lj_layout *a, const struct lj_layout *b);

/* ---- runtime and caches (runtime.c) ---- */

#define LJ_MAX_GS 8
#define LJ_PROTO_SLOTS 1024
#define LJ_SPLICE_THREADS 8 /* lua_States walked per sample (splice.c) */
#define LJ_INS_SLOTS 4096
#define LJ_NAMES_PER_PROTO 8
#define LJ_SPILL 512

struct lj_pname {
    uint32_t pos; /* bytecode position of the call instruction + 1 (0 = empty) */
    const char *name;
};

/* Immutable data of one prototype, validated on every use by comparing the
 * header bytes that never change during the prototype's life, and its chunk
 * name's string: a prototype of the same shape allocated where a freed one
 * was, with its chunk name where the old name was, has the old header to
 * the byte (the name is a pointer in it); the string's hash, id, length and
 * first bytes tell the two apart. */
#define LJ_CNS 64 /* bytes of the chunk name's GCstr kept: header and data */
struct lj_proto {
    uint64_t addr;    /* 0 = empty slot */
    uint8_t sig[104]; /* header with mutable fields zeroed */
    uint32_t siglen;
    uint64_t cn;         /* the chunk name's GCstr */
    uint8_t cns[LJ_CNS]; /* its first cnslen bytes as filled (0: none readable, or
                          * read in a walk the GC proof failed: fill again) */
    uint32_t cnslen;
    uint32_t sizebc, numline, sizept, sizekgc, sizeuv;
    int32_t firstline;
    const char *chunk; /* interned, without leading @/= */
    bool cn_bad;       /* its chunk name is no string: "?" (no live prototype: freed memory) */
    uint8_t *blob;     /* bytes [addr, addr + sizept) */
    struct lj_pname names[LJ_NAMES_PER_PROTO];
    uint64_t epoch; /* splice that last used it (ss_lj_runtime.epoch) */
    uint64_t gcgen; /* GC generation its header was last matched in (gc.c) */
};

struct lj_insent {
    uint64_t retpc; /* 0 = empty */
    uint32_t ins;   /* instruction word at retpc - 4 */
};

struct lj_strblk;

#define LJ_FNPT_SLOTS 1024
#define LJ_LSTACK_SLOTS 16
#define LJ_TBASE_SLOTS 8
struct lj_lstack {
    uint64_t L, stack; /* last stack start seen for thread L (walks without windows) */
};

struct lj_fnpt {
    uint64_t fn, pt; /* function -> prototype seen last time (a guess) */
    /* the function's header as read in GC generation gen (gc.c): trusted
     * without a read while the collector has not moved since */
    uint64_t fnpc, cf, gen;
    uint8_t ffid;
};

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

/* GC generations (gc.c): the collector's bytes (gc.total .. gc.estimate)
 * of the last proof. */
struct lj_gcproof {
    uint8_t ep[88];
    uint64_t gen;  /* generation of ep; 0: none proven since the last step seen */
    uint64_t last; /* generations handed out */
};

/* Window sizes (plan.c): how much Lua stack lies below BASE in the walks of
 * the recent samples, [0] the running thread's, [1] the main thread's under
 * a running coroutine (its resumer); bytes, the maximum of an epoch of
 * LJ_NEED_EPOCH walks. The plan covers the larger of this epoch's and the
 * last one's. */
struct lj_winneed {
    uint32_t cur[2], prev[2];
    uint32_t tr_cur, tr_prev; /* highest trace number a trace sample showed, + 1 */
    bool coro, coro_prev;     /* a coroutine ran (cur_L not the main thread) */
    unsigned walks;           /* in this epoch */
    unsigned epochs;          /* completed */
};

struct ss_lj_runtime {
    struct ss_lj_elfinfo info;
    uint64_t bias, vm_lo, vm_hi;
    uint32_t pid;
    const struct lj_layout *lay; /* a table row, or &dlay */
    struct lj_layout dlay;       /* the derived layout when no row equals it */
    bool lay_derived;            /* lay was built from facts derived from the code */
    uint64_t gs[LJ_MAX_GS];
    unsigned ngs, verify_fail, bad_states;
    bool disabled;
    bool check_guards; /* also place snapshots by guards where mcofs exists (tests) */
    char diag[256];
    char last_reject[200];               /* why the last global state did not verify (report.c) */
    struct lj_proto *protos;             /* LJ_PROTO_SLOTS, direct-mapped */
    uint64_t pused[LJ_PROTO_SLOTS / 64]; /* slots ever filled: the only ones the
                                            free visits (no fault-in) */
    struct lj_insent *ins;               /* LJ_INS_SLOTS, direct-mapped */
    struct lj_strblk *strs;              /* interned strings */
    struct lj_lstack lstack[LJ_LSTACK_SLOTS];
    struct lj_fnpt *fnpt; /* LJ_FNPT_SLOTS */
    struct lj_tcache *tc; /* known traces (trace.c), NULL until the first trace sample */
    struct {
        uint64_t L, base; /* BASE of the last good trace walk of L (trace.c) */
    } tbase[LJ_TBASE_SLOTS];
    struct ss_lj_stats st;
    /* Frames of a splice point into the prototype cache until the splice
     * ends: a prototype that misses on a slot this splice already uses goes
     * to a spill entry instead of overwriting it (freed by the next splice). */
    uint64_t epoch; /* bumped by every ss_lj_splice; 0: no protection */
    struct lj_gcproof gcp;
    struct lj_winneed need;
    uint64_t spill_epoch;
    struct lj_proto *spill; /* LJ_SPILL entries, allocated on first use */
    unsigned nspill;
    /* scratch kept from sample to sample (no allocation per walk): the
     * walks of one splice (splice.c), the copy of the Lua stack and the
     * header batch of a walk (frames.c); contents never carried over */
    struct lj_walk *walks[LJ_SPLICE_THREADS];
    uint8_t *sbuf, *hbuf;
    size_t sbuf_cap, hbuf_cap;
};

/* Intern a string (len bytes, need not be NUL-terminated); NULL on ENOMEM. */
const char *ss_lj_intern(struct ss_lj_runtime *rt, const char *s, size_t len);
/* Make sure G is verified (layout chosen); false if Lua walking is off. */
bool ss_lj_check_G(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G);
/* A walk found no lua_State where one must be. While no layout has ever
 * verified, 32 such failures turn Lua walking off with one diagnostic. */
void ss_lj_note_bad_state(struct ss_lj_runtime *rt, uint64_t L, unsigned type_byte);
/* Prototype data for pt (read or validated; hdr = current header bytes if
 * the caller already read them, else NULL). NULL when pt is not a valid
 * prototype. */
struct lj_proto *ss_lj_proto(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                             const uint8_t *hdr);
/* The same, with cs the read ss_lj_proto_cn_iov(pt) made in the caller's
 * batch (NULL, or not of the entry there now: read here if the header
 * matches the cache, one more read). */
struct lj_proto *ss_lj_proto_cs(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                                const uint8_t *hdr, const struct ss_iov *cs);
/* The read of the cached prototype at pt's chunk name, into dst (LJ_CNS
 * bytes), to batch with pt's header: len 0 when the cache has no such
 * prototype. */
struct ss_iov ss_lj_proto_cn_iov(const struct ss_lj_runtime *rt, uint64_t pt, uint8_t *dst);
/* Line for bytecode position pos (0-based index of the instruction). */
uint32_t ss_lj_proto_line(const struct ss_lj_runtime *rt, const struct lj_proto *p, uint32_t pos);

/* A sample's walk of thread L (of global state G) found `below` bytes of
 * its Lua stack below BASE: what the plan's windows should hold (plan.c). */
void ss_lj_need(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G, uint64_t L,
                uint64_t below);
/* A sample ran in trace number traceno: the J->trace window should hold
 * its slot (plan.c). */
void ss_lj_need_trace(struct ss_lj_runtime *rt, uint32_t traceno);

/* ---- walking (frames.c) ---- */

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
};

/* The function and prototype headers of w's frames (resolve.c): ffid,
 * fnpc, cf, pt and proto of each; -ECANCELED when the GC state moved since
 * sep (elen bytes of gc.c's collector state as of the walk's view of the
 * thread; 0: none, no proof), -EINVAL on a header that is no function. */
int ss_lj_resolve(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_walk *w, const uint8_t *sep,
                  size_t elen);
/* Room for n bytes of scratch at *buf (cap bytes now, grown and kept);
 * NULL on ENOMEM. */
void *ss_lj_scratch(uint8_t **buf, size_t *cap, size_t n);

/* Walk all frames of thread st->L. 0 or negative errno (-EINVAL: state
 * not valid / inconsistent; the walk is then empty). */
int ss_lj_walk_thread(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                      struct lj_walk *w);

/* ---- traces (trace.c) ---- */

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

/* ---- VM states (vmstate.c) ---- */

/* Pseudo frame naming G's VM state ([GC], [JIT compiler], [trace exit])
 * for a sample whose natives[0..i) are C frames above VM/trace frame i (or
 * whose VM frame i is the trace exit handler): from the functions that
 * switch vmstate when known (stfn.c), else from the sample's own
 * G->vmstate (its window), else none. */
bool ss_lj_vmstate_frame(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                         const struct ss_lj_native *natives, uint32_t i, struct ss_frame *fr);

/* ---- naming (names.c) ---- */

/* Fill fr (kind SS_FRAME_LUA) for walk frame i. */
void ss_lj_frame_text(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_walk *w,
                      unsigned i, struct ss_frame *fr);

/* GC generations (gc.c). The collector's bytes in the sample's copy of
 * global_State G into ep (88 bytes): their length, 0 when the layout or the
 * sample has none. */
size_t ss_lj_gc_sample(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                       uint8_t *ep);
/* The live read of the same bytes, to come after every object read of a walk. */
struct ss_iov ss_lj_gc_iov(const struct ss_lj_runtime *rt, uint64_t G, uint8_t *dst);
/* Does the sample show no allocation since the last proof (the headers
 * proved in the current generation hold)? If not, that generation ends. */
bool ss_lj_gc_current(struct ss_lj_runtime *rt, const uint8_t *ep, size_t n);
/* Sample vs live bytes: true (and the generation current) when no atomic
 * phase ran between. */
bool ss_lj_gc_prove(struct ss_lj_runtime *rt, const uint8_t *sample, const uint8_t *live, size_t n);
/* The prototype at pt when its header was matched in the current
 * generation (no read), else NULL. */
struct lj_proto *ss_lj_proto_trusted(struct ss_lj_runtime *rt, uint64_t pt);

#endif
