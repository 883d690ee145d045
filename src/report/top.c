/* report/top: the live top model (include/stacksnap/top.h). Counters
 * are keyed by (pid, granularity, name); each holds cumulative self/total
 * and a ring of per-second counts for the window. A per-process counter
 * with name 0 counts the process's samples. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"
#include "stacksnap/top.h"

#define W SS_TOP_WINDOW

struct ctr {
    uint32_t pid, name; /* name: string id (display text), 0 = the process's samples */
    uint8_t gran, kind; /* gran: 0 function, 1 line; both for non-Lua frames */
    uint64_t self_all, total_all;
    uint64_t self[W], total[W];
    uint64_t stamp; /* last stack counted in total, + 1 */
};

struct proc {
    uint32_t pid;
    uint32_t comm; /* string id */
};

struct ss_top {
    struct rp_strtab str;
    struct ctr *c;
    size_t n, cap;
    struct rp_index ix;
    struct proc *procs;
    size_t nprocs, capprocs;
    unsigned slot, seconds; /* current ring slot; seconds in the window so far */
    uint64_t stacks;
    struct rp_buf tmp, disp;
    /* query scratch */
    uint32_t *row_of;
    size_t caprow_of;
};

struct ss_top *ss_top_new(struct ss_err *err)
{
    struct ss_top *t = calloc(1, sizeof(*t));
    if (!t || rp_strtab_init(&t->str)) {
        free(t);
        ss_err_set(err, -ENOMEM, "top: out of memory");
        return NULL;
    }
    t->seconds = 1;
    return t;
}

void ss_top_free(struct ss_top *t)
{
    if (!t) return;
    rp_strtab_free(&t->str);
    free(t->c);
    rp_index_free(&t->ix);
    free(t->procs);
    rp_buf_free(&t->tmp);
    rp_buf_free(&t->disp);
    free(t->row_of);
    free(t);
}

struct ckey {
    const struct ss_top *t;
    uint32_t pid, name;
    uint8_t gran;
};

static bool ctr_eq(const void *ctx, uint32_t idx)
{
    const struct ckey *k = ctx;
    const struct ctr *c = &k->t->c[idx];
    return c->pid == k->pid && c->name == k->name && c->gran == k->gran;
}

static struct ctr *counter(struct ss_top *t, uint32_t pid, uint32_t name, uint8_t gran,
                           uint8_t kind)
{
    struct ckey k = {t, pid, name, gran};
    uint64_t h = rp_hash_u64(((uint64_t)pid << 32) | name, gran);
    uint32_t idx;
    if (rp_index_find(&t->ix, h, ctr_eq, &k, &idx)) return &t->c[idx];
    if (t->n >= UINT32_MAX - 1 || rp_grow(&t->c, &t->cap, t->n + 1, sizeof(*t->c)) ||
        rp_index_insert(&t->ix, h, (uint32_t)t->n))
        return NULL;
    t->c[t->n] = (struct ctr){.pid = pid, .name = name, .gran = gran, .kind = kind};
    return &t->c[t->n++];
}

static int proc_seen(struct ss_top *t, const struct ss_stack *s)
{
    size_t lo = 0, hi = t->nprocs;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (t->procs[m].pid < s->pid)
            lo = m + 1;
        else
            hi = m;
    }
    int64_t comm = rp_str_intern(&t->str, s->comm, strnlen(s->comm, sizeof(s->comm)));
    if (comm < 0) return -ENOMEM;
    if (lo < t->nprocs && t->procs[lo].pid == s->pid) {
        t->procs[lo].comm = (uint32_t)comm; /* exec renames */
        return 0;
    }
    if (rp_grow(&t->procs, &t->capprocs, t->nprocs + 1, sizeof(*t->procs))) return -ENOMEM;
    memmove(t->procs + lo + 1, t->procs + lo, (t->nprocs - lo) * sizeof(*t->procs));
    t->procs[lo] = (struct proc){s->pid, (uint32_t)comm};
    t->nprocs++;
    return 0;
}

/* Display text of a frame at a granularity, interned. */
static int64_t frame_name(struct ss_top *t, const struct ss_frame *f, int lines)
{
    struct rp_frame_view v = {f->kind,   f->addr, f->offset,    f->name,
                              f->module, f->line, f->first_line};
    rp_buf_reset(&t->tmp);
    rp_frame_text(&t->tmp, &v, !lines);
    rp_buf_reset(&t->disp);
    rp_escape(&t->disp, t->tmp.p ? t->tmp.p : "", t->tmp.len, RP_ESC_DISPLAY);
    if (t->tmp.oom || t->disp.oom) return -ENOMEM;
    return rp_str_intern(&t->str, t->disp.p ? t->disp.p : "", t->disp.len);
}

static void count(struct ctr *c, unsigned slot, uint64_t stamp, int leaf)
{
    if (leaf) {
        c->self_all++;
        c->self[slot]++;
    }
    if (c->stamp != stamp) {
        c->stamp = stamp;
        c->total_all++;
        c->total[slot]++;
    }
}

int ss_top_add(struct ss_top *t, const struct ss_stack *s)
{
    if (proc_seen(t, s)) return -ENOMEM;
    uint64_t stamp = ++t->stacks;
    struct ctr *p = counter(t, s->pid, 0, 0, 0);
    if (!p) return -ENOMEM;
    count(p, t->slot, stamp, 1);
    struct ss_frame none = {.kind = SS_FRAME_PSEUDO, .name = SS_REPORT_NO_FRAMES};
    uint32_t n = s->nframes ? s->nframes : 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct ss_frame *f = s->nframes ? &s->frames[i] : &none;
        int lua = f->kind == SS_FRAME_LUA;
        for (int g = 0; g < 2; g++) {
            int64_t name = g == 0 || lua ? frame_name(t, f, g) : -1;
            if (name == -ENOMEM) return -ENOMEM;
            if (name < 0) { /* non-Lua: one counter serves both granularities */
                continue;
            }
            struct ctr *c = counter(t, s->pid, (uint32_t)name, lua ? (uint8_t)g : 2, f->kind);
            if (!c) return -ENOMEM;
            count(c, t->slot, stamp, i == 0);
        }
    }
    return 0;
}

void ss_top_tick(struct ss_top *t)
{
    t->slot = (t->slot + 1) % W;
    if (t->seconds < W) t->seconds++;
    for (size_t i = 0; i < t->n; i++)
        t->c[i].self[t->slot] = t->c[i].total[t->slot] = 0;
}

static uint64_t sum(const uint64_t *v)
{
    uint64_t s = 0;
    for (int i = 0; i < W; i++)
        s += v[i];
    return s;
}

struct qctx {
    enum ss_top_sort sort;
};

static int row_cmp(const void *a, const void *b, void *ctx)
{
    const struct ss_top_row *x = a, *y = b;
    const struct qctx *q = ctx;
    uint64_t xw = q->sort == SS_TOP_SORT_SELF ? x->self_win : x->total_win;
    uint64_t yw = q->sort == SS_TOP_SORT_SELF ? y->self_win : y->total_win;
    uint64_t xa = q->sort == SS_TOP_SORT_SELF ? x->self_all : x->total_all;
    uint64_t ya = q->sort == SS_TOP_SORT_SELF ? y->self_all : y->total_all;
    if (xw != yw) return xw < yw ? 1 : -1;
    if (xa != ya) return xa < ya ? 1 : -1;
    return strcmp(x->name, y->name);
}

int ss_top_query(struct ss_top *t, const struct ss_top_query *q, struct ss_top_view *v)
{
    if (rp_grow(&t->row_of, &t->caprow_of, t->str.n + 1, sizeof(*t->row_of))) return -ENOMEM;
    memset(t->row_of, 0, t->caprow_of * sizeof(*t->row_of));
    size_t cap = 0;
    struct ss_top_row *rows = v->rows;
    v->nrows = 0;
    v->samples_win = v->samples_all = 0;
    v->window_s = t->seconds;
    for (size_t i = 0; i < t->n; i++) {
        const struct ctr *c = &t->c[i];
        if (q->pid && c->pid != q->pid) continue;
        if (!c->name) {
            v->samples_win += sum(c->self);
            v->samples_all += c->self_all;
            continue;
        }
        if (c->gran != 2 && c->gran != (q->lua_lines ? 1 : 0)) continue;
        uint32_t *ri = &t->row_of[c->name];
        if (!*ri) {
            if (v->nrows + 1 > cap) {
                cap = cap ? cap * 2 : 64;
                struct ss_top_row *nr = realloc(rows, cap * sizeof(*rows));
                if (!nr) {
                    v->rows = rows;
                    return -ENOMEM;
                }
                rows = nr;
            }
            rows[v->nrows] = (struct ss_top_row){.name = rp_str(&t->str, c->name), .kind = c->kind};
            *ri = (uint32_t)++v->nrows;
        }
        struct ss_top_row *r = &rows[*ri - 1];
        r->self_win += sum(c->self);
        r->total_win += sum(c->total);
        r->self_all += c->self_all;
        r->total_all += c->total_all;
    }
    v->rows = rows;
    struct qctx qc = {q->sort};
    if (v->nrows) qsort_r(v->rows, v->nrows, sizeof(*v->rows), row_cmp, &qc);
    return 0;
}

void ss_top_view_free(struct ss_top_view *v)
{
    free(v->rows);
    *v = (struct ss_top_view){0};
}

bool ss_top_process(const struct ss_top *t, size_t i, uint32_t *pid, const char **comm)
{
    if (i >= t->nprocs) return false;
    *pid = t->procs[i].pid;
    *comm = rp_str(&t->str, t->procs[i].comm);
    return true;
}
