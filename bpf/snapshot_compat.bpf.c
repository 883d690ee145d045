// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bpf/snapshot_compat.bpf.c: the perf_event program for old kernels.
 *
 * Same records and counters as snapshot.bpf.c, built from 4.x-era pieces
 * only: bpf_probe_read, bpf_perf_event_output into a PERF_EVENT_ARRAY, an
 * ARRAY map indexed by CPU as scratch space (a per-CPU array value cannot
 * hold 64 KiB), settings in an ARRAY map instead of global data, and no
 * CO-RE: every struct read here is declared in snapshot.h (vmlinux.h only
 * provides types and enum values). User registers come from the sample's
 * own regs, so a sample that interrupted kernel mode is counted as skipped.
 * Window plans as in the main variant, the windows right after the copied
 * stack. With --kernel (the snapshot_compat_k entry point, loaded instead
 * of snapshot_compat: 4.x kernels have no global data to gate it) the
 * kernel stack follows the
 * windows (kstack.h), and a sample that interrupted kernel mode is kept with
 * its kernel stack alone (SS_EV_KERNEL and no stack bytes: user space
 * drops its registers, the kernel's).
 * Children are followed through the task/task_newtask tracepoint;
 * procevents.h adds the fork/exec/exit markers. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "snapshot.h"
#define SS_PROBE_READ bpf_probe_read
#define SS_COPY_MAX SS_EV_COMPAT_STACK_MAX
#include "pages.h"
#include "windows.h"
#include "kstack.h"

struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, __u32);
    __type(value, __u8);
} pids SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct ss_counters);
} counters SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct ss_config);
} settings SEC(".maps");

struct scratch {
    __u8 buf[sizeof(struct ss_event) + SS_EV_COMPAT_STACK_MAX];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1); /* the loader sets: number of possible CPUs */
    __type(key, __u32);
    __type(value, struct scratch);
} scratch SEC(".maps");

/* One sample; kernel: --kernel (a constant: each entry point below gets
 * its own copy, so the default program carries none of it). */
static __always_inline int sample(struct bpf_perf_event_data *pctx, const bool kernel)
{
    struct ss_perf_ctx *ctx = (void *)pctx;
    __u64 id = bpf_get_current_pid_tgid(), size, len, wb = 0, kb = 0, off, kregs;
    __u32 tgid = id >> 32, zero = 0, cpu, kmode = 0;
    struct ss_counters *c;
    struct ss_config *cfg;
    struct ss_plan *plan = NULL;
    struct ss_event *e;

    cfg = bpf_map_lookup_elem(&settings, &zero);
    if (!cfg) return 0;
    if (cfg->all) {
        if (tgid == 0 || tgid == cfg->self_tgid) return 0;
    } else if (!bpf_map_lookup_elem(&pids, &tgid)) {
        return 0;
    }
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    if (!SS_EV_USER_MODE(SS_UAPI_MODE(ctx->regs))) { /* kernel mode: no user regs here */
        if (!kernel) {
            COUNT(c->skipped);
            return 0;
        }
        kmode = 1;
    }
    cpu = bpf_get_smp_processor_id();
    e = bpf_map_lookup_elem(&scratch, &cpu);
    if (!e) return 0;
    size = cfg->stack_size;
    if (size > SS_EV_COMPAT_STACK_MAX) size = SS_EV_COMPAT_STACK_MAX;
    if (kernel && size > SS_EV_COMPAT_STACK_MAX - SS_EV_KSTACK_BYTES)
        size = SS_EV_COMPAT_STACK_MAX - SS_EV_KSTACK_BYTES;
    /* the windows follow the copied stack in a record below 64 KiB */
    if (cfg->windows) plan = bpf_map_lookup_elem(&plans, &tgid);
    if (plan && size > SS_EV_COMPAT_STACK_MAX - SS_EV_WIN_BYTES - SS_EV_KSTACK_BYTES)
        size = SS_EV_COMPAT_STACK_MAX - SS_EV_WIN_BYTES - SS_EV_KSTACK_BYTES;
    *(__u64 *)e = id; /* tid, tgid */
    e->cpu = cpu;
    e->flags = kmode ? SS_EV_KERNEL : 0;
    e->time_ns = bpf_ktime_get_ns();
    /* The registers in one read, as the main variant does, not 21 context
     * loads: the context is a struct bpf_perf_event_data_kern, whose first
     * member (since 4.10) points to the sampled struct pt_regs. */
    if (bpf_probe_read(&kregs, sizeof(kregs), pctx) ||
        bpf_probe_read(e->regs, sizeof(e->regs), (void *)kregs)) {
        COUNT(c->skipped);
        return 0;
    }

    e->nwin = 0;
    e->holes = 0;
    if (kmode) { /* the kernel's registers, not the user's: user space drops them */
        len = 0;
        goto kstack;
    }
    len = size;
    if (bpf_probe_read(e->stack, size, (void *)e->regs[SS_PT_SP])) {
        e->stack_len = 0;
        copy_pages(e, size);
        len = e->stack_len;
        barrier_var(len); /* a bound for the verifier, not folded into the tests below */
        if (len > SS_EV_COMPAT_STACK_MAX) len = 0;
        barrier_var(len);
        if (len)
            COUNT(c->copy_partial);
        else
            COUNT(c->copy_failed);
    }
    barrier_var(len);
    if (plan && len <= SS_EV_COMPAT_STACK_MAX - SS_EV_WIN_BYTES) {
        wb = SS_EV_WIN_BYTES;
        apply_plan(plan, e, e->stack + len);
    }
kstack:
    e->stack_len = len;
    e->stack_room = len;
    if (kernel) {
        off = len + wb;
        barrier_var(off);
        if (off <= SS_EV_COMPAT_STACK_MAX - SS_EV_KSTACK_BYTES) {
            kb = SS_EV_KSTACK_BYTES;
            copy_kstack(pctx, (void *)(e->stack + off));
        }
    }
    if (bpf_perf_event_output(pctx, &events, BPF_F_CURRENT_CPU, e, sizeof(*e) + len + wb + kb))
        COUNT(c->dropped);
    else
        COUNT(c->emitted);
    return 0;
}

SEC("perf_event")
int snapshot_compat(struct bpf_perf_event_data *pctx) /* see snapshot.bpf.c */
{
    return sample(pctx, false);
}

SEC("perf_event")
int snapshot_compat_k(struct bpf_perf_event_data *pctx) /* --kernel */
{
    return sample(pctx, true);
}

/* task/task_newtask as laid out since 3.14 (64-bit). */
struct newtask_ctx {
    __u64 common;
    int pid;
    char comm[16];
    __u64 clone_flags;
};

/* Follow children: a fork (not a new thread) by a selected process selects
 * the child. Runs in the parent. */
SEC("tracepoint/task/task_newtask")
int follow_newtask(struct newtask_ctx *ctx)
{
    __u32 ptgid = bpf_get_current_pid_tgid() >> 32, child = ctx->pid;
    __u8 one = 1;

    if (!(ctx->clone_flags & 0x00010000 /* CLONE_THREAD */) && bpf_map_lookup_elem(&pids, &ptgid))
        bpf_map_update_elem(&pids, &child, &one, BPF_ANY);
    return 0;
}

/* Fork, exec and exit markers (loaded only when asked for). */
#define SS_PEV_PROGRAMS
#include "procevents.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
