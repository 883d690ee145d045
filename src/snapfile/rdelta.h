/* snapfile/rdelta.h: delta-coded memreads records (format version 4). The
 * live walker reads almost the same target memory, with the same bytes, on
 * every sample of a thread (the Lua stack slots, prototypes, names), so a
 * memreads record is written relative to a key: the last key memreads
 * record of the same thread. A key stores every read; a delta stores, in
 * order, spans of reads identical (address, length, error and bytes) to the
 * key's reads at the same positions and the other reads literally. A new key
 * every SNAP_RDELTA_KEY_EVERY records of a thread, and whenever the writer's
 * slot for the thread (tid modulo SNAP_RDELTA_WRITER_SLOTS) holds another
 * thread. Deltas refer to the key only: a damaged delta costs only itself. */
#ifndef SS_SNAPFILE_RDELTA_H
#define SS_SNAPFILE_RDELTA_H

#include <stdint.h>

#include "snapfile/format.h"

#define SNAP_RDELTA_KEY_EVERY 64u      /* a key memreads record per thread at least this often */
#define SNAP_RDELTA_WRITER_SLOTS 1024u /* writer: key slots (tid % this) */
#define SNAP_RDELTA_READER_SLOTS 4096u /* reader: a multiple, so a valid file always decodes */
#define SNAP_RDELTA_KEY UINT64_MAX     /* base of a key record */

struct snap_rstate; /* per-thread key reads, one side */
struct snap_rstate *snap_rstate_new(uint32_t slots);
void snap_rstate_free(struct snap_rstate *d);
void snap_rstate_reset(struct snap_rstate *d);

/* Writer: append the version-4 memreads payload of sample seq of thread tid
 * to b: u64 seq, u32 n, u32 tid, u64 base, then the reads (reads: n of
 * them as snap_enc_read encodes them, len bytes). -ENOMEM or 0. */
int snap_rdelta_encode(struct snap_rstate *d, struct snap_buf *b, uint64_t seq, uint32_t tid,
                       const uint8_t *reads, size_t len, uint32_t n);

/* Reader: decode a version-4 memreads payload into m (reads in a, their
 * data in the payload or in d's key copy: valid until the next key of that
 * thread). 0, -EBADMSG (*why) or -ENOMEM. */
int snap_rdelta_decode(struct snap_rstate *d, struct snap_cur *c, struct snap_arrays *a,
                       struct ss_snap_memreads *m, const char **why);

#endif
