/* unwind/stack.c: the public unwinder (include/stacksnap/unwind.h).
 *
 * Keeps the per-process bundles (unwinder.h), runs the native walk for each
 * sample and turns native frames into ss_frames. The LuaJIT walker splices
 * its frames in at the marked point of ss_unwind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/debuginfod.h"
#include "elf/elf.h"
#include "process/perfmap.h"
#include "process/process.h"
#include "symbolize/ksyms.h"
#include "symbolize/symbolize.h"
#include "unwind/lua.h"
#include "unwind/luajit/vmsyms.h"
#include "unwind/memo.h"
#include "unwind/unwinder.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void record_hook(void *ctx, uint64_t addr, const void *data, size_t len, int err)
{
    struct ss_uproc *up = ctx;
    struct ss_unwinder *u = up->u;
    if (u->o.record) u->o.record(u->o.record_ctx, up->pid, addr, data, len, err);
}

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

/* Counters kept per process, summed by ss_unwinder_stats. */
static void add_proc_stats(struct ss_unwinder_stats *st, const struct ss_uproc *up)
{
    const struct ss_nstats *ns = ss_nproc_stats(up->np);
    st->rule_steps += ns->rule_steps;
    st->unw_steps += ns->unw_steps;
    st->rule_loads += ns->rule_loads;
    st->native_memo_hits += ss_nproc_memo_hits(up->np);
    st->target_reads += up->mem.n_target_reads;
    st->target_calls += up->mem.n_target_calls;
}

static void uproc_free(struct ss_uproc *up)
{
    if (up->np) add_proc_stats(&up->u->st, up); /* keep the counters of exited processes */
    if (up->luajit && up->luajit_free) up->luajit_free(up->luajit);
    ss_nproc_free(up->np);
    ss_symcache_free(up->syms);
    ss_memo_free(up->memo);
    ss_perfmap_free(up->pm);
    ss_proc_free(up->proc);
    free(up);
}

void ss_unwinder_free(struct ss_unwinder *u)
{
    if (!u) return;
    for (unsigned b = 0; b < 256; b++) {
        struct ss_uproc *up = u->buckets[b];
        while (up) {
            struct ss_uproc *n = up->next;
            uproc_free(up);
            up = n;
        }
    }
    ss_lua_detect_cache_free(u);
    ss_ksyms_free(u->ksyms);
    ss_forks_free(u);
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

/* Wrap a process view into a bundle and insert it. */
static struct ss_uproc *attach(struct ss_unwinder *u, uint32_t pid, struct ss_proc *proc,
                               struct ss_err *err)
{
    struct ss_uproc *up = calloc(1, sizeof(*up));
    if (!up) {
        ss_proc_free(proc);
        return NULL;
    }
    up->pid = pid;
    up->proc = proc;
    up->u = u;
    up->live.pid = (pid_t)pid;
    bool live = ss_proc_is_live(proc);
    ss_mem_init(&up->mem, proc, live ? &ss_target_live : NULL, live ? &up->live : NULL);
    if (live && u->o.record) {
        up->mem.record = record_hook;
        up->mem.record_ctx = up;
    }
    if (ss_symcache_new(&up->syms) < 0 || !(up->pm = ss_perfmap_new()) ||
        ss_nproc_new(&up->np, proc, &up->mem, err) < 0) {
        uproc_free(up);
        return NULL;
    }
    ss_symcache_set_perfmap(up->syms, up->pm, live ? (pid_t)pid : 0);
    ss_symcache_set_files(up->syms, u->files);
    ss_nproc_set_mode(up->np, u->o.native_mode);
    up->next = u->buckets[pid & 255];
    u->buckets[pid & 255] = up;
    up->serial = ++u->st.processes;
    return up;
}

struct ss_uproc *ss_unwinder_proc(struct ss_unwinder *u, uint32_t pid, bool create,
                                  struct ss_err *err)
{
    if (u->last && u->last->pid == pid) return u->last;
    for (struct ss_uproc *up = u->buckets[pid & 255]; up; up = up->next)
        if (up->pid == pid) return u->last = up;
    if (!create || u->o.offline) {
        ss_err_set(err, -ESRCH, "pid %u: unknown process", pid);
        return NULL;
    }
    struct ss_proc *proc = ss_forks_take(u, pid); /* forked, not exec'd yet */
    if (!proc && ss_proc_new_live(&proc, (pid_t)pid, u->files, NULL, err) < 0) return NULL;
    struct ss_uproc *up = attach(u, pid, proc, err);
    return up ? (u->last = up) : NULL;
}

int ss_unwinder_add_process(struct ss_unwinder *u, uint32_t pid, const char *comm,
                            const struct ss_map_desc *maps, size_t n,
                            int (*resolve)(void *ctx, const struct ss_map_desc *m), void *ctx,
                            struct ss_err *err)
{
    ss_unwinder_forget(u, pid);
    struct ss_proc *proc;
    int r = ss_proc_new(&proc, (pid_t)pid, maps, n, resolve, ctx, u->files, err);
    if (r < 0) return r;
    ss_proc_set_comm(proc, comm);
    return attach(u, pid, proc, err) ? 0 : -ENOMEM;
}

void ss_unwinder_forget(struct ss_unwinder *u, uint32_t pid)
{
    for (struct ss_uproc **pp = &u->buckets[pid & 255]; *pp; pp = &(*pp)->next) {
        if ((*pp)->pid == pid) {
            struct ss_uproc *up = *pp;
            *pp = up->next;
            if (u->last == up) u->last = NULL;
            uproc_free(up);
            return;
        }
    }
}

void ss_unwinder_proc_event(struct ss_unwinder *u, const struct ss_proc_event *ev)
{
    u->markers = true;
    ss_unwinder_forget(u, ev->pid); /* exec, exit; fork: a reused pid's old state */
    ss_forks_drop(u, ev->pid);
    if (ev->kind == SS_PROC_FORK && !u->o.offline) ss_forks_note(u, ev->pid, ev->ppid);
    if (ev->kind == SS_PROC_EXIT) ss_sideband_forget(u, ev->pid);
}

void ss_unwinder_memo_drop(struct ss_unwinder *u)
{
    for (unsigned b = 0; b < 256; b++)
        for (struct ss_uproc *up = u->buckets[b]; up; up = up->next) {
            ss_memo_free(up->memo);
            up->memo = NULL;
        }
}

void ss_unwinder_gc(struct ss_unwinder *u)
{
    uint64_t now = now_ns();
    for (unsigned b = 0; b < 256; b++) {
        struct ss_uproc **pp = &u->buckets[b];
        while (*pp) {
            struct ss_uproc *up = *pp;
            bool idle = now - up->used_ns > 10000000000ull;
            if ((up->sideband && idle) ||
                (ss_proc_is_live(up->proc) && (!u->markers || idle) && !ss_proc_alive(up->proc))) {
                *pp = up->next;
                if (u->last == up) u->last = NULL;
                uproc_free(up);
            } else {
                pp = &up->next;
            }
        }
    }
    ss_elf_cache_gc(u->files);
}

void ss_unwinder_stats(const struct ss_unwinder *u, struct ss_unwinder_stats *st)
{
    *st = u->st; /* includes processes already freed */
    for (unsigned b = 0; b < 256; b++)
        for (struct ss_uproc *up = u->buckets[b]; up; up = up->next) {
            add_proc_stats(st, up);
            st->live++;
            st->lj_runtimes += ss_lua_nruntimes(up);
        }
    st->files = ss_elf_cache_count(u->files);
    st->debug_pending = ss_unwinder_debug_pending((struct ss_unwinder *)u);
}

_Static_assert(SS_READ_REWALK == -ERESTART, "the capture format's marker is -ERESTART");

static void count_unproven(struct ss_unwinder *u, const struct ss_stack *out)
{
    unsigned n = ss_stack_unproven(out);
    u->st.lua_unproven += n;
    u->st.lua_unproven_samples += n > 0;
}

int ss_unwind(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out)
{
    memset(out, 0, sizeof(*out));
    out->pid = s->pid;
    out->tid = s->tid;
    out->cpu = s->cpu;
    out->time_ns = s->time_ns;
    out->weight = s->weight;
    out->frames = u->out;
    u->st.samples++;
    struct ss_err err = {0};
    struct ss_uproc *up = ss_unwinder_proc(u, s->pid, true, &err);
    struct ss_proc *gone;
    if (up && up->sideband && !ss_sideband_covers(up->proc, s->regs[SS_REG_IP])) {
        ss_unwinder_forget(u, s->pid); /* built for an earlier sample: the log may know more */
        up = NULL;
        err.code = -ESRCH;
    }
    if (!up && err.code == -ESRCH &&
        ss_sideband_view(u, s->pid, s->time_ns, s->regs[SS_REG_IP], &gone) == 0 &&
        (up = attach(u, s->pid, gone, &err))) {
        up->sideband = true; /* freed by the exit marker, or unused for 10 s */
        u->last = up;
    }
    if (!up) {
        u->st.errors++;
        out->trunc = SS_TRUNC_ERROR;
        return err.code ? err.code : -ESRCH;
    }
    if (up->sideband) up->used_ns = now_ns();
    if (ss_proc_is_live(up->proc)) {
        uint64_t now = now_ns();
        up->used_ns = now;
        if (!u->markers) ss_proc_check_exec(up->proc, now); /* else exec markers say so */
        /* perf map: re-read (when a lookup missed) before the walk, so that
         * one sample sees one version, the one the capture records */
        ss_perfmap_sync(up->pm, (pid_t)up->pid, now, SS_PERFMAP_GAP_NS);
    }
    const char *comm = ss_proc_comm(up->proc); /* (snprintf cost 1 % of a LuaJIT replay) */
    size_t cl = strnlen(comm, sizeof(out->comm) - 1);
    memcpy(out->comm, comm, cl);
    out->comm[cl] = 0;
    ss_mem_set_snapshot(&up->mem, s->regs[SS_REG_SP], s->stack, s->stack_len);
    ss_mem_set_windows(&up->mem, s->win, s->nwin);
    uint64_t calls = up->mem.n_target_calls;

    enum ss_trunc why = SS_TRUNC_NONE;
    if (!s->regs[SS_REG_IP] && !s->regs[SS_REG_SP] && s->nkernel) { /* compat: kernel alone */
        out->nframes = ss_unwind_kernel(u, s, 0);
        out->frames = u->out;
        u->st.frames += out->nframes;
        u->st.trunc[why]++;
        return 0;
    }
    /* replay: the frames of an earlier walk with the same inputs (memo.h) */
    size_t nstate = 0;
    bool track = u->state[0] && !u->no_memo && ss_memo_want(up->memo);
    if (track) {
        /* the state as the last walk left it, when no walk ran since */
        const uint64_t *kept = ss_memo_state(up->memo, ss_lua_epoch(up), &nstate);
        if (kept)
            memcpy(u->state[0], kept, nstate * sizeof(*kept));
        else
            nstate = ss_lua_state(up, u->state[0]);
        unsigned n;
        uint8_t tr;
        const struct ss_frame *f =
            ss_memo_find(&up->memo, &up->mem, s, u->state[0], nstate, &n, &tr);
        if (f) { /* the memo's own copy: valid until the next call on u */
            out->frames = (struct ss_frame *)f;
            out->nframes = n;
            out->trunc = tr;
            u->st.frames += n;
            u->st.trunc[tr]++;
            u->st.memo_hits++;
            count_unproven(u, out);
            return 0;
        }
        ss_mem_track_reset(&u->track);
        up->mem.track = &u->track;
    }
    /* frames above the leaf from an earlier walk with the same inputs
     * (native_memo.c): exact, and off where every frame is to be walked */
    ss_nproc_set_memo(up->np, u->state[0] && !u->no_memo);
    uint64_t gen = ss_proc_generation(up->proc);
    unsigned nn = ss_unwind_mixed(u, up, s, &why); /* native walk + LuaJIT splice (lua.c) */
    if (ss_proc_generation(up->proc) != gen) {
        /* The maps were re-read during the walk (an address missed): walk
         * again on the new view only, which is what the capture records and
         * what replay will use, so live and replay stay identical. */
        why = SS_TRUNC_NONE;
        if (u->o.record) u->o.record(u->o.record_ctx, s->pid, 0, NULL, 0, SS_READ_REWALK);
        nn = ss_unwind_mixed(u, up, s, &why);
    }
    up->mem.track = NULL;
    u->read_walks += up->mem.n_target_calls != calls;
    if (nn == 0 && u->o.max_frames) {
        out->trunc = SS_TRUNC_ERROR;
        return -ENOMEM;
    }
    nn = ss_unwind_kernel(u, s, nn);
    out->frames = u->out;
    out->nframes = nn;
    out->trunc = (uint8_t)why;
    /* keep it when the walk left the walker's state as it found it (else a
     * later sample answered from the memo would miss that change) */
    size_t after = track ? ss_lua_state(up, u->state[1]) : 0;
    if (track) ss_memo_set_state(&up->memo, ss_lua_epoch(up), u->state[1], after);
    if (track && ss_proc_generation(up->proc) == gen && after == nstate &&
        !memcmp(u->state[0], u->state[1], nstate * sizeof(uint64_t)))
        ss_memo_store(&up->memo, &up->mem, s, u->state[0], nstate, &u->track, u->out, nn,
                      (uint8_t)why);
    u->st.frames += nn;
    u->st.trunc[why]++;
    count_unproven(u, out);
    return 0;
}

unsigned ss_stack_unproven(const struct ss_stack *st)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < st->nframes; i++)
        n += st->frames[i].unproven;
    return n;
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

int ss_unwind_twice(struct ss_unwinder *u, const struct ss_sample *s, struct ss_stack *out,
                    void (*between)(void *ctx), void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, s->pid, true, NULL);
    if (up) {
        enum ss_trunc why = SS_TRUNC_NONE;
        ss_mem_set_snapshot(&up->mem, s->regs[SS_REG_SP], s->stack, s->stack_len);
        ss_mem_set_windows(&up->mem, s->win, s->nwin);
        (void)ss_unwind_mixed(u, up, s, &why);
    }
    between(ctx);
    /* the second walk's reads are not all the sample's: no memo */
    u->no_memo = true;
    int r = ss_unwind(u, s, out);
    u->no_memo = false;
    return r;
}

int ss_unwinder_perfmap(struct ss_unwinder *u, uint32_t pid, uint32_t *version, const char **text,
                        size_t *len)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    *version = ss_perfmap_version(up->pm);
    *text = ss_perfmap_text(up->pm, len);
    return 0;
}

int ss_unwinder_set_perfmap(struct ss_unwinder *u, uint32_t pid, const char *text, size_t len)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    ss_memo_free(up->memo); /* JIT frames' names change */
    up->memo = NULL;
    return ss_perfmap_set(up->pm, text, len);
}
