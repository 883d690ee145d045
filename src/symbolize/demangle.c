/* symbolize/demangle.c: C++ and Rust symbol names demangled with
 * libiberty's demangler (Debian libiberty-dev), as perf and gdb show them:
 * Rust first (legacy `_ZN...17h<hash>E` without the hash, and v0 `_R...`),
 * then C++ (Itanium ABI, with parameters and qualifiers). */
#include <libiberty/demangle.h>
#include <stdlib.h>

#include "symbolize/symbolize.h"

const char *ss_demangle(struct ss_strpool *pool, const char *name)
{
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R')) return NULL;
    char *d = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    if (!d && name[1] == 'Z') d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    if (!d) return NULL;
    const char *s = ss_strpool_intern(pool, d);
    free(d);
    return s;
}
