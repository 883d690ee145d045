/* unwind/luajit/detcache.c: LuaJIT detection results by file identity
 * (include/stacksnap/unwind.h, struct ss_lj_detcache). Detection and layout
 * derivation disassemble the VM (milliseconds per file); the unwinder's Lua
 * walker and the symbolizer's LuaJIT internal symbols both need them, and a
 * replay that runs several times (a fresh unwinder each run) can pass one
 * cache to all its unwinders. Identity: the build-id and size when the file
 * has a build-id, else device, inode, size and mtime; a file with neither
 * (no build-id, no inode) is detected every time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "unwind/luajit/detcache.h"

struct dentry {
    uint8_t id[20];
    uint8_t id_len;
    uint64_t dev, ino, fsize, mtime;
    int rc;
    struct ss_lj_elfinfo info;
};

struct ss_lj_detcache {
    struct dentry *v;
    size_t n, cap;
};

int ss_lj_detcache_new(struct ss_lj_detcache **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void ss_lj_detcache_free(struct ss_lj_detcache *c)
{
    if (!c) return;
    free(c->v);
    free(c);
}

static bool same(const struct dentry *d, const struct ss_elf *e)
{
    if (d->fsize != e->fsize) return false;
    if (e->build_id_len)
        return d->id_len == e->build_id_len && !memcmp(d->id, e->build_id, e->build_id_len);
    return !d->id_len && d->dev == e->dev && d->ino == e->ino && d->mtime == e->mtime;
}

static struct dentry *append(struct ss_lj_detcache *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct dentry *nv = realloc(c->v, cap * sizeof(*nv));
        if (!nv) return NULL;
        c->v = nv;
        c->cap = cap;
    }
    struct dentry *d = &c->v[c->n++];
    memset(d, 0, sizeof(*d));
    return d;
}

int ss_lj_detcache_get(struct ss_lj_detcache *c, const struct ss_elf *e, struct ss_lj_elfinfo *out)
{
    bool keyed = e->build_id_len || e->ino;
    for (size_t i = 0; c && keyed && i < c->n; i++)
        if (same(&c->v[i], e)) {
            *out = c->v[i].info;
            return c->v[i].rc;
        }
    int rc = ss_lj_detect_image(e->image, e->size, e->path, out, NULL);
    ss_elf_release_tables(e); /* its symbol tables were scanned once, for good */
    struct dentry *d;
    if (!c || !keyed || !(d = append(c))) return rc; /* not kept: computed again next time */
    d->id_len = e->build_id_len <= sizeof(d->id) ? e->build_id_len : 0;
    memcpy(d->id, e->build_id, d->id_len);
    d->dev = e->dev, d->ino = e->ino, d->fsize = e->fsize, d->mtime = e->mtime;
    d->rc = rc;
    d->info = *out;
    return rc;
}

int ss_lj_detcache_put(struct ss_lj_detcache *c, const uint8_t *id, size_t id_len, uint64_t fsize,
                       const struct ss_lj_elfinfo *info)
{
    if (!id_len || id_len > sizeof(c->v->id) || !ss_lj_elfinfo_plausible(info)) return -EINVAL;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id_len == id_len && c->v[i].fsize == fsize && !memcmp(c->v[i].id, id, id_len))
            return 0; /* the first result for a file stays */
    struct dentry *d = append(c);
    if (!d) return -ENOMEM;
    d->id_len = (uint8_t)id_len;
    memcpy(d->id, id, id_len);
    d->fsize = fsize;
    d->info = *info;
    return 0;
}

size_t ss_lj_detcache_each(const struct ss_lj_detcache *c, size_t from, ss_lj_det_fn fn, void *ctx)
{
    for (size_t i = from; i < c->n; i++)
        if (c->v[i].id_len && c->v[i].rc == 0)
            fn(ctx, c->v[i].id, c->v[i].id_len, c->v[i].fsize, &c->v[i].info);
    return c->n > from ? c->n : from;
}
