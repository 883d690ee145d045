/* unwind/luajit/detcache.h: LuaJIT detection results by file identity (see
 * detcache.c; the type and its new/free are public, stacksnap/unwind.h). */
#ifndef SS_UNWIND_LUAJIT_DETCACHE_H
#define SS_UNWIND_LUAJIT_DETCACHE_H

#include "elf/elf.h"
#include "stacksnap/ss_lj_luajit.h"

struct ss_lj_detcache;
/* ss_lj_detect_image of e, from c when c has this file (c may be NULL:
 * detect every time). Same return as ss_lj_detect_image. */
int ss_lj_detcache_get(struct ss_lj_detcache *c, const struct ss_elf *e, struct ss_lj_elfinfo *out);

#endif
