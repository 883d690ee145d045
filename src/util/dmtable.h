/* util/dmtable.h: the growth step of the direct-mapped caches that start
 * small and grow as their misses pass their size (symbolize/symbolize.c,
 * symbolize/filememo.c): short-lived processes and files never need the big
 * table. */
#ifndef SS_UTIL_DMTABLE_H
#define SS_UTIL_DMTABLE_H

#include <stdint.h>
#include <stdlib.h>

/* The slot of key in a table of 1 << bits entries. */
static inline size_t ss_dm_slot(uint64_t key, unsigned bits)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* Four times the entries, all empty (the old ones are dropped: it is a
 * cache), at most 1 << max_bits; *misses restarts. Out of memory: stays as
 * it is. */
static inline void ss_dm_grow(void **table, unsigned *bits, unsigned *misses, unsigned max_bits,
                              size_t entry_size)
{
    *misses = 0;
    unsigned nb = *bits + 2 < max_bits ? *bits + 2 : max_bits;
    void *n = calloc((size_t)1 << nb, entry_size);
    if (!n) return;
    free(*table);
    *table = n;
    *bits = nb;
}

#endif
