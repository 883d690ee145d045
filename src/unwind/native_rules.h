/* unwind/native_rules.h: compiled CFI rows ("rules") taken from libunwind.
 *
 * A rule is one row of a CFI table in the shape x86-64 compilers emit for
 * ordinary code: CFA = reg + offset; return address, rbx, rbp, r12-r15 at
 * CFA + n, unchanged, or undefined; other registers unchanged or undefined.
 * On arm64, the shape GCC emits there: CFA = sp or x29 + offset; x19-x29
 * and the return address column x30 at CFA + n, unchanged (x30: a frame
 * that keeps its return address in the register, a leaf), or undefined;
 * x0-x18 unchanged or undefined. Pointer authentication does not change a
 * row's shape: the return address loaded is stripped with the process's
 * PAC mask always, as native_unw.c strips libunwind's (native_pac.c).
 * Rows in any other shape are stored as SS_NR_COMPLEX so the unwinder hands
 * them to libunwind. Rows are kept per ELF file (ELF vaddr ranges, shared by
 * all processes that map the file) in a sorted table hung off the ss_elf. */
#ifndef SS_UNWIND_NATIVE_RULES_H
#define SS_UNWIND_NATIVE_RULES_H

#include <stddef.h>
#include <stdint.h>

struct ss_elf;

enum ss_nrule_kind {
    SS_NR_OK = 0,
    SS_NR_END,     /* return address (or rbp) undefined: outermost frame */
    SS_NR_COMPLEX, /* needs libunwind (expressions, register rules, signal frames) */
    SS_NR_NOINFO,  /* no CFI for this address */
};

/* Saved-register slots of a rule, in this order; the last is the return
 * address column's, loaded into the caller's ip (SS_DR_IP). */
#if defined(__x86_64__)
enum {
    SS_NRS_RBX,
    SS_NRS_RBP,
    SS_NRS_R12,
    SS_NRS_R13,
    SS_NRS_R14,
    SS_NRS_R15,
    SS_NRS_RIP,
    SS_NRS_COUNT
};
#define SS_NRS_RA SS_NRS_RIP
#define SS_NRS_FP SS_NRS_RBP
#else
/* arm64: x19-x28, x29 (frame pointer), x30 (the return address column) */
enum { SS_NRS_X19, SS_NRS_X29 = 10, SS_NRS_X30, SS_NRS_COUNT };
#define SS_NRS_RA SS_NRS_X30
#define SS_NRS_FP SS_NRS_X29
#endif
#define SS_NR_SAME INT16_MIN
#define SS_NR_UNDEF (INT16_MIN + 1)

struct ss_nrule {
    int32_t cfa_off;
    uint8_t cfa_reg; /* DWARF register number */
    uint8_t kind;    /* enum ss_nrule_kind */
    uint32_t undef;  /* volatile registers that become undefined (bit = DWARF reg) */
    int16_t off[SS_NRS_COUNT];
};

/* DWARF register number of a saved-register slot. */
extern const uint8_t ss_nrs_dreg[SS_NRS_COUNT];

/* Compile libunwind's struct dwarf_reg_state (as passed to an
 * unw_reg_states_iterate callback, size bytes) into a rule. */
void ss_nrule_compile(const void *rs, size_t size, struct ss_nrule *out);

/* Per-file row table. Lookup returns 1 and the rule when vaddr is covered. */
int ss_nrules_lookup(struct ss_elf *e, uint64_t vaddr, struct ss_nrule *out);
/* Add rows [lo[i], hi[i]) (sorted, non-overlapping among themselves). */
int ss_nrules_add(struct ss_elf *e, const uint64_t *lo, const uint64_t *hi,
                  const struct ss_nrule *r, size_t n);
size_t ss_nrules_count(struct ss_elf *e);

#endif
