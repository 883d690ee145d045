/* unwind/procs.c: the processes an unwinder knows (struct ss_uproc in
 * unwinder.h), their whole lifecycle, off the walk: a bundle per pid of
 * process view, memory reader, native unwinding state, symbol cache, perf
 * map and memo.
 *
 * A bundle is made at a process's first sample: from /proc, from its
 * parent's view for a child forked and not exec'd yet (a fork marker noted
 * it), or from the side band's log (sideband_view.c) for a process already
 * gone, at the sample's intake (ss_unwinder_intake), which the sample loop
 * calls before the walk. Replay makes one per recorded process
 * (ss_unwinder_add_process).
 * Exit and exec markers free it, and so does collection (ss_unwinder_gc) once
 * the process is gone or, for a side band view, unused for 10 s. The walk
 * asks one question, ss_procs_ready: the bundle the intake readied for the
 * sample (one lookup). A side band view that no longer covers the sample's
 * ip is retired at the intake (out of the table at once, freed at the next
 * collection), so that no teardown runs on the sample's path. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/elf.h"
#include "process/perfmap.h"
#include "process/process.h"
#include "symbolize/symbolize.h"
#include "unwind/lua_runtimes.h"
#include "unwind/memo.h"
#include "unwind/procs.h"
#include "unwind/sideband_view.h"
#include "unwind/unwinder.h"

#define FORK_SLOTS 4096 /* a colliding fork replaces the older note */
#define FORK_FROZEN_MS 1000
#define SIDEBAND_IDLE_NS 10000000000ull

uint64_t ss_procs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Counters kept per process, summed by ss_unwinder_stats. */
static void add_proc_stats(struct ss_unwinder_stats *st, const struct ss_uproc *up)
{
    const struct ss_nstats *ns = ss_nproc_stats(up->np);
    st->rule_steps += ns->rule_steps;
    st->unw_steps += ns->unw_steps;
    st->rule_loads += ns->rule_loads;
    st->rule_checks += ns->rule_checks;
    st->rule_check_diffs += ns->rule_check_diffs;
    st->native_memo_hits += ss_nproc_memo_hits(up->np);
    st->target_reads += up->mem.n_target_reads;
    st->target_calls += up->mem.n_target_calls;
}

static void uproc_free(struct ss_uproc *up)
{
    if (up->np) add_proc_stats(&up->u->st, up); /* keep the counters of exited processes */
    if (up->luajit && up->luajit_free) up->luajit_free(up->luajit);
    if (up->foreign && up->foreign_free) up->foreign_free(up->foreign);
    ss_nproc_free(up->np);
    ss_mem_free(&up->mem);
    ss_symcache_free(up->syms);
    ss_memo_free(up->memo);
    ss_perfmap_free(up->pm);
    ss_proc_free(up->proc);
    free(up);
}

static void record_hook(void *ctx, uint64_t addr, const void *data, size_t len, int err)
{
    struct ss_uproc *up = ctx;
    struct ss_unwinder *u = up->u;
    if (u->o.record) u->o.record(u->o.record_ctx, up->pid, addr, data, len, err);
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
    ss_nproc_set_pac(up->np, u->o.pac_mask);
    ss_nproc_set_check(up->np, u->o.check_rules);
    up->next = u->buckets[pid & 255];
    u->buckets[pid & 255] = up;
    up->serial = ++u->st.processes;
    return up;
}

/* Out of the table; *pp is up's link. */
static void unlink_proc(struct ss_unwinder *u, struct ss_uproc **pp)
{
    struct ss_uproc *up = *pp;
    *pp = up->next;
    if (u->last == up) u->last = NULL;
}

/* Forked children not yet sampled. A fork marker only notes the child and
 * its parent (a slot in a fixed table, by pid); most children exec right
 * away and are never sampled before, and their exec marker drops the note.
 * A child sampled before its exec gets, at its first sample, a copy of its
 * parent's view (ss_proc_fork), which /proc does not replace until the exec
 * marker comes (or FORK_FROZEN_MS pass: a child that never execs is then
 * read from /proc like any other). */
struct ss_fork {
    uint32_t pid, ppid;
    uint64_t parent_serial; /* the parent's view at the fork, 0: it had none */
};

static void fork_note(struct ss_unwinder *u, uint32_t pid, uint32_t ppid)
{
    if (!u->forks && !(u->forks = calloc(FORK_SLOTS, sizeof(*u->forks)))) return;
    struct ss_uproc *pp = ss_unwinder_proc(u, ppid, false, NULL);
    u->forks[pid % FORK_SLOTS] = (struct ss_fork){pid, ppid, pp ? pp->serial : 0};
}

static void fork_drop(struct ss_unwinder *u, uint32_t pid)
{
    if (u->forks && u->forks[pid % FORK_SLOTS].pid == pid) u->forks[pid % FORK_SLOTS].pid = 0;
}

/* The view a noted child runs in: a copy of its parent's (NULL: no note, or
 * no view of the parent to copy). */
static struct ss_proc *fork_take(struct ss_unwinder *u, uint32_t pid)
{
    struct ss_fork *f = u->forks ? &u->forks[pid % FORK_SLOTS] : NULL;
    if (!f || f->pid != pid) return NULL;
    struct ss_fork n = *f;
    f->pid = 0;
    /* the parent's view: the one it had at the fork (not one it exec'd
     * since), or read now when it had none */
    struct ss_uproc *pp = ss_unwinder_proc(u, n.ppid, !n.parent_serial, NULL);
    struct ss_proc *cp = NULL;
    if (!pp || (n.parent_serial && pp->serial != n.parent_serial) || !ss_proc_is_live(pp->proc) ||
        ss_proc_fork(&cp, pp->proc, (pid_t)pid, FORK_FROZEN_MS, NULL) < 0)
        return NULL;
    return cp;
}

/* The bundle of pid in the table, or NULL. */
static struct ss_uproc *lookup(struct ss_unwinder *u, uint32_t pid)
{
    if (u->last && u->last->pid == pid) return u->last;
    for (struct ss_uproc *up = u->buckets[pid & 255]; up; up = up->next)
        if (up->pid == pid) return u->last = up;
    return NULL;
}

/* The view of a live pid: copied from its parent's (forked, not exec'd
 * yet) or read from /proc. */
static int live_view(struct ss_unwinder *u, uint32_t pid, struct ss_proc **out, struct ss_err *err)
{
    if (u->o.offline) {
        ss_err_set(err, -ESRCH, "pid %u: unknown process", pid);
        return -ESRCH;
    }
    *out = fork_take(u, pid); /* forked, not exec'd yet */
    return *out ? 0 : ss_proc_new_live(out, (pid_t)pid, u->files, NULL, err);
}

struct ss_uproc *ss_unwinder_proc(struct ss_unwinder *u, uint32_t pid, bool create,
                                  struct ss_err *err)
{
    struct ss_uproc *up = lookup(u, pid);
    if (up) return up;
    struct ss_proc *proc;
    if (!create) {
        ss_err_set(err, -ESRCH, "pid %u: unknown process", pid);
        return NULL;
    }
    if (live_view(u, pid, &proc, err) < 0 || !(up = attach(u, pid, proc, err))) return NULL;
    return u->last = up;
}

/* A side band view that does not cover the sample's ip was built for an
 * earlier sample (the log may know more now): out of the table, freed by
 * the next collection. */
static void retire(struct ss_unwinder *u, struct ss_uproc *up)
{
    for (struct ss_uproc **pp = &u->buckets[up->pid & 255]; *pp; pp = &(*pp)->next)
        if (*pp == up) {
            unlink_proc(u, pp);
            up->next = u->retired;
            u->retired = up;
            return;
        }
}

/* A bundle for s's process at its first sample (gone: a side band view
 * of it no longer covers the sample; it was retired): a live view (a
 * forked parent's copy, or /proc), else its mappings from the side band's
 * log (a process gone before its walk). */
static struct ss_uproc *first_sample(struct ss_unwinder *u, const struct ss_sample *s, bool gone,
                                     struct ss_err *err)
{
    struct ss_proc *view = NULL;
    int r = gone ? -ESRCH : live_view(u, s->pid, &view, err);
    if (r < 0 && err->code == -ESRCH &&
        ss_sideband_view(u, s->pid, s->time_ns, s->regs[SS_REG_IP], &view) == 0)
        gone = true, r = 0;
    struct ss_uproc *up = r < 0 ? NULL : attach(u, s->pid, view, err);
    if (!up) return NULL;
    up->sideband = gone; /* freed by the exit marker, or unused for 10 s */
    return u->last = up;
}

/* A live process's exec checked (without markers) and its perf map synced;
 * its use time kept (collection). */
static void ready(struct ss_unwinder *u, struct ss_uproc *up)
{
    if (up->sideband) up->used_ns = ss_procs_now_ns();
    if (!ss_proc_is_live(up->proc)) return;
    uint64_t now = ss_procs_now_ns();
    up->used_ns = now;
    if (!u->markers) ss_proc_check_exec(up->proc, now); /* else exec markers say so */
    /* perf map: re-read (when a lookup missed) before the walk, so that
     * one sample sees one version, the one the capture records */
    ss_perfmap_sync(up->pm, (pid_t)up->pid, now, SS_PERFMAP_GAP_NS);
}

struct ss_uproc *ss_procs_get(struct ss_unwinder *u, const struct ss_sample *s, struct ss_err *err)
{
    struct ss_uproc *up = lookup(u, s->pid);
    bool gone = up && up->sideband && !ss_proc_in_file(up->proc, s->regs[SS_REG_IP]);
    if (gone) {
        retire(u, up);
        err->code = -ESRCH;
    }
    if ((!up || gone) && !(up = first_sample(u, s, gone, err))) return NULL;
    ready(u, up);
    ss_mem_set_sample(&up->mem, s);
    return up;
}

int ss_unwinder_intake(struct ss_unwinder *u, const struct ss_sample *s)
{
    struct ss_err err = {0};
    int code = ss_procs_get(u, s, &err) ? 0 : err.code ? err.code : -ESRCH;
    u->intake = (struct ss_intake){s, s->time_ns, s->pid, code};
    return code;
}

struct ss_uproc *ss_procs_taken(struct ss_unwinder *u, const struct ss_sample *s, int *code)
{
    const struct ss_intake *in = &u->intake;
    bool taken = in->s == s && in->pid == s->pid && in->time_ns == s->time_ns;
    *code = !taken ? -EINVAL : in->code ? in->code : -ESRCH;
    return taken && !in->code ? lookup(u, s->pid) : NULL;
}

struct ss_uproc *ss_procs_ready(struct ss_unwinder *u, const struct ss_sample *s, int *code)
{
    struct ss_uproc *up = ss_procs_taken(u, s, code);
    u->intake.s = NULL; /* one walk a sample taken in */
    return up;
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
            unlink_proc(u, pp);
            uproc_free(up);
            return;
        }
    }
}

void ss_unwinder_proc_event(struct ss_unwinder *u, const struct ss_proc_event *ev)
{
    u->markers = true;
    ss_unwinder_forget(u, ev->pid); /* exec, exit; fork: a reused pid's old state */
    fork_drop(u, ev->pid);
    if (ev->kind == SS_PROC_FORK && !u->o.offline) fork_note(u, ev->pid, ev->ppid);
    if (ev->kind == SS_PROC_EXIT) ss_sideband_forget(u, ev->pid);
}

static void free_retired(struct ss_unwinder *u)
{
    while (u->retired) {
        struct ss_uproc *up = u->retired;
        u->retired = up->next;
        uproc_free(up);
    }
}

void ss_unwinder_gc(struct ss_unwinder *u)
{
    uint64_t now = ss_procs_now_ns();
    free_retired(u);
    for (unsigned b = 0; b < 256; b++) {
        struct ss_uproc **pp = &u->buckets[b];
        while (*pp) {
            struct ss_uproc *up = *pp;
            bool idle = now - up->used_ns > SIDEBAND_IDLE_NS;
            if ((up->sideband && idle) ||
                (ss_proc_is_live(up->proc) && (!u->markers || idle) && !ss_proc_alive(up->proc))) {
                unlink_proc(u, pp);
                uproc_free(up);
            } else {
                pp = &up->next;
            }
        }
    }
    ss_elf_cache_gc(u->files);
}

void ss_procs_free(struct ss_unwinder *u)
{
    free_retired(u);
    for (unsigned b = 0; b < 256; b++) {
        struct ss_uproc *up = u->buckets[b];
        while (up) {
            struct ss_uproc *n = up->next;
            uproc_free(up);
            up = n;
        }
        u->buckets[b] = NULL;
    }
    u->last = NULL;
    free(u->forks);
    u->forks = NULL;
}

void ss_procs_stats(const struct ss_unwinder *u, struct ss_unwinder_stats *st)
{
    for (const struct ss_uproc *up = u->retired; up; up = up->next) /* freed, as it were */
        add_proc_stats(st, up);
    for (unsigned b = 0; b < 256; b++)
        for (struct ss_uproc *up = u->buckets[b]; up; up = up->next) {
            add_proc_stats(st, up);
            st->live++;
            st->lj_runtimes += ss_lua_nruntimes(up);
        }
}

void ss_unwinder_memo_drop(struct ss_unwinder *u)
{
    for (unsigned b = 0; b < 256; b++)
        for (struct ss_uproc *up = u->buckets[b]; up; up = up->next) {
            ss_memo_free(up->memo);
            up->memo = NULL;
        }
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

int ss_unwinder_describe(struct ss_unwinder *u, uint32_t pid, struct ss_unwinder_pdesc *out,
                         ss_unwinder_map_fn fn, void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    size_t n;
    const struct ss_mapping *m = ss_proc_mappings(up->proc, &n);
    out->comm = ss_proc_comm(up->proc);
    out->serial = up->serial;
    out->generation = ss_proc_generation(up->proc);
    out->nmaps = n;
    for (size_t i = 0; fn && i < n; i++) {
        struct ss_map_desc d = m[i].d;
        if (m[i].elf && m[i].elf->build_id_len && !d.build_id_len) {
            d.build_id_len = m[i].elf->build_id_len;
            memcpy(d.build_id, m[i].elf->build_id, d.build_id_len);
        }
        fn(ctx, &d);
    }
    return 0;
}

int ss_unwinder_set_target(struct ss_unwinder *u, uint32_t pid, const struct ss_target_ops *ops,
                           void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    if (up->mem.target != ops || up->mem.target_ctx != ctx) { /* other answers: memo.h */
        ss_memo_free(up->memo);
        up->memo = NULL;
    }
    up->mem.target = ops;
    up->mem.target_ctx = ctx;
    return 0;
}
