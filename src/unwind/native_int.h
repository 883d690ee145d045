/* unwind/native_int.h: state shared by native.c (stepping, rule cache) and
 * native_unw.c (libunwind address space, accessors, libunwind steps). */
#ifndef SS_UNWIND_NATIVE_INT_H
#define SS_UNWIND_NATIVE_INT_H

#include <libunwind.h>

#include "unwind/native.h"
#include "unwind/native_rules.h"

#define SS_RC_BITS 12
#define SS_RC_BITS_MIN 6

struct ss_rc_ent {
    uint64_t key; /* lookup address, 0 = empty */
    struct ss_nrule r;
};

/* Accessor argument of one libunwind use (as_arg). */
struct ss_uctx {
    struct ss_nproc *np;
    struct ss_nregs regs; /* registers access_reg serves */
    uint64_t fault_addr;  /* first failed access_mem */
    bool faulted, noinfo; /* noinfo: find_proc_info found no CFI */
};

/* The log of a walk for the memo of native walks (native_memo.c): kept by
 * the rule steps while on. */
struct ss_nmemo_log {
    bool on, opaque, oom;   /* opaque: a step used libunwind */
    uint64_t carried;       /* registers that still hold frame 1's value */
    uint64_t loaded;        /* registers that hold a value loaded from src[] */
    uint64_t deps, allregs; /* CFA base registers: carried ones; all */
    uint64_t load;
    uint32_t first;       /* the last step's loads, where they start in the list */
    unsigned nload, ndep; /* slots loaded; slots the path depends on */
    uint64_t src[SS_DR_COUNT];
    uint64_t lo, hi; /* stack bytes loaded, [lo, hi) */
    uint64_t gen;    /* process view generation at the start */
};
struct ss_nmemo;

struct ss_nproc {
    struct ss_proc *proc;
    struct ss_mem *mem;
    unw_addr_space_t as;
    enum ss_native_mode mode;
    uint64_t pac_mask; /* aarch64: signature bits of return addresses (ss_nproc_set_pac) */
    uint8_t *pac_cfi;  /* native_pac.c: the last CFI programs given to libunwind fixed */
    uint64_t gen;
    struct ss_nstats st;
    /* rule cache, direct-mapped: 1 << rc_bits entries, from SS_RC_BITS_MIN
     * growing to SS_RC_BITS as misses come (most processes are short and
     * never need the big table) */
    struct ss_rc_ent *rc;
    unsigned rc_bits, rc_misses;
    bool memo_on; /* ss_nproc_set_memo */
    bool check;   /* ss_nproc_set_check */
    struct ss_nmemo *nmemo;
    struct ss_nmemo_log nlog;
    /* native_scan.c: capstone handle (csh) and instruction, opened on first use */
    size_t cs;
    void *cs_insn;
    bool cs_ok;
};

/* native_memo.c: walks above the leaf kept with their inputs. out[0] is
 * frame 1 (the leaf's caller), max the frames the walk may make from it.
 * find: the number of frames (>= 1, out filled, *why set) of a kept walk
 * whose inputs equal this one's, else 0. log_start (0: logging) before the
 * steps from frame 1, log_rule for every rule applied, log_step after the
 * step that made frame k (f),
 * log_end with the frames made (out[0..n)) keeps the walk when it may. */
unsigned ss_nmemo_find(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                       enum ss_trunc *why);
int ss_nmemo_log_start(struct ss_nproc *np, const struct ss_native_frame *f1, unsigned max);
void ss_nmemo_log_rule(struct ss_nproc *np, const struct ss_nrule *r, uint64_t cfa);
void ss_nmemo_log_step(struct ss_nproc *np, const struct ss_native_frame *f, unsigned k);
void ss_nmemo_log_end(struct ss_nproc *np, const struct ss_native_frame *out, unsigned n,
                      unsigned max, enum ss_trunc why);
void ss_nmemo_free(struct ss_nmemo *m);
uint64_t ss_nmemo_hits(const struct ss_nmemo *m);

/* native_unw.c */
int ss_unw_as_new(struct ss_nproc *np, struct ss_err *err);
void ss_unw_as_free(struct ss_nproc *np);
/* Fetch the CFI rows of the FDE holding lookup address look into the file's
 * row table (via unw_reg_states_iterate). */
void ss_unw_load_rows(struct ss_nproc *np, uint64_t look);
/* One libunwind step from f (cursor set up at f). Same contract as
 * ss_native_step minus the sanity checks. */
int ss_unw_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                enum ss_trunc *why);
/* Whole walk with one libunwind cursor (SS_NATIVE_UNW_CURSOR). */
unsigned ss_unw_walk(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                     enum ss_trunc *why);
/* Common checks on a new caller frame: 1 ok, 0 stop with *why. */
int ss_native_check(struct ss_nproc *np, const struct ss_native_frame *f,
                    const struct ss_native_frame *caller, enum ss_trunc *why);
/* native.c: the rule for lookup address look (only for addresses in an
 * executable mapping); one step by CFI alone (no stepping out of code
 * without CFI: SS_TRUNC_NOINFO), with ss_native_check. */
const struct ss_nrule *ss_native_rule(struct ss_nproc *np, uint64_t look);
int ss_native_cfi_step(struct ss_nproc *np, struct ss_native_frame *f,
                       struct ss_native_frame *caller, enum ss_trunc *why);
/* native_scan.c: step from f, whose ip has no CFI, by a validated
 * frame-pointer chain or stack scan (same contract as ss_native_step, checks
 * included); ss_nscan_free: its capstone handle. */
int ss_nscan_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                  enum ss_trunc *why);
void ss_nscan_free(struct ss_nproc *np);
/* native_pac.c: after find_proc_info found pi (need_unwind_info; local: a
 * .debug_frame FDE, in our memory), give libunwind its CFI programs with
 * pointer authentication's negate_ra_state as nops (libunwind < 1.7, arm64;
 * else nothing); ss_pac_cfi_peek: the 8 bytes at addr of those copies, NULL
 * for any other address. */
void ss_pac_cfi_fix(struct ss_nproc *np, unw_proc_info_t *pi, bool local);
const void *ss_pac_cfi_peek(const struct ss_nproc *np, uint64_t addr);
/* Why a memory fault at addr ended the walk. */
enum ss_trunc ss_native_fault_reason(const struct ss_nproc *np, uint64_t addr);

#endif
