/* unwind/unwinder.c: the unwinder itself (include/stacksnap/unwind.h,
 * unwinder.h): made and freed here with what it shares between processes
 * (the file cache, the string pool, LuaJIT detection, kernel symbols, the
 * output frames), its counters and its pace. The walk of one sample is
 * walk.c's, the processes are procs.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/debuginfod.h"
#include "elf/elf.h"
#include "symbolize/ksyms.h"
#include "symbolize/symbolize.h"
#include "unwind/lua.h"
#include "unwind/lua_runtimes.h"
#include "unwind/luajit/vmsyms.h"
#include "unwind/procs.h"
#include "unwind/sideband_view.h"
#include "unwind/unwinder.h"

int ss_unwinder_new_files(struct ss_unwinder **out, const struct ss_unwinder_opts *o,
                          struct ss_elf_cache *files, struct ss_err *err)
{
    struct ss_unwinder *u = calloc(1, sizeof(*u));
    if (!u) return -ENOMEM;
    if (o) u->o = *o;
    if (!u->o.max_frames) u->o.max_frames = 512;
    int r = 0;
    if (files)
        u->files = files, u->files_shared = true;
    else
        r = ss_elf_cache_new(&u->files, u->o.debug_root);
    if (r == 0 && !(u->ljc = u->o.lj_cache)) r = ss_lj_detcache_new(&u->ljc_own);
    if (r == 0 && !u->ljc) u->ljc = u->ljc_own;
    if (r == 0) ss_elf_cache_set_synth(u->files, ss_lj_internal_syms, u->ljc);
    if (r == 0) r = ss_strpool_new(&u->strs);
    if (r == 0) ss_strpool_set_id(u->strs, ss_elf_cache_pool_id(u->files));
    if (r == 0 && u->o.memo && u->o.offline &&
        !(u->state[0] = malloc(2 * SS_LUA_STATE_WORDS * sizeof(uint64_t))))
        r = -ENOMEM;
    if (r == 0) u->state[1] = u->state[0] ? u->state[0] + SS_LUA_STATE_WORDS : NULL;
    if (r == 0) {
        u->nf = calloc(u->o.max_frames, sizeof(*u->nf));
        if (!u->nf || ss_unwinder_reserve(u, u->o.max_frames + 16) < 0) r = -ENOMEM;
    }
    if (r < 0) {
        ss_err_set(err, r, "unwinder: %s", strerror(-r));
        ss_unwinder_free(u);
        return r;
    }
    *out = u;
    return 0;
}

int ss_unwinder_new(struct ss_unwinder **out, const struct ss_unwinder_opts *o, struct ss_err *err)
{
    return ss_unwinder_new_files(out, o, NULL, err);
}

int ss_unwinder_reserve(struct ss_unwinder *u, size_t n)
{
    if (n <= u->out_cap) return 0;
    struct ss_frame *nv = realloc(u->out, n * sizeof(*nv));
    if (!nv) return -ENOMEM;
    u->out = nv;
    u->out_cap = n;
    return 0;
}

void ss_unwinder_free(struct ss_unwinder *u)
{
    if (!u) return;
    ss_procs_free(u);
    ss_lua_detect_cache_free(u);
    ss_ksyms_free(u->ksyms);
    ss_sideband_free(u);
    ss_dfd_free(u->dfd); /* before the files: its thread knows none of them */
    if (!u->files_shared) ss_elf_cache_free(u->files);
    ss_lj_detcache_free(u->ljc_own);
    ss_strpool_free(u->strs);
    ss_mem_track_free(&u->track);
    free(u->state[0]);
    free(u->nf);
    free(u->out);
    free(u);
}

size_t ss_unwinder_lj_detections(struct ss_unwinder *u, size_t from, ss_lj_det_fn fn, void *ctx)
{
    return u->ljc ? ss_lj_detcache_each(u->ljc, from, fn, ctx) : from;
}

void ss_unwinder_stats(const struct ss_unwinder *u, struct ss_unwinder_stats *st)
{
    *st = u->st; /* includes processes already freed */
    ss_procs_stats(u, st);
    st->files = ss_elf_cache_count(u->files);
    st->debug_pending = ss_unwinder_debug_pending((struct ss_unwinder *)u);
}

int ss_unwinder_pace(const struct ss_unwinder *u, struct ss_pace *p)
{
    if (p->ms < SS_PACE_MIN_MS || u->read_walks != p->read_walks)
        p->ms = SS_PACE_MIN_MS;
    else if (p->ms < SS_PACE_MAX_MS)
        p->ms = 2 * p->ms < SS_PACE_MAX_MS ? 2 * p->ms : SS_PACE_MAX_MS;
    p->read_walks = u->read_walks;
    return p->ms;
}
