/* unwind/memo.c: replay's memo of whole walks (memo.h): entries by process,
 * found by a hash of the registers every walk uses and the sample's shape,
 * then every input compared exactly; a process whose samples rarely repeat
 * stops using it for a while. The walk (walk.c) asks it twice, all its glue
 * here: before (ss_memo_answer: the walker's state, the lookup, the log
 * started) and after (ss_memo_keep: the state kept, the walk stored). */
#include <stdlib.h>
#include <string.h>

#include "unwind/memo.h"
#include "process/process.h"
#include "unwind/lua_runtimes.h"
#include "unwind/native.h"
#include "unwind/unwinder.h"

#define MEMO_BUCKETS 256
#define MEMO_MAX 256        /* entries per process; one more drops them all */
#define MEMO_TRIAL 64       /* lookups judged at a time */
#define MEMO_MIN_HITS 16    /* fewer hits in a trial: */
#define MEMO_PAUSE_MIN 256  /* samples walked without the memo, twice as many after */
#define MEMO_PAUSE_MAX 4096 /* each poor trial in a row, up to this */

/* Registers every walk may read: ip, sp, the callee-saved ones (native
 * frames above the leaf restore or keep them) and rdx (LuaJIT's BASE);
 * a walk that reads another (a CFA rule on it, libunwind) is compared on
 * all of them. MEMO_H1, MEMO_H2: two of them in the key's hash. */
#if defined(__x86_64__)
#define MEMO_REGS                                                                                  \
    (1ull << SS_REG_IP | 1ull << SS_REG_SP | 1ull << SS_REG_BX | 1ull << SS_REG_BP |               \
     1ull << SS_REG_DX | 1ull << SS_REG_R12 | 1ull << SS_REG_R13 | 1ull << SS_REG_R14 |            \
     1ull << SS_REG_R15)
#define MEMO_H1 SS_REG_BX
#define MEMO_H2 SS_REG_DX
#else /* arm64: ip, sp, the callee-saved x19-x28, fp (x29) and lr (x30) */
#define MEMO_REGS (1ull << SS_REG_IP | 1ull << SS_REG_SP | 0xfffull << SS_REG_X19)
#define MEMO_H1 SS_REG_X29
#define MEMO_H2 SS_REG_X30
#endif
#define MEMO_ALL_REGS ((1ull << SS_NREGS) - 1)

struct win_shape {
    uint64_t addr;
    uint32_t len;
    int32_t err;
    bool data;
};

struct ent {
    struct ent *next;
    uint64_t hash;
    uint64_t regmask;
    uint64_t regs[SS_NREGS];
    uint32_t flags, stack_len, holes, nwin, nkernel;
    uint32_t stack_used; /* stack bytes [0, stack_used) compared (the walk's) */
    struct win_shape win[SS_WIN_MAX];
    size_t nstate, nwords, nt, nframes;
    uint8_t trunc;
    /* the window words the walk looked at: group g's are [grp[g-1].end,
     * grp[g].end) of window grp[g].win, at woff, with the values wval */
    struct {
        uint32_t win, end;
    } grp[SS_WIN_MAX];
    uint32_t ngrp;
    /* in the same allocation, after the struct */
    const uint64_t *state, *kernel, *wval;
    const uint32_t *woff;
    const uint8_t *stack, *tbytes;
    const struct ss_mem_tread *t;
    const struct ss_frame *frames;
};

struct wpos {
    uint32_t win, off;
};

struct ss_memo {
    struct ent *b[MEMO_BUCKETS];
    struct wpos *w; /* words of a walk being kept */
    size_t wcap;
    unsigned n;
    unsigned tries, hits, pause, backoff;
    uint64_t total_hits;
    uint8_t *scratch; /* target reads of a check */
    size_t scap;
    uint64_t *state; /* the walker's state at state_epoch (SS_LUA_STATE_WORDS) */
    size_t nstate;
    uint64_t state_epoch;
    bool have_state;
};

static void drop_all(struct ss_memo *m)
{
    for (unsigned i = 0; i < MEMO_BUCKETS; i++)
        for (struct ent *e = m->b[i], *nx; e; e = nx) {
            nx = e->next;
            free(e);
        }
    memset(m->b, 0, sizeof(m->b));
    m->n = 0;
}

void ss_memo_free(struct ss_memo *m)
{
    if (!m) return;
    drop_all(m);
    free(m->scratch);
    free(m->w);
    free(m->state);
    free(m);
}

/* The walker's state (ss_lua_state) as kept at epoch (ss_lua_epoch), or
 * NULL when it was not kept at that epoch; *n words. */
static const uint64_t *kept_state(const struct ss_memo *m, uint64_t epoch, size_t *n)
{
    if (!m || !m->have_state || m->state_epoch != epoch) return NULL;
    *n = m->nstate;
    return m->state;
}

/* Keep the walker's state w (n words) as it is at epoch. */
static void keep_state(struct ss_memo **mp, uint64_t epoch, const uint64_t *w, size_t n)
{
    struct ss_memo *m = *mp;
    if (!m && !(m = *mp = calloc(1, sizeof(*m)))) return;
    m->have_state = false;
    if (n > SS_LUA_STATE_WORDS) return;
    if (!m->state && !(m->state = malloc(SS_LUA_STATE_WORDS * sizeof(*m->state)))) return;
    memcpy(m->state, w, n * sizeof(*w));
    m->nstate = n;
    m->state_epoch = epoch;
    m->have_state = true;
}

uint64_t ss_memo_hits(const struct ss_memo *m)
{
    return m ? m->total_hits : 0;
}

/* Worth looking this sample up and logging its walk? Not while the memo is
 * paused; counts the pause down. */
static bool want(struct ss_memo *m)
{
    if (m && m->pause) {
        m->pause--;
        return false;
    }
    return true;
}

static uint64_t key_hash(const struct ss_sample *s)
{
    uint64_t h = s->regs[SS_REG_IP] * 0x9e3779b97f4a7c15ull;
    h = (h ^ s->regs[SS_REG_SP]) * 0xc2b2ae3d27d4eb4full;
    h = (h ^ s->regs[MEMO_H1]) * 0x165667b19e3779f9ull;
    h = (h ^ s->regs[MEMO_H2] ^ (uint64_t)s->stack_len << 32 ^ s->nwin) * 0x9e3779b97f4a7c15ull;
    return h ^ h >> 29;
}

static void shape_of(const struct ss_sample *s, struct win_shape *w)
{
    memset(w, 0, SS_WIN_MAX * sizeof(*w));
    for (uint32_t i = 0; i < s->nwin && i < SS_WIN_MAX; i++)
        w[i] = (struct win_shape){s->win[i].addr, s->win[i].len, s->win[i].err,
                                  s->win[i].data != NULL};
}

/* Are the target's answers to e's reads the same now? */
static bool same_reads(struct ss_memo *m, struct ss_mem *mem, const struct ent *e, bool *read)
{
    /* a walk after a check that read needs the reads served afresh; and the
     * live walk of this sample must have made these reads and no others
     * (its caches may have sent it elsewhere: a header it had to read again
     * where this entry's walk trusted its cache) */
    if (!mem->target || !mem->target->consumed || (e->nt && !mem->target->restart)) return false;
    if (e->nt) *read = true;
    for (size_t i = 0; i < e->nt; i++) {
        const struct ss_mem_tread *t = &e->t[i];
        if (t->len > m->scap) {
            uint8_t *n = realloc(m->scratch, t->len);
            if (!n) return false;
            m->scratch = n;
            m->scap = t->len;
        }
        struct ss_iov v = {.addr = t->addr, .dst = m->scratch, .len = t->len};
        int r = mem->target->readv(mem->target_ctx, &v, 1);
        if (r < 0 && !v.err) v.err = r;
        if (v.err != t->err || (!v.err && memcmp(m->scratch, e->tbytes + t->off, t->len)))
            return false;
    }
    return mem->target->consumed(mem->target_ctx);
}

static bool same_regs(const struct ent *e, const struct ss_sample *s)
{
    if (e->regmask != MEMO_REGS) return !memcmp(e->regs, s->regs, sizeof(e->regs));
    const uint64_t *a = e->regs, *b = s->regs;
#if defined(__x86_64__)
    return a[SS_REG_IP] == b[SS_REG_IP] && a[SS_REG_SP] == b[SS_REG_SP] &&
           a[SS_REG_BX] == b[SS_REG_BX] && a[SS_REG_DX] == b[SS_REG_DX] &&
           a[SS_REG_BP] == b[SS_REG_BP] && a[SS_REG_R12] == b[SS_REG_R12] &&
           a[SS_REG_R13] == b[SS_REG_R13] && a[SS_REG_R14] == b[SS_REG_R14] &&
           a[SS_REG_R15] == b[SS_REG_R15];
#else
    for (uint64_t m = MEMO_REGS; m; m &= m - 1)
        if (a[__builtin_ctzll(m)] != b[__builtin_ctzll(m)]) return false;
    return true;
#endif
}

static bool same_shape(const struct ent *e, const struct ss_sample *s)
{
    if (e->flags != s->flags || e->stack_len != s->stack_len || e->holes != s->holes ||
        e->nwin != s->nwin || e->nkernel != s->nkernel)
        return false;
    for (uint32_t i = 0; i < s->nwin; i++) {
        const struct win_shape *w = &e->win[i];
        const struct ss_window *x = &s->win[i];
        if (w->addr != x->addr || w->len != x->len || w->err != x->err ||
            w->data != (x->data != NULL))
            return false;
    }
    return true;
}

/* memcmp(a, b, n) == 0, for the short ranges of Lua slots without a call */
static inline bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n > 64) return !memcmp(a, b, n);
    uint64_t x, y, d = 0;
    for (; n >= 8; n -= 8, a += 8, b += 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        d |= x ^ y;
    }
    for (; n; n--)
        d |= (uint64_t)(*a++ ^ *b++);
    return !d;
}

static bool matches(struct ss_memo *m, struct ss_mem *mem, const struct ent *e,
                    const struct ss_sample *s, const uint64_t *state, size_t nstate, bool *read)
{
    if (!same_regs(e, s) || !same_shape(e, s) || e->nstate != nstate ||
        !same_bytes((const uint8_t *)e->state, (const uint8_t *)state, nstate * sizeof(*state)) ||
        (e->nkernel && memcmp(e->kernel, s->kernel, e->nkernel * sizeof(*s->kernel))))
        return false;
    /* the windows have the shape they had (same_shape), and so the sorted
     * copies in mem the same indexes and lengths: every word lies in one */
    uint64_t d = 0;
    for (uint32_t g = 0, k = 0; g < e->ngrp; g++) {
        const uint8_t *base = mem->cw[e->grp[g].win].data;
        for (; k < e->grp[g].end; k++) {
            uint64_t x;
            memcpy(&x, base + e->woff[k], 8);
            d |= x ^ e->wval[k];
        }
    }
    if (d) return false;
    if (e->stack_used && memcmp(e->stack, s->stack, e->stack_used)) return false;
    /* each check is served from the sample's first read on, as a walk is
     * (*read: an earlier check read, so the target has restart) */
    if (*read) mem->target->restart(mem->target_ctx);
    return same_reads(m, mem, e, read);
}

/* The frames of an earlier walk whose inputs equal s's (state: the
 * walker's now), or NULL (then, when the check read the target, the target
 * was restarted for the walk to come). */
static const struct ss_frame *find(struct ss_memo **mp, struct ss_mem *mem,
                                   const struct ss_sample *s, const uint64_t *state, size_t nstate,
                                   unsigned *n, uint8_t *trunc)
{
    struct ss_memo *m = *mp;
    if (!m && !(m = *mp = calloc(1, sizeof(*m)))) return NULL;
    if (++m->tries == MEMO_TRIAL) {    /* judge the last trial */
        if (m->hits < MEMO_MIN_HITS) { /* (the first trial starts from nothing) */
            drop_all(m);
            m->pause = m->backoff < MEMO_PAUSE_MIN ? MEMO_PAUSE_MIN : m->backoff;
            m->backoff = m->pause * 2 > MEMO_PAUSE_MAX ? MEMO_PAUSE_MAX : m->pause * 2;
        } else {
            m->backoff = MEMO_PAUSE_MIN;
        }
        m->tries = m->hits = 0;
    }
    uint64_t h = key_hash(s);
    bool read = false;
    struct ent **pp = &m->b[h % MEMO_BUCKETS], *e;
    for (; (e = *pp); pp = &e->next)
        if (e->hash == h && matches(m, mem, e, s, state, nstate, &read)) break;
    if (read && mem->target && mem->target->restart) mem->target->restart(mem->target_ctx);
    if (!e) return NULL;
    *pp = e->next; /* to the front: the next sample is likely the same */
    e->next = m->b[h % MEMO_BUCKETS];
    m->b[h % MEMO_BUCKETS] = e;
    m->hits++;
    m->total_hits++;
    *n = (unsigned)e->nframes;
    *trunc = e->trunc;
    return e->frames;
}

/* Copy len bytes to *p, advance it; where they went. */
static void *take(uint8_t **p, const void *src, size_t len)
{
    void *at = *p;
    if (len) memcpy(at, src, len);
    *p += len;
    return at;
}

/* Registers the walk that t logged may have read. */
static uint64_t regs_read(const struct ss_mem_track *t)
{
    uint64_t fixed = 0;
    for (unsigned i = 0; i < SS_NREGS; i++)
        if ((MEMO_REGS & SS_PERF_GP_MASK) >> i & 1) fixed |= SS_DBIT(ss_perf_to_dwarf[i]);
    return (t->dregs & ~fixed) ? MEMO_ALL_REGS : MEMO_REGS;
}

/* The 8-byte words of the windows that cover t's ranges, window by window
 * (cw order), into m->w; a range that does not end on a word gets the word
 * ending with it (more bytes compared than were read, never fewer). -1: a
 * window too short for a word, or out of memory. */
static long words_of(struct ss_memo *m, const struct ss_mem *mem, const struct ss_mem_track *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nr; i++)
        if (t->r[i].win >= mem->ncw) return -1;
    for (unsigned w = 0; w < mem->ncw; w++)
        for (size_t i = 0; i < t->nr; i++) {
            const struct ss_mem_range *r = &t->r[i];
            if (r->win != w) continue;
            uint64_t wl = mem->cw[w].len, lo = r->off, hi = lo + r->len;
            if (wl < 8) return -1;
            for (uint64_t o = lo; o < hi || o == lo; o += 8) {
                if (n == m->wcap) {
                    size_t c = m->wcap ? m->wcap * 2 : 256;
                    struct wpos *nw = realloc(m->w, c * sizeof(*nw));
                    if (!nw) return -1;
                    m->w = nw;
                    m->wcap = c;
                }
                uint64_t at = o + 8 <= hi ? o : (hi >= 8 ? hi - 8 : 0);
                m->w[n++] = (struct wpos){w, (uint32_t)at};
            }
        }
    return (long)n;
}

/* Keep the frames of the walk of s that t logged (state: as it was before
 * and after the walk, both nstate words). */
static void store(struct ss_memo **mp, const struct ss_mem *mem, const struct ss_sample *s,
                  const uint64_t *state, size_t nstate, const struct ss_mem_track *t,
                  const struct ss_frame *f, unsigned n, uint8_t trunc)
{
    struct ss_memo *m = *mp;
    /* Only walks that read nothing from the target. A skipped walk must
     * leave the walker's caches as the live walk of that sample left them:
     * the caches are filled from target reads, and a sample answered here
     * had a live walk that made exactly the entry's reads (same_reads), so
     * with none it changed no cache a later walk's reads depend on. With
     * reads, the live walk refilled what its reads bring; if something
     * evicted that since the entry's walk, replay would now lack it and a
     * later walk read what live did not (on LuaJIT -joff 0.1% of the
     * answers had reads). */
    if (!m || m->pause || t->opaque || t->oom || t->nt || s->nwin > SS_WIN_MAX) return;
    long nw = words_of(m, mem, t);
    if (nw < 0) return;
    size_t kl = s->nkernel * sizeof(uint64_t), sl = nstate * sizeof(uint64_t);
    uint32_t used = t->snap_hi < s->stack_len ? (uint32_t)t->snap_hi : s->stack_len;
    /* frames first (alignment), then the word arrays, then the bytes */
    size_t sz = sizeof(struct ent) + n * sizeof(struct ss_frame) + sl + kl +
                (size_t)nw * (sizeof(uint64_t) + sizeof(uint32_t)) + t->nt * sizeof(*t->t) + used +
                t->nbytes;
    if (m->n >= MEMO_MAX) drop_all(m);
    struct ent *e = malloc(sz);
    if (!e) return;
    memset(e, 0, sizeof(*e));
    uint8_t *p = (uint8_t *)(e + 1);
    e->frames = take(&p, f, n * sizeof(*f));
    e->state = take(&p, state, sl);
    e->kernel = take(&p, s->kernel, kl);
    uint64_t *wval = (uint64_t *)(void *)p;
    p += (size_t)nw * sizeof(uint64_t);
    e->t = take(&p, t->t, t->nt * sizeof(*t->t));
    uint32_t *woff = (uint32_t *)(void *)p;
    p += (size_t)nw * sizeof(uint32_t);
    e->stack = take(&p, s->stack, used);
    e->tbytes = take(&p, t->bytes, t->nbytes);
    for (long i = 0; i < nw; i++) {
        const struct wpos *w = &m->w[i];
        memcpy(&wval[i], mem->cw[w->win].data + w->off, 8);
        woff[i] = w->off;
        if (!e->ngrp || e->grp[e->ngrp - 1].win != w->win) e->grp[e->ngrp++].win = w->win;
        e->grp[e->ngrp - 1].end = (uint32_t)i + 1;
    }
    e->wval = wval;
    e->woff = woff;
    e->nwords = (size_t)nw;
    e->hash = key_hash(s);
    e->regmask = regs_read(t);
    memcpy(e->regs, s->regs, sizeof(e->regs));
    e->flags = s->flags;
    e->stack_len = s->stack_len;
    e->holes = s->holes;
    e->stack_used = used;
    e->nwin = s->nwin;
    e->nkernel = s->nkernel;
    shape_of(s, e->win);
    e->nstate = nstate;
    e->nt = t->nt;
    e->nframes = n;
    e->trunc = trunc;
    struct ent **b = &m->b[e->hash % MEMO_BUCKETS];
    e->next = *b;
    *b = e;
    m->n++;
}

const struct ss_frame *ss_memo_answer(struct ss_uproc *up, const struct ss_sample *s, bool on,
                                      struct ss_memo_walk *w, unsigned *n, uint8_t *trunc)
{
    w->nstate = 0;
    w->track = on && want(up->memo);
    if (!w->track) return NULL;
    /* the state as the last walk left it, when no walk ran since */
    const uint64_t *kept = kept_state(up->memo, ss_lua_epoch(up), &w->nstate);
    if (kept)
        memcpy(w->state[0], kept, w->nstate * sizeof(*kept));
    else
        w->nstate = ss_lua_state(up, w->state[0]);
    const struct ss_frame *f = find(&up->memo, &up->mem, s, w->state[0], w->nstate, n, trunc);
    if (f) return f;
    ss_mem_track_reset(w->log);
    up->mem.track = w->log;
    return NULL;
}

void ss_memo_keep(struct ss_uproc *up, const struct ss_sample *s, const struct ss_memo_walk *w,
                  const struct ss_frame *f, unsigned n, uint8_t trunc)
{
    if (!w->track) return;
    size_t after = ss_lua_state(up, w->state[1]);
    keep_state(&up->memo, ss_lua_epoch(up), w->state[1], after);
    if (ss_proc_generation(up->proc) == w->gen && after == w->nstate &&
        !memcmp(w->state[0], w->state[1], w->nstate * sizeof(uint64_t)))
        store(&up->memo, &up->mem, s, w->state[0], w->nstate, w->log, f, n, trunc);
}
