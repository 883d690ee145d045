/* util/zmem.h: zeroed memory for big, sparsely used tables (hash slots by
 * thread, by prototype, by return address). calloc takes such a table from
 * the heap once malloc's mmap threshold has grown past its size and then
 * clears every page of it; an anonymous mapping's pages are zero and only
 * those used are ever faulted in: what a replay from nothing, run after
 * run, pays for its tables. Small sizes are plain calloc. */
#ifndef SS_UTIL_ZMEM_H
#define SS_UTIL_ZMEM_H

#include <stddef.h>

/* n zeroed bytes, or NULL. Free with ss_zfree and the same n. */
void *ss_zalloc(size_t n);
void ss_zfree(void *p, size_t n);

#endif
