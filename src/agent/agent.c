/* agent/agent.c: the agent's lifecycle and its sampling loop — one capture,
 * one unwinder, every sample fed to the open profile windows, the push
 * window and the capture segment. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/webcfg.h"
#include "snapfile/snapout.h"
#include "util/pac.h"

void ag_log(const struct ss_agent *a, const char *fmt, ...)
{
    if (!a->o.log) return;
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof(b), fmt, ap);
    va_end(ap);
    a->o.log(a->o.log_ctx, b);
}

double ag_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t ag_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char *dup_opt(const char *s, bool *oom)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = true;
    return d;
}

static void verifier_log(void *arg, const char *prog, const char *log)
{
    const struct ss_agent *a = arg;
    ag_log(a, "verifier log of BPF program %s:\n%s", prog, log);
}

/* A fork, exec or exit, in order with the samples: the unwinder's views
 * follow it (a child keeps its parent's mappings until its exec; an exited
 * process's view goes once its samples are unwound), the segment records
 * it. With -p, children are not sampled: their forks need no view. */
/* System-wide: the kernel's record of mappings and execs, for processes
 * gone before their first sample is walked. */
static void on_map_event(void *ctx, const struct ss_map_event *ev)
{
    struct ss_agent *a = ctx;
    if (a->u) ss_unwinder_map_event(a->u, ev);
}

static void on_proc_event(void *ctx, const struct ss_proc_event *ev)
{
    struct ss_agent *a = ctx;
    if (ev->kind <= SS_PROC_EXIT) a->live.markers[ev->kind]++;
    if (!a->u || (ev->kind == SS_PROC_FORK && a->o.npids)) return;
    ss_unwinder_proc_event(a->u, ev);
    if (a->seg) ag_seg_proc_event(a->seg, ev);
}

/* The ring buffer of CPU samples: room for half a second of samples at the
 * rate on every CPU, each at its largest (stack snapshot, window area,
 * header), as a power of two from 1 to 8 MiB (record's size, the default).
 * The ring is locked kernel memory mapped twice into the agent, so 8 MiB
 * for 19 Hz on a small host was 16 MiB of the agent's RSS for nothing.
 * Off-CPU samples follow the workload's blocking, not the rate: default. */
static unsigned ring_bytes(const struct ss_agent_opts *o)
{
    if (o->off_cpu) return 0;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    uint64_t rec = (uint64_t)(o->stack_size ? o->stack_size : SS_STACK_DEFAULT) + SS_WIN_AREA +
                   1024; /* + the record header and kernel stack area */
    uint64_t want =
        (uint64_t)(o->freq_hz ? o->freq_hz : 19) * (uint64_t)(cpus > 0 ? cpus : 1) * rec / 2;
    unsigned ring = 1u << 20;
    while (ring < want && ring < (8u << 20))
        ring <<= 1;
    return ring;
}

static int open_capture(struct ss_agent *a, struct ss_err *err)
{
    struct ss_capture_opts co = {.freq_hz = a->o.freq_hz,
                                 .ringbuf_bytes = ring_bytes(&a->o),
                                 .stack_size = a->o.stack_size,
                                 .system_wide = a->o.npids == 0,
                                 .compat = a->o.compat,
                                 .no_windows = a->o.no_windows,
                                 .off_cpu = a->o.off_cpu,
                                 .proc_event = on_proc_event,
                                 .proc_event_arg = a,
                                 .map_event = a->o.npids ? NULL : on_map_event,
                                 .map_event_arg = a,
                                 .verifier_log = verifier_log,
                                 .verifier_log_arg = a};
    int rc = ss_capture_open(&a->cap, &co, err);
    if (rc < 0) return rc;
    const char *why = ss_capture_fallback_reason(a->cap);
    if (*why) ag_log(a, "using the compat BPF program: %s", why);
    why = ss_capture_markers_reason(a->cap);
    if (*why) ag_log(a, "no fork/exec/exit markers: %s", why);
    for (size_t i = 0; i < a->o.npids; i++)
        if ((rc = ss_capture_add_pid(a->cap, a->o.pids[i], err)) < 0) return rc;
    return 0;
}

int ss_agent_new(struct ss_agent **out, const struct ss_agent_opts *o, struct ss_err *err)
{
    struct ss_agent *a = calloc(1, sizeof(*a));
    if (!a) {
        ss_err_set(err, -ENOMEM, "agent: out of memory");
        return -ENOMEM;
    }
    a->o = *o;
    a->listen_fd = -1;
    a->t0 = ag_now(); /* before any thread reads it */
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->ce.mu, NULL);
    if (!a->o.freq_hz) a->o.freq_hz = 19;
    if (!a->o.stack_size) a->o.stack_size = SS_STACK_DEFAULT;
    if (!a->o.max_seconds) a->o.max_seconds = 300;
    if (!a->o.poll_ms) a->o.poll_ms = 10;
    if (!a->o.max_profiles) a->o.max_profiles = 4;
    if (!a->o.capture_max_bytes) a->o.capture_max_bytes = 256ull << 20;
    if (!a->o.capture_segment_s) a->o.capture_segment_s = 600;
    if (!a->o.push_every_s) a->o.push_every_s = 15;
    if (!a->o.push_queue) a->o.push_queue = 16;
    bool oom = false;
    a->listen = dup_opt(o->listen ? o->listen : "127.0.0.1:7470", &oom);
    a->capture_dir = dup_opt(o->capture_dir, &oom);
    a->push_url = dup_opt(o->push_url, &oom);
    a->o.listen = a->listen;
    a->o.capture_dir = a->capture_dir;
    a->o.push_url = a->push_url;
    a->o.pids = NULL; /* only used below, while o->pids is valid */
    a->procs = ag_procinfo_new();
    int rc = -ENOMEM;
    if (oom || !a->procs) {
        ss_err_set(err, -ENOMEM, "agent: out of memory");
        goto fail;
    }
    if ((rc = ag_web_load(&a->web, o->web_config, o->auth_token_file, o->healthz_open, err)) < 0)
        goto fail;
    a->o.web_config = a->o.auth_token_file = NULL; /* read: not kept */
    a->o.pids = o->pids;
    rc = open_capture(a, err);
    a->o.pids = NULL;
    if (rc < 0) goto fail;
    if (a->capture_dir && (rc = ag_seg_new(&a->seg, a, err)) < 0) goto fail;
    if (!a->seg) {
        struct ss_unwinder_opts uo = {
            .pac_mask = ss_pac_mask(), .plan_ready = ag_give_plan, .plan_ctx = a};
        if ((rc = ss_unwinder_new(&a->u, &uo, err)) < 0) goto fail;
        /* -p: their files and LuaJIT runtimes now, as record does, so that
         * the window plan comes before the first samples (a failure: the
         * first sample tries again) */
        for (size_t i = 0; i < o->npids; i++) {
            struct ss_err e = {0};
            ss_unwinder_prepare(a->u, (uint32_t)o->pids[i], &e);
        }
    }
    if (a->push_url && (rc = ag_push_new(&a->push, a, err)) < 0) goto fail;
    /* the URL and headers are copied by ag_otlp_new: only used here */
    if (o->otlp_url && (rc = ag_otlp_new(&a->otlp, a, err)) < 0) goto fail;
    a->o.otlp_url = NULL;
    a->o.otlp_headers = NULL;
    a->o.n_otlp_headers = 0;
    a->o.otlp_service = NULL;
    if ((a->listen_fd = ag_listen(a->listen, a->address, sizeof(a->address), err)) < 0) {
        rc = a->listen_fd;
        goto fail;
    }
    if ((rc = ag_http_start(a, err)) < 0) goto fail;
    *out = a;
    return 0;
fail:
    ss_agent_free(a);
    return rc;
}

const char *ss_agent_address(const struct ss_agent *a)
{
    return a->address;
}

static void feed_windows(struct ss_agent *a, const struct ss_stack *st, const char *exe,
                         const char *cgroup)
{
    pthread_mutex_lock(&a->mu);
    for (struct ag_window *w = a->windows; w; w = w->next) {
        if (w->done || (w->pid && w->pid != st->pid)) continue;
        struct ss_err err = {0};
        if (ss_report_set_labels(w->rep, st->pid, exe, cgroup, &err) < 0 ||
            ss_report_add(w->rep, st, a->o.off_cpu ? ss_report_weight_us(st) : 1, &err) < 0) {
            w->done = true; /* out of memory: answered with what it has at the next tick */
        }
    }
    pthread_mutex_unlock(&a->mu);
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct ss_agent *a = ctx;
    struct ss_stack st;
    ss_unwinder_intake(a->u, s);
    int rc = ss_unwind(a->u, s, &st);
    if (a->seg) ag_seg_sample(a->seg, a->u, s, rc == 0);
    if (rc < 0) { /* gone before we could look at it */
        a->live.errors++;
        return;
    }
    a->live.samples++;
    for (uint32_t i = 0; i < st.nframes; i++)
        if (st.frames[i].kind == SS_FRAME_LUA) {
            a->live.lua++;
            break;
        }
    a->live.lua_unproven += ss_stack_unproven(&st);
    unsigned f = ss_stack_facts(&st);
    a->live.truncated += (f & SS_SF_TRUNCATED) != 0;
    a->live.trace_cut += (f & SS_SF_TRACE_CUT) != 0;
    a->live.scan_stale += (f & SS_SF_STALE) != 0;
    a->live.nocfi += (f & SS_SF_NOCFI) != 0;
    a->live.nocfi_root += (f & SS_SF_NOCFI_ROOT) != 0;
    const char *exe = NULL, *cgroup = NULL;
    ag_procinfo_get(a->procs, st.pid, st.comm, &exe, &cgroup);
    feed_windows(a, &st, exe, cgroup);
    if (a->push) ag_push_add(a->push, &st, exe, cgroup);
    if (a->otlp) ag_otlp_add(a->otlp, &st, exe, cgroup);
    ag_give_plan(a, s->pid); /* a LuaJIT runtime verified, or its needs changed */
}

void ag_give_plan(void *ctx, uint32_t pid)
{
    struct ss_agent *a = ctx;
    struct ss_win_plan plan;
    struct ss_err err = {0};
    if (ss_unwinder_take_plan(a->u, pid, &plan) &&
        ss_capture_set_plan(a->cap, (pid_t)pid, &plan, &err) < 0)
        ag_log(a, "%s", err.msg);
}

/* A new unwinder (at the start, and for each capture segment): its
 * debuginfod fetcher when asked for. */
static void unwinder_ready(struct ss_agent *a)
{
    struct ss_err err = {0};
    if (a->u && a->o.debuginfod_timeout_s > 0 &&
        ss_unwinder_debuginfod(a->u, a->o.debuginfod_timeout_s, &err) < 0)
        ag_log(a, "no debuginfod: %s", err.msg);
}

/* ss_unwinder_debug_fn: a debug file arrived. The open profile windows
 * rename the frames they named before it, the segment records it (its
 * replay names the same from there on). */
static void on_debug(void *ctx, const uint8_t *id, size_t len, const char *path)
{
    struct ss_agent *a = ctx;
    struct ss_unwinder_renamer n = {a->u, id, len};
    pthread_mutex_lock(&a->mu);
    for (struct ag_window *w = a->windows; w; w = w->next) {
        struct ss_err err = {0};
        if (!w->done && ss_report_rename(w->rep, ss_unwinder_rename_fn, &n, &err) < 0)
            ag_log(a, "renaming frames after %s: %s", path, err.msg);
    }
    pthread_mutex_unlock(&a->mu);
    if (a->seg) ag_seg_debugfile(a->seg, id, len, path);
}

static void refresh_stats(struct ss_agent *a)
{
    ss_capture_stats(a->cap, &a->live.cap);
    ss_unwinder_stats(a->u, &a->live.unw);
    a->live.processes_seen = a->seen_before + a->live.unw.processes;
    a->live.debug_fetched = a->fetched_before + a->live.unw.debug_fetched;
    a->live.debug_failed = a->fetch_failed_before + a->live.unw.debug_failed;
    if (a->seg)
        ag_seg_stats(a->seg, &a->live.segments, &a->live.segment_errors, &a->live.capture_bytes,
                     &a->live.capturing);
    pthread_mutex_lock(&a->mu);
    a->st = a->live;
    pthread_mutex_unlock(&a->mu);
}

int ss_agent_run(struct ss_agent *a, volatile sig_atomic_t *stop, struct ss_err *err)
{
    int rc = 0;
    if (a->seg && (rc = ag_seg_begin(a->seg, &a->u, err)) < 0) return rc;
    unwinder_ready(a);
    if ((rc = ss_capture_start(a->cap, err)) < 0) return rc;
    double last_stats = 0, last_gc = a->t0;
    if (a->o.off_cpu)
        ag_log(a, "agent: sampling %s off the CPU (waits of 100 us or more), HTTP on %s",
               a->o.npids ? "the given pids" : "every process", a->address);
    else
        ag_log(a, "agent: sampling %s at %u Hz, HTTP on %s",
               a->o.npids ? "the given pids" : "every process", a->o.freq_hz, a->address);
    while (!*stop) {
        int n = ss_capture_poll(a->cap, (int)a->o.poll_ms, on_sample, a);
        if (n < 0) {
            ss_err_set(err, n, "polling the capture buffer: %s", strerror(-n));
            rc = n;
            break;
        }
        double t = ag_now();
        ag_windows_tick(a, t);
        ag_ce_tick(a, t, false);
        if (a->push) ag_push_tick(a->push, t, false);
        if (a->otlp) ag_otlp_tick(a->otlp, t, false);
        if (a->seg && ag_seg_tick(a->seg, t)) {
            ag_seg_end(a->seg, a->cap, a->u);
            struct ss_unwinder_stats us;
            ss_unwinder_stats(a->u, &us);
            a->seen_before += us.processes;
            a->fetched_before += us.debug_fetched;
            a->fetch_failed_before += us.debug_failed;
            ss_unwinder_free(a->u);
            a->u = NULL;
            if ((rc = ag_seg_begin(a->seg, &a->u, err)) < 0) break;
            unwinder_ready(a);
        }
        if (a->o.debuginfod_timeout_s > 0) ss_unwinder_debug_poll(a->u, on_debug, a);
        if (t - last_gc >= 2.0) { /* drop the state of processes that exited */
            ss_unwinder_gc(a->u);
            ag_procinfo_gc(a->procs);
            last_gc = t;
        }
        if (t - last_stats >= 0.5) {
            refresh_stats(a);
            last_stats = t;
        }
    }
    ss_capture_stop(a->cap);
    while (a->u && ss_capture_poll(a->cap, 0, on_sample, a) > 0)
        ;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_mutex_unlock(&a->mu);
    ag_windows_tick(a, ag_now());
    if (a->push) ag_push_tick(a->push, ag_now(), true);
    if (a->otlp) ag_otlp_tick(a->otlp, ag_now(), true);
    if (a->seg && a->u) ag_seg_end(a->seg, a->cap, a->u);
    if (a->u) refresh_stats(a);
    return rc;
}

void ss_agent_free(struct ss_agent *a)
{
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_mutex_unlock(&a->mu);
    ag_windows_tick(a, ag_now());
    ag_http_stop(a); /* waits for the connection threads */
    if (a->listen_fd >= 0) close(a->listen_fd);
    if (!strncmp(a->address, "unix:", 5)) unlink(a->address + 5);
    ag_web_free(a->web);
    ag_push_free(a->push);
    ag_otlp_free(a->otlp);
    ag_seg_free(a->seg);
    ss_unwinder_free(a->u);
    ss_capture_close(a->cap);
    ag_procinfo_free(a->procs);
    pthread_mutex_destroy(&a->ce.mu);
    pthread_mutex_destroy(&a->mu);
    free(a->listen);
    free(a->capture_dir);
    free(a->push_url);
    free(a);
}
