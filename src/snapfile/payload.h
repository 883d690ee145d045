/* snapfile/payload.h: decoding one record's payload (payload.c) for the
 * capture reader (reader.c, which owns the stream: read window, framing,
 * CRCs, resynchronisation, lookahead). */
#ifndef SS_SNAPFILE_PAYLOAD_H
#define SS_SNAPFILE_PAYLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <zlib.h>
#include <zstd.h>

#include "snapfile/delta.h"
#include "snapfile/format.h"

/* One decoded record and the memory it points into. */
struct snap_slot {
    uint8_t *raw; /* the record's payload (copied or decompressed), owned */
    size_t raw_cap;
    struct snap_arrays arr;
    struct ss_snap_record rec;
    struct snap_delta dl; /* a version-3 sample's bytes, applied at delivery */
    char msg[128];
};

/* Decompression contexts (created on first use, reused for every record),
 * the capture's version and, from version 4, the threads' key reads. */
struct snap_decoder {
    z_stream zs; /* deflate records (captures written before zstd) */
    bool zs_ready;
    ZSTD_DCtx *zd;
    uint32_t version;
    struct snap_rstate *rdelta; /* owned by the reader */
    struct snap_ftable *ftab;   /* version 5: the frames defined so far; owned by the reader */
    uint64_t off;               /* file offset of the record being decoded */
};

/* Decode the payload p[0..len) of a record of known type (flags: its
 * compression) into s->rec. 0, -EBADMSG (*why says what), -ENOMEM. */
int snap_decode_payload(struct snap_decoder *d, struct snap_slot *s, uint16_t type, uint16_t flags,
                        const uint8_t *p, uint32_t len, const char **why);
void snap_decoder_free(struct snap_decoder *d);

#endif
