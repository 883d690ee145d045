/* bench/kcost.c: kernel cost per sample and in-kernel coverage (phase A).
 *
 * On one running workload, every BPF program of the comparison is loaded
 * at once (our snapshot program at 8/16/32/64 KiB, a floor program that only
 * rejects the pid, the frame-pointer comparator, the LuaJIT walker) and
 * attached one at a time, in slices: each round gives every program one
 * slice (attach_s / rounds), each round starting with another program. The
 * cost per sample of a slice is the growth of run_time_ns over that of
 * run_cnt; the median slice is reported, so load that comes and goes on a
 * shared machine moves it less than one long run would. The comparators'
 * records are kept and judged afterwards (bench/truth.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "stacksnap/ss.h"

struct grow {
    uint8_t *p;
    size_t n, cap, rec; /* records of rec bytes */
};

static void keep_rec(void *ctx, const void *rec, size_t len)
{
    struct grow *g = ctx;
    if (len < g->rec) return;
    if (g->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 1024;
        uint8_t *np = realloc(g->p, nc * g->rec);
        if (!np) return;
        g->p = np;
        g->cap = nc;
    }
    memcpy(g->p + g->n++ * g->rec, rec, g->rec);
}

struct r14set {
    uint64_t v[16];
    size_t n;
};

static void count_win(void *ctx, const void *rec, size_t len)
{
    const struct ss_event *e = rec;
    if (len >= sizeof(*e) && e->nwin) ++*(long *)ctx;
}

static void eval_fp(const struct grow *g, const struct bn_truth *t, struct bn_cov *cov)
{
    memset(cov, 0, sizeof(*cov));
    cov->have_root = true;
    cov->have_lua = !t->native;
    for (size_t i = 0; i < g->n; i++) {
        const struct bench_fp_event *e = (const void *)(g->p + i * g->rec);
        size_t n = e->nbytes > 0 ? (size_t)e->nbytes / 8 : 0;
        bool full;
        cov->samples++;
        cov->frames += (long)n;
        if (i == 0 && getenv("BENCH_DEBUG"))
            for (size_t k = 0; k < n; k++)
                fprintf(stderr, "fp[%zu] %llx\n", k, (unsigned long long)e->ips[k]);
        if (bn_truth_root(t, (const uint64_t *)e->ips, n, &full)) cov->root++;
        cov->full += full;
    }
}

struct ptcache {
    uint64_t pt[64];
    int32_t first[64];
    char chunk[64][64];
    size_t n;
};

static void eval_lua(const struct grow *g, const struct bn_truth *t, const char *layout,
                     struct bn_cov *cov, long *starts)
{
    struct ptcache pc = {0};
    memset(cov, 0, sizeof(*cov));
    cov->have_lua = true;
    for (size_t i = 0; i < g->n; i++) {
        const struct bench_lua_event *e = (const void *)(g->p + i * g->rec);
        int32_t first[BENCH_LUA_MAX];
        const char *chunk[BENCH_LUA_MAX];
        size_t m = e->n < BENCH_LUA_MAX ? e->n : BENCH_LUA_MAX, n = 0;
        cov->samples++;
        if (e->start < 4) starts[e->start]++;
        for (size_t k = 0; k < m; k++) {
            /* VARG or dummy slots, C and fast functions: not Lua frames */
            if (!e->frames[k].fn || !e->frames[k].pt) continue;
            uint64_t pt = e->frames[k].pt;
            size_t j = 0;
            while (j < pc.n && pc.pt[j] != pt)
                j++;
            if (j == pc.n && pc.n < 64) {
                pc.pt[j] = pt;
                pc.first[j] = -1;
                pc.chunk[j][0] = 0;
                if (pt) bn_lua_proto(t->pid, layout, pt, &pc.first[j], pc.chunk[j], 64);
                pc.n++;
            }
            first[n] = j < pc.n ? pc.first[j] : -1;
            chunk[n++] = j < pc.n ? pc.chunk[j] : NULL;
        }
        cov->frames += (long)n;
        if (i == 0 && getenv("BENCH_DEBUG"))
            for (size_t k = 0; k < n; k++)
                fprintf(stderr, "lua[%zu] %d %s (start %d end %d)\n", k, first[k], chunk[k],
                        e->start, e->end);
        if (e->end == BENCH_LUA_END_BOTTOM && bn_truth_lua(t, first, chunk, n)) cov->lua_ok++;
    }
}

struct slot {
    enum bn_prog kind;
    unsigned size;
    bool select;
    struct bn_bpf *b;
    bn_record_fn fn;
    void *ctx;
    struct bn_prog_info *out;
    bool *have;
    double ns[16];
    int nns;
    uint64_t ns0, cnt0;
};

static int add(struct slot *sl, int *n, enum bn_prog kind, unsigned size, bool select, bool follow,
               bool windows, struct bn_prog_info *out, bool *have, struct bn_results *r)
{
    char msg[256];
    struct slot *x = &sl[*n];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->size = size;
    x->select = select;
    x->out = out;
    x->have = have;
    if (bn_bpf_open(&x->b, kind, size, follow, windows, msg, sizeof(msg))) {
        bn_note(r, "BPF program %d (%u): %s", (int)kind, size, msg);
        return -1;
    }
    return (*n)++;
}

/* One slice: attach, poll, detach; the cost per run in it (ns), kept
 * among the slot's slices when keep, or -1. */
static double slice(const struct bn_opts *o, struct slot *x, pid_t pid, double secs, bool keep)
{
    char msg[256];
    struct bn_prog_info pi;
    if (bn_bpf_attach(x->b, pid, o->freq, x->select, msg, sizeof(msg))) {
        bn_log(o, "%s", msg);
        return -1;
    }
    double end = bn_now() + secs;
    while (bn_now() < end)
        bn_bpf_poll(x->b, 50, x->fn, x->ctx);
    bn_bpf_detach(x->b, x->fn, x->ctx);
    bn_bpf_info(x->b, &pi);
    uint64_t dn = pi.run_ns - x->ns0, dc = pi.run_cnt - x->cnt0;
    x->ns0 = pi.run_ns;
    x->cnt0 = pi.run_cnt;
    if (!dc) return -1;
    if (keep && x->nns < 16) x->ns[x->nns++] = (double)dn / (double)dc;
    return (double)dn / (double)dc;
}

static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof(double), bn_cmp_double);
    double at = q * (n - 1);
    int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

/* The windows' cost: the host under this VM moves a program's cost per run
 * by 2x from one second to the next, more than the windows cost, and the
 * medians of five slices per program apart moved the difference by +-2 us
 * between runs. So the two programs also run in pairs of adjacent short
 * slices (which goes first alternates), and the median of the pairs'
 * differences is the figure. */
#define WIN_PAIRS 40
static void win_pairs(const struct bn_opts *o, struct slot *without, struct slot *with, pid_t pid,
                      struct bn_results *r, int w)
{
    double d[WIN_PAIRS], q[WIN_PAIRS];
    int n = 0, pairs = o->quick ? 6 : WIN_PAIRS;
    double secs = o->quick ? 0.1 : 0.25;
    for (int i = 0; i < pairs; i++) {
        struct slot *first = i % 2 ? with : without, *second = i % 2 ? without : with;
        double a = slice(o, first, pid, secs, false), b = slice(o, second, pid, secs, false);
        if (a <= 0 || b <= 0) continue;
        double nw = i % 2 ? b : a, ww = i % 2 ? a : b;
        d[n] = ww - nw;
        q[n++] = ww / nw;
    }
    r->win_pairs[w] = n;
    if (!n) return;
    r->win_d_q1[w] = quantile(d, n, 0.25);
    r->win_d_q3[w] = quantile(d, n, 0.75);
    r->win_d_med[w] = quantile(d, n, 0.5);
    r->win_r_med[w] = quantile(q, n, 0.5);
}

void bn_kernel_phase(const struct bn_opts *o, int w, pid_t pid, const struct bn_truth *t,
                     struct bn_results *r, struct bench_lua_cfg *lua_cfg_out, bool *have_lua_cfg)
{
    struct slot sl[8];
    int n = 0, k;
    char msg[256], layout[64];
    bool native = !bn_wl_lua(w);

    /* the LuaJIT walker's settings need a DISPATCH value, and the window
     * program the plan `record` would set: a short capture unwound by our
     * own unwinder gives r14 of real samples and that plan */
    struct r14set r14 = {0};
    struct bench_lua_cfg cfg;
    struct ss_win_plan plan = {0};
    bool lua = false;
    if (!native) {
        if (bn_take_plan(o, pid, &plan, r14.v, &r14.n, 16, msg, sizeof(msg)))
            bn_note(r, "%s: no window plan: %s", bn_wl_name[w], msg);
        if (bn_lua_cfg(pid, r14.v, r14.n, &cfg, layout, sizeof(layout), msg, sizeof(msg)))
            bn_note(r, "%s: LuaJIT walker not run: %s", bn_wl_name[w], msg);
        else
            lua = true;
    }

    for (int s = 0; s < BN_NSIZES; s++) {
        if (w == BN_NATIVE_FP && bn_sizes[s] != 16384) continue;
        bool follow = w == BN_NATIVE && s == 1;
        k = add(sl, &n, BN_PROG_SNAP, bn_sizes[s], true, follow, false, &r->snap[w][s],
                &r->have_snap[w][s], r);
        if (k >= 0 && follow) {
            bn_bpf_info_follow(sl[k].b, &r->follow);
            r->have_follow = true;
        }
    }
    long nwinrec = 0;
    int kw = -1, k16 = -1; /* the windows' program, and the 16 KiB one without */
    for (int j = 0; j < n; j++)
        if (sl[j].size == 16384 && sl[j].kind == BN_PROG_SNAP) k16 = j;
    if (plan.n && (k = add(sl, &n, BN_PROG_SNAP, 16384, true, false, true, &r->snapw[w],
                           &r->have_snapw[w], r)) >= 0) {
        if (bn_bpf_set_plan(sl[k].b, pid, &plan)) {
            bn_note(r, "%s: window plan not set", bn_wl_name[w]);
            bn_bpf_close(sl[k].b);
            n--;
        } else {
            r->plan_n[w] = plan.n;
            sl[k].fn = count_win;
            sl[k].ctx = &nwinrec;
            kw = k;
        }
    }
    if (w == BN_NATIVE)
        add(sl, &n, BN_PROG_FP, 0, false, false, false, &r->floor, &r->have_floor, r);
    struct grow g = {.rec = sizeof(struct bench_fp_event)};
    if ((k = add(sl, &n, BN_PROG_FP, 0, true, false, false, &r->fp[w], &r->have_fp[w], r)) >= 0) {
        sl[k].fn = keep_rec;
        sl[k].ctx = &g;
    }
    struct grow lg = {.rec = sizeof(struct bench_lua_event)};
    if (lua && (k = add(sl, &n, BN_PROG_LUA, 0, true, false, false, &r->lua[w], &r->have_lua[w],
                        r)) >= 0) {
        bn_bpf_set_lua_cfg(sl[k].b, &cfg);
        sl[k].fn = keep_rec;
        sl[k].ctx = &lg;
        snprintf(r->layout, sizeof(r->layout), "%s", layout);
        *lua_cfg_out = cfg;
        *have_lua_cfg = true;
    }

    int rounds = o->quick ? 2 : 5;
    for (int round = 0; round < rounds; round++)
        for (int j = 0; j < n; j++)
            slice(o, &sl[(j + round) % n], pid, o->attach_s / rounds, true);
    if (kw >= 0 && k16 >= 0) win_pairs(o, &sl[k16], &sl[kw], pid, r, w);

    for (int j = 0; j < n; j++) {
        struct slot *x = &sl[j];
        bn_bpf_info(x->b, x->out);
        if (x->nns) {
            qsort(x->ns, (size_t)x->nns, sizeof(double), bn_cmp_double);
            x->out->ns_med =
                x->nns % 2 ? x->ns[x->nns / 2] : (x->ns[x->nns / 2 - 1] + x->ns[x->nns / 2]) / 2;
            x->out->ns_lo = x->ns[0];
            x->out->ns_hi = x->ns[x->nns - 1];
            *x->have = true;
        }
        bn_bpf_close(x->b);
    }
    r->win_recs[w] = nwinrec;
    if (r->have_fp[w]) eval_fp(&g, t, &r->cov_fp[w]);
    if (r->have_lua[w]) eval_lua(&lg, t, layout, &r->cov_lua[w], r->lua_start[w]);
    free(g.p);
    free(lg.p);
}
