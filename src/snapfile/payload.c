/* snapfile/payload.c: a record's payload, once the stream (reader.c) has
 * framed it and checked its CRC: decompression (zstd, or deflate in older
 * captures) into the slot's buffer, with the raw length trusted only up to
 * what the stream could produce, then the typed decoding of codec.c,
 * delta.c (version 3 sample bytes) and rdelta.c (version 4 memory reads). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "snapfile/stackrec.h"
#include "snapfile/payload.h"
#include "snapfile/rdelta.h"

/* Room for a raw payload of n bytes in s->raw. */
static int raw_room(struct snap_slot *s, size_t n)
{
    if (n <= s->raw_cap) return 0;
    uint8_t *b = realloc(s->raw, n);
    if (!b) return -ENOMEM;
    s->raw = b;
    s->raw_cap = n;
    return 0;
}

/* A compressed payload p[0..len): u32 raw length, then the stream. The raw
 * length is trusted only up to what the stream could produce (max_ratio). */
static int raw_length(const uint8_t *p, uint32_t len, uint64_t max_ratio, uint32_t *raw)
{
    if (len < 4) return -EBADMSG;
    *raw = snap_le32(p);
    if (*raw > SNAP_MAX_PAYLOAD || *raw > (uint64_t)(len - 4) * max_ratio + 1024) return -EBADMSG;
    return 0;
}

static int inflate_payload(struct snap_decoder *r, struct snap_slot *s, const uint8_t *p,
                           uint32_t len, size_t *out_len, const char **why)
{
    *why = "bad compressed payload (deflate)";
    uint32_t raw;
    int rc = raw_length(p, len, 1032, &raw); /* deflate's maximum ratio */
    if (rc || (rc = raw_room(s, raw))) return rc;
    if (!r->zs_ready) {
        memset(&r->zs, 0, sizeof(r->zs));
        if (inflateInit(&r->zs) != Z_OK) return -ENOMEM;
        r->zs_ready = true;
    } else if (inflateReset(&r->zs) != Z_OK) {
        return -EIO;
    }
    r->zs.next_in = (Bytef *)p + 4;
    r->zs.avail_in = len - 4;
    r->zs.next_out = s->raw;
    r->zs.avail_out = raw;
    int zr = inflate(&r->zs, Z_FINISH);
    if (zr != Z_STREAM_END || r->zs.total_out != raw) return -EBADMSG;
    *out_len = raw;
    return 0;
}

static int unzstd_payload(struct snap_decoder *r, struct snap_slot *s, const uint8_t *p,
                          uint32_t len, size_t *out_len, const char **why)
{
    *why = "bad compressed payload (zstd)";
    uint32_t raw;
    int rc = raw_length(p, len, SNAP_ZSTD_MAX_RATIO, &raw);
    if (rc || (rc = raw_room(s, raw))) return rc;
    if (!r->zd && !(r->zd = ZSTD_createDCtx())) return -ENOMEM;
    /* exactly one frame of exactly raw bytes: a frame claiming more fails
     * (dstSize_tooSmall), trailing bytes fail, a short one is caught here */
    size_t n = ZSTD_decompressDCtx(r->zd, s->raw, raw, p + 4, len - 4);
    if (ZSTD_isError(n)) {
        if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) return -ENOMEM;
        ZSTD_DCtx_reset(r->zd, ZSTD_reset_session_only);
        return -EBADMSG;
    }
    if (n != raw) return -EBADMSG;
    *out_len = raw;
    return 0;
}

int snap_decode_payload(struct snap_decoder *r, struct snap_slot *s, uint16_t type, uint16_t flags,
                        const uint8_t *p, uint32_t len, const char **why)
{
    size_t n = len;
    int rc;
    if ((flags & SNAP_RF_DEFLATE) && (flags & SNAP_RF_ZSTD)) {
        *why = "record flags both deflate and zstd";
        return -EBADMSG;
    } else if (flags & SNAP_RF_ZSTD) {
        rc = unzstd_payload(r, s, p, len, &n, why);
        if (rc) return rc;
    } else if (flags & SNAP_RF_DEFLATE) {
        rc = inflate_payload(r, s, p, len, &n, why);
        if (rc) return rc;
    } else {
        if ((rc = raw_room(s, len))) return rc;
        if (len) memcpy(s->raw, p, len);
    }
    struct snap_cur c = {.p = s->raw, .len = n};
    struct ss_snap_record *rec = &s->rec;
    switch (type) {
    case SS_SNAP_HEADER:
        rc = snap_dec_header(&c, &rec->header, why);
        rec->header.version = r->version;
        return rc;
    case SS_SNAP_PROCESS:
        return snap_dec_process(&c, &s->arr, &rec->process, why);
    case SS_SNAP_SAMPLE:
        rc = snap_dec_sample(&c, r->version, &rec->sample, &s->dl, why);
        return rc ? rc : snap_dec_sample_tail(&c, &rec->sample, why);
    case SS_SNAP_MEMREADS:
        if (r->version >= 4)
            return r->rdelta ? snap_rdelta_decode(r->rdelta, &c, &s->arr, &rec->memreads, why)
                             : -ENOMEM;
        return snap_dec_memreads(&c, &s->arr, &rec->memreads, why);
    case SS_SNAP_COUNTERS:
        return snap_dec_counters(&c, &s->arr, &rec->counters, why);
    case SS_SNAP_BUNDLE:
        return snap_dec_bundle(&c, &rec->bundle, why);
    case SS_SNAP_TRAILER:
        return snap_dec_trailer(&c, &rec->trailer, why);
    case SS_SNAP_PERFMAP:
        return snap_dec_perfmap(&c, &rec->perfmap, why);
    case SS_SNAP_DEBUGFILE:
        return snap_dec_debugfile(&c, &rec->debugfile, why);
    case SS_SNAP_KSYMS:
        return snap_dec_ksyms(&c, &s->arr, &rec->ksyms, why);
    case SS_SNAP_PROCEVENT:
        return snap_dec_procevent(&c, &rec->procevent, why);
    case SS_SNAP_LJDET:
        return snap_dec_ljdet(&c, &rec->ljdet, why);
    case SS_SNAP_FRAMES:
        return r->ftab ? snap_dec_frames(&c, r->ftab, r->off, &rec->frames, why) : -ENOMEM;
    case SS_SNAP_STACK:
        return r->ftab ? snap_dec_stack(&c, r->ftab, &s->arr, &rec->stack, why) : -ENOMEM;
    case SS_SNAP_LJRT:
        return snap_dec_ljrt(&c, &rec->ljrt, why);
    }
    return -EBADMSG;
}

void snap_decoder_free(struct snap_decoder *d)
{
    if (d->zs_ready) inflateEnd(&d->zs);
    d->zs_ready = false;
    ZSTD_freeDCtx(d->zd);
    d->zd = NULL;
}
