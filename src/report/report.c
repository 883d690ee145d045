/* report/report: the aggregator. Interns strings, frames and stacks so that
 * every writer can be produced from one pass over the samples. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

struct ss_report *ss_report_new(const struct ss_report_opts *opts, struct ss_err *err)
{
    struct ss_report *r = calloc(1, sizeof(*r));
    if (!r) goto oom;
    r->freq_hz = opts && opts->freq_hz ? opts->freq_hz : 99;
    r->period_ns = 1000000000ull / r->freq_hz;
    if (!r->period_ns) r->period_ns = 1;
    r->wall_start_ns = opts ? opts->wall_start_ns : 0;
    r->off_cpu = opts && opts->off_cpu;
    r->timestamps = opts && opts->timestamps;
    r->title = strdup(opts && opts->title ? opts->title : "stacksnap flame graph");
    r->tmin = UINT64_MAX;
    if (!r->title || rp_strtab_init(&r->str)) goto oom;
    return r;
oom:
    ss_report_free(r);
    ss_err_set(err, -ENOMEM, "report: out of memory");
    return NULL;
}

void ss_report_free(struct ss_report *r)
{
    if (!r) return;
    free(r->title);
    rp_strtab_free(&r->str);
    free(r->frames);
    rp_index_free(&r->frame_ix);
    free(r->fids);
    free(r->stacks);
    rp_index_free(&r->stack_ix);
    rp_buf_free(&r->scratch);
    free(r->plabels);
    rp_index_free(&r->plabel_ix);
    free(r->events);
    free(r->tmp);
    free(r);
}

uint64_t ss_report_samples(const struct ss_report *r)
{
    return r->samples;
}

uint64_t ss_report_weight_us(const struct ss_stack *s)
{
    uint64_t us = (s->weight + 500) / 1000;
    return us ? us : 1;
}

size_t ss_report_nstacks(const struct ss_report *r)
{
    return r->nstacks;
}

/* The producer's strings come back sample after sample at the same
 * addresses (the unwinder's interned names), but they may be freed and their
 * memory reused for other text: an address seen before gives its id only
 * when the text there is still the id's. */
static int64_t intern(struct ss_report *r, const char *s)
{
    if (!s) return 0;
    struct rp_pcache *c = &r->pcache[(((uintptr_t)s * 0x9e3779b97f4a7c15ull) >> 32) % RP_PCACHE];
    if (c->p == s && !strcmp(rp_s(r, c->id), s)) return c->id;
    int64_t id = rp_str_intern(&r->str, s, strlen(s));
    if (id >= 0) {
        c->p = s;
        c->id = (uint32_t)id;
    }
    return id;
}

static uint64_t frame_hash(const struct rp_frame *f)
{
    uint64_t k[7] = {((uint64_t)f->kind << 8) | f->build_id_len,
                     ((uint64_t)f->name << 32) | f->module,
                     ((uint64_t)f->line << 32) | f->first_line,
                     f->addr,
                     f->offset ^ ((uint64_t)f->sysname << 40),
                     0,
                     0};
    memcpy(&k[5], f->build_id, f->build_id_len < 16 ? f->build_id_len : 16);
    return rp_hash(k, sizeof(k), f->build_id_len > 16 ? f->build_id[16] : 0);
}

struct frame_key {
    const struct ss_report *r;
    const struct rp_frame *f;
};

static bool frame_eq(const void *ctx, uint32_t idx)
{
    const struct frame_key *k = ctx;
    const struct rp_frame *a = &k->r->frames[idx], *b = k->f;
    return a->kind == b->kind && a->build_id_len == b->build_id_len &&
           !memcmp(a->build_id, b->build_id, b->build_id_len) && a->name == b->name &&
           a->module == b->module && a->line == b->line && a->first_line == b->first_line &&
           a->addr == b->addr && a->offset == b->offset && a->sysname == b->sysname;
}

static int64_t frame_text_id(struct ss_report *r, const struct rp_frame *f, int func)
{
    struct rp_frame_view v = {
        f->kind, f->addr, f->offset, rp_s(r, f->name), rp_s(r, f->module), f->line, f->first_line};
    rp_buf_reset(&r->scratch);
    rp_frame_text(&r->scratch, &v, func);
    if (r->scratch.oom) return -ENOMEM;
    /* the text may not contain NUL: names are C strings */
    return rp_str_intern(&r->str, r->scratch.p, r->scratch.len);
}

/* Intern one frame; returns its id or -ENOMEM. */
static int64_t frame_id(struct ss_report *r, const struct ss_frame *sf)
{
    struct rp_frame f = {0};
    int64_t name = intern(r, sf->name), module = intern(r, sf->module);
    int64_t sysname = sf->kind == SS_FRAME_NATIVE ? intern(r, sf->system_name) : 0;
    if (name < 0 || module < 0 || sysname < 0) return -ENOMEM;
    f.sysname = (uint32_t)sysname;
    f.kind = sf->kind;
    f.build_id_len = sf->build_id_len > sizeof(f.build_id) ? sizeof(f.build_id) : sf->build_id_len;
    memcpy(f.build_id, sf->build_id, f.build_id_len);
    f.name = (uint32_t)name;
    f.module = (uint32_t)module;
    f.addr = sf->addr;
    f.offset = sf->offset;
    f.sym_offset = sf->sym_offset;
    if (f.kind == SS_FRAME_LUA) {
        f.line = sf->line;
        f.first_line = sf->first_line;
    }
    struct frame_key k = {r, &f};
    /* the frame this address and name had last time, if it is the same */
    uint32_t *hint =
        &r->fcache[((f.addr ^ f.offset ^ ((uint64_t)f.name << 40)) * 0x9e3779b97f4a7c15ull) >>
                   (64 - RP_FCACHE_BITS)];
    if (*hint && frame_eq(&k, *hint - 1)) return *hint - 1;
    uint64_t h = frame_hash(&f);
    uint32_t idx;
    if (rp_index_find(&r->frame_ix, h, frame_eq, &k, &idx)) {
        *hint = idx + 1;
        return idx;
    }
    int64_t text = frame_text_id(r, &f, 0);
    int64_t func = f.kind == SS_FRAME_LUA ? frame_text_id(r, &f, 1) : text;
    if (text < 0 || func < 0 || r->nframes >= UINT32_MAX - 1 ||
        rp_grow(&r->frames, &r->capframes, r->nframes + 1, sizeof(*r->frames)))
        return -ENOMEM;
    f.text = (uint32_t)text;
    f.func = (uint32_t)func;
    r->frames[r->nframes] = f;
    if (rp_index_insert(&r->frame_ix, h, (uint32_t)r->nframes)) return -ENOMEM;
    *hint = (uint32_t)r->nframes + 1;
    return (int64_t)r->nframes++;
}

int ss_report_rename(struct ss_report *r, ss_report_namer_fn fn, void *ctx, struct ss_err *err)
{
    int n = 0;
    for (size_t i = 0; i < r->nframes; i++) {
        struct rp_frame *f = &r->frames[i];
        if (f->kind != SS_FRAME_NATIVE) continue;
        struct ss_frame in = {.kind = f->kind,
                              .build_id_len = f->build_id_len,
                              .addr = f->addr,
                              .offset = f->offset,
                              .name = f->name ? rp_s(r, f->name) : NULL,
                              .module = f->module ? rp_s(r, f->module) : NULL,
                              .sym_offset = f->sym_offset,
                              .system_name = f->sysname ? rp_s(r, f->sysname) : NULL},
                        out;
        memcpy(in.build_id, f->build_id, f->build_id_len);
        if (!fn(ctx, &in, &out) || !out.name) continue;
        int64_t name = rp_str_intern(&r->str, out.name, strlen(out.name));
        int64_t sys =
            out.system_name ? rp_str_intern(&r->str, out.system_name, strlen(out.system_name)) : 0;
        if (name < 0 || sys < 0) goto oom;
        if ((uint32_t)name == f->name && (uint32_t)sys == f->sysname) continue;
        f->name = (uint32_t)name;
        f->sysname = (uint32_t)sys;
        f->sym_offset = out.sym_offset;
        int64_t text = frame_text_id(r, f, 0);
        if (text < 0) goto oom;
        f->text = f->func = (uint32_t)text;
        n++;
    }
    if (!n) return 0;
    rp_index_free(&r->frame_ix); /* names are part of the frame key */
    memset(r->fcache, 0, sizeof(r->fcache));
    for (size_t i = 0; i < r->nframes; i++)
        if (rp_index_insert(&r->frame_ix, frame_hash(&r->frames[i]), (uint32_t)i)) goto oom;
    return n;
oom:
    ss_err_set(err, -ENOMEM, "report: out of memory renaming frames");
    return -ENOMEM;
}

struct stack_key {
    const struct ss_report *r;
    uint32_t pid, tid, comm, n;
    const uint32_t *fids;
};

static bool stack_eq(const void *ctx, uint32_t idx)
{
    const struct stack_key *k = ctx;
    const struct rp_stack *s = &k->r->stacks[idx];
    return s->pid == k->pid && s->tid == k->tid && s->comm == k->comm && s->nframes == k->n &&
           !memcmp(k->r->fids + s->first, k->fids, k->n * sizeof(*k->fids));
}

int ss_report_add(struct ss_report *r, const struct ss_stack *s, uint64_t count, struct ss_err *err)
{
    if (!r || !s || (s->nframes && !s->frames)) {
        ss_err_set(err, -EINVAL, "report: invalid stack");
        return -EINVAL;
    }
    if (!count) return 0;
    struct ss_stack one;
    struct ss_frame none = {.kind = SS_FRAME_PSEUDO, .name = SS_REPORT_NO_FRAMES};
    if (!s->nframes) { /* pprof views drop samples without locations */
        one = *s;
        one.nframes = 1;
        one.frames = &none;
        s = &one;
    }
    if (rp_grow(&r->tmp, &r->captmp, s->nframes + 1, sizeof(*r->tmp))) goto oom;
    int64_t comm = rp_str_intern(&r->str, s->comm, strnlen(s->comm, sizeof(s->comm)));
    if (comm < 0) goto oom;
    for (uint32_t i = 0; i < s->nframes; i++) {
        int64_t id = frame_id(r, &s->frames[i]);
        if (id < 0) goto oom;
        r->tmp[i] = (uint32_t)id;
    }
    struct stack_key k = {r, s->pid, s->tid, (uint32_t)comm, s->nframes, r->tmp};
    uint64_t h = rp_hash(r->tmp, s->nframes * sizeof(*r->tmp), comm);
    h = rp_hash_u64(h, ((uint64_t)s->pid << 32) | s->tid);
    uint32_t idx;
    if (!rp_index_find(&r->stack_ix, h, stack_eq, &k, &idx)) {
        if (r->nstacks >= UINT32_MAX - 1 ||
            rp_grow(&r->stacks, &r->capstacks, r->nstacks + 1, sizeof(*r->stacks)) ||
            rp_grow(&r->fids, &r->capfids, r->nfids + s->nframes, sizeof(*r->fids)))
            goto oom;
        idx = (uint32_t)r->nstacks;
        r->stacks[idx] =
            (struct rp_stack){s->pid, s->tid, (uint32_t)comm, s->nframes, r->nfids, 0, 0};
        if (s->nframes) memcpy(r->fids + r->nfids, r->tmp, s->nframes * sizeof(*r->tmp));
        if (rp_index_insert(&r->stack_ix, h, idx)) goto oom;
        r->nfids += s->nframes;
        r->nstacks++;
    }
    if (r->timestamps) {
        if (rp_grow(&r->events, &r->capevents, r->nevents + 1, sizeof(*r->events))) goto oom;
        uint32_t c = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
        r->events[r->nevents++] = (struct rp_event){s->time_ns, idx, c};
    }
    r->stacks[idx].count += count;
    r->samples += count;
    r->stacks[idx].n += r->off_cpu ? 1 : count;
    r->nsamp += r->off_cpu ? 1 : count;
    if (s->time_ns) {
        if (s->time_ns < r->tmin) r->tmin = s->time_ns;
        if (r->tmax == 0 || s->time_ns > r->tmax) r->tmax = s->time_ns;
    }
    return 0;
oom:
    ss_err_set(err, -ENOMEM, "report: out of memory adding a stack of pid %u", s->pid);
    return -ENOMEM;
}

int rp_fwrite(FILE *f, const void *p, size_t n, const char *what, struct ss_err *err)
{
    if (n && fwrite(p, 1, n, f) != n) {
        ss_err_set(err, -EIO, "%s: write error: %s", what, strerror(errno));
        return -EIO;
    }
    return 0;
}

int rp_fflush(FILE *f, const char *what, struct ss_err *err)
{
    if (fflush(f) || ferror(f)) {
        ss_err_set(err, -EIO, "%s: write error: %s", what, strerror(errno ? errno : EIO));
        return -EIO;
    }
    return 0;
}

struct plabel_key {
    const struct ss_report *r;
    uint32_t pid;
};

static bool plabel_eq(const void *ctx, uint32_t idx)
{
    const struct plabel_key *k = ctx;
    return k->r->plabels[idx].pid == k->pid;
}

/* Every sample of the agent's windows looks its pid up here, and the pprof
 * writer every stack: an index, not a walk over the window's processes. */
const struct rp_plabel *rp_plabel_of(const struct ss_report *r, uint32_t pid)
{
    struct plabel_key k = {r, pid};
    uint32_t idx;
    return rp_index_find(&r->plabel_ix, rp_hash_u64(0, pid), plabel_eq, &k, &idx) ? &r->plabels[idx]
                                                                                  : NULL;
}

/* A string label as it is (the same every sample of a process): no intern. */
static bool same_label(const struct ss_report *r, int64_t id, const char *s)
{
    return id >= 0 && !strcmp(rp_s(r, (uint32_t)id), s);
}

int ss_report_set_labels(struct ss_report *r, uint32_t pid, const char *exe, const char *cgroup,
                         struct ss_err *err)
{
    struct rp_plabel *l = (struct rp_plabel *)rp_plabel_of(r, pid);
    if (!l) {
        if (r->nplabels == r->capplabels) {
            size_t cap = r->capplabels ? r->capplabels * 2 : 16;
            struct rp_plabel *n = realloc(r->plabels, cap * sizeof(*n));
            if (!n) goto oom;
            r->plabels = n;
            r->capplabels = cap;
        }
        if (rp_index_insert(&r->plabel_ix, rp_hash_u64(0, pid), (uint32_t)r->nplabels)) goto oom;
        l = &r->plabels[r->nplabels++];
        *l = (struct rp_plabel){.pid = pid, .exe = -1, .cgroup = -1};
    }
    if (exe && *exe && same_label(r, l->exe, exe)) exe = NULL;
    if (cgroup && *cgroup && same_label(r, l->cgroup, cgroup)) cgroup = NULL;
    if (exe && *exe && (l->exe = rp_str_intern(&r->str, exe, strlen(exe))) < 0) goto oom;
    if (cgroup && *cgroup && (l->cgroup = rp_str_intern(&r->str, cgroup, strlen(cgroup))) < 0)
        goto oom;
    return 0;
oom:
    ss_err_set(err, -ENOMEM, "report: out of memory");
    return -ENOMEM;
}
