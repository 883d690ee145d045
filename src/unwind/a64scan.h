/* unwind/a64scan.h: the arm64 step out of code without CFI (a64scan.c),
 * shared by the arm64 build's walk (native_scan.c) and an x86-64 build
 * walking an arm64 capture (foreign_scan.c), so that both take the same
 * caller or refuse the same candidates. The walker gives the scan its CFI
 * steps and its rule lookups through ss_a64scan_ops; the scan reads the
 * stack snapshot and the mapped files' bytes itself. */
#ifndef SS_UNWIND_A64SCAN_H
#define SS_UNWIND_A64SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/unwind.h"

struct ss_proc;
struct ss_mem;

#define SS_SCAN_BYTES 8192 /* of the snapshot above a frame's sp, scanned */
#define SS_SCAN_TRIAL 16   /* CFI frames a candidate's walk must make (or end validly) */

enum { SS_A64S_X29 = 29, SS_A64S_X30 = 30, SS_A64S_SP = 31, SS_A64S_PC = 32, SS_A64S_NREG = 33 };
#define SS_A64S_BIT(i) (1ull << (i))

/* One arm64 frame: x0-x30, sp, pc; bit i of valid: r[i] known; bit i of
 * lost (within valid): left by code without CFI, unproven; flags: SS_NF_*
 * of unwind/native.h (SS_NF_EXACT: pc is the interrupted instruction,
 * looked up at pc; else at pc - 1). */
struct ss_a64sf {
    uint64_t r[SS_A64S_NREG];
    uint64_t valid, lost;
    uint32_t flags;
};

struct ss_a64scan_ops {
    void *ctx;
    struct ss_proc *proc;
    const struct ss_mem *mem; /* the stack snapshot */
    uint64_t pac;             /* the PAC mask return addresses are stripped with */
    /* Has lookup address look a CFI row (or is it the entry's code, the root)? */
    bool (*has_cfi)(void *ctx, uint64_t look);
    /* One step by f's CFI into up. checked: as the walk steps (the caller
     * checked: ip 0 the root, sp not below, ip in executable memory; a
     * frame without CFI: false, SS_TRUNC_NOINFO); else the CFI's registers
     * whatever the return address (false when there are none). */
    bool (*step)(void *ctx, const struct ss_a64sf *f, struct ss_a64sf *up, bool checked,
                 enum ss_trunc *why);
    uint64_t *stale; /* counted: candidates refused as stale */
};

/* How ss_a64scan found the caller. */
enum ss_a64s_how {
    SS_A64S_NONE = 0, /* refused: the walk ends (SS_TRUNC_NOINFO) */
    SS_A64S_LR,       /* a frameless leaf: x30 with its sp (f's CFA is its sp) */
    SS_A64S_FP,       /* f's x29 pointed to the frame record */
    SS_A64S_SCAN,     /* a frame record found by the scan */
};

/* The caller of f (its ip without CFI) into *caller (flags SS_NF_NOCFI,
 * SS_NF_SCAN for SS_A64S_SCAN). Bounded: SS_SCAN_BYTES of the snapshot,
 * SS_A64_BUDGET CFI steps. */
enum ss_a64s_how ss_a64scan(const struct ss_a64scan_ops *o, const struct ss_a64sf *f,
                            struct ss_a64sf *caller);

/* Could ra be a return address (the scan's check): in an executable file
 * mapping whose CFI covers ra - 1, right after a call that could have made
 * the frame above it (nocfi_callee: code without CFI, stepped over). */
bool ss_a64scan_ret_addr(const struct ss_a64scan_ops *o, uint64_t ra, bool nocfi_callee);

#endif
