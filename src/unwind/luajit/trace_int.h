/* unwind/luajit/trace_int.h: what trace.c (lookup, walk), trace_load.c
 * (decoding a trace once) and trace_check.c (its per-sample re-validation)
 * share: limits, the decoded trace and its snapshots. See trace.c for how
 * samples in trace code are handled. */
#ifndef SS_LJ_TRACE_INT_H
#define SS_LJ_TRACE_INT_H

#include <capstone/capstone.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"

#define REF_BIAS SS_IR_BIAS
#define SNAP_FRAME 0x10000u
#define SNAP_CONT 0x20000u
#define TC_MAX 1024             /* traces indexed per runtime */
#define TC_MAXSNAP 8192         /* snapshots per trace */
#define TC_MAXMAP (1u << 20)    /* snapshot map entries per trace */
#define TC_MAXK 65536u          /* IR constant slots per trace */
#define TC_MAXFR LJ_TRACE_MAXFR /* Lua frames per snapshot */
#define TC_MAXPT 128            /* candidate prototypes per trace */
#define TC_MAXARR 65536u        /* J->trace entries read on a refresh */
#define TC_HDR 128
#define TC_REFRESH_NS 20000000ull /* sample time between two full refreshes */
#define TC_MAXGUARDS 4096u
#define TC_MAXINS 65536u /* IR instructions read for the RETF check (no-mcofs builds) */
/* SnapShot.mcofs counts MCode units (lj_trace.c lj_trace_exit: "MCode
 * units!"): bytes on x86-64, 4-byte instructions on arm64 (lj_arch) */

struct tframe {
    uint64_t pc;   /* current pc, next-instruction convention (as frames.c) */
    uint64_t link; /* this frame's link as the snapshot restores it */
    uint64_t pt;   /* prototype holding pc */
};

struct tsnap {
    uint32_t mcofs, mapofs, maplen; /* map slice [mapofs, mapofs + maplen) */
    uint32_t prof;                  /* mcode offset of a profiler check inside, 0 none */
    uint32_t gofs;                  /* start as placed from the guards (guards.c) */
    uint32_t first, n;              /* frames [first, first + n), outermost first */
    uint32_t ncut;                  /* inner frames dropped: a caller not at a call */
    uint32_t nret; /* 1: the frame returning at the snapshot's pc, stored after the n */
    /* mcode offset just past a side-effecting call in this snapshot's code
     * at which the next snapshot's frames (all of them) are the frames on
     * the stack, up to the next snapshot's code; 0 none (trace_load.c
     * post_call) */
    uint32_t xret;
    /* at xret: the innermost frame's pc (next-instruction convention) when
     * the call is not right before the next snapshot's pc (a comparison
     * after it, trace_post.c); 0: that pc - 4 */
    uint64_t xpc;
};

/* a call in a loop's copy and the pre-roll call it copies (trace_calls.c):
 * mcode offsets just past each */
struct tcall {
    uint32_t end, alias;
};

/* a helper call out of snapshot si's code placed by the forward replay
 * (trace_fwd.c): mcode offset just past it, its frames fwdfr[first, +n) */
struct tfwd {
    uint32_t si, end, first, n;
};

struct trace {
    uint64_t G, T, mcode;
    uint32_t szmcode, traceno, spadjust;
    uint8_t base_reg;   /* ss_reg holding BASE all through the trace, 0xff none */
    uint8_t base_spill; /* IR(REF_BASE)->s: BASE's spill slot (4-byte units), 0 none */
    uint64_t gen;       /* GC generation header, snapshots and map were proven in (gc.c) */
    bool loaded, bad;
    bool by_guards; /* snaps[].gofs set (guards.c) */
    bool profiled;  /* profiler checks in its code: recorded under jit.p (trace_load.c) */
    uint8_t hdr[TC_HDR];
    uint32_t nsnap;
    struct tsnap *snaps;
    uint32_t *map; /* whole snapshot map as loaded */
    struct tframe *fr;
    struct tcall *calls; /* the loop copy's matched FFI calls, in mcode order */
    uint32_t ncalls;
    struct tfwd *fwd; /* placed helper calls (trace_fwd.c) */
    struct tframe *fwdfr;
    uint32_t nfwd;
};

struct lj_tcache {
    struct trace *t; /* sorted by mcode */
    unsigned n;
    uint64_t refresh_ns; /* sample time of the last full refresh */
    uint64_t arr_G, arr; /* J->trace array address seen last, per G */
    uint32_t token;
    struct ss_lj_tsample cur;
};

static inline uint16_t u16at(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* Header bytes a and b of one trace equal where they never change during
 * its life (trace_check.c)? */
bool ss_lj_trace_same_hdr(const struct lj_layout *lay, const uint8_t *a, const uint8_t *b);
/* Re-validate trace index idx of rt's cache for a sample at look and fill
 * cur (trace_check.c): 0, -ENOENT (no frames from it), -EIO, -ENOMEM,
 * -ESTALE (not the trace decoded: flushed or replaced). */
int ss_lj_trace_validate(struct ss_lj_runtime *rt, struct ss_mem *m, int idx, uint64_t look,
                         struct ss_lj_tsample *cur);

/* The FFI calls in t's loop copy matched to the pre-roll calls they copy
 * (trace_calls.c): how many, *out in mcode order (malloc'd), 0 none. kb: IR
 * slots [nk, REF_BIAS]; ib: IR from REF_BIAS to nins; mc: the mcode at
 * mcode; sb: the snapshots as read, snaps as decoded. */
uint32_t ss_lj_trace_loop_calls(bool a64, const struct lj_layout *lay, const uint8_t *kb,
                                uint32_t nk, const uint8_t *ib, uint32_t nins, const uint8_t *mc,
                                uint64_t mcode, uint32_t szmcode, const uint8_t *sb,
                                const struct tsnap *snaps, uint32_t nsnap, struct tcall **out);

/* The calls of a trace's machine code (trace_mcalls.c): each one's offset,
 * the offset just past it, and what it calls. */
enum {
    SS_MC_DIRECT,  /* to tgt */
    SS_MC_FFIREG,  /* x86-64: through a non-scratch register, an FFI call */
    SS_MC_FAR,     /* x86-64: `call rax`, an assembler call, target not shown */
    SS_MC_EITHER,  /* arm64: `blr` of a register not known: FFI or assembler */
    SS_MC_UNKNOWN, /* a form the backend does not emit */
};
struct ss_lj_mcall {
    uint32_t at, end;
    uint64_t tgt;
    uint8_t kind;
};
struct ss_lj_mcalls {
    struct ss_lj_mcall *c; /* malloc'd, in mcode order */
    uint32_t n, decoded;   /* decoded: [0, decoded) of the code */
};
/* arm64 registers holding known constants: bit n, val[n] xn's */
struct ss_lj_a64k {
    uint32_t known;
    uint64_t val[29];
};
/* x0-x28 / w0-w28 as 0-28, else 32 */
unsigned ss_lj_a64_xreg(unsigned r);
/* Follow one arm64 instruction's effect on the known constants. */
void ss_lj_a64_track(csh cs, const cs_insn *ci, struct ss_lj_a64k *st);
/* Decode trace code mc[0, sz) at mcode (cs with details) into *l; -ENOMEM. */
int ss_lj_mcalls_scan(bool a64, csh cs, cs_insn *ci, const uint8_t *mc, uint64_t mcode, uint32_t sz,
                      struct ss_lj_mcalls *l);
/* The calls made from mcode [lo, hi) to one of fn[0, nfn): offsets just
 * past the first cap into end, which fn each called into which, how many;
 * -1 when a call's target is not known (x86-64's far `call rax`, arm64's
 * `blr` of a register not known) or the code did not decode. */
int ss_lj_mcode_calls_to(const struct ss_lj_mcalls *l, uint32_t lo, uint32_t hi, const uint64_t *fn,
                         unsigned nfn, uint32_t *end, uint8_t *which, unsigned cap);
/* Offset just past the one call from mcode [lo, hi) that can be asm_callx's
 * of a computed function (x86-64: through a non-scratch register; arm64: a
 * `blr` of a register not known); 0 none, more than one, or undecodable. */
uint32_t ss_lj_mcode_regcall(const struct ss_lj_mcalls *l, uint32_t lo, uint32_t hi);

/* Of the frames fr[0, n) of one snapshot, outermost first: how many inner
 * frames lie above the innermost caller not standing at a call (trace_load.c). */
uint32_t ss_lj_callers_at_calls(struct ss_lj_runtime *rt, struct ss_mem *m, const struct tframe *fr,
                                uint32_t n);
/* The address of a 64-bit (KINT64, GC64) or 32-bit IR constant, 0 none
 * (trace_calls.c). kb: IR slots [nk, REF_BIAS]. */
uint64_t ss_lj_trace_kaddr(const struct lj_layout *lay, const uint8_t *kb, uint32_t nk,
                           uint32_t ref);
/* snaps[i].xret (and .xpc) for snapshot i and its successor (trace_post.c):
 * kb/nk the IR constants, ib the IR from REF_BIAS to nins, sb the
 * snapshots as read, map the whole map, fr the decoded frames, mc the
 * mcode; GC64 maps only. */
void ss_lj_post_call(struct ss_lj_runtime *rt, struct ss_mem *m, const uint8_t *kb, uint32_t nk,
                     const uint8_t *ib, uint32_t nins, const uint8_t *sb, const uint32_t *map,
                     struct tsnap *snaps, uint32_t i, const struct tframe *fr, csh cs, cs_insn *ci,
                     const uint8_t *mc);

/* t->fwd: the helper calls in t's code whose frames the forward replay of
 * the bytecode from the snapshot before proves (trace_fwdcalls.c: which IR
 * call each machine call is; trace_fwd.c: the replay); arguments as
 * ss_lj_post_call's, snaps/fr decoded, nsnap of them. */
void ss_lj_fwd_calls(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t, const uint8_t *kb,
                     uint32_t nk, const uint8_t *ib, uint32_t nins, const uint8_t *sb,
                     const uint32_t *map, const struct tsnap *snaps, const struct tframe *fr,
                     csh cs, cs_insn *ci, const uint8_t *mc);

/* The kinds of call the replay places: string.rep's and table.concat's
 * helper (the range's first CALLL of it), a string.format helper (the
 * nth string.format the path calls), an FFI call through an upvalue. */
enum { SS_FWD_REP, SS_FWD_TAB, SS_FWD_FMT, SS_FWD_XS };
/* One trace's data for the replay (as ss_lj_fwd_calls's arguments). */
struct ss_lj_fwdin {
    struct ss_lj_runtime *rt;
    struct ss_mem *m;
    struct trace *t;
    const uint8_t *kb, *ib, *sb;
    uint32_t nk, nins, loop; /* loop: IR LOOP's ref, nins none */
    const uint32_t *map;
    const struct tsnap *snaps;
    const struct tframe *fr;
    const struct ss_lj_mcalls *mcalls; /* the trace's calls */
};
struct ss_lj_fwd_w;
/* The replay's state (trace_fwd.c), reused from call to call. */
struct ss_lj_fwd_w *ss_lj_fwd_new(const struct ss_lj_fwdin *in);
void ss_lj_fwd_free(struct ss_lj_fwd_w *w);
/* Replay snapshot i's path to the call of kind k (SS_FWD_FMT: the nth
 * string.format call of the path, from 1) made by IR call c, whose machine
 * call ends at mcode offset end: on proof, one more t->fwd (trace_fwd.c). */
void ss_lj_fwd_replay(struct ss_lj_fwd_w *w, uint32_t i, uint32_t c, unsigned k, uint32_t nth,
                      uint32_t end);

/* Has format string s (a GCstr) a plain "%s" (lj_strfmt.c lj_strfmt_parse:
 * '%', flags, width, '.', precision, conversion; "%%" a literal)? Its
 * recording puts the argument with a BUFPUT: of a string.rep's result,
 * bufput_bufstr replays the CALLL lj_buf_putstr_rep into the new chain.
 * False when s cannot be read (trace_fwdcalls.c). */
bool ss_lj_fmt_plain_s(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t s, bool *plain);

/* A trace's IR for the facts of trace_irfacts.c: constants kb (from nk),
 * instructions ib (from REF_BIAS); a snapshot's range from r0, a call at c,
 * the last RETF before the range (REF_BIAS none). */
struct ss_lj_irv {
    const uint8_t *kb, *ib;
    uint32_t nk, r0, c, lastretf;
};
const uint8_t *ss_lj_ir_ins(const struct ss_lj_irv *w, uint32_t ref);
/* the value of KGC constant ref of type irt, 0 none */
uint64_t ss_lj_ir_kgc(const struct ss_lj_irv *w, uint32_t ref, unsigned irt);
/* The function the trace guards base slot s to hold since the base last
 * moved: EQ(SLOAD #s, constant) before c (one, never two), 0 none. */
uint64_t ss_lj_ir_slot_fn(const struct ss_lj_irv *w, uint32_t s);
/* The function the range's IR guards env(fn)[k1][k2] to be before c (one,
 * never two), 0 none. */
uint64_t ss_lj_ir_guarded(const struct ss_lj_irv *w, uint64_t fn, uint64_t k1, uint64_t k2);
/* The ULOAD every UGET uv in frames of closure fn recorded before c gave
 * (no USTORE or UREFO before c, one ULOAD of UREFC(fn, uv)), 0 none. */
uint32_t ss_lj_uv_load(const struct ss_lj_irv *w, uint64_t fn, uint32_t uv);
/* Is CALLXS c the call of the cdata function ULOAD u loaded (its callee
 * FLOAD(u, cdata.ptr))? */
bool ss_lj_callxs_through(const struct ss_lj_irv *w, uint32_t u);

/* Decode t's snapshots, map and frames (once per trace; t->bad on failure). */
void ss_lj_trace_load(struct ss_lj_runtime *rt, struct ss_mem *m, struct trace *t);

#endif
