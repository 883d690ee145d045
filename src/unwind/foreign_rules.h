/* unwind/foreign_rules.h: the rule cache of foreign.c's arm64 walks (an
 * x86-64 build replaying an arm64 capture): CFI rows that libdw parsed,
 * compiled into plain rules and applied without libdw.
 *
 * A rule is a row in the shape GCC emits on aarch64: CFA = sp or x29 +
 * offset; each of x0-x30 and sp undefined, the same value, saved at CFA +
 * n, or the value CFA + n (sp's CFA + 0 from the ABI's initial rules); the
 * return-address column x30. Anything else (DWARF expressions, register
 * rules, another return-address column, a signal frame's row) is
 * SS_A64R_COMPLEX or SS_A64R_SIGNAL and foreign.c takes libdw's step. A
 * rule is applied as libdwfl's handle_cfi applies the row (registers past
 * sp are none of the walk's), and gives up (libdw's step then) wherever
 * that would end or change the walk: the CFA's register unknown, a save
 * slot unreadable, x30 (the caller's pc) unknown, sp unknown. Where libdw's
 * walk ends (x30 undefined or 0), so does the rule's.
 *
 * Pointer authentication: libdw (0.188, Debian 12) strips nothing from
 * the return address it loads (aarch64 has no ebl_func_addr_mask), so a
 * rule does not either: out->r[SS_A64R_X30] is what the slot holds, signed
 * or not, as libdw's step gives it; foreign_walk.c strips both with the
 * capture's PAC mask before either is a pc. */
#ifndef SS_UNWIND_FOREIGN_RULES_H
#define SS_UNWIND_FOREIGN_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include <elfutils/libdwfl.h>

enum { SS_A64R_NREG = 32, SS_A64R_X29 = 29, SS_A64R_X30 = 30, SS_A64R_SP = 31 };

enum ss_a64r_kind {
    SS_A64R_OK = 0,
    SS_A64R_COMPLEX, /* libdw steps (expressions, register rules, another RA column) */
    SS_A64R_SIGNAL,  /* a signal trampoline's row ('S' augmentation): libdw steps */
    SS_A64R_NOINFO,  /* no CFI at this address (neither .eh_frame nor .debug_frame) */
};

struct ss_a64rule {
    uint8_t kind, cfa_reg;
    int32_t cfa_off;
    uint32_t same, at, val; /* same value; saved at CFA + off; value CFA + off; others
                               undefined (bit = DWARF register) */
    int16_t off[SS_A64R_NREG];
};

/* x0-x30, sp of one frame; bit i of valid: r[i] known. */
struct ss_a64regs {
    uint64_t r[SS_A64R_NREG];
    uint64_t valid;
};

/* The rule for lookup address look in the process's modules d, from a
 * direct-mapped cache (c: 1 << SS_A64RC_BITS entries) or compiled now.
 * ss_a64rc_flush: drop every entry (the modules changed). */
#define SS_A64RC_BITS 10
struct ss_a64rc_ent {
    uint64_t key; /* lookup address, 0 = empty */
    struct ss_a64rule r;
};
const struct ss_a64rule *ss_a64_rule(struct ss_a64rc_ent *c, Dwfl *d, uint64_t look);
void ss_a64rc_flush(struct ss_a64rc_ent *c);

/* Apply rule r (kind SS_A64R_OK) to the registers in: 1 and the caller's
 * registers in out (its pc = out->r[SS_A64R_X30]); -1 when libdw's walk
 * ends there (its pc undefined: the return address column undefined, or
 * 0: the root); 0 when libdw's step is to be taken instead (see above).
 * read: 8 bytes at addr as libdw's memory_read callback reads them. */
int ss_a64_apply(const struct ss_a64rule *r, const struct ss_a64regs *in, struct ss_a64regs *out,
                 bool (*read)(void *ctx, uint64_t addr, uint64_t *val), void *ctx);

#endif
