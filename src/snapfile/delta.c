/* snapfile/delta.c: delta-coded sample bytes (delta.h). A span holds the
 * bytes of [top - len, top) at the end of its buffer (buf + cap - len), so a
 * thread whose stack top stays put is updated in place: only the runs are
 * copied, on both sides. */
#include "snapfile/delta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct span {
    uint64_t top;
    uint32_t len, cap;
    uint8_t *buf;
};

/* Reader: bytes of the key span that the last delta overwrote in place
 * (u32 offset from the buffer's end, u32 n, n bytes; repeated). */
struct undo {
    uint8_t *p;
    size_t len, cap;
};

struct tstate {
    uint32_t tid;
    uint32_t nwin;
    uint64_t seq;  /* of the key sample the spans hold */
    uint64_t used; /* last use, for eviction */
    uint32_t since_key;
    struct span stack, win[SS_WIN_MAX];
    struct undo ustack, uwin[SS_WIN_MAX];
};

struct snap_dstate {
    struct tstate *t;
    size_t n, cap;
    uint64_t clock;
    struct span scratch[1 + SS_WIN_MAX]; /* samples that do not fit their key's place */
};

struct snap_dstate *snap_dstate_new(void)
{
    return calloc(1, sizeof(struct snap_dstate));
}

static void tstate_free(struct tstate *t)
{
    free(t->stack.buf);
    free(t->ustack.p);
    for (int i = 0; i < SS_WIN_MAX; i++) {
        free(t->win[i].buf);
        free(t->uwin[i].p);
    }
}

void snap_dstate_reset(struct snap_dstate *d)
{
    for (size_t i = 0; i < d->n; i++)
        tstate_free(&d->t[i]);
    d->n = 0;
}

void snap_dstate_free(struct snap_dstate *d)
{
    if (!d) return;
    snap_dstate_reset(d);
    free(d->t);
    for (int i = 0; i <= SS_WIN_MAX; i++)
        free(d->scratch[i].buf);
    free(d);
}

/* The state of tid, or a fresh one (evicting the least recently used one
 * past max); NULL on allocation failure. *fresh: it has no key. */
static struct tstate *tstate_of(struct snap_dstate *d, uint32_t tid, size_t max, int *fresh)
{
    d->clock++;
    for (size_t i = 0; i < d->n; i++)
        if (d->t[i].tid == tid) {
            d->t[i].used = d->clock;
            *fresh = 0;
            return &d->t[i];
        }
    *fresh = 1;
    struct tstate *t;
    if (d->n >= max) {
        t = &d->t[0];
        for (size_t i = 1; i < d->n; i++)
            if (d->t[i].used < t->used) t = &d->t[i];
        tstate_free(t);
    } else {
        if (d->n == d->cap) {
            size_t nc = d->cap ? d->cap * 2 : 8;
            struct tstate *nt = realloc(d->t, nc * sizeof(*nt));
            if (!nt) return NULL;
            d->t = nt;
            d->cap = nc;
        }
        t = &d->t[d->n++];
    }
    memset(t, 0, sizeof(*t));
    t->tid = tid;
    t->used = d->clock;
    return t;
}

static int span_room(struct span *s, uint32_t len)
{
    if (len <= s->cap) return 0;
    uint32_t cap = len < 4096 ? 4096 : len;
    uint8_t *b = malloc(cap);
    if (!b) return -ENOMEM;
    free(s->buf);
    s->buf = b;
    s->cap = cap;
    return 0;
}

/* Make s hold [lo, lo + len) = p (a key). */
static int span_set(struct span *s, uint64_t lo, const uint8_t *p, uint32_t len)
{
    if (span_room(s, len)) {
        s->len = 0;
        return -ENOMEM;
    }
    s->top = lo + len;
    s->len = len;
    if (len) memcpy(s->buf + s->cap - len, p, len);
    return 0;
}

/* ---- writer ---- */

/* Is [a, a + n) in the key and equal to p there? */
static int same(const struct span *key, uint64_t a, const uint8_t *p, uint32_t n)
{
    if (!key->len || a < key->top - key->len || a + n > key->top) return 0;
    return !memcmp(key->buf + key->cap - (key->top - a), p, n);
}

/* A key: the bytes, kept as the thread's key span; else runs against it. */
static void enc_span(struct snap_buf *b, struct span *key, uint64_t lo, const uint8_t *p,
                     uint32_t len, int is_key, int *oom)
{
    if (is_key) {
        snap_put(b, p, len);
        if (span_set(key, lo, p, len)) *oom = 1;
        return;
    }
    size_t at = b->len;
    snap_put_u32(b, 0);
    uint32_t nruns = 0;
    for (uint32_t o = 0; o < len;) {
        uint32_t n = len - o < SNAP_DELTA_BLOCK ? len - o : SNAP_DELTA_BLOCK;
        if (same(key, lo + o, p + o, n)) {
            o += n;
            continue;
        }
        uint32_t e = o + n; /* extend over the following differing blocks */
        while (e < len) {
            uint32_t m = len - e < SNAP_DELTA_BLOCK ? len - e : SNAP_DELTA_BLOCK;
            if (same(key, lo + e, p + e, m)) break;
            e += m;
        }
        snap_put_u32(b, o);
        snap_put_u32(b, e - o);
        snap_put(b, p + o, e - o);
        nruns++;
        o = e;
    }
    if (!b->oom) {
        uint8_t x[4] = {(uint8_t)nruns, (uint8_t)(nruns >> 8), (uint8_t)(nruns >> 16),
                        (uint8_t)(nruns >> 24)};
        memcpy(b->p + at, x, 4);
    }
}

int snap_delta_encode(struct snap_dstate *d, struct snap_buf *b, const struct ss_sample *s,
                      uint64_t seq)
{
    int fresh = 1, oom = 0;
    struct tstate *t = tstate_of(d, s->tid, SNAP_DELTA_WRITER_TIDS, &fresh);
    if (!t) {
        b->oom = true;
        return 1;
    }
    int key = fresh || t->since_key + 1 >= SNAP_DELTA_KEY_EVERY;
    snap_put_u64(b, key ? SNAP_DELTA_KEY : t->seq);
    t->since_key = key ? 0 : t->since_key + 1;
    uint32_t len = s->stack ? s->stack_len : 0;
    enc_span(b, &t->stack, s->regs[SS_REG_SP], s->stack, len, key, &oom);
    unsigned n = s->nwin <= SS_WIN_MAX ? s->nwin : SS_WIN_MAX;
    snap_put_u32(b, n);
    for (unsigned i = 0; i < n; i++) {
        const struct ss_window *w = &s->win[i];
        uint32_t wl = w->data ? w->len : 0;
        snap_put_u64(b, w->addr);
        snap_put_u32(b, wl);
        snap_put_u32(b, (uint32_t)w->err);
        enc_span(b, &t->win[i], w->addr, w->data, wl, key, &oom);
    }
    if (key) {
        for (unsigned i = n; i < SS_WIN_MAX; i++) /* windows the key has not */
            t->win[i].len = 0;
        t->seq = seq;
    }
    if (oom) /* the key could not be kept: the next sample is a key */
        t->since_key = SNAP_DELTA_KEY_EVERY;
    return key;
}

/* ---- reader ---- */

static int parse_runs(struct snap_cur *c, uint32_t len, int key, struct snap_runs *r)
{
    memset(r, 0, sizeof(*r));
    if (key) {
        r->key = len ? snap_get(c, len) : NULL;
        return c->bad ? -1 : 0;
    }
    r->p = c->p + c->off;
    r->nruns = snap_get_u32(c);
    uint64_t end = 0;
    for (uint32_t i = 0; i < r->nruns && !c->bad; i++) {
        uint32_t off = snap_get_u32(c), n = snap_get_u32(c);
        if (c->bad || n == 0 || off < end || (uint64_t)off + n > len) return -1;
        snap_get(c, n);
        end = (uint64_t)off + n;
    }
    r->p += 4;
    return c->bad ? -1 : 0;
}

int snap_delta_parse_windows(struct snap_cur *c, struct ss_snap_sample *x, struct snap_delta *dl,
                             int key, const char **why)
{
    struct ss_sample *s = &x->s;
    s->nwin = snap_get_u32(c);
    if (c->bad || s->nwin > SS_WIN_MAX) {
        *why = "sample record: bad window count";
        return -EBADMSG;
    }
    for (uint32_t i = 0; i < s->nwin; i++) {
        struct ss_window *w = &s->win[i];
        w->addr = snap_get_u64(c);
        w->len = snap_get_u32(c);
        w->err = (int32_t)snap_get_u32(c);
        if (c->bad || w->len > SS_WIN_LEN_MAX || parse_runs(c, w->len, key, &dl->win[i])) {
            *why = "sample record: window bytes missing or bad";
            return -EBADMSG;
        }
        if (key) w->data = dl->win[i].key;
    }
    return 0;
}

int snap_delta_parse(struct snap_cur *c, struct ss_snap_sample *x, struct snap_delta *dl,
                     const char **why)
{
    struct ss_sample *s = &x->s;
    dl->base_seq = snap_get_u64(c);
    int key = dl->base_seq == SNAP_DELTA_KEY;
    if (c->bad || s->stack_len > SS_STACK_MAX || parse_runs(c, s->stack_len, key, &dl->stack)) {
        *why = "sample record: stack bytes missing or bad";
        return -EBADMSG;
    }
    return snap_delta_parse_windows(c, x, dl, key, why);
}

/* Put back the key bytes the previous delta overwrote. */
static void undo(struct span *k, struct undo *u)
{
    for (size_t o = 0; o + 8 <= u->len;) {
        uint32_t back = snap_le32(u->p + o), n = snap_le32(u->p + o + 4);
        memcpy(k->buf + k->cap - back, u->p + o + 8, n);
        o += 8 + n;
    }
    u->len = 0;
}

static int undo_save(struct undo *u, const uint8_t *at, uint32_t back, uint32_t n)
{
    if (u->len + 8 + n > u->cap) {
        size_t cap = (u->len + 8 + n) * 2;
        uint8_t *p = realloc(u->p, cap);
        if (!p) return -ENOMEM;
        u->p = p;
        u->cap = cap;
    }
    uint8_t h[8] = {(uint8_t)back,         (uint8_t)(back >> 8), (uint8_t)(back >> 16),
                    (uint8_t)(back >> 24), (uint8_t)n,           (uint8_t)(n >> 8),
                    (uint8_t)(n >> 16),    (uint8_t)(n >> 24)};
    memcpy(u->p + u->len, h, 8);
    memcpy(u->p + u->len + 8, at, n);
    u->len += 8 + n;
    return 0;
}

/* The bytes of [lo, lo + len): the key's with the runs on top. In the key's
 * buffer when the top is the key's (the overwritten bytes saved for undo),
 * else built in scratch. */
static int apply_span(struct span *k, struct undo *u, struct span *scratch, uint64_t lo,
                      uint32_t len, const struct snap_runs *r, const uint8_t **out)
{
    undo(k, u);
    if (r->key || !r->p) {
        if (span_set(k, lo, r->key, len)) return -ENOMEM;
        *out = len ? k->buf + k->cap - len : NULL;
        return 0;
    }
    if (!len) {
        *out = NULL;
        return 0;
    }
    uint64_t top = lo + len, klo = k->top - k->len;
    if (top < lo) return -EBADMSG;
    /* every byte outside the runs must be in the key */
    const uint8_t *q = r->p;
    uint32_t gap = 0;
    for (uint32_t i = 0; i <= r->nruns; i++) {
        uint32_t off = i < r->nruns ? snap_le32(q) : len;
        if (off > gap && (!k->len || lo + gap < klo || lo + off > k->top)) return -EBADMSG;
        if (i < r->nruns) {
            uint32_t n = snap_le32(q + 4);
            gap = off + n;
            q += 8 + n;
        }
    }
    uint8_t *at;
    if (top == k->top && len <= k->cap) { /* in place, undone at the next sample */
        at = k->buf + k->cap - len;
        q = r->p;
        for (uint32_t i = 0; i < r->nruns; i++) {
            uint32_t off = snap_le32(q), n = snap_le32(q + 4);
            if (undo_save(u, at + off, len - off, n)) return -ENOMEM;
            memcpy(at + off, q + 8, n);
            q += 8 + n;
        }
    } else {
        if (span_room(scratch, len)) return -ENOMEM;
        at = scratch->buf + scratch->cap - len;
        gap = 0;
        q = r->p;
        for (uint32_t i = 0; i <= r->nruns; i++) {
            uint32_t off = i < r->nruns ? snap_le32(q) : len;
            if (off > gap) memcpy(at + gap, k->buf + k->cap - (k->top - (lo + gap)), off - gap);
            if (i < r->nruns) {
                uint32_t n = snap_le32(q + 4);
                memcpy(at + off, q + 8, n);
                gap = off + n;
                q += 8 + n;
            }
        }
    }
    *out = at;
    return 0;
}

int snap_delta_apply(struct snap_dstate *d, struct ss_snap_sample *x, const struct snap_delta *dl,
                     const char **why)
{
    struct ss_sample *s = &x->s;
    int fresh = 1;
    struct tstate *t = tstate_of(d, s->tid, SNAP_DELTA_READER_TIDS, &fresh);
    if (!t) return -ENOMEM;
    int key = dl->base_seq == SNAP_DELTA_KEY;
    if (!key && (fresh || t->seq != dl->base_seq)) {
        *why = "delta sample whose key sample was not read (damaged or cut out): skipped";
        return -EBADMSG;
    }
    int rc = apply_span(&t->stack, &t->ustack, &d->scratch[0], x->sp, s->stack_len, &dl->stack,
                        &s->stack);
    for (uint32_t i = 0; !rc && i < s->nwin; i++)
        rc = apply_span(&t->win[i], &t->uwin[i], &d->scratch[1 + i], s->win[i].addr, s->win[i].len,
                        &dl->win[i], &s->win[i].data);
    if (key) {
        for (uint32_t i = s->nwin; i < SS_WIN_MAX; i++) { /* windows the key has not */
            undo(&t->win[i], &t->uwin[i]);
            t->win[i].len = 0;
        }
        t->seq = rc ? SNAP_DELTA_KEY : x->seq;
    }
    if (rc) {
        *why = rc == -ENOMEM ? "out of memory"
                             : "delta sample with bytes outside its key sample: skipped";
        return rc;
    }
    return 0;
}
