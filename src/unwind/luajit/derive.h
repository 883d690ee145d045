/* unwind/luajit/derive.h: layout facts from the binary's machine code
 * (derive.c), called by detection (detect.c) on an opened ELF file. */
#ifndef SS_LJ_DERIVE_H
#define SS_LJ_DERIVE_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss_lj_luajit.h"

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
