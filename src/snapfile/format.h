/* snapfile/format.h: on-disk constants of the capture format and the
 * little-endian encode (growable buffer) / decode (bounds-checked cursor)
 * helpers shared by the writer and the reader. docs/capture-format.md is the
 * prose version of this file and of codec.c. */
#ifndef SS_SNAPFILE_FORMAT_H
#define SS_SNAPFILE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stacksnap/snapfile.h"

/* Preamble: 8 magic bytes, u32 version, u32 reserved (0). */
#define SNAP_MAGIC "\x89SSNAP\r\n"
#define SNAP_MAGIC_LEN 8
#define SNAP_PREAMBLE_LEN 16

/* Record header: u32 sync, u16 type, u16 flags, u32 len, u32 pcrc, u32 hcrc.
 * pcrc = crc32(payload as stored), hcrc = crc32(the first 16 header bytes). */
#define SNAP_SYNC "\x9eSR\n"
#define SNAP_REC_HDR 20
#define SNAP_RF_DEFLATE 0x1u /* payload = u32 raw length + zlib stream (read only) */
#define SNAP_RF_ZSTD 0x2u    /* payload = u32 raw length + one zstd frame */
#define SNAP_RF_KNOWN (SNAP_RF_DEFLATE | SNAP_RF_ZSTD)
/* A zstd block of at most 128 KiB costs at least 4 stored bytes (RLE), so a
 * frame cannot expand more than this: bounds the raw length a reader trusts. */
#define SNAP_ZSTD_MAX_RATIO 32768u
#define SNAP_MAX_PAYLOAD (1u << 30) /* stored and raw payload limit */

/* The records' CRC-32 (zlib's crc32: reflected IEEE polynomial, the same
 * values), computed with ISA-L's folding (PCLMULQDQ) implementation, ~6x
 * faster than zlib's on a sample record; continues crc like zlib's crc32. */
uint32_t snap_crc32(uint32_t crc, const void *p, size_t len);

/* Growable little-endian output buffer. oom is sticky. */
struct snap_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

bool snap_buf_reserve(struct snap_buf *b, size_t extra);
void snap_buf_free(struct snap_buf *b);

static inline void snap_put(struct snap_buf *b, const void *src, size_t n)
{
    if (!snap_buf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}
static inline void snap_put_u8(struct snap_buf *b, uint8_t v)
{
    snap_put(b, &v, 1);
}
static inline void snap_put_u16(struct snap_buf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    snap_put(b, x, 2);
}
static inline void snap_put_u32(struct snap_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    snap_put(b, x, 4);
}
static inline void snap_put_u64(struct snap_buf *b, uint64_t v)
{
    snap_put_u32(b, (uint32_t)v);
    snap_put_u32(b, (uint32_t)(v >> 32));
}
/* String: u16 length, bytes, one NUL (so the reader can hand out pointers).
 * Longer strings are cut at 65535 bytes. */
void snap_put_str(struct snap_buf *b, const char *s);
/* Same, at most max bytes of s (fixed-size char arrays). */
void snap_put_strn(struct snap_buf *b, const char *s, size_t max);

static inline uint16_t snap_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t snap_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t snap_le64(const uint8_t *p)
{
    return snap_le32(p) | (uint64_t)snap_le32(p + 4) << 32;
}

/* Bounds-checked input cursor; bad is sticky and every get returns 0/NULL
 * once it is set. */
struct snap_cur {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline const uint8_t *snap_get(struct snap_cur *c, size_t n)
{
    if (c->bad || n > c->len - c->off) {
        c->bad = true;
        return NULL;
    }
    const uint8_t *r = c->p + c->off;
    c->off += n;
    return r;
}
static inline uint8_t snap_get_u8(struct snap_cur *c)
{
    const uint8_t *p = snap_get(c, 1);
    return p ? p[0] : 0;
}
static inline uint16_t snap_get_u16(struct snap_cur *c)
{
    const uint8_t *p = snap_get(c, 2);
    return p ? snap_le16(p) : 0;
}
static inline uint32_t snap_get_u32(struct snap_cur *c)
{
    const uint8_t *p = snap_get(c, 4);
    return p ? snap_le32(p) : 0;
}
static inline uint64_t snap_get_u64(struct snap_cur *c)
{
    const uint8_t *p = snap_get(c, 8);
    return p ? snap_le64(p) : 0;
}
/* Returns a NUL-terminated string inside the payload, or "" (and bad). */
const char *snap_get_str(struct snap_cur *c);
/* Copy a string field into a fixed array (cut to fit). */
void snap_get_str_into(struct snap_cur *c, char *dst, size_t cap);
static inline size_t snap_left(const struct snap_cur *c)
{
    return c->bad ? 0 : c->len - c->off;
}

/* ---- codec.c: payload encoders / decoders of each record type ---- */
void snap_enc_header(struct snap_buf *b, const struct ss_snap_header *h);
void snap_enc_process(struct snap_buf *b, const struct ss_snap_process *p);
void snap_enc_sample(struct snap_buf *b, const struct ss_sample *s, uint64_t seq);
void snap_enc_counters(struct snap_buf *b, uint64_t time_ns, const struct ss_snap_counter *c,
                       uint32_t n);
void snap_enc_trailer(struct snap_buf *b, const struct ss_snap_trailer *t);
void snap_enc_perfmap(struct snap_buf *b, const struct ss_snap_perfmap *m);
void snap_enc_debugfile(struct snap_buf *b, const struct ss_snap_debugfile *d);
void snap_enc_procevent(struct snap_buf *b, const struct ss_proc_event *ev);
/* Reads are encoded incrementally: u64 seq, u32 n, then entries (see codec.c). */
void snap_enc_read(struct snap_buf *b, uint64_t addr, const void *data, size_t len, int err);

/* Arrays the decoders fill (grown as needed, owned by a reader slot). */
struct snap_arrays {
    struct ss_snap_mapping *maps;
    size_t maps_cap;
    struct ss_snap_read *reads;
    size_t reads_cap;
    struct ss_snap_counter *ctrs;
    size_t ctrs_cap;
    struct ss_ksym *ksyms;
    size_t ksyms_cap;
    struct ss_frame *frames; /* a stack record's (stackrec.c) */
    size_t frames_cap;
};
void snap_arrays_free(struct snap_arrays *a);

/* Decoders: 0 ok, -EBADMSG malformed (*why says what), -ENOMEM.
 * Unknown trailing payload bytes are ignored (fields appended later). */
int snap_dec_header(struct snap_cur *c, struct ss_snap_header *h, const char **why);
int snap_dec_process(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_process *p,
                     const char **why);
struct snap_delta;
/* Version 3 samples are delta-coded: dl receives where their bytes are
 * (delta.h), applied when the sample is delivered. */
int snap_dec_sample(struct snap_cur *c, uint32_t version, struct ss_snap_sample *s,
                    struct snap_delta *dl, const char **why);
int snap_dec_memreads(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_memreads *m,
                      const char **why);
/* n reads (u64 addr, u32 len, i32 err, data if err is 0) into out; data
 * point into the payload. 0 or -EBADMSG. */
int snap_dec_reads(struct snap_cur *c, struct ss_snap_read *out, uint32_t n);
/* Grow *arr (capacity *cap) to hold n elements of size sz: 0 or -ENOMEM. */
int snap_grow(void **arr, size_t *cap, size_t n, size_t sz);
int snap_dec_counters(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_counters *k,
                      const char **why);
int snap_dec_bundle(struct snap_cur *c, struct ss_snap_bundle *b, const char **why);
int snap_dec_trailer(struct snap_cur *c, struct ss_snap_trailer *t, const char **why);
int snap_dec_perfmap(struct snap_cur *c, struct ss_snap_perfmap *m, const char **why);
int snap_dec_debugfile(struct snap_cur *c, struct ss_snap_debugfile *d, const char **why);
int snap_dec_procevent(struct snap_cur *c, struct ss_proc_event *ev, const char **why);

/* ---- kcodec.c: kernel symbols (record 11) and the sample's tail (fields
 * appended after the windows: kernel stack, off-CPU weight) ---- */
void snap_enc_ksyms(struct snap_buf *b, const struct ss_snap_ksyms *k);
int snap_dec_ksyms(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_ksyms *k,
                   const char **why);
void snap_enc_ljdet(struct snap_buf *b, const struct ss_snap_ljdet *x);
int snap_dec_ljdet(struct snap_cur *c, struct ss_snap_ljdet *x, const char **why);
void snap_enc_ljrt(struct snap_buf *b, const struct ss_snap_ljrt *x);
int snap_dec_ljrt(struct snap_cur *c, struct ss_snap_ljrt *x, const char **why);
/* Only when the sample has a kernel stack or a weight: nothing otherwise. */
void snap_enc_sample_tail(struct snap_buf *b, const struct ss_sample *s);
/* Whatever follows the windows (nothing: none); x->s.kernel -> x->kips. */
int snap_dec_sample_tail(struct snap_cur *c, struct ss_snap_sample *x, const char **why);

#endif
