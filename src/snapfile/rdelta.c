/* snapfile/rdelta.c: delta-coded memreads records (format version 4; see
 * rdelta.h and docs/capture-format.md). Payload after u64 seq, u32 n,
 * u32 tid, u64 base: a key (base = 2^64-1) has its n reads as in versions
 * 1-3; a delta (base = the key record's seq) has ops u32 same, u32 lit, then
 * lit reads, until n reads are covered: `same` reads are the key's reads at
 * the same positions. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapfile/rdelta.h"
#include "util/zmem.h"

struct rslot {
    uint32_t tid;
    bool valid;
    uint32_t age;               /* records of this thread since its key (writer) */
    uint64_t seq;               /* the key record's sample seq */
    uint32_t n;                 /* its reads */
    uint8_t *buf;               /* their encoded bytes (a copy) */
    size_t len, cap;            /* of buf */
    struct ss_snap_read *reads; /* reader: parsed, data into buf */
    size_t reads_cap;
    uint32_t *ends; /* writer: offset after each encoded read */
    size_t ends_cap;
};

struct snap_rstate {
    uint32_t nslots;
    size_t size;    /* of this allocation (util/zmem.h) */
    uint64_t *used; /* nslots bits: the slots ever taken (the rest is never touched, so
                       reset and free do not fault the whole table in) */
    struct rslot slots[];
};

struct snap_rstate *snap_rstate_new(uint32_t slots)
{
    size_t sb = sizeof(struct snap_rstate) + slots * sizeof(struct rslot);
    sb = (sb + 7) & ~(size_t)7;
    size_t size = sb + (slots + 63) / 64 * sizeof(uint64_t);
    struct snap_rstate *d = ss_zalloc(size);
    if (!d) return NULL;
    d->nslots = slots;
    d->size = size;
    d->used = (uint64_t *)(void *)((char *)d + sb);
    return d;
}

/* The slot of tid, marked as taken. */
static struct rslot *slot_of(struct snap_rstate *d, uint32_t tid)
{
    uint32_t i = tid % d->nslots;
    d->used[i / 64] |= 1ull << (i % 64);
    return &d->slots[i];
}

void snap_rstate_reset(struct snap_rstate *d)
{
    if (!d) return;
    for (uint32_t w = 0; w < (d->nslots + 63) / 64; w++)
        for (uint64_t b = d->used[w]; b; b &= b - 1)
            d->slots[w * 64 + (uint32_t)__builtin_ctzll(b)].valid = false;
}

void snap_rstate_free(struct snap_rstate *d)
{
    if (!d) return;
    for (uint32_t w = 0; w < (d->nslots + 63) / 64; w++)
        for (uint64_t b = d->used[w]; b; b &= b - 1) {
            struct rslot *k = &d->slots[w * 64 + (uint32_t)__builtin_ctzll(b)];
            free(k->buf);
            free(k->reads);
            free(k->ends);
        }
    ss_zfree(d, d->size);
}

/* Size of the encoded read at p (the writer's own bytes: well formed). */
static size_t read_size(const uint8_t *p)
{
    return 16 + (snap_le32(p + 12) ? 0 : snap_le32(p + 8));
}

static int keep_key(struct rslot *k, uint64_t seq, uint32_t tid, const uint8_t *reads, size_t len,
                    uint32_t n)
{
    if (len > k->cap) {
        uint8_t *nb = realloc(k->buf, len);
        if (!nb) return -ENOMEM;
        k->buf = nb;
        k->cap = len;
    }
    if (len) memcpy(k->buf, reads, len);
    k->len = len;
    k->n = n;
    k->seq = seq;
    k->tid = tid;
    k->age = 0;
    k->valid = true;
    return 0;
}

int snap_rdelta_encode(struct snap_rstate *d, struct snap_buf *b, uint64_t seq, uint32_t tid,
                       const uint8_t *reads, size_t len, uint32_t n)
{
    struct rslot *k = slot_of(d, tid);
    snap_put_u64(b, seq);
    snap_put_u32(b, n);
    snap_put_u32(b, tid);
    if (!k->valid || k->tid != tid || ++k->age >= SNAP_RDELTA_KEY_EVERY) {
        snap_put_u64(b, SNAP_RDELTA_KEY);
        snap_put(b, reads, len);
        if (keep_key(k, seq, tid, reads, len, n) < 0) {
            k->valid = false; /* no key: the next record is a key again */
            return 0;
        }
        if (snap_grow((void **)&k->ends, &k->ends_cap, n, sizeof(*k->ends))) {
            k->valid = false;
            return 0;
        }
        size_t off = 0;
        for (uint32_t i = 0; i < n; i++)
            k->ends[i] = (uint32_t)(off += read_size(k->buf + off));
        return 0;
    }
    snap_put_u64(b, k->seq);
    size_t off = 0;
    uint32_t i = 0;
    while (i < n) {
        uint32_t same = 0, lit = 0;
        size_t lit_off;
        while (i + same < n && i + same < k->n) {
            size_t sz = read_size(reads + off);
            size_t ko = i + same ? k->ends[i + same - 1] : 0;
            if (k->ends[i + same] - ko != sz || memcmp(reads + off, k->buf + ko, sz)) break;
            off += sz;
            same++;
        }
        lit_off = off;
        while (i + same + lit < n) {
            uint32_t j = i + same + lit;
            size_t sz = read_size(reads + off);
            if (j < k->n) {
                size_t ko = j ? k->ends[j - 1] : 0;
                if (k->ends[j] - ko == sz && !memcmp(reads + off, k->buf + ko, sz)) break;
            }
            off += sz;
            lit++;
        }
        snap_put_u32(b, same);
        snap_put_u32(b, lit);
        snap_put(b, reads + lit_off, off - lit_off);
        i += same + lit;
    }
    return b->oom ? -ENOMEM : 0;
}

/* Reader: keep the key's reads (a copy of their bytes, parsed). */
static int reader_key(struct rslot *k, uint64_t seq, uint32_t tid, const uint8_t *p, size_t len,
                      uint32_t n)
{
    k->valid = false;
    if (keep_key(k, seq, tid, p, len, n) < 0 ||
        snap_grow((void **)&k->reads, &k->reads_cap, n, sizeof(*k->reads)))
        return -ENOMEM;
    struct snap_cur c = {.p = k->buf, .len = len};
    snap_dec_reads(&c, k->reads, n); /* already parsed once: cannot fail */
    return 0;
}

int snap_rdelta_decode(struct snap_rstate *d, struct snap_cur *c, struct snap_arrays *a,
                       struct ss_snap_memreads *m, const char **why)
{
    m->sample_seq = snap_get_u64(c);
    m->nreads = snap_get_u32(c);
    m->reads = NULL;
    uint32_t tid = snap_get_u32(c);
    uint64_t base = snap_get_u64(c);
    struct rslot *k = slot_of(d, tid);
    uint32_t n = m->nreads;
    bool key = base == SNAP_RDELTA_KEY;
    if (c->bad || n > snap_left(c) / 16 + (key || !k->valid ? 0 : k->n)) {
        *why = "memory-read record: bad count";
        return -EBADMSG;
    }
    if (snap_grow((void **)&a->reads, &a->reads_cap, n, sizeof(*a->reads))) return -ENOMEM;
    if (key) {
        size_t start = c->off;
        if (snap_dec_reads(c, a->reads, n) < 0) {
            *why = "memory-read record: bad read list";
            return -EBADMSG;
        }
        if (reader_key(k, m->sample_seq, tid, c->p + start, c->off - start, n) < 0) return -ENOMEM;
        m->reads = a->reads;
        return 0;
    }
    if (!k->valid || k->tid != tid || k->seq != base) {
        *why = "memory-read delta whose key record was not read (damaged or cut out)";
        return -EBADMSG;
    }
    for (uint32_t i = 0; i < n;) {
        uint32_t same = snap_get_u32(c), lit = snap_get_u32(c);
        if (c->bad || (uint64_t)same + lit == 0 || (uint64_t)i + same + lit > n ||
            (uint64_t)i + same > k->n || lit > snap_left(c) / 16) {
            *why = "memory-read delta: bad span";
            return -EBADMSG;
        }
        if (same) memcpy(a->reads + i, k->reads + i, same * sizeof(*a->reads));
        i += same;
        if (snap_dec_reads(c, a->reads + i, lit) < 0) {
            *why = "memory-read delta: bad read list";
            return -EBADMSG;
        }
        i += lit;
    }
    m->reads = a->reads;
    return 0;
}
