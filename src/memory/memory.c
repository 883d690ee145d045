/* memory/memory.c: the layered reader of memory.h: stack snapshot, then the
 * file bytes of read-only file mappings (a table taken from the process
 * view, process/, when its mappings change), then the target backend in one
 * batch, with every target read passed to the record hook. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memory/memory.h"
#include "process/process.h"

void ss_mem_init(struct ss_mem *m, struct ss_proc *proc, const struct ss_target_ops *target,
                 void *target_ctx)
{
    memset(m, 0, sizeof(*m));
    m->proc = proc;
    m->target = target;
    m->target_ctx = target_ctx;
}

void ss_mem_free(struct ss_mem *m)
{
    free(m->spans);
    m->spans = NULL;
    m->nspans = m->spans_cap = 0;
    m->spans_taken = false;
}

void ss_mem_set_snapshot(struct ss_mem *m, uint64_t sp, const uint8_t *bytes, size_t len,
                         uint32_t holes)
{
    m->snap_base = sp;
    m->snap = bytes;
    m->snap_len = bytes ? len : 0;
    m->snap_holes = m->snap_len ? holes : 0;
    if (!m->snap_holes) return;
    /* The copy went on past pages it could not read. Past the end of the
     * mapping that holds sp they are another mapping's (the guard page
     * above a thread's stack, then whatever lies above it): the snapshot
     * ends there. With no mapping known for sp, at the first hole. */
    const struct ss_mapping *mp = m->proc ? ss_proc_find_cached(m->proc, sp) : NULL;
    if (!mp && m->proc) mp = ss_proc_find(m->proc, sp); /* a newer mapping: re-read, rate limited */
    uint64_t end;
    if (mp && mp->d.start <= sp && mp->d.end > sp) {
        end = mp->d.end - sp;
    } else {
        uint64_t hole = (sp & ~4095ull) + 4096ull * (unsigned)__builtin_ctz(m->snap_holes);
        end = hole > sp ? hole - sp : 0;
    }
    if (end < m->snap_len) m->snap_len = end;
    if (!m->snap_len) m->snap_holes = 0;
}

void ss_mem_set_windows(struct ss_mem *m, const struct ss_window *win, unsigned nwin)
{
    m->win = win;
    m->nwin = win ? nwin : 0;
    /* the copied windows sorted by address (insertion: at most SS_WIN_MAX),
     * so that a read below the next window stops the search */
    m->ncw = 0;
    for (unsigned i = 0; i < m->nwin && m->ncw < SS_WIN_MAX; i++) {
        const struct ss_window *w = &win[i];
        if (!w->len || !w->data) continue;
        unsigned k = m->ncw++;
        for (; k > 0 && m->cw[k - 1].addr > w->addr; k--)
            m->cw[k] = m->cw[k - 1];
        m->cw[k] = (struct ss_mem_win){w->addr, w->len, w->data};
    }
}

void ss_mem_set_sample(struct ss_mem *m, const struct ss_sample *s)
{
    ss_mem_set_windows(m, s->win, s->nwin);
    ss_mem_set_snapshot(m, s->regs[SS_REG_SP], s->stack, s->stack_len, s->holes);
}

static uint64_t from(uint64_t base, uint64_t len, uint64_t lo, uint64_t hi, uint64_t best)
{
    if (!len || hi <= base || hi - base > len) return best;
    uint64_t x = lo > base ? lo : base;
    return x < best ? x : best;
}

uint64_t ss_mem_sample_from(const struct ss_mem *m, uint64_t lo, uint64_t hi)
{
    uint64_t x = from(m->snap_base, m->snap_len, lo, hi, hi);
    for (unsigned i = 0; i < m->nwin; i++)
        x = from(m->win[i].addr, m->win[i].len, lo, hi, x);
    return x;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

void ss_mem_track_reset(struct ss_mem_track *t)
{
    t->nr = t->nt = t->nbytes = 0;
    t->snap_hi = 0;
    t->dregs = 0;
    t->opaque = t->oom = false;
}

void ss_mem_track_free(struct ss_mem_track *t)
{
    free(t->r);
    free(t->t);
    free(t->bytes);
    memset(t, 0, sizeof(*t));
}

/* Window bytes [off, off + len) of cw[w] were looked at: one range, or the
 * last one grown when they touch it (walks read neighbouring slots). */
void ss_mem_track_win(struct ss_mem_track *t, unsigned w, uint64_t off, size_t len)
{
    if (t->nr) {
        struct ss_mem_range *l = &t->r[t->nr - 1];
        if (l->win == w && off <= (uint64_t)l->off + l->len && off + len >= l->off) {
            uint64_t lo = off < l->off ? off : l->off;
            uint64_t hi = off + len > (uint64_t)l->off + l->len ? off + len : l->off + l->len;
            l->off = (uint32_t)lo;
            l->len = (uint32_t)(hi - lo);
            return;
        }
    }
    if (!grow((void **)&t->r, &t->rcap, t->nr + 1, sizeof(*t->r))) {
        t->oom = true;
        return;
    }
    t->r[t->nr++] = (struct ss_mem_range){w, (uint32_t)off, (uint32_t)len};
}

static void track_read(struct ss_mem_track *t, const struct ss_iov *v)
{
    size_t len = v->err ? 0 : v->len;
    if (v->len > UINT32_MAX || !grow((void **)&t->t, &t->tcap, t->nt + 1, sizeof(*t->t)) ||
        !grow((void **)&t->bytes, &t->bcap, t->nbytes + len, 1)) {
        t->oom = true;
        return;
    }
    t->t[t->nt++] = (struct ss_mem_tread){v->addr, (uint32_t)v->len, (uint32_t)t->nbytes, v->err};
    if (len) memcpy(t->bytes + t->nbytes, v->dst, len);
    t->nbytes += len;
}

const void *ss_mem_peek_sample(const struct ss_mem *m, uint64_t addr, size_t len)
{
    const void *p = ss_mem_peek_snap(m, addr, len);
    if (p) {
        if (m->track) ss_mem_track_snap(m->track, m, addr, len);
        return p;
    }
    /* windows that start above addr cannot hold it: the search stops there */
    for (unsigned i = 0; i < m->ncw && m->cw[i].addr <= addr; i++) {
        uint64_t off = addr - m->cw[i].addr;
        if (off < m->cw[i].len && len <= m->cw[i].len - off) {
            if (m->track) ss_mem_track_win(m->track, i, off, len);
            return m->cw[i].data + off;
        }
    }
    return NULL;
}

int ss_mem_sample_win(const struct ss_mem *m, uint64_t addr, size_t len)
{
    if (ss_mem_peek_snap(m, addr, len)) return -1;
    for (unsigned i = 0; i < m->ncw && m->cw[i].addr <= addr; i++) {
        uint64_t off = addr - m->cw[i].addr;
        if (off < m->cw[i].len && len <= m->cw[i].len - off) return (int)i;
    }
    return -1;
}

/* Layer 2's table anew from the view's mappings (generation gen); out of
 * memory: empty (the target reads what it would have served). */
static void take_spans(struct ss_mem *m, uint64_t gen)
{
    size_t n;
    const struct ss_mapping *mp = ss_proc_mappings(m->proc, &n);
    m->nspans = m->last = 0;
    m->spans_gen = gen;
    m->spans_taken = true;
    for (size_t i = 0; i < n; i++) {
        if (!mp[i].file_base) continue;
        if (!grow((void **)&m->spans, &m->spans_cap, m->nspans + 1, sizeof(*m->spans))) {
            m->nspans = 0;
            return;
        }
        m->spans[m->nspans++] = (struct ss_mem_span){mp[i].file_lo, mp[i].file_hi, mp[i].file_base};
    }
}

/* The span that holds addr, or NULL: the last hit, else by halves. */
static const struct ss_mem_span *span_at(struct ss_mem *m, uint64_t addr)
{
    size_t lo = m->last < m->nspans ? m->last : 0, hi = m->nspans;
    if (lo < hi && addr >= m->spans[lo].lo && addr < m->spans[lo].hi) return &m->spans[lo];
    for (lo = 0; lo < hi;) { /* the first span that ends above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (m->spans[mid].hi <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == m->nspans || addr < m->spans[lo].lo) return NULL;
    m->last = lo;
    return &m->spans[lo];
}

const void *ss_mem_peek(struct ss_mem *m, uint64_t addr, size_t len)
{
    const void *p = ss_mem_peek_sample(m, addr, len);
    if (p) return p;
    if (!m->proc || addr + len < addr) return NULL;
    uint64_t gen = ss_proc_generation(m->proc);
    if (!m->spans_taken || m->spans_gen != gen) take_spans(m, gen);
    const struct ss_mem_span *s = span_at(m, addr);
    return s && addr + len <= s->hi ? s->base + (addr - s->lo) : NULL;
}

static void log_read(struct ss_mem *m, const struct ss_iov *v)
{
    if (m->track) track_read(m->track, v);
    if (m->record) m->record(m->record_ctx, v->addr, v->err ? NULL : v->dst, v->len, v->err);
}

int ss_mem_read_target(struct ss_mem *m, uint64_t addr, void *dst, size_t len)
{
    if (len == 0) return 0;
    if (!m->target) return -EFAULT;
    struct ss_iov v = {.addr = addr, .dst = dst, .len = len, .err = 0};
    int r = m->target->readv(m->target_ctx, &v, 1);
    m->n_target_calls++;
    m->n_target_reads++;
    if (r < 0 && !v.err) v.err = r;
    log_read(m, &v);
    return v.err;
}

int ss_mem_read(struct ss_mem *m, uint64_t addr, void *dst, size_t len)
{
    if (len == 0) return 0;
    const void *p = ss_mem_peek(m, addr, len);
    if (p) {
        memcpy(dst, p, len);
        return 0;
    }
    return ss_mem_read_target(m, addr, dst, len);
}

int ss_mem_read_span(struct ss_mem *m, uint64_t *lo, uint64_t hi, uint8_t *b, bool live, int *win,
                     uint64_t *from)
{
    uint64_t l = *lo, x = live ? hi : ss_mem_sample_from(m, l, hi);
    *win = x < hi && m->track ? ss_mem_sample_win(m, x, hi - x) : -1;
    *from = x;
    struct ss_mem_track *track = m->track;
    if (*win >= 0) m->track = NULL;
    int rc = x < hi ? ss_mem_read(m, x, b + (x - l), hi - x) : 0;
    m->track = track;
    if (!rc && l < x) {
        uint64_t ov = hi - x < SS_MEM_SEAM ? hi - x : SS_MEM_SEAM;
        uint8_t *seam = b + (hi - l); /* SS_MEM_SEAM spare bytes after the copy */
        rc = ss_mem_read_target(m, l, b, x - l + ov);
        if (!rc && x < hi) {
            memcpy(seam, b + (x - l), ov); /* the live seam, then the sample's back */
            ss_mem_read(m, x, b + (x - l), ov);
            if (memcmp(seam, b + (x - l), ov)) {
                memmove(b, b + (x - l), hi - x);
                l = x;
            }
        }
    }
    if (!rc) *lo = l;
    return rc;
}

int ss_mem_readv(struct ss_mem *m, struct ss_iov *iov, int n)
{
    enum { BATCH = 64 };
    struct ss_iov batch[BATCH];
    int idx[BATCH], nb = 0, ret = 0;
    for (int i = 0; i <= n; i++) {
        if (i < n) {
            if (!iov[i].len) {
                iov[i].err = 0;
                continue;
            }
            const void *p = iov[i].live     ? NULL
                            : iov[i].sample ? ss_mem_peek_sample(m, iov[i].addr, iov[i].len)
                                            : ss_mem_peek(m, iov[i].addr, iov[i].len);
            if (p) {
                memcpy(iov[i].dst, p, iov[i].len);
                iov[i].err = 0;
                continue;
            }
            if (iov[i].sample) {
                iov[i].err = -ENOENT;
                continue;
            }
            if (!m->target) {
                iov[i].err = -EFAULT;
                continue;
            }
            batch[nb] = iov[i];
            batch[nb].err = 0;
            idx[nb++] = i;
        }
        if (nb == BATCH || (i == n && nb)) {
            int r = m->target->readv(m->target_ctx, batch, nb);
            m->n_target_calls++;
            m->n_target_reads += nb;
            for (int k = 0; k < nb; k++) {
                if (r < 0 && !batch[k].err) batch[k].err = r;
                iov[idx[k]].err = batch[k].err;
                log_read(m, &batch[k]);
            }
            if (r < 0) ret = r;
            nb = 0;
        }
    }
    return ret;
}
