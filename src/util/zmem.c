/* util/zmem.c: see zmem.h. */
#include "util/zmem.h"

#include <stdlib.h>
#include <sys/mman.h>

#define ZMEM_MAP_AT (64u << 10) /* from this size on: a mapping of its own */

void *ss_zalloc(size_t n)
{
    if (n < ZMEM_MAP_AT) return calloc(1, n);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ss_zfree(void *p, size_t n)
{
    if (!p) return;
    if (n < ZMEM_MAP_AT)
        free(p);
    else
        munmap(p, n);
}
