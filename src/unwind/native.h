/* unwind/native.h: native (DWARF CFI) unwinding of one stack snapshot.
 *
 * One ss_nproc per process holds a libunwind remote address space (caching
 * on, enlarged) whose accessors serve the snapshot and the mapped ELF files
 * through memory/ and process/, plus a per-ip rule cache in front of it.
 *
 * Stepping a frame: the CFI row for the frame's lookup address (ip for the
 * leaf and for frames interrupted by a signal, ip - 1 for return addresses)
 * is taken from libunwind itself (unw_reg_states_iterate) and, when it is a
 * plain "CFA = reg + n, registers at CFA + m / same / undefined" row, applied
 * here without entering libunwind; anything else (signal trampolines, DWARF
 * expressions, code without CFI, which libunwind unwinds through frame
 * pointers within [CFA, CFA + 0x4000]) is one unw_step of libunwind on a
 * cursor set up at that frame. libunwind stays the source of truth; the
 * SS_NATIVE_UNW_CURSOR mode walks with libunwind alone for cross-checks.
 *
 * Only layers 1-2 of memory/ are read here (snapshot, file bytes): a walk
 * that needs stack bytes past the snapshot ends with SS_TRUNC_SNAPSHOT.
 *
 * For the LuaJIT splice every frame carries its ip, sp, CFA and all
 * registers known in that frame (callee-saved rbx, rbp, r12-r15 as recovered
 * from CFI; the leaf has all of them), and whether it is a signal frame.
 * ss_native_step() walks one frame at a time and ss_native_frame_init()
 * starts a walk from any register set, so walk.c can splice Lua frames in
 * and resume native unwinding where the LuaJIT walker says. */
#ifndef SS_UNWIND_NATIVE_H
#define SS_UNWIND_NATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/ss.h"
#include "stacksnap/unwind.h" /* enum ss_native_mode */

struct ss_proc;
struct ss_mem;
struct ss_nproc;

#if defined(__x86_64__)
/* x86-64 DWARF register numbers (also libunwind's UNW_X86_64_* order). */
enum ss_dreg {
    SS_DR_RAX,
    SS_DR_RDX,
    SS_DR_RCX,
    SS_DR_RBX,
    SS_DR_RSI,
    SS_DR_RDI,
    SS_DR_RBP,
    SS_DR_RSP,
    SS_DR_R8,
    SS_DR_R9,
    SS_DR_R10,
    SS_DR_R11,
    SS_DR_R12,
    SS_DR_R13,
    SS_DR_R14,
    SS_DR_R15,
    SS_DR_RIP,
    SS_DR_COUNT
};
#define SS_DR_IP SS_DR_RIP
#define SS_DR_SP SS_DR_RSP
#define SS_DR_FP SS_DR_RBP
#else
/* arm64 DWARF register numbers for x0-x30 and sp; libunwind's UNW_AARCH64_*
 * order, whose pc (32) is the return-address column's value. */
enum ss_dreg {
    SS_DR_X0,
    SS_DR_X29 = 29,
    SS_DR_X30,
    SS_DR_SP,
    SS_DR_IP, /* pc */
    SS_DR_COUNT
};
#define SS_DR_FP SS_DR_X29
#endif
#define SS_DBIT(d) (1ull << (d)) /* a register's bit in ss_nregs.valid */

/* Registers of one frame; bit i of valid = r[i] known. Bit i of lost (a
 * subset of valid): r[i] is the value code without CFI below left in the
 * register (a stack scan stepped over it, native_scan.c), which that code
 * may have changed; no CFI rule on the way up has loaded it from a save
 * slot since, so it is not proven this frame's. */
struct ss_nregs {
    uint64_t r[SS_DR_COUNT];
    uint64_t valid, lost;
};

enum {
    SS_NF_EXACT = 1u << 0,     /* ip is the interrupted instruction (leaf, or below a
                                  signal frame), not a return address */
    SS_NF_SIGNAL = 1u << 1,    /* this frame is a signal trampoline (__restore_rt): the
                                  frame after it was interrupted by the signal */
    SS_NF_RULE = 1u << 2,      /* reached from its callee by a cached CFI rule */
    SS_NF_UNW = 1u << 3,       /* reached from its callee by a libunwind step */
    SS_NF_NOCFI = 1u << 4,     /* its callee had no CFI: reached by libunwind's
                                  frame-pointer / PLT heuristics */
    SS_NF_FILE = 1u << 5,      /* stepped from by a CFI row of a file: ip is in file code
                                  (not in anonymous code such as LuaJIT traces) */
    SS_NF_JIT = 1u << 6,       /* in code without CFI, stepped from by a validated
                                  frame-pointer chain or stack scan (native_scan.c) */
    SS_NF_SCAN = 1u << 7,      /* reached from its callee by a stack scan (not the frame
                                  pointer): callee-saved registers are the callee's
                                  (ss_nregs.lost) */
    SS_NF_STALE = 1u << 8,     /* the scan out of it refused candidates as stale
                                  (native_scan.c; SS_FF_STALE) */
    SS_NF_TRACE_CUT = 1u << 9, /* the walk ended at it: trace code the Lua walk could
                                  not claim at or above it (walk.c; SS_FF_TRACE_CUT) */
};

/* One native frame. */
struct ss_native_frame {
    struct ss_nregs regs; /* r[SS_DR_IP] = ip, r[SS_DR_SP] = sp of this frame */
    uint64_t cfa;         /* this frame's CFA (= its caller's sp); 0 until stepped */
    uint32_t flags;       /* SS_NF_* */
};

static inline uint64_t ss_nf_ip(const struct ss_native_frame *f)
{
    return f->regs.r[SS_DR_IP];
}
static inline uint64_t ss_nf_sp(const struct ss_native_frame *f)
{
    return f->regs.r[SS_DR_SP];
}
#if defined(__x86_64__)
/* perf/ss.h register numbers -> DWARF ones, for the general-purpose
 * registers (SS_PERF_GP_MASK) */
static const uint8_t ss_perf_to_dwarf[SS_NREGS] = {
    [SS_REG_AX] = SS_DR_RAX,  [SS_REG_BX] = SS_DR_RBX,  [SS_REG_CX] = SS_DR_RCX,
    [SS_REG_DX] = SS_DR_RDX,  [SS_REG_SI] = SS_DR_RSI,  [SS_REG_DI] = SS_DR_RDI,
    [SS_REG_BP] = SS_DR_RBP,  [SS_REG_SP] = SS_DR_RSP,  [SS_REG_IP] = SS_DR_RIP,
    [SS_REG_R8] = SS_DR_R8,   [SS_REG_R9] = SS_DR_R9,   [SS_REG_R10] = SS_DR_R10,
    [SS_REG_R11] = SS_DR_R11, [SS_REG_R12] = SS_DR_R12, [SS_REG_R13] = SS_DR_R13,
    [SS_REG_R14] = SS_DR_R14, [SS_REG_R15] = SS_DR_R15,
};
#define SS_PERF_GP_MASK                                                                            \
    ((1u << SS_REG_AX) | (1u << SS_REG_BX) | (1u << SS_REG_CX) | (1u << SS_REG_DX) |               \
     (1u << SS_REG_SI) | (1u << SS_REG_DI) | (1u << SS_REG_BP) | (1u << SS_REG_SP) |               \
     (1u << SS_REG_IP) | (0xffu << SS_REG_R8))
#else
/* arm64: perf's x0-x30, sp, pc are the DWARF/libunwind numbers; pstate is
 * none of the unwinder's */
static const uint8_t ss_perf_to_dwarf[SS_NREGS] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,       15,       16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, SS_DR_SP, SS_DR_IP,
};
#define SS_PERF_GP_MASK ((1ull << SS_REG_PSTATE) - 1)
#endif

/* Register by perf/ss.h numbering (SS_REG_BX...); false when unknown or
 * lost to a stack scan (ss_nf_lost). Inline: the LuaJIT splice asks for
 * four per native frame. */
static inline bool ss_nf_reg(const struct ss_native_frame *f, enum ss_reg reg, uint64_t *val)
{
    if ((unsigned)reg >= SS_NREGS || !(SS_PERF_GP_MASK & (1ull << reg))) return false;
    unsigned d = ss_perf_to_dwarf[reg];
    if (!(f->regs.valid & SS_DBIT(d)) || (f->regs.lost & SS_DBIT(d))) return false;
    *val = f->regs.r[d];
    return true;
}
/* Is the register (perf/ss.h numbering) the value of code without CFI
 * below, not proven this frame's (ss_nregs.lost)? */
static inline bool ss_nf_lost(const struct ss_native_frame *f, enum ss_reg reg)
{
    if ((unsigned)reg >= SS_NREGS || !(SS_PERF_GP_MASK & (1ull << reg))) return false;
    return (f->regs.lost & SS_DBIT(ss_perf_to_dwarf[reg])) != 0;
}
/* The address whose CFI row describes f: ip, or ip - 1 for return addresses. */
static inline uint64_t ss_nf_lookup_ip(const struct ss_native_frame *f)
{
    return (f->flags & SS_NF_EXACT) ? f->regs.r[SS_DR_IP] : f->regs.r[SS_DR_IP] - 1;
}

struct ss_nstats {
    uint64_t walks, frames;
    uint64_t rule_steps;                    /* steps done by a cached rule */
    uint64_t unw_steps;                     /* steps done by libunwind */
    uint64_t rule_loads;                    /* CFI rows fetched from libunwind */
    uint64_t rule_checks, rule_check_diffs; /* ss_nproc_set_check */
    uint64_t cache_misses;
    uint64_t nocfi_fp, nocfi_scan, nocfi_fail; /* steps over code without CFI: by the frame
                                                  pointer, by a stack scan, none found */
    uint64_t nocfi_stale; /* scan candidates (or their walks) refused by a direct call's
                             target, or by a zero return address as the root */
    uint64_t trunc[SS_TRUNC_ERROR + 1];
};

/* Per-process state. proc and mem belong to the caller and must outlive np;
 * mem->proc should be proc. */
int ss_nproc_new(struct ss_nproc **out, struct ss_proc *proc, struct ss_mem *mem,
                 struct ss_err *err);
void ss_nproc_free(struct ss_nproc *np);
void ss_nproc_set_mode(struct ss_nproc *np, enum ss_native_mode mode);
/* aarch64: the pointer-authentication bits to strip from return addresses
 * (util/pac.h; 0: none). */
void ss_nproc_set_pac(struct ss_nproc *np, uint64_t mask);
/* Answer walks above the leaf from earlier walks with the same inputs
 * (native_memo.c; rules mode only); off: walk every frame. */
void ss_nproc_set_memo(struct ss_nproc *np, bool on);
/* Check every rule step against libunwind's step from the same frame
 * (tests: ss_nstats rule_checks, rule_check_diffs). */
void ss_nproc_set_check(struct ss_nproc *np, bool on);
/* Walks the memo of native walks answered. */
uint64_t ss_nproc_memo_hits(const struct ss_nproc *np);
const struct ss_nstats *ss_nproc_stats(const struct ss_nproc *np);
/* Drop address-keyed caches (called automatically when the process view's
 * generation changes). */
void ss_nproc_flush(struct ss_nproc *np);

/* Leaf frame from a sample's registers (perf order, all valid). */
void ss_native_frame_from_sample(struct ss_native_frame *f, const uint64_t regs[SS_NREGS]);
/* A frame to resume from: regs as known, exact = ip is not a return address. */
void ss_native_frame_init(struct ss_native_frame *f, const struct ss_nregs *regs, bool exact);

/* Step from f to its caller. Returns 1 and fills *caller (and f->cfa), or 0
 * when the walk ends here with *why set (SS_TRUNC_NONE = reached the root). */
int ss_native_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                   enum ss_trunc *why);

/* Walk from out[0] (already filled: leaf or resume frame) up to max frames.
 * Returns the number of frames in out (>= 1); *why says how it ended. */
unsigned ss_native_unwind(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                          enum ss_trunc *why);

/* ss_native_unwind, except that a frame above out[0] whose ip is in
 * anonymous memory (or in no mapping) and has no CFI ends the walk at once
 * (SS_TRUNC_NOINFO, *held set), before the libunwind step that
 * ss_native_unwind would take there (its frame-pointer guess): the caller
 * may know that code (LuaJIT traces). If it does not,
 * ss_native_unwind_on(..., n, ...) takes that step from out[n - 1] and goes
 * on as ss_native_unwind_held would; the frames come out the same as from
 * ss_native_unwind. */
unsigned ss_native_unwind_held(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                               enum ss_trunc *why, bool *held);
unsigned ss_native_unwind_on(struct ss_nproc *np, struct ss_native_frame *out, unsigned n,
                             unsigned max, enum ss_trunc *why, bool *held);

#endif
