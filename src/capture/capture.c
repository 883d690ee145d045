/* capture/capture.c: choosing and loading the snapshot BPF program (ring
 * buffer variant or compat variant), the pid filter, counters and program
 * info. perf_events.c opens and attaches the perf events, buffer.c polls. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "capture/capture_int.h"
#include "snapshot.h" /* bpf/: shared with the BPF side */
#include "snapshot.skel.h"
#include "snapshot_compat.skel.h"
#include "util/caps.h"

_Static_assert(SS_EV_STACK_MAX == SS_STACK_MAX, "stack max");
_Static_assert(SS_EV_KERNEL == SS_SAMPLE_KERNEL && SS_EV_OFFCPU == SS_SAMPLE_OFFCPU, "flags");
_Static_assert(SS_EV_KSTACK_MAX == SS_KSTACK_MAX, "kernel stack depth");
_Static_assert(SS_EV_WIN_MAX == SS_WIN_MAX && SS_EV_WIN_BYTES == SS_WIN_AREA &&
                   SS_EV_WIN_LEN_MAX == SS_WIN_LEN_MAX && SS_WIN_ABS == 0xff &&
                   SS_WIN_IF_IP == 0x1 && SS_WIN_UNLESS_PREV == 0x2,
               "window plans");

#define LOG_SIZE (256 * 1024)

int ss_capture_libbpf_silent(enum libbpf_print_level l, const char *f, va_list ap)
{
    (void)l, (void)f, (void)ap;
    return 0;
}

/* The ring buffer variant needs the ring buffer map, bpf_task_pt_regs and
 * kernel BTF (tp_btf, CO-RE on pt_regs). Returns why not, or NULL. */
static const char *need_compat(void)
{
    if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) <= 0)
        return "the kernel has no BPF ring buffer (5.8+)";
    if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) <= 0)
        return "the kernel has no bpf_task_pt_regs helper (5.15+)";
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) return "the kernel has no BTF";
    return NULL;
}

static unsigned pow2_at_least(unsigned v, unsigned min)
{
    unsigned p = min;
    while (p < v && p < (1u << 30))
        p <<= 1;
    return p;
}

/* The verifier's reason in its log: the last non-empty line before the
 * statistics line ("processed N insns (limit ...) ..."), else the last
 * non-empty line. Cuts the log there. */
const char *ss_capture_log_reason(char *log)
{
    char *stats = strstr(log, "\nprocessed ");
    size_t n = stats ? (size_t)(stats - log) : strlen(log);
    if (!stats && !strncmp(log, "processed ", 10)) n = 0;
    while (n && (log[n - 1] == '\n' || log[n - 1] == ' '))
        n--;
    log[n] = 0;
    char *nl = strrchr(log, '\n');
    return nl ? nl + 1 : log;
}

/* A program the kernel refused: the whole log to the caller's hook, the
 * reason (or what to do about it) into err. */
static void rejected(struct ss_capture *c, const char *what, int r, char *log, struct ss_err *err)
{
    char miss[64];

    if (*log && c->o.verifier_log) c->o.verifier_log(c->o.verifier_log_arg, what, log);
    const char *why = *log ? ss_capture_log_reason(log) : "";
    ss_caps_missing(SS_CAPBIT(SS_CAP_BPF) | SS_CAPBIT(SS_CAP_PERFMON), miss, sizeof(miss));
    if ((r == -EPERM || r == -EACCES) && miss[0])
        ss_err_set(err, r,
                   "load BPF program %s: %s: missing %s (needs CAP_BPF, CAP_PERFMON and "
                   "CAP_SYS_PTRACE, or root)",
                   what, strerror(-r), miss);
    else if (r == -EPERM && !*why)
        ss_err_set(err, r,
                   "load BPF program %s: %s (kernels before 5.11 charge BPF maps to "
                   "RLIMIT_MEMLOCK: raise it, ulimit -l, or add CAP_SYS_RESOURCE)",
                   what, strerror(-r));
    else
        ss_err_set(err, r, "load BPF program %s: %s%s%s", what, strerror(-r), *why ? ": " : "",
                   why);
}

static int load_ringbuf(struct ss_capture *c, char *log, struct ss_err *err)
{
    LIBBPF_OPTS(bpf_object_open_opts, oo, .kernel_log_buf = log, .kernel_log_size = LOG_SIZE);
    int r;

    c->skel = snapshot_bpf__open_opts(&oo);
    if (!c->skel) {
        r = -errno;
        ss_err_set(err, r, "open BPF object snapshot: %s", strerror(-r));
        return r;
    }
    c->skel->rodata->stack_size = c->stack_size;
    c->skel->rodata->self_tgid = getpid();
    c->skel->rodata->system_wide = c->o.system_wide;
    c->skel->rodata->windows = !c->o.no_windows;
    c->skel->rodata->kernel_stack = c->o.kernel;
    c->skel->rodata->offcpu_min_ns = (__u64)c->o.off_cpu_min_us * 1000;
    bpf_program__set_autoload(c->skel->progs.snapshot, !c->o.kernel);
    bpf_program__set_autoload(c->skel->progs.snapshot_k, c->o.kernel);
    bpf_program__set_autoload(c->skel->progs.offcpu_switch, c->o.off_cpu);
    bpf_program__set_autoload(c->skel->progs.offcpu_exit, c->o.off_cpu);
    /* a power of two, and room for one record at least */
    unsigned ring = pow2_at_least(c->o.ringbuf_bytes,
                                  pow2_at_least(8 + sizeof(struct ss_event) + c->stack_size +
                                                    SS_EV_WIN_BYTES + SS_EV_KSTACK_BYTES + 8,
                                                4096));
    bpf_map__set_max_entries(c->skel->maps.events, ring);
    c->skel->rodata->wake_bytes = ring / 4;
    bpf_program__set_autoload(c->skel->progs.follow_fork, c->o.follow_children);
    ss_capture_pev_autoload(c);
    r = snapshot_bpf__load(c->skel);
    if (r) {
        rejected(c, "snapshot", r, log, err);
        snapshot_bpf__destroy(c->skel);
        c->skel = NULL;
        return r;
    }
    c->prog = c->o.kernel ? c->skel->progs.snapshot_k : c->skel->progs.snapshot;
    c->follow_prog = c->skel->progs.follow_fork;
    c->pids_fd = bpf_map__fd(c->skel->maps.pids);
    c->plans_fd = bpf_map__fd(c->skel->maps.plans);
    c->counters_fd = bpf_map__fd(c->skel->maps.counters);
    c->events_fd = bpf_map__fd(c->skel->maps.events);
    return 0;
}

static int load_compat(struct ss_capture *c, char *log, struct ss_err *err)
{
    LIBBPF_OPTS(bpf_object_open_opts, oo, .kernel_log_buf = log, .kernel_log_size = LOG_SIZE);
    int r;

    if (c->stack_size > SS_EV_COMPAT_STACK_MAX)
        c->stack_size = SS_EV_COMPAT_STACK_MAX; /* perf records are < 64 KiB */
    c->cskel = snapshot_compat_bpf__open_opts(&oo);
    if (!c->cskel) {
        r = -errno;
        ss_err_set(err, r, "open BPF object snapshot_compat: %s", strerror(-r));
        return r;
    }
    r = libbpf_num_possible_cpus();
    if (r < 0) {
        ss_err_set(err, r, "number of possible CPUs: %s", strerror(-r));
        return r;
    }
    bpf_map__set_max_entries(c->cskel->maps.scratch, r);
    bpf_program__set_autoload(c->cskel->progs.follow_newtask, c->o.follow_children);
    bpf_program__set_autoload(c->cskel->progs.snapshot_compat, !c->o.kernel);
    bpf_program__set_autoload(c->cskel->progs.snapshot_compat_k, c->o.kernel);
    ss_capture_pev_autoload(c);
    r = snapshot_compat_bpf__load(c->cskel);
    if (r) {
        rejected(c, "snapshot_compat", r, log, err);
        return r;
    }
    c->prog = c->o.kernel ? c->cskel->progs.snapshot_compat_k : c->cskel->progs.snapshot_compat;
    c->follow_prog = c->cskel->progs.follow_newtask;
    c->pids_fd = bpf_map__fd(c->cskel->maps.pids);
    c->plans_fd = bpf_map__fd(c->cskel->maps.plans);
    c->counters_fd = bpf_map__fd(c->cskel->maps.counters);
    c->events_fd = bpf_map__fd(c->cskel->maps.events);
    struct ss_config cfg = {.stack_size = c->stack_size,
                            .self_tgid = getpid(),
                            .all = c->o.system_wide,
                            .windows = !c->o.no_windows};
    __u32 zero = 0;
    r = bpf_map_update_elem(bpf_map__fd(c->cskel->maps.settings), &zero, &cfg, BPF_ANY);
    if (r) ss_err_set(err, r, "BPF map settings of snapshot_compat: %s", strerror(-r));
    return r;
}

/* The ring buffer program unless compat is forced or the kernel lacks what
 * it needs; when the kernel rejects it anyway, the compat one. c->why says
 * why compat is in use when it was not asked for. */
static int load(struct ss_capture *c, char *log, struct ss_err *err)
{
    const char *lack = c->o.compat ? NULL : need_compat();
    int r;

    if (c->o.off_cpu && (c->o.compat || lack)) {
        ss_err_set(err, -EOPNOTSUPP, "--off-cpu needs the ring buffer program, not compat (%s)",
                   lack ? lack : "--compat");
        return -EOPNOTSUPP;
    }
    c->compat = c->o.compat || lack;
    if (lack) snprintf(c->why, sizeof(c->why), "%s", lack);
    if (!c->compat) {
        r = load_ringbuf(c, log, err);
        if (!r) return 0;
        if (c->o.off_cpu) { /* compat has no off-CPU programs: no fallback */
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            snprintf(err->msg, sizeof(err->msg), "--off-cpu: %.480s", why);
            return r;
        }
        snprintf(c->why, sizeof(c->why), "the ring buffer program was rejected (%.400s)", err->msg);
        *err = (struct ss_err){0};
        c->compat = true;
        memset(log, 0, LOG_SIZE);
    }
    r = load_compat(c, log, err);
    if (r && c->why[0]) { /* both failed: say both */
        char first[sizeof(err->msg)];
        snprintf(first, sizeof(first), "%s", err->msg);
        snprintf(err->msg, sizeof(err->msg), "%.250s; %.250s", first, c->why);
    }
    return r;
}

int ss_capture_open(struct ss_capture **out, const struct ss_capture_opts *o, struct ss_err *err)
{
    struct ss_capture *c = calloc(1, sizeof(*c));
    char *log = calloc(1, LOG_SIZE);
    libbpf_print_fn_t old;
    int r;

    *out = NULL;
    if (!c || !log) {
        free(c), free(log);
        ss_err_set(err, -ENOMEM, "capture: out of memory");
        return -ENOMEM;
    }
    c->o = *o;
    c->stats_fd = -1;
    if (!c->o.freq_hz) c->o.freq_hz = 99;
    if (!c->o.off_cpu_min_us) c->o.off_cpu_min_us = 100;
    if (!c->o.ringbuf_bytes) c->o.ringbuf_bytes = 8u << 20;
    c->stack_size = c->o.stack_size ? c->o.stack_size : SS_STACK_DEFAULT;
    if (c->stack_size > SS_STACK_MAX) {
        ss_err_set(err, -EINVAL, "stack size %u: above the maximum %u", c->stack_size,
                   SS_STACK_MAX);
        r = -EINVAL;
        goto fail;
    }
    old = libbpf_set_print(ss_capture_libbpf_silent);
    r = load(c, log, err);
    if (r && c->o.proc_event) { /* the samples matter more than the markers */
        snprintf(c->pev_why, sizeof(c->pev_why), "%s", err->msg);
        *err = (struct ss_err){0};
        snapshot_compat_bpf__destroy(c->cskel);
        c->cskel = NULL;
        c->o.proc_event = NULL;
        c->why[0] = 0;
        memset(log, 0, LOG_SIZE);
        r = load(c, log, err);
        if (r) c->pev_why[0] = 0;
    }
    libbpf_set_print(old);
    if (r) goto fail;
    if (c->o.bpf_stats) {
        c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
        if (c->stats_fd < 0) {
            r = c->stats_fd;
            ss_err_set(err, r, "enable BPF run-time stats: %s", strerror(-r));
            goto fail;
        }
    }
    if (c->o.follow_children && (r = ss_capture_follow_attach(c, err))) goto fail;
    if ((r = ss_capture_pev_attach(c, err))) goto fail;
    if (c->o.map_event && (r = ss_capture_sb_open(c, err))) goto fail;
    if ((r = ss_capture_buffer_open(c, err))) goto fail;
    free(log);
    *out = c;
    return 0;
fail:
    free(log);
    ss_capture_close(c);
    return r;
}

int ss_capture_add_pid(struct ss_capture *c, pid_t pid, struct ss_err *err)
{
    __u32 key = pid;
    __u8 one = 1;

    int r = bpf_map_update_elem(c->pids_fd, &key, &one, BPF_ANY);

    if (r < 0) {
        ss_err_set(err, r, "select pid %d: %s", (int)pid, strerror(-r));
        return r;
    }
    return 0;
}

int ss_capture_remove_pid(struct ss_capture *c, pid_t pid)
{
    __u32 key = pid;
    bpf_map_delete_elem(c->plans_fd, &key);
    return bpf_map_delete_elem(c->pids_fd, &key);
}

int ss_capture_set_plan(struct ss_capture *c, pid_t pid, const struct ss_win_plan *p,
                        struct ss_err *err)
{
    struct ss_plan v;
    __u32 key = pid;
    int r;

    if (c->o.no_windows) return 0;
    if (!p || !p->n) {
        r = bpf_map_delete_elem(c->plans_fd, &key);
        return r == -ENOENT ? 0 : r;
    }
    memset(&v, 0, sizeof(v));
    if (p->n > SS_WIN_MAX) goto bad;
    v.nwin = p->n;
    for (unsigned i = 0; i < p->n; i++) {
        const struct ss_win_spec *w = &p->w[i];
        struct ss_win *o = &v.win[i];
        int reg = w->reg == SS_WIN_ABS ? (int)SS_WIN_ABS : ss_capture_pt_reg(w->reg);
        if (reg < 0 || SS_PT_NO_ANCHOR(reg) || w->nload > 2 || !w->len || w->len > SS_WIN_LEN_MAX ||
            w->dst > SS_WIN_AREA - SS_WIN_LEN_MAX ||
            (w->flags & ~(SS_WIN_IF_IP | SS_WIN_UNLESS_PREV)))
            goto bad;
        o->reg = (__u8)reg;
        o->nload = w->nload;
        o->flags = w->flags;
        o->len = w->len;
        o->dst = w->dst;
        o->addr = reg == SS_WIN_ABS ? w->addr : 0; /* the BPF side adds it to a register */
        memcpy(o->off, w->off, sizeof(o->off));
        memcpy(o->mask, w->mask, sizeof(o->mask));
        ss_capture_win_ip(o, w);
    }
    r = bpf_map_update_elem(c->plans_fd, &key, &v, BPF_ANY);
    if (r == 0) c->plans_set++;
    if (r < 0) ss_err_set(err, r, "window plan of pid %d: %s", (int)pid, strerror(-r));
    return r;
bad:
    ss_err_set(err, -EINVAL, "window plan of pid %d: window out of bounds", (int)pid);
    return -EINVAL;
}

int ss_capture_pids(struct ss_capture *c, pid_t *out, size_t max)
{
    __u32 key, next;
    size_t n = 0;
    int r = bpf_map_get_next_key(c->pids_fd, NULL, &next);

    while (!r) {
        if (n < max) out[n] = (pid_t)next;
        n++;
        key = next;
        r = bpf_map_get_next_key(c->pids_fd, &key, &next);
    }
    return r == -ENOENT ? (int)n : r;
}

void ss_capture_stats(struct ss_capture *c, struct ss_capture_stats *st)
{
    int ncpu = libbpf_num_possible_cpus();
    struct ss_counters *v;
    __u32 zero = 0;

    memset(st, 0, sizeof(*st));
    st->dropped = c->lost;
    st->win_failed = c->win_failed;
    st->copy_holes = c->copy_holes;
    st->markers = c->markers;
    st->exec_stacks = c->exec_stacks;
    st->map_events = c->map_events;
    st->map_lost = c->map_lost;
    if (ncpu <= 0 || !(v = calloc(ncpu, sizeof(*v)))) return;
    if (bpf_map_lookup_elem(c->counters_fd, &zero, v) == 0) {
        uint64_t bpf_dropped = 0;
        for (int i = 0; i < ncpu; i++) {
            st->seen += v[i].emitted + v[i].dropped + v[i].skipped;
            st->emitted += v[i].emitted;
            bpf_dropped += v[i].dropped;
            st->copy_failed += v[i].copy_failed;
            st->copy_partial += v[i].copy_partial;
            st->skipped += v[i].skipped;
            st->off_blocks += v[i].off_blocks;
            st->off_short += v[i].off_short;
            st->off_unmatched += v[i].off_unmatched;
        }
        /* A record the perf buffer lost also failed bpf_perf_event_output:
         * both sides saw the same drops, report the larger count. */
        if (bpf_dropped > st->dropped) st->dropped = bpf_dropped;
    }
    free(v);
}

bool ss_capture_is_compat(const struct ss_capture *c)
{
    return c->compat;
}

const char *ss_capture_fallback_reason(const struct ss_capture *c)
{
    return c->why;
}

const char *ss_capture_markers_reason(const struct ss_capture *c)
{
    return c->pev_why;
}

unsigned ss_capture_stack_size(const struct ss_capture *c)
{
    return c->stack_size;
}

int ss_capture_prog_info(struct ss_capture *c, struct ss_bpf_prog_info *info, struct ss_err *err)
{
    struct bpf_prog_info pi;
    __u32 len = sizeof(pi);
    int r;

    memset(&pi, 0, sizeof(pi));
    memset(info, 0, sizeof(*info));
    r = bpf_obj_get_info_by_fd(bpf_program__fd(c->prog), &pi, &len);
    if (r < 0) {
        ss_err_set(err, r, "BPF program info of %s: %s", bpf_program__name(c->prog), strerror(-r));
        return r;
    }
    snprintf(info->name, sizeof(info->name), "%s", pi.name);
    info->xlated_insns = pi.xlated_prog_len / 8;
    info->jited_bytes = pi.jited_prog_len;
    info->verified_insns = pi.verified_insns;
    info->run_time_ns = pi.run_time_ns;
    info->run_cnt = pi.run_cnt;
    return 0;
}

void ss_capture_close(struct ss_capture *c)
{
    if (!c) return;
    ss_capture_stop(c);
    ss_capture_buffer_close(c);
    bpf_link__destroy(c->follow_link);
    ss_capture_pev_close(c);
    ss_capture_sb_close(c);
    snapshot_bpf__destroy(c->skel);
    snapshot_compat_bpf__destroy(c->cskel);
    if (c->stats_fd >= 0) close(c->stats_fd);
    free(c);
}
