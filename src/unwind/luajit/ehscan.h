/* unwind/luajit/ehscan.h: FDEs of an .eh_frame section, for detection. */
#ifndef SS_UNWIND_LUAJIT_EHSCAN_H
#define SS_UNWIND_LUAJIT_EHSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One FDE: code [begin, begin + range) (ELF vaddr), its CIE's augmentation
 * string, its CFA instructions [insn, end). Return true to stop. */
typedef bool (*ss_eh_fde_fn)(void *ctx, uint64_t begin, uint64_t range, const char *aug,
                             const uint8_t *insn, const uint8_t *end);

/* Call fn for every FDE of the section (bytes buf[0..len) at vaddr sh_addr)
 * whose CIE is understood. 0, or -1 when the section is malformed (the
 * FDEs before the damage were reported). */
int ss_eh_each_fde(const uint8_t *buf, size_t len, uint64_t sh_addr, ss_eh_fde_fn fn, void *ctx);

#endif
