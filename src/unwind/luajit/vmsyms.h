/* unwind/luajit/vmsyms.h: names of LuaJIT internals in stripped builds
 * (vmsyms.c), from the per-build tables that scripts/gen-ljsyms generates
 * (vmsyms_tab.c). */
#ifndef SS_LJ_VMSYMS_H
#define SS_LJ_VMSYMS_H

#include <stdint.h>

#include "elf/elf.h"

/* A label of the VM object (offset from lj_vm_asm_begin, size, 0 = up to
 * the next label), or a call site (offset of a `call rel32`, its callee). */
struct ss_lj_vmlabel {
    uint32_t off, size;
    const char *name;
};

/* One IRCALLDEF entry of a source tree: lj_ir_callinfo[i] calls it. */
struct ss_lj_ircall {
    const char *name;
    uint8_t nargs;
};

/* One build of the matrix: its lj_bc_ofs[] identifies the VM's code. */
struct ss_lj_vmbuild {
    const char *what;
    uint32_t vm_end; /* end of the VM object (offset) */
    const uint16_t *bc_ofs;
    uint16_t nbc;
    const struct ss_lj_vmlabel *lab;
    uint16_t nlab;
    const struct ss_lj_vmlabel *call;
    uint16_t ncall;
    const struct ss_lj_ircall *ircall; /* NULL: no JIT */
    uint16_t nircall;
};

extern const struct ss_lj_vmbuild ss_lj_vmbuilds[];
extern const unsigned ss_lj_nvmbuilds;

/* Synthetic symbols for a file without a full symbol table: when e embeds
 * LuaJIT, fn gets the VM's labels (lj_vm_*, lj_BC_*, lj_ff_*, ...), the C
 * functions the VM calls and the IR-call targets of lj_ir_callinfo
 * (size 0 = unknown; names are static strings). For a build the tables do
 * not list, the VM's range with the name "": no name, and not one frame per
 * FDE either (symbolize/). Nothing for files without LuaJIT. */
void ss_lj_internal_syms(void *detcache, struct ss_elf *e, ss_elf_synth_add fn, void *ctx);

/* The IRCALLDEF index (id) and function (ELF vaddr, fn; 0 when not found)
 * of each name in want, from e's lj_ir_callinfo (as above): what IR
 * CALL* op2 = id calls. */
void ss_lj_ircall_fns(void *detcache, const struct ss_elf *e, const char *const *want,
                      unsigned nwant, uint16_t *id, uint64_t *fn);

#endif
