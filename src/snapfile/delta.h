/* snapfile/delta.h: delta-coded sample bytes (format version 3). A key
 * sample stores every byte of its stack snapshot and windows; the samples of
 * the same thread that follow are written relative to that key sample (their
 * "base"): only the 64-byte blocks whose bytes differ at the same target
 * address are stored ("runs"), every other byte is the key's byte at that
 * address. A new key every SNAP_DELTA_KEY_EVERY samples of a thread (and
 * whenever the writer has none). Deltas refer to the key, not to each other,
 * so a damaged delta sample costs only itself; a damaged key costs the
 * samples of its thread up to the next key. */
#ifndef SS_SNAPFILE_DELTA_H
#define SS_SNAPFILE_DELTA_H

#include <stdint.h>

#include "snapfile/format.h"

#define SNAP_DELTA_BLOCK 16
#define SNAP_DELTA_KEY_EVERY 64u     /* a key sample per thread at least this often */
#define SNAP_DELTA_WRITER_TIDS 1024u /* threads the writer keeps bases for */
#define SNAP_DELTA_READER_TIDS 4096u /* and the reader (more: a valid file always decodes) */
#define SNAP_DELTA_KEY UINT64_MAX    /* base_seq of a key sample */

/* One delta-coded byte range as decoded (pointers into the payload). */
struct snap_runs {
    const uint8_t *p; /* u32 nruns, then nruns x (u32 off, u32 n, n bytes); NULL = key */
    uint32_t nruns;
    const uint8_t *key; /* key sample: the bytes */
};
/* What a version-3 sample needs at delivery (reader slot state). */
struct snap_delta {
    uint64_t base_seq;
    struct snap_runs stack, win[SS_WIN_MAX];
};

struct snap_dstate; /* per-thread spans, one side */
struct snap_dstate *snap_dstate_new(void);
void snap_dstate_free(struct snap_dstate *d);
void snap_dstate_reset(struct snap_dstate *d);

/* Writer: encode the byte part of sample s (after the fixed fields): u64
 * base_seq, the stack, u32 nwin and the windows, each key or runs. 1 when
 * it wrote a key sample, 0 a delta. */
int snap_delta_encode(struct snap_dstate *d, struct snap_buf *b, const struct ss_sample *s,
                      uint64_t seq);

/* Reader: parse the byte part of a version-3 sample (bounds-checked), into x
 * (stack_len, windows' addr/len/err) and dl (where the bytes are). */
int snap_delta_parse(struct snap_cur *c, struct ss_snap_sample *x, struct snap_delta *dl,
                     const char **why);
/* The windows part alone (u32 nwin, then each window); key: the bytes are
 * stored whole and the windows' data point at them (also version 2). */
int snap_delta_parse_windows(struct snap_cur *c, struct ss_snap_sample *x, struct snap_delta *dl,
                             int key, const char **why);
/* Reader, at delivery: build the sample's bytes from its base; x->s.stack
 * and window data then point into d (valid until the next sample of that
 * thread is applied). 0, -EBADMSG (*why: no base, or bytes outside it),
 * -ENOMEM. */
int snap_delta_apply(struct snap_dstate *d, struct ss_snap_sample *x, const struct snap_delta *dl,
                     const char **why);

#endif
