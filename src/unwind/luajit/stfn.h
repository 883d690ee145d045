/* unwind/luajit/stfn.h: functions that switch G->vmstate (stfn.c), for
 * detect.c. */
#ifndef SS_UNWIND_LUAJIT_STFN_H
#define SS_UNWIND_LUAJIT_STFN_H

#include <libelf.h>

#include "stacksnap/ss_lj_luajit.h"

/* A defined function symbol: recorded when it is one of them. */
void ss_lj_stfn_symbol(struct ss_lj_elfinfo *info, const char *nm, uint64_t value, uint64_t size);
/* No symbols found any (stripped GC64 build): find them by their code. Needs
 * info's VM range and exit_ret; eh is the .eh_frame section at eh_addr. */
void ss_lj_stfn_code(Elf *e, struct ss_lj_elfinfo *info, const uint8_t *eh, size_t ehlen,
                     uint64_t eh_addr);

#endif
