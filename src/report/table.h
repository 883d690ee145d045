/* report/table: the small containers the report module is built on: a
 * growable byte buffer, a string interner with dense ids, and an open
 * addressing index from 64-bit hashes to caller-owned entries. */
#ifndef SS_REPORT_TABLE_H
#define SS_REPORT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Growable NUL-terminated byte buffer. On allocation failure it sets oom and
 * ignores further writes; callers check oom once at the end. */
struct rp_buf {
    char *p;
    size_t len, cap;
    bool oom;
};
/* Append n bytes (kept NUL-terminated); nothing once out of memory (oom). */
void rp_buf_put_grow(struct rp_buf *b, const void *s, size_t n);
static inline void rp_buf_put(struct rp_buf *b, const void *s, size_t n)
{
    if (!b->oom && b->cap - b->len > n) { /* room for them and the NUL */
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return;
    }
    rp_buf_put_grow(b, s, n);
}
static inline void rp_buf_puts(struct rp_buf *b, const char *s)
{
    rp_buf_put(b, s, strlen(s));
}
static inline void rp_buf_putc(struct rp_buf *b, char c)
{
    rp_buf_put(b, &c, 1);
}
void rp_buf_printf(struct rp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in lowercase hex (no 0x), right-aligned with spaces to width ("%*lx") */
void rp_buf_hex(struct rp_buf *b, uint64_t v, unsigned width);
/* v in decimal padded to width with pad ("%*lu", "%0*lu"; left: "%-*lu") */
void rp_buf_udec_pad(struct rp_buf *b, uint64_t v, unsigned width, char pad, bool left);
static inline void rp_buf_udec(struct rp_buf *b, uint64_t v)
{
    rp_buf_udec_pad(b, v, 0, ' ', false);
}
static inline void rp_buf_reset(struct rp_buf *b)
{
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}
void rp_buf_free(struct rp_buf *b);

uint64_t rp_hash(const void *p, size_t n, uint64_t seed);
static inline uint64_t rp_hash_u64(uint64_t h, uint64_t v)
{
    return rp_hash(&v, sizeof(v), h);
}

/* Open addressing index: slots hold entry index + 1; the caller compares. */
struct rp_index {
    uint32_t *slot;
    uint64_t *hash;
    size_t cap, n;
};
typedef bool (*rp_eq_fn)(const void *ctx, uint32_t idx);
/* Returns true and sets *idx if an entry with hash h satisfies eq. */
bool rp_index_find(const struct rp_index *ix, uint64_t h, rp_eq_fn eq, const void *ctx,
                   uint32_t *idx);
int rp_index_insert(struct rp_index *ix, uint64_t h, uint32_t idx); /* 0 or -ENOMEM */
void rp_index_free(struct rp_index *ix);

/* String interner: ids are dense (0, 1, 2, ...), id 0 is "". Pointers from
 * rp_str() move when strings are added. */
struct rp_strtab {
    char *buf;
    size_t len, cap;
    uint64_t *off; /* by id */
    size_t n, offcap;
    struct rp_index ix;
};
int rp_strtab_init(struct rp_strtab *t);
/* Intern n bytes (no NUL inside). Returns the id, or -ENOMEM. */
int64_t rp_str_intern(struct rp_strtab *t, const char *s, size_t n);
static inline const char *rp_str(const struct rp_strtab *t, uint32_t id)
{
    return t->buf + t->off[id];
}
void rp_strtab_free(struct rp_strtab *t);

/* Grow *p (element size es) so that it holds at least need elements. */
int rp_grow(void *p, size_t *cap, size_t need, size_t es);

#endif
