/* report/otlp_dict: the OTLP writer's dictionary tables: strings,
 * attributes, functions, mappings and stacks, deduplicated by value, each
 * with its zero value at index 0 (ProfilesDictionary's rule). */
#ifdef SS_HAVE_OTLP
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/otlp_int.h"

struct otab_key {
    const struct otab *t;
    const void *e;
};

static bool otab_eq(const void *ctx, uint32_t idx)
{
    const struct otab_key *k = ctx;
    return !memcmp(k->t->v + idx * k->t->size, k->e, k->t->size);
}

static int32_t otab_add(struct ox *x, struct otab *t, const void *e, uint64_t h, rp_eq_fn eq,
                        const void *ctx)
{
    uint32_t idx;
    if (rp_index_find(&t->ix, h, eq, ctx, &idx)) return (int32_t)idx;
    if (t->n >= INT32_MAX || rp_grow(&t->v, &t->cap, t->n + 1, t->size) ||
        rp_index_insert(&t->ix, h, (uint32_t)t->n)) {
        x->oom = 1;
        return 0;
    }
    memcpy(t->v + t->n * t->size, e, t->size);
    return (int32_t)t->n++;
}

static int32_t otab_intern(struct ox *x, struct otab *t, const void *e)
{
    struct otab_key k = {t, e};
    return otab_add(x, t, e, rp_hash(e, t->size, t->size), otab_eq, &k);
}

void ox_tab_init(struct ox *x, struct otab *t, size_t size)
{
    t->size = size;
    if (rp_grow(&t->v, &t->cap, 1, size)) {
        x->oom = 1;
        return;
    }
    memset(t->v, 0, size); /* index 0: the zero value, not in the index */
    t->n = 1;
}

/* Intern s escaped for display (valid UTF-8, as protobuf strings must be). */
int32_t ox_str_in(struct ox *x, struct rp_strtab *t, const char *s)
{
    rp_buf_reset(&x->tmp);
    rp_escape_str(&x->tmp, s, RP_ESC_DISPLAY);
    int64_t id = x->tmp.oom ? -ENOMEM : rp_str_intern(t, x->tmp.p ? x->tmp.p : "", x->tmp.len);
    if (id < 0 || id > INT32_MAX) x->oom = 1;
    return id < 0 || id > INT32_MAX ? 0 : (int32_t)id;
}

int32_t ox_str(struct ox *x, const char *s)
{
    return ox_str_in(x, &x->str, s);
}

int32_t ox_attr_int(struct ox *x, const char *key, int64_t v)
{
    struct oattr a = {ox_str(x, key), 0, v};
    return otab_intern(x, &x->attrs, &a);
}

/* String values are written as AnyValue.string_value: kept apart from the
 * dictionary's string_table, which holds only what is referenced by index. */
int32_t ox_attr_str(struct ox *x, const char *key, const char *v)
{
    struct oattr a = {ox_str(x, key), 1, ox_str_in(x, &x->res, v)};
    return otab_intern(x, &x->attrs, &a);
}

/* Function index of a frame with a name (0: none, an unsymbolized native frame). */
int32_t ox_func(struct ox *x, const struct rp_frame *fr)
{
    const struct ss_report *r = x->r;
    struct ofunc f = {0};
    if (fr->kind == SS_FRAME_LUA) {
        f.name = ox_str(x, fr->name ? rp_s(r, fr->name) : "anonymous");
        f.file = fr->module ? ox_str(x, rp_s(r, fr->module)) : 0;
        f.start = fr->module ? fr->first_line : 0;
        return otab_intern(x, &x->funcs, &f);
    }
    if (fr->kind == SS_FRAME_NATIVE && !fr->name) return 0;
    if (fr->kind == SS_FRAME_KERNEL) { /* the name without the "_[k]" of frame text */
        const char *t = rp_s(r, fr->text);
        size_t n = strlen(t);
        if (n >= 4 && !strcmp(t + n - 4, "_[k]")) n -= 4;
        char *own = fr->name ? NULL : strndup(t, n);
        if (!fr->name && !own) {
            x->oom = 1;
            return 0;
        }
        f.name = ox_str(x, fr->name ? rp_s(r, fr->name) : own);
        free(own);
    } else {
        f.name = ox_str(x, rp_s(r, fr->text));
    }
    f.sys = fr->sysname ? ox_str(x, rp_s(r, fr->sysname)) : f.name;
    return otab_intern(x, &x->funcs, &f);
}

/* Mapping index of a native frame with a module (0 otherwise); the address
 * range and file offset are filled in by map_range. */
int32_t ox_map(struct ox *x, const struct rp_frame *fr)
{
    if (fr->kind != SS_FRAME_NATIVE || !fr->module) return 0;
    struct omap m = {.module = fr->module, .build_id_len = fr->build_id_len};
    memcpy(m.build_id, fr->build_id, fr->build_id_len);
    m.bias = fr->addr - fr->offset;
    return otab_intern(x, &x->maps, &m);
}

struct stack_key {
    const struct ox *x;
    uint32_t s;
};

static bool stack_eq(const void *ctx, uint32_t idx)
{
    const struct stack_key *k = ctx;
    const struct ss_report *r = k->x->r;
    const struct ostack *o = (const struct ostack *)(k->x->stacks.v + idx * sizeof(*o));
    const struct rp_stack *a = &r->stacks[o->report_stack], *b = &r->stacks[k->s];
    return a->nframes == b->nframes &&
           !memcmp(r->fids + a->first, r->fids + b->first, a->nframes * sizeof(*r->fids));
}

int32_t ox_stack(struct ox *x, uint32_t s)
{
    const struct rp_stack *st = &x->r->stacks[s];
    uint64_t h = rp_hash(x->r->fids + st->first, st->nframes * sizeof(*x->r->fids), 7);
    struct ostack o = {h, s, 0};
    struct stack_key k = {x, s};
    return otab_add(x, &x->stacks, &o, h, stack_eq, &k);
}

void ox_free(struct ox *x)
{
    rp_strtab_free(&x->str);
    rp_strtab_free(&x->res);
    rp_buf_free(&x->tmp);
    struct otab *t[] = {&x->attrs, &x->funcs, &x->maps, &x->stacks};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        free(t[i]->v);
        rp_index_free(&t[i]->ix);
    }
    free(x->stack_of);
}

/* Report stacks grouped by pid (ascending), in report order within a pid. */
int ox_by_pid(const void *a, const void *b, void *ctx)
{
    const struct ss_report *r = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t p = r->stacks[i].pid, q = r->stacks[j].pid;
    return p != q ? (p < q ? -1 : 1) : (i < j ? -1 : i > j);
}

#endif
