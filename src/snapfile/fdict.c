/* snapfile/fdict.c: the writer's side of captures of unwound stacks
 * (stackrec.c has the format and the reader's side): a dictionary of every
 * frame written so far, by content, that gives a stack's frames their ids
 * and encodes the new ones into a frames record before the stack record. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapfile/stackrec.h"
#include "snapfile/writer.h"

/* unsigned LEB128 (frame ids, counts) */
static void put_uvar(struct snap_buf *b, uint32_t v)
{
    uint8_t x[5];
    int n = 0;
    do {
        x[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) x[n] |= 0x80;
        n++;
    } while (v);
    snap_put(b, x, (size_t)n);
}

struct fentry {
    struct ss_frame f; /* strings owned (strdup) */
    uint64_t hash;
};

struct snap_fdict {
    struct fentry *e;
    uint32_t n, cap;
    uint32_t *slot; /* open addressing: id + 1, 0 empty */
    uint32_t nslots;
};

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    uint8_t tag = s ? 1 : 0;
    h = mix(h, &tag, 1);
    return s ? mix(h, s, strlen(s) + 1) : h;
}

static uint64_t frame_hash(const struct ss_frame *f)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, &f->kind, 1);
    h = mix(h, &f->flags, 1);
    h = mix(h, &f->unproven, 1);
    h = mix(h, f->build_id, f->build_id_len <= sizeof(f->build_id) ? f->build_id_len : 0);
    h = mix(h, &f->addr, sizeof(f->addr));
    h = mix(h, &f->offset, sizeof(f->offset));
    h = mix(h, &f->sym_offset, sizeof(f->sym_offset));
    h = mix(h, &f->line, sizeof(f->line));
    h = mix(h, &f->first_line, sizeof(f->first_line));
    h = mix_str(h, f->name);
    h = mix_str(h, f->module);
    return mix_str(h, f->system_name);
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool frame_eq(const struct ss_frame *a, const struct ss_frame *b)
{
    return a->kind == b->kind && a->flags == b->flags && a->unproven == b->unproven &&
           a->build_id_len == b->build_id_len &&
           !memcmp(a->build_id, b->build_id, a->build_id_len) && a->addr == b->addr &&
           a->offset == b->offset && a->sym_offset == b->sym_offset && a->line == b->line &&
           a->first_line == b->first_line && str_eq(a->name, b->name) &&
           str_eq(a->module, b->module) && str_eq(a->system_name, b->system_name);
}

void snap_fdict_free(struct snap_fdict *d)
{
    if (!d) return;
    for (uint32_t i = 0; i < d->n; i++) {
        free((char *)d->e[i].f.name);
        free((char *)d->e[i].f.module);
        free((char *)d->e[i].f.system_name);
    }
    free(d->e);
    free(d->slot);
    free(d);
}

static int rehash(struct snap_fdict *d)
{
    uint32_t ns = d->nslots ? d->nslots * 2 : 1024;
    uint32_t *s = calloc(ns, sizeof(*s));
    if (!s) return -ENOMEM;
    for (uint32_t i = 0; i < d->n; i++) {
        uint32_t k = (uint32_t)d->e[i].hash & (ns - 1);
        while (s[k])
            k = (k + 1) & (ns - 1);
        s[k] = i + 1;
    }
    free(d->slot);
    d->slot = s;
    d->nslots = ns;
    return 0;
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = true;
    return d;
}

/* The frame's id; a new frame is added and encoded into defs. */
static int64_t fdict_id(struct snap_fdict *d, const struct ss_frame *f, struct snap_buf *defs)
{
    if ((d->n + 1) * 2 > d->nslots && rehash(d) < 0) return -ENOMEM;
    uint64_t h = frame_hash(f);
    uint32_t k = (uint32_t)h & (d->nslots - 1);
    for (; d->slot[k]; k = (k + 1) & (d->nslots - 1)) {
        struct fentry *e = &d->e[d->slot[k] - 1];
        if (e->hash == h && frame_eq(&e->f, f)) return d->slot[k] - 1;
    }
    if (d->n == UINT32_MAX - 1) return -E2BIG;
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 256;
        struct fentry *n = realloc(d->e, cap * sizeof(*n));
        if (!n) return -ENOMEM;
        d->e = n;
        d->cap = cap;
    }
    struct fentry *e = &d->e[d->n];
    bool oom = false;
    e->f = *f;
    if (e->f.build_id_len > sizeof(e->f.build_id)) e->f.build_id_len = 0;
    e->f.name = dup_or_null(f->name, &oom);
    e->f.module = dup_or_null(f->module, &oom);
    e->f.system_name = dup_or_null(f->system_name, &oom);
    e->hash = h;
    if (oom) {
        free((char *)e->f.name), free((char *)e->f.module), free((char *)e->f.system_name);
        return -ENOMEM;
    }
    d->slot[k] = ++d->n;
    const struct ss_frame *g = &e->f;
    snap_put_u8(defs, g->kind);
    snap_put_u8(defs, (uint8_t)((g->name ? SNAP_HAS_NAME : 0) | (g->module ? SNAP_HAS_MODULE : 0) |
                                (g->system_name ? SNAP_HAS_SYSNAME : 0)));
    snap_put_u8(defs, g->flags);
    snap_put_u8(defs, g->unproven);
    snap_put_u8(defs, g->build_id_len);
    snap_put(defs, g->build_id, g->build_id_len);
    snap_put_u64(defs, g->addr);
    snap_put_u64(defs, g->offset);
    snap_put_u64(defs, g->sym_offset);
    snap_put_u32(defs, g->line);
    snap_put_u32(defs, g->first_line);
    if (g->name) snap_put_str(defs, g->name);
    if (g->module) snap_put_str(defs, g->module);
    if (g->system_name) snap_put_str(defs, g->system_name);
    return d->n - 1;
}

int ss_snap_write_stack(struct ss_snap_writer *w, const struct ss_stack *st, uint32_t flags,
                        struct ss_err *err)
{
    if (!w->nostack) {
        ss_err_set(err, -EINVAL, "capture %s: a stack record in a capture of samples", w->path);
        return -EINVAL;
    }
    if (w->err) {
        ss_err_set(err, w->err, "%s", w->errmsg);
        return w->err;
    }
    if (!w->fdict && !(w->fdict = calloc(1, sizeof(*w->fdict)))) goto nomem;
    if (st->nframes > w->ids_cap) {
        uint32_t *n = realloc(w->ids, st->nframes * sizeof(*n));
        if (!n) goto nomem;
        w->ids = n;
        w->ids_cap = st->nframes;
    }
    uint32_t first = w->fdict->n;
    w->defs.len = 0;
    snap_put_u32(&w->defs, first);
    snap_put_u32(&w->defs, 0); /* n, below */
    for (uint32_t i = 0; i < st->nframes; i++) {
        int64_t id = fdict_id(w->fdict, &st->frames[i], &w->defs);
        if (id == -E2BIG) {
            ss_err_set(err, -E2BIG, "capture %s: more than 2^32 distinct frames", w->path);
            return -E2BIG;
        }
        if (id < 0) goto nomem;
        w->ids[i] = (uint32_t)id;
    }
    if (w->defs.oom) goto nomem;
    uint32_t n = w->fdict->n - first;
    if (n) { /* the frames first: a stack refers only to frames before it */
        for (int b = 0; b < 4; b++)
            w->defs.p[4 + b] = (uint8_t)(n >> (8 * b));
        struct snap_part part = {w->defs.p, w->defs.len};
        int rc = snap_emit(w, SS_SNAP_FRAMES, SNAP_Z_FAST, &part, 1, err);
        if (rc) return rc;
    }
    w->pay.len = 0;
    snap_put_u64(&w->pay, w->next_seq);
    snap_put_u32(&w->pay, st->pid);
    snap_put_u32(&w->pay, st->tid);
    snap_put_u32(&w->pay, st->cpu);
    snap_put_u32(&w->pay, flags);
    snap_put_u64(&w->pay, st->time_ns);
    snap_put_u64(&w->pay, st->weight);
    snap_put_u8(&w->pay, st->trunc);
    snap_put_strn(&w->pay, st->comm, sizeof(st->comm));
    put_uvar(&w->pay, st->nframes);
    for (uint32_t i = 0; i < st->nframes; i++)
        put_uvar(&w->pay, w->ids[i]);
    if (w->pay.oom) {
        w->pay.oom = false;
        goto nomem;
    }
    struct snap_part part = {w->pay.p, w->pay.len};
    int rc = snap_emit(w, SS_SNAP_STACK, SNAP_Z_NONE, &part, 1, err);
    if (!rc) w->next_seq++;
    return rc;
nomem:
    w->defs.oom = false;
    ss_err_set(err, -ENOMEM, "capture %s: out of memory", w->path);
    return -ENOMEM;
}
