/* unwind/luajit/derive.h: layout facts from the binary's machine code
 * (derive.c for x86-64, derive_a64.c for arm64, and the VM entry facts they
 * share), called by detection (detect.c) on an opened ELF file. */
#ifndef SS_LJ_DERIVE_H
#define SS_LJ_DERIVE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss_lj_luajit.h"

/* Facts of one VM entry path, shared by both decoders (LJ_DUNSET where not
 * seen): cframe slots, offsets from L, and G2DISP, G->vmstate, G->cur_L
 * (from DISPATCH on x86-64, from G on arm64). */
#define LJ_DUNSET 0x7fffffff
struct lj_dentry {
    int32_t cf_size, cf_L, cf_pc, cf_prev, cf_nres;
    int32_t glref, g2disp, cframe, status, cur_L, vmstate, base, top;
};
/* Every fact LJ_DUNSET. */
void ss_lj_dentry_init(struct lj_dentry *f);
/* Set *f to v once (v within +-64 KiB). */
void ss_lj_dset(int32_t *f, int64_t v);
/* Seen, in [0, max) and a multiple of align. */
bool ss_lj_dplausible(int32_t v, uint32_t align, int32_t max);
/* The facts of e[0..n) merged into *m: NULL, or why not (two disagree). */
const char *ss_lj_dentry_merge(const struct lj_dentry *e, unsigned n, struct lj_dentry *m);
/* The ENTRY group from merged, checked facts m; vms and cur: G->vmstate and
 * G->cur_L from G. */
void ss_lj_dentry_apply(const struct lj_dentry *m, int32_t vms, int32_t cur,
                        struct ss_lj_derived *dv);

/* Bytes at ELF vaddr [va, va + len) from an allocated PROGBITS section, or
 * NULL (detect.c). */
const uint8_t *ss_lj_vaddr_bytes(Elf *e, uint64_t va, size_t len);

/* Fill info->derived from the code of the VM entries that the exported API
 * functions api[0..napi) call (lua_resume, lua_pcall, lua_call; apisz: their
 * symbol sizes, 0 unknown), of
 * vm_exit_handler (info->exit_lo) and of BC_JLOOP, inside the verified VM
 * range info->vm_lo..vm_hi. Facts the code does not show, or that two
 * functions disagree on, stay unset. */
void ss_lj_derive(Elf *e, struct ss_lj_elfinfo *info, const uint64_t *api, const uint64_t *apisz,
                  unsigned napi);

/* The same for an arm64 ELF (derive_a64.c): offsets relative to G; also
 * sets info->exit_lo/exit_ret when it finds vm_exit_handler. */
void ss_lj_derive_a64(Elf *e, struct ss_lj_elfinfo *info, const uint64_t *api,
                      const uint64_t *apisz, unsigned napi);

#endif
