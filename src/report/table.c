/* report/table: byte buffer, hashing, index and string interner (table.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/table.h"

int rp_grow(void *pp, size_t *cap, size_t need, size_t es)
{
    void **p = pp;
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / es) return -ENOMEM;
        nc *= 2;
    }
    void *q = realloc(*p, nc * es);
    if (!q) return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static bool buf_reserve(struct rp_buf *b, size_t n)
{
    if (b->oom) return false;
    if (n > SIZE_MAX - b->len - 1 || rp_grow(&b->p, &b->cap, b->len + n + 1, 1)) {
        b->oom = true;
        return false;
    }
    return true;
}

void rp_buf_put_grow(struct rp_buf *b, const void *s, size_t n)
{
    if (!buf_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void rp_buf_printf(struct rp_buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    /* one pass when it fits the room left (the common case), else again
     * with the room it needs */
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        if (room) b->p[b->len] = '\0';
        return;
    }
    if ((size_t)n >= room) {
        if (!buf_reserve(b, (size_t)n)) {
            if (room) b->p[b->len] = '\0';
            return;
        }
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void rp_buf_hex(struct rp_buf *b, uint64_t v, unsigned width)
{
    static const char d[] = "0123456789abcdef";
    char t[32];
    unsigned n = 0;
    do {
        t[sizeof(t) - 1 - n++] = d[v & 15];
        v >>= 4;
    } while (v);
    while (n < width && n < sizeof(t))
        t[sizeof(t) - 1 - n++] = ' ';
    rp_buf_put(b, t + sizeof(t) - n, n);
}

void rp_buf_udec_pad(struct rp_buf *b, uint64_t v, unsigned width, char pad, bool left)
{
    char t[48];
    unsigned n = 0;
    do {
        t[sizeof(t) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (width > 24) width = 24;
    if (left) {
        rp_buf_put(b, t + sizeof(t) - n, n);
        for (; n < width; n++)
            rp_buf_putc(b, pad);
        return;
    }
    while (n < width)
        t[sizeof(t) - 1 - n++] = pad;
    rp_buf_put(b, t + sizeof(t) - n, n);
}

void rp_buf_free(struct rp_buf *b)
{
    free(b->p);
    *b = (struct rp_buf){0};
}

/* 8 bytes at a time: xor, multiply, rotate; splitmix64 finalizer. */
uint64_t rp_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ seed ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h = (h << 31) | (h >> 33);
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

bool rp_index_find(const struct rp_index *ix, uint64_t h, rp_eq_fn eq, const void *ctx,
                   uint32_t *idx)
{
    if (!ix->cap) return false;
    size_t mask = ix->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        if (!ix->slot[i]) return false;
        if (ix->hash[i] == h && eq(ctx, ix->slot[i] - 1)) {
            *idx = ix->slot[i] - 1;
            return true;
        }
    }
}

static void index_place(uint32_t *slot, uint64_t *hash, size_t cap, uint64_t h, uint32_t v)
{
    size_t mask = cap - 1, i = h & mask;
    while (slot[i])
        i = (i + 1) & mask;
    slot[i] = v;
    hash[i] = h;
}

int rp_index_insert(struct rp_index *ix, uint64_t h, uint32_t idx)
{
    if (idx == UINT32_MAX) return -ENOMEM;
    if ((ix->n + 1) * 4 > ix->cap * 3) { /* keep load <= 3/4 */
        size_t nc = ix->cap ? ix->cap * 2 : 64;
        uint32_t *slot = calloc(nc, sizeof(*slot));
        uint64_t *hash = calloc(nc, sizeof(*hash));
        if (!slot || !hash) {
            free(slot);
            free(hash);
            return -ENOMEM;
        }
        for (size_t i = 0; i < ix->cap; i++)
            if (ix->slot[i]) index_place(slot, hash, nc, ix->hash[i], ix->slot[i]);
        free(ix->slot);
        free(ix->hash);
        ix->slot = slot;
        ix->hash = hash;
        ix->cap = nc;
    }
    index_place(ix->slot, ix->hash, ix->cap, h, idx + 1);
    ix->n++;
    return 0;
}

void rp_index_free(struct rp_index *ix)
{
    free(ix->slot);
    free(ix->hash);
    *ix = (struct rp_index){0};
}

struct str_key {
    const struct rp_strtab *t;
    const char *s;
    size_t n;
};

static bool str_eq(const void *ctx, uint32_t id)
{
    const struct str_key *k = ctx;
    const char *p = rp_str(k->t, id);
    return !memcmp(p, k->s, k->n) && p[k->n] == '\0';
}

int rp_strtab_init(struct rp_strtab *t)
{
    *t = (struct rp_strtab){0};
    return rp_str_intern(t, "", 0) < 0 ? -ENOMEM : 0;
}

int64_t rp_str_intern(struct rp_strtab *t, const char *s, size_t n)
{
    uint64_t h = rp_hash(s, n, 0);
    struct str_key k = {t, s, n};
    uint32_t id;
    if (t->n && rp_index_find(&t->ix, h, str_eq, &k, &id)) return id;
    if (t->n >= UINT32_MAX - 1 || n > SIZE_MAX - t->len - 1) return -ENOMEM;
    if (rp_grow(&t->buf, &t->cap, t->len + n + 1, 1) ||
        rp_grow(&t->off, &t->offcap, t->n + 1, sizeof(*t->off)))
        return -ENOMEM;
    memcpy(t->buf + t->len, s, n);
    t->buf[t->len + n] = '\0';
    t->off[t->n] = t->len;
    if (rp_index_insert(&t->ix, h, (uint32_t)t->n)) return -ENOMEM;
    t->len += n + 1;
    return (int64_t)t->n++;
}

void rp_strtab_free(struct rp_strtab *t)
{
    free(t->buf);
    free(t->off);
    rp_index_free(&t->ix);
    *t = (struct rp_strtab){0};
}
