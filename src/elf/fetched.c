/* elf/fetched.c: debug files that arrive while an ss_elf_cache is in use
 * (a debuginfod fetch live, the capture's record of one in replay): the
 * per-cache list of (build-id, path) and attaching them to ss_elf files,
 * whose symbol tables are then rebuilt. See elf.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"

void ss_elf_fetch_state_free(struct ss_elf_fetch_state *fs)
{
    for (size_t i = 0; i < fs->n; i++)
        free(fs->v[i].path);
    free(fs->v);
    memset(fs, 0, sizeof(*fs));
}

void ss_elf_cache_set_fetch(struct ss_elf_cache *c, ss_elf_fetch_fn fn, void *ctx)
{
    struct ss_elf_fetch_state *fs = ss_elf_cache_fetch_state(c);
    fs->fn = fn;
    fs->ctx = ctx;
}

static const char *known_path(struct ss_elf_fetch_state *fs, const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < fs->n; i++)
        if (fs->v[i].len == len && !memcmp(fs->v[i].id, id, len)) return fs->v[i].path;
    return NULL;
}

/* Open path as e's fetched debug file (build-id checked). */
static int attach(struct ss_elf *e, const char *path)
{
    struct ss_elf *d = ss_elf_open_debug_file(path);
    if (!d) return -ENOENT;
    if (d->build_id_len != e->build_id_len || memcmp(d->build_id, e->build_id, e->build_id_len)) {
        ss_elf_close_image(d);
        return -ESTALE;
    }
    if (e->fetched) ss_elf_close_image(e->fetched);
    e->fetched = d;
    return 0;
}

struct ss_elf *ss_elf_fetched_debug(struct ss_elf *e)
{
    if (e->fetched_state || !e->cache || !e->build_id_len) return e->fetched;
    e->fetched_state = 1;
    struct ss_elf_fetch_state *fs = ss_elf_cache_fetch_state(e->cache);
    const char *p = known_path(fs, e->build_id, e->build_id_len);
    if (p)
        attach(e, p);
    else if (fs->fn)
        fs->fn(fs->ctx, e);
    return e->fetched;
}

int ss_elf_cache_add_debug(struct ss_elf_cache *c, const uint8_t *id, size_t len, const char *path,
                           struct ss_err *err)
{
    struct ss_elf_fetch_state *fs = ss_elf_cache_fetch_state(c);
    if (!len || len > sizeof(fs->v[0].id)) {
        ss_err_set(err, -EINVAL, "debug file %s: no build-id", path);
        return -EINVAL;
    }
    struct ss_elf *probe = ss_elf_open_debug_file(path);
    int rc = 0;
    if (!probe)
        rc = -ENOENT;
    else if (probe->build_id_len != len || memcmp(probe->build_id, id, len))
        rc = -ESTALE;
    ss_elf_close_image(probe);
    if (rc) {
        ss_err_set(err, rc, "debug file %s: %s", path,
                   rc == -ENOENT ? "cannot be read as ELF" : "build-id differs");
        return rc;
    }
    char *copy = strdup(path);
    size_t i = 0;
    while (i < fs->n && !(fs->v[i].len == len && !memcmp(fs->v[i].id, id, len)))
        i++;
    if (copy && i == fs->n && fs->n == fs->cap) {
        size_t cap = fs->cap ? 2 * fs->cap : 8;
        struct ss_elf_fetched *nv = realloc(fs->v, cap * sizeof(*nv));
        if (nv) fs->v = nv, fs->cap = cap;
    }
    if (!copy || (i == fs->n && fs->n == fs->cap)) {
        free(copy);
        ss_err_set(err, -ENOMEM, "debug file %s: out of memory", path);
        return -ENOMEM;
    }
    if (i == fs->n) {
        fs->n++;
        memcpy(fs->v[i].id, id, len);
        fs->v[i].len = (uint8_t)len;
    } else {
        free(fs->v[i].path);
    }
    fs->v[i].path = copy;
    struct ss_elf *e = ss_elf_cache_find(c, id, len);
    if (e && (rc = attach(e, path)) == 0) {
        e->fetched_state = 1;
        if (e->syms) ss_symtab_free(e->syms); /* names are interned by their users */
        e->syms = NULL;
        e->syms_state = 0;
        fs->gen++;
    }
    return 0;
}
