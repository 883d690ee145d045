/* unwind/lua_runtimes.c: the LuaJIT runtimes of each process (see
 * lua_runtimes.h). Per process, the executable file mappings are checked
 * once per mapping generation for LuaJIT (verdicts cached per file, by
 * build-id or dev/inode, so libc is inspected once per unwinder), and each
 * LuaJIT module gets a runtime that lives as long as the module stays
 * mapped at the same bias (its prototype caches survive map refreshes).
 * Also the runtimes' diagnostics, window plans and state for the memo. */
#include "unwind/lua_runtimes.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "elf/elf.h"
#include "process/process.h"
#include "unwind/luajit/detcache.h"
#include "unwind/luajit/runtime.h"
#include "unwind/procs.h"

struct verdict {
    uint8_t id[20], id_len;
    uint64_t dev, ino, size;
    bool is_luajit;
    struct ss_lj_elfinfo info;
    struct ss_lj_fwd fwd; /* helpers trace_fwd.c places (file vaddrs) */
};

/* Replay replaces a process's bundle at every recorded mapping change, where
 * the live unwinder keeps it (and its runtimes) across map refreshes. To
 * walk with the same caches, and so make the same reads, an offline
 * unwinder parks the runtimes of a replaced bundle and hands them to the
 * next bundle of that pid for the same file at the same bias. */
#define MAX_PARKED 16
struct parked {
    uint32_t pid;
    struct verdict id; /* file identity (id, dev/ino/size) */
    int64_t bias;
    struct ss_lj_runtime *rt;
};

struct ss_lua_detect {
    struct verdict *v;
    size_t n, cap;
    struct parked park[MAX_PARKED];
    unsigned npark;
};

static void set_id(struct verdict *v, const struct ss_elf *e)
{
    memset(v, 0, sizeof(*v));
    memcpy(v->id, e->build_id, e->build_id_len);
    v->id_len = e->build_id_len;
    v->dev = e->dev;
    v->ino = e->ino;
    v->size = e->fsize;
}

static void park(struct ss_lua_detect *d, uint32_t pid, const struct ss_luart *r)
{
    if (d->npark == MAX_PARKED) { /* drop the oldest */
        ss_lj_runtime_free(d->park[0].rt);
        memmove(&d->park[0], &d->park[1], (MAX_PARKED - 1) * sizeof(d->park[0]));
        d->npark--;
    }
    struct parked *pk = &d->park[d->npark++];
    pk->pid = pid;
    set_id(&pk->id, r->elf);
    pk->bias = r->bias;
    pk->rt = r->rt;
}

static void luaproc_free(void *p)
{
    struct ss_luaproc *l = p;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->d && l->rts[i].rt)
            park(l->d, l->pid, &l->rts[i]);
        else
            ss_lj_runtime_free(l->rts[i].rt);
    }
    free(l->natives);
    free(l->items);
    free(l->tokens);
    free(l);
}

void ss_lua_detect_cache_free(struct ss_unwinder *u)
{
    if (!u->lua_detect) return;
    for (unsigned i = 0; i < u->lua_detect->npark; i++)
        ss_lj_runtime_free(u->lua_detect->park[i].rt);
    free(u->lua_detect->v);
    free(u->lua_detect);
    u->lua_detect = NULL;
}

static bool same_file(const struct verdict *v, const struct ss_elf *e)
{
    if (e->build_id_len)
        return v->id_len == e->build_id_len && !memcmp(v->id, e->build_id, e->build_id_len);
    return !v->id_len && v->dev == e->dev && v->ino == e->ino && v->size == e->fsize;
}

/* Detection verdict for e, computed once per unwinder. */
static const struct verdict *detect(struct ss_unwinder *u, const struct ss_elf *e)
{
    struct ss_lua_detect *d = u->lua_detect;
    if (!d && !(d = u->lua_detect = calloc(1, sizeof(*d)))) return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (same_file(&d->v[i], e)) return &d->v[i];
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 32;
        struct verdict *nv = realloc(d->v, cap * sizeof(*nv));
        if (!nv) return NULL;
        d->v = nv;
        d->cap = cap;
    }
    struct verdict *v = &d->v[d->n++];
    set_id(v, e);
    v->is_luajit =
        ss_lj_detcache_get(u->ljc, e, &v->info) == 0 && v->info.is_luajit && v->info.vm_found;
    if (v->is_luajit) ss_lj_fwd_find(u->ljc, e, &v->fwd);
    return v;
}

/* Remember a mapped file with LuaJIT's API but no usable VM (once). */
static void note_novm(struct ss_luaproc *l, const struct ss_mapping *m,
                      const struct ss_lj_elfinfo *info)
{
    for (unsigned i = 0; i < l->nnovm; i++)
        if (l->novm[i].elf == m->elf && l->novm[i].bias == m->bias) return;
    if (l->nnovm == SS_LUA_MAX_NOVM) return;
    struct ss_luanovm *x = &l->novm[l->nnovm++];
    x->elf = m->elf;
    x->bias = m->bias;
    snprintf(x->path, sizeof(x->path), "%s", m->d.path ? m->d.path : "");
    x->info = *info;
    x->said = false;
}

/* Rebuild the runtime list after the process's mappings changed. */
static void scan(struct ss_unwinder *u, struct ss_uproc *up, struct ss_luaproc *l)
{
    size_t n;
    const struct ss_mapping *m = ss_proc_mappings(up->proc, &n);
    struct ss_luart keep[SS_LUA_MAX_RTS];
    unsigned nk = 0;
    for (size_t i = 0; i < n && nk < SS_LUA_MAX_RTS; i++) {
        if (!m[i].elf || !(m[i].d.prot & SS_MAP_X)) continue;
        bool dup = false;
        for (unsigned k = 0; k < nk && !dup; k++)
            dup = keep[k].elf == m[i].elf && keep[k].bias == m[i].bias;
        if (dup) continue;
        const struct verdict *v = detect(u, m[i].elf);
        if (v && !v->is_luajit && v->info.is_luajit) note_novm(l, &m[i], &v->info);
        if (!v || !v->is_luajit) continue;
        struct ss_luart r = {.elf = m[i].elf, .bias = m[i].bias};
        snprintf(r.path, sizeof(r.path), "%s", m[i].d.path ? m[i].d.path : "");
        for (unsigned j = 0; j < l->n; j++) /* same module as before: keep its caches */
            if (l->rts[j].rt && l->rts[j].elf == r.elf && l->rts[j].bias == r.bias) {
                r.rt = l->rts[j].rt;
                r.said = l->rts[j].said;
                l->rts[j].rt = NULL;
            }
        struct ss_lua_detect *d = u->lua_detect;
        for (unsigned j = 0; !r.rt && l->d && j < d->npark; j++) /* replay: same caches */
            if (d->park[j].pid == up->pid && d->park[j].bias == r.bias &&
                same_file(&d->park[j].id, r.elf)) {
                r.rt = d->park[j].rt;
                memmove(&d->park[j], &d->park[j + 1], (d->npark - j - 1) * sizeof(d->park[0]));
                d->npark--;
            }
        if (!r.rt && ss_lj_runtime_new(&r.rt, &v->info, (uint64_t)r.bias, up->pid, NULL) == 0) {
            ss_lj_runtime_check_guards(r.rt, u->o.lj_check_guards);
            ss_lj_runtime_set_arch(r.rt, r.elf->e_machine == EM_AARCH64); /* its capture's */
            ss_lj_fwd_setup(r.rt, &v->fwd);
        }
        if (!r.rt) continue;
        keep[nk++] = r;
    }
    for (unsigned j = 0; j < l->n; j++)
        ss_lj_runtime_free(l->rts[j].rt);
    memcpy(l->rts, keep, nk * sizeof(keep[0]));
    l->n = nk;
    l->gen = ss_proc_generation(up->proc);
    l->scanned = true;
}

struct ss_luaproc *ss_luaproc_get(struct ss_unwinder *u, struct ss_uproc *up)
{
    struct ss_luaproc *l = up->luajit;
    if (!l) {
        if (!(l = calloc(1, sizeof(*l)))) return NULL;
        up->luajit = l;
        up->luajit_free = luaproc_free;
        l->pid = up->pid;
        if (u->o.offline && (u->lua_detect || (u->lua_detect = calloc(1, sizeof(*u->lua_detect)))))
            l->d = u->lua_detect;
    }
    l->epoch++;
    if (!l->scanned || l->gen != ss_proc_generation(up->proc)) scan(u, up, l);
    return l;
}

unsigned ss_unwinder_lua_runtimes(struct ss_unwinder *u, uint32_t pid,
                                  const struct ss_lj_runtime **out, unsigned max)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ss_luaproc *l = up ? ss_luaproc_get(u, up) : NULL;
    unsigned n = 0;
    for (unsigned i = 0; l && i < l->n && n < max; i++)
        out[n++] = l->rts[i].rt;
    return n;
}

void ss_unwinder_lj_news(struct ss_unwinder *u, uint32_t pid, ss_lj_status_fn fn, void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ss_luaproc *l = up ? up->luajit : NULL; /* no scan: the walks' view as it is */
    if (!l) return;
    for (unsigned i = 0; i < l->nnovm; i++) {
        struct ss_luanovm *x = &l->novm[i];
        if (x->said) continue;
        x->said = true;
        struct ss_lj_status st = {.path = x->path,
                                  .build_id = x->elf->build_id,
                                  .build_id_len = x->elf->build_id_len,
                                  .bias = (uint64_t)x->bias,
                                  .info = &x->info,
                                  .news = SS_LJS_FOUND};
        fn(ctx, pid, &st);
    }
    for (unsigned i = 0; i < l->n; i++) {
        struct ss_luart *r = &l->rts[i];
        if (!r->rt) continue;
        unsigned now = SS_LJS_FOUND | (ss_lj_runtime_layout(r->rt) ? SS_LJS_LAYOUT : 0) |
                       (ss_lj_runtime_diag(r->rt)[0] ? SS_LJS_DIAG : 0);
        if (!(now & ~r->said)) continue;
        struct ss_lj_status st = {.path = r->path,
                                  .build_id = r->elf->build_id,
                                  .build_id_len = r->elf->build_id_len,
                                  .bias = (uint64_t)r->bias,
                                  .rt = r->rt,
                                  .info = ss_lj_runtime_info(r->rt),
                                  .news = now & ~r->said};
        r->said |= now;
        fn(ctx, pid, &st);
    }
}

uint64_t ss_lua_epoch(const struct ss_uproc *up)
{
    const struct ss_luaproc *l = up->luajit;
    return l ? l->epoch : 0;
}

_Static_assert(2 + SS_LUA_MAX_RTS * (1 + SS_LJ_STATE_WORDS) <= SS_LUA_STATE_WORDS,
               "ss_lua_state fits");

size_t ss_lua_state(const struct ss_uproc *up, uint64_t *w)
{
    const struct ss_luaproc *l = up->luajit;
    if (!l) return 0;
    size_t n = 0;
    w[n++] = 1 + l->n + ((uint64_t)l->scanned << 8);
    w[n++] = l->gen;
    for (unsigned i = 0; i < l->n; i++) {
        w[n++] = (uint64_t)(uintptr_t)l->rts[i].rt;
        if (l->rts[i].rt) n += ss_lj_runtime_state(l->rts[i].rt, w + n);
    }
    return n;
}

unsigned ss_lua_nruntimes(const struct ss_uproc *up)
{
    const struct ss_luaproc *l = up->luajit;
    unsigned n = 0;
    for (unsigned i = 0; l && i < l->n; i++)
        n += l->rts[i].rt != NULL;
    return n;
}

int ss_unwinder_prepare_file(struct ss_unwinder *u, const char *path, uint64_t ino,
                             uint32_t dev_major, uint32_t dev_minor, struct ss_err *err)
{
    struct ss_elf *e;
    if (u->o.offline) return -EINVAL;
    int rc = ss_elf_open_path(u->files, path, &e, err);
    if (rc < 0) return rc;
    if (!ino || (e->ino == ino && e->dev == makedev(dev_major, dev_minor)))
        rc = detect(u, e) ? 0 : -ENOMEM; /* the verdict is kept; the file stays cached */
    else
        ss_err_set(err, rc = -ESTALE, "%s: not the mapped file", path);
    ss_elf_put(e);
    return rc;
}

void ss_lua_plan_early(struct ss_unwinder *u, const struct ss_luaproc *l)
{
    if (l->plan_key || !u->o.plan_ready) return; /* handed out: after the walk, as ever */
    for (unsigned i = 0; i < l->n; i++)
        if (l->rts[i].rt && ss_lj_runtime_layout(l->rts[i].rt)) {
            u->o.plan_ready(u->o.plan_ctx, l->pid);
            return;
        }
}

int ss_unwinder_prepare(struct ss_unwinder *u, uint32_t pid, struct ss_err *err)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, true, err);
    if (!up) return err->code ? err->code : -ESRCH;
    return ss_luaproc_get(u, up) ? 0 : -ENOMEM;
}

bool ss_unwinder_take_plan(struct ss_unwinder *u, uint32_t pid, struct ss_win_plan *p)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ss_luaproc *l = up ? up->luajit : NULL;
    for (unsigned i = 0; l && i < l->n; i++) {
        const struct ss_lj_runtime *rt = l->rts[i].rt;
        uint64_t key = 0;
        int r = rt ? ss_lj_runtime_plan(rt, l->plan_key, p, &key) : -1;
        if (r < 0) continue;
        if (r == 0) return false; /* already handed out */
        l->plan_key = key;
        return true;
    }
    return false;
}
