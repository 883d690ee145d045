/* unwind/debugfiles.c: debug files that arrive during a run — the
 * debuginfod fetcher of a live unwinder (elf/debuginfod.c) hooked into the
 * file cache, installing what it fetched, and renaming frames named before
 * (include/stacksnap/unwind.h). */
#include <errno.h>
#include <string.h>

#include "elf/debuginfod.h"
#include "elf/elf.h"
#include "symbolize/symbolize.h"
#include "unwind/procs.h"
#include "unwind/unwinder.h"

/* ss_elf_fetch_fn: a file without a full symbol table: ask for its debug
 * file (queued; the fetch thread does the network). */
static void want(void *ctx, struct ss_elf *e)
{
    struct ss_unwinder *u = ctx;
    if (e->build_id_len) ss_dfd_request(u->dfd, e->build_id, e->build_id_len);
}

int ss_unwinder_debuginfod(struct ss_unwinder *u, double timeout_s, struct ss_err *err)
{
    if (u->dfd) return 0;
    int rc = ss_dfd_new(&u->dfd, timeout_s, err);
    if (rc == 0) ss_elf_cache_set_fetch(u->files, want, u);
    return rc;
}

struct poll_ctx {
    struct ss_unwinder *u;
    ss_unwinder_debug_fn fn;
    void *ctx;
    int n;
};

static void arrived(void *ctx, const uint8_t *id, size_t len, const char *path, int rc)
{
    struct poll_ctx *pc = ctx;
    struct ss_err err = {0};
    /* not on any server, timed out, unusable: stays unnamed */
    if (rc < 0 || !path || ss_elf_cache_add_debug(pc->u->files, id, len, path, &err) < 0) {
        pc->u->st.debug_failed++;
        return;
    }
    pc->u->st.debug_fetched++;
    pc->n++;
    if (pc->fn) pc->fn(pc->ctx, id, len, path);
}

int ss_unwinder_debug_poll(struct ss_unwinder *u, ss_unwinder_debug_fn fn, void *ctx)
{
    if (!u->dfd) return 0;
    struct poll_ctx pc = {u, fn, ctx, 0};
    ss_dfd_poll(u->dfd, arrived, &pc);
    return pc.n;
}

size_t ss_unwinder_debug_pending(struct ss_unwinder *u)
{
    return u->dfd ? ss_dfd_pending(u->dfd) : 0;
}

void ss_unwinder_debug_wait(struct ss_unwinder *u, double max_s)
{
    if (u->dfd) ss_dfd_wait(u->dfd, max_s);
}

int ss_unwinder_add_debug(struct ss_unwinder *u, const uint8_t *id, size_t len, const char *path,
                          struct ss_err *err)
{
    ss_unwinder_memo_drop(u); /* names change */
    return ss_elf_cache_add_debug(u->files, id, len, path, err);
}

bool ss_unwinder_rename_fn(void *renamer, const struct ss_frame *in, struct ss_frame *out)
{
    const struct ss_unwinder_renamer *n = renamer;
    return ss_unwinder_rename(n->u, n->id, n->len, in, out);
}

bool ss_unwinder_rename(struct ss_unwinder *u, const uint8_t *id, size_t len,
                        const struct ss_frame *in, struct ss_frame *out)
{
    if (in->kind != SS_FRAME_NATIVE || in->build_id_len != len || memcmp(in->build_id, id, len))
        return false;
    struct ss_elf *e = ss_elf_cache_find(u->files, id, len);
    return e && ss_symbolize_rename(u->strs, e, in, out);
}
