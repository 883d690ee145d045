/* bench/bpfrun.c: one BPF program of the bench, attached to one task.
 *
 * Our snapshot program (bpf/snapshot.bpf.c, the profiler's own object) and
 * the two in-kernel comparators (bench_fp, bench_lua) are loaded from their
 * skeletons with the same ring buffer size and wake-up policy, and attached
 * the same way: one cpu-clock perf event on the target task (pid, any CPU)
 * at the same frequency, so run_time_ns/run_cnt is exactly the cost of one
 * sample of that task for every program (the profiler itself opens one event
 * per CPU and filters by tgid; the filtered runs are not part of a sample's
 * cost). Records are drained by the caller's callback. The LuaJIT walker
 * reads x86-64's registers: a build for another architecture (bench_vmcost
 * in the arm64 VM) has no bench_lua object, and BN_PROG_LUA fails there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>

#include "bench.h"
#include "bench_fp.skel.h"
#include "capture/capture_int.h" /* ss_capture_pt_reg, ss_capture_win_ip */
#if __has_include("bench_lua.skel.h")
#include "bench_lua.skel.h"
#define BN_HAVE_LUA 1
#else
#define BN_HAVE_LUA 0
struct bench_lua_bpf;
#endif
#include "snapshot.skel.h"

#define RING_BYTES (8u << 20)

struct bn_bpf {
    enum bn_prog kind;
    struct snapshot_bpf *snap;
    struct bench_fp_bpf *fp;
    struct bench_lua_bpf *lua;
    struct bpf_program *prog, *follow;
    int pids_fd, counters_fd, cfg_fd, plans_fd;
    struct ring_buffer *rb;
    int perf_fd;
    struct bpf_link *link;
    uint64_t records;
    bn_record_fn fn;
    void *ctx;
};

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
    (void)l, (void)f, (void)ap;
    return 0;
}

static int on_rec(void *ctx, void *data, size_t len)
{
    struct bn_bpf *b = ctx;
    b->records++;
    if (b->fn) b->fn(b->ctx, data, len);
    return 0;
}

int bn_bpf_stats_on(void)
{
    int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    return fd < 0 ? -errno : fd;
}

int bn_bpf_open(struct bn_bpf **out, enum bn_prog kind, unsigned stack_size, bool follow,
                bool windows, char *msg, size_t len)
{
    struct bn_bpf *b = calloc(1, sizeof(*b));
    struct bpf_map *events = NULL;
    int r = -EINVAL;

    if (!b) return -ENOMEM;
    b->kind = kind;
    b->perf_fd = -1;
    b->cfg_fd = -1;
    b->plans_fd = -1;
    libbpf_print_fn_t old = libbpf_set_print(silent);
    switch (kind) {
    case BN_PROG_SNAP:
        b->snap = snapshot_bpf__open();
        if (!b->snap) goto open_failed;
        b->snap->rodata->stack_size = stack_size;
        b->snap->rodata->self_tgid = getpid();
        b->snap->rodata->wake_bytes = RING_BYTES / 4;
        b->snap->rodata->windows = windows;
        bpf_map__set_max_entries(b->snap->maps.events, RING_BYTES);
        bpf_program__set_autoload(b->snap->progs.follow_fork, follow);
        bpf_program__set_autoload(b->snap->progs.snapshot_k, false); /* --kernel's */
        r = snapshot_bpf__load(b->snap);
        b->prog = b->snap->progs.snapshot;
        b->follow = follow ? b->snap->progs.follow_fork : NULL;
        events = b->snap->maps.events;
        b->pids_fd = bpf_map__fd(b->snap->maps.pids);
        b->counters_fd = bpf_map__fd(b->snap->maps.counters);
        b->plans_fd = bpf_map__fd(b->snap->maps.plans);
        break;
    case BN_PROG_FP:
        b->fp = bench_fp_bpf__open();
        if (!b->fp) goto open_failed;
        b->fp->rodata->wake_bytes = RING_BYTES / 4;
        bpf_map__set_max_entries(b->fp->maps.events, RING_BYTES);
        r = bench_fp_bpf__load(b->fp);
        b->prog = b->fp->progs.bench_fp;
        events = b->fp->maps.events;
        b->pids_fd = bpf_map__fd(b->fp->maps.pids);
        b->counters_fd = bpf_map__fd(b->fp->maps.counters);
        break;
    case BN_PROG_LUA:
#if BN_HAVE_LUA
        b->lua = bench_lua_bpf__open();
        if (!b->lua) goto open_failed;
        b->lua->rodata->wake_bytes = RING_BYTES / 4;
        bpf_map__set_max_entries(b->lua->maps.events, RING_BYTES);
        r = bench_lua_bpf__load(b->lua);
        b->prog = b->lua->progs.bench_lua;
        events = b->lua->maps.events;
        b->pids_fd = bpf_map__fd(b->lua->maps.pids);
        b->counters_fd = bpf_map__fd(b->lua->maps.counters);
        b->cfg_fd = bpf_map__fd(b->lua->maps.cfg);
#else
        errno = EOPNOTSUPP;
        goto open_failed;
#endif
        break;
    }
    libbpf_set_print(old);
    if (r < 0) {
        snprintf(msg, len, "loading BPF program %d: %s", (int)kind, strerror(-r));
        bn_bpf_close(b);
        return r;
    }
    b->rb = ring_buffer__new(bpf_map__fd(events), on_rec, b, NULL);
    if (!b->rb) {
        r = -errno;
        snprintf(msg, len, "ring buffer: %s", strerror(-r));
        bn_bpf_close(b);
        return r;
    }
    *out = b;
    return 0;
open_failed:
    libbpf_set_print(old);
    r = -errno;
    snprintf(msg, len, "opening BPF object %d: %s", (int)kind, strerror(-r));
    free(b);
    return r ? r : -EINVAL;
}

int bn_bpf_set_lua_cfg(struct bn_bpf *b, const struct bench_lua_cfg *cfg)
{
    __u32 zero = 0;
    if (b->cfg_fd < 0) return -EINVAL;
    return bpf_map_update_elem(b->cfg_fd, &zero, cfg, BPF_ANY) ? -errno : 0;
}

int bn_bpf_set_plan(struct bn_bpf *b, pid_t pid, const struct ss_win_plan *p)
{
    struct ss_plan v;
    __u32 key = (__u32)pid;
    if (b->plans_fd < 0 || !p->n || p->n > SS_WIN_MAX) return -EINVAL;
    memset(&v, 0, sizeof(v));
    v.nwin = p->n;
    for (unsigned i = 0; i < p->n; i++) {
        const struct ss_win_spec *w = &p->w[i];
        struct ss_win *o = &v.win[i];
        int reg = w->reg == SS_WIN_ABS ? (int)SS_WIN_ABS : ss_capture_pt_reg(w->reg);
        if (reg < 0) return -EINVAL;
        /* the fields as ss_capture_set_plan writes them (the plan comes from
         * our own unwinder, which record's loader validates) */
        *o = (struct ss_win){.reg = (__u8)reg,
                             .nload = w->nload,
                             .flags = w->flags,
                             .len = w->len,
                             .dst = w->dst,
                             .addr = reg == SS_WIN_ABS ? w->addr : 0};
        ss_capture_win_ip(o, w);
        memcpy(o->off, w->off, sizeof(o->off));
        memcpy(o->mask, w->mask, sizeof(o->mask));
    }
    return bpf_map_update_elem(b->plans_fd, &key, &v, BPF_ANY) ? -errno : 0;
}

int bn_bpf_attach(struct bn_bpf *b, pid_t pid, unsigned freq, bool select, char *msg, size_t len)
{
    __u32 key = (__u32)pid;
    __u8 one = 1;
    struct perf_event_attr a = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof(a),
        .config = PERF_COUNT_SW_CPU_CLOCK,
        .sample_freq = freq,
        .freq = 1,
        .disabled = 1,
    };

    if (select && bpf_map_update_elem(b->pids_fd, &key, &one, BPF_ANY)) {
        snprintf(msg, len, "pid map: %s", strerror(errno));
        return -errno;
    }
    b->perf_fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (b->perf_fd < 0) {
        int r = -errno;
        snprintf(msg, len, "perf_event_open pid %d: %s", (int)pid, strerror(-r));
        return r;
    }
    b->link = bpf_program__attach_perf_event(b->prog, b->perf_fd);
    if (!b->link) {
        int r = -errno;
        snprintf(msg, len, "attach to pid %d: %s", (int)pid, strerror(-r));
        close(b->perf_fd);
        b->perf_fd = -1;
        return r;
    }
    return 0;
}

int bn_bpf_poll(struct bn_bpf *b, int timeout_ms, bn_record_fn fn, void *ctx)
{
    b->fn = fn;
    b->ctx = ctx;
    int r = ring_buffer__poll(b->rb, timeout_ms);
    return r == -EINTR ? 0 : r;
}

void bn_bpf_detach(struct bn_bpf *b, bn_record_fn fn, void *ctx)
{
    bpf_link__destroy(b->link);
    b->link = NULL;
    if (b->perf_fd >= 0) close(b->perf_fd);
    b->perf_fd = -1;
    b->fn = fn;
    b->ctx = ctx;
    while (ring_buffer__consume(b->rb) > 0)
        ;
}

static void prog_info(struct bpf_program *p, struct bn_prog_info *pi)
{
    struct bpf_prog_info i;
    __u32 n = sizeof(i);
    memset(&i, 0, sizeof(i));
    if (!p || bpf_obj_get_info_by_fd(bpf_program__fd(p), &i, &n)) return;
    snprintf(pi->name, sizeof(pi->name), "%s", i.name);
    pi->xlated = i.xlated_prog_len / 8;
    pi->jited = i.jited_prog_len;
    pi->verified = i.verified_insns;
    pi->run_ns = i.run_time_ns;
    pi->run_cnt = i.run_cnt;
}

void bn_bpf_info(struct bn_bpf *b, struct bn_prog_info *pi)
{
    memset(pi, 0, sizeof(*pi));
    prog_info(b->prog, pi);
    pi->records = b->records;
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return;
    __u32 zero = 0;
    if (b->kind == BN_PROG_SNAP) {
        struct ss_counters *c = calloc((size_t)ncpu, sizeof(*c));
        if (c && !bpf_map_lookup_elem(b->counters_fd, &zero, c))
            for (int i = 0; i < ncpu; i++) {
                pi->seen += c[i].emitted + c[i].dropped + c[i].skipped;
                pi->emitted += c[i].emitted;
                pi->dropped += c[i].dropped;
            }
        free(c);
    } else {
        struct bench_counters *c = calloc((size_t)ncpu, sizeof(*c));
        if (c && !bpf_map_lookup_elem(b->counters_fd, &zero, c))
            for (int i = 0; i < ncpu; i++) {
                pi->seen += c[i].seen;
                pi->emitted += c[i].emitted;
                pi->dropped += c[i].dropped;
            }
        free(c);
    }
}

void bn_bpf_info_follow(struct bn_bpf *b, struct bn_prog_info *pi)
{
    memset(pi, 0, sizeof(*pi));
    prog_info(b->follow, pi);
}

void bn_bpf_close(struct bn_bpf *b)
{
    if (!b) return;
    bpf_link__destroy(b->link);
    if (b->perf_fd >= 0) close(b->perf_fd);
    ring_buffer__free(b->rb);
    snapshot_bpf__destroy(b->snap);
    bench_fp_bpf__destroy(b->fp);
#if BN_HAVE_LUA
    bench_lua_bpf__destroy(b->lua);
#endif
    free(b);
}
