/* symbolize/strpool.c: interned strings (open-addressing hash set over
 * strings allocated in large blocks), freed all at once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"

struct block {
    struct block *next;
    size_t used, cap;
    char data[];
};

struct ss_strpool {
    const char **slots;
    size_t cap, count;
    struct block *blocks;
    uint64_t id; /* ss_strpool_set_id */
};

void ss_strpool_set_id(struct ss_strpool *p, uint64_t id)
{
    p->id = id;
}

uint64_t ss_strpool_id(const struct ss_strpool *p)
{
    return p->id;
}

int ss_strpool_new(struct ss_strpool **out)
{
    struct ss_strpool *p = calloc(1, sizeof(*p));
    if (!p) return -ENOMEM;
    p->cap = 1024;
    p->slots = calloc(p->cap, sizeof(*p->slots));
    if (!p->slots) {
        free(p);
        return -ENOMEM;
    }
    *out = p;
    return 0;
}

void ss_strpool_free(struct ss_strpool *p)
{
    if (!p) return;
    struct block *b = p->blocks;
    while (b) {
        struct block *n = b->next;
        free(b);
        b = n;
    }
    free(p->slots);
    free(p);
}

size_t ss_strpool_count(const struct ss_strpool *p)
{
    return p->count;
}

static uint64_t hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static char *store(struct ss_strpool *p, const char *s, size_t len)
{
    struct block *b = p->blocks;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        b = malloc(sizeof(*b) + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = p->blocks;
        p->blocks = b;
    }
    char *d = b->data + b->used;
    memcpy(d, s, len);
    d[len] = 0;
    b->used += len + 1;
    return d;
}

static int grow(struct ss_strpool *p)
{
    size_t nc = p->cap * 2;
    const char **ns = calloc(nc, sizeof(*ns));
    if (!ns) return -ENOMEM;
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->slots[i]) continue;
        size_t j = hash(p->slots[i], strlen(p->slots[i])) & (nc - 1);
        while (ns[j])
            j = (j + 1) & (nc - 1);
        ns[j] = p->slots[i];
    }
    free(p->slots);
    p->slots = ns;
    p->cap = nc;
    return 0;
}

const char *ss_strpool_intern_n(struct ss_strpool *p, const char *s, size_t len)
{
    if (!s) return NULL;
    if ((p->count + 1) * 2 > p->cap && grow(p) < 0) return NULL;
    size_t j = hash(s, len) & (p->cap - 1);
    while (p->slots[j]) {
        if (!strncmp(p->slots[j], s, len) && p->slots[j][len] == 0) return p->slots[j];
        j = (j + 1) & (p->cap - 1);
    }
    char *d = store(p, s, len);
    if (!d) return NULL;
    p->slots[j] = d;
    p->count++;
    return d;
}

const char *ss_strpool_intern(struct ss_strpool *p, const char *s)
{
    return s ? ss_strpool_intern_n(p, s, strlen(s)) : NULL;
}
