// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bpf/snapshot.bpf.c: the perf_event program (ring buffer variant).
 *
 * Per sample of a selected process: tgid, tid, cpu, time, the user registers
 * (struct pt_regs as saved at kernel entry, read in one go) and a copy of the
 * user stack from sp up, straight into the ring buffer record. The registers
 * come from the task's user pt_regs, so a sample that interrupted kernel mode
 * still gets them. When the full copy fails, the largest readable prefix is
 * copied instead (prefix.h). No unwinding, no loops, no tail calls.
 * A tp_btf program on sched_process_fork follows children (loaded only when
 * asked for). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "snapshot.h"
#define SS_PROBE_READ bpf_probe_read_user
#include "prefix.h"

_Static_assert(sizeof(struct pt_regs) == SS_PT_NREGS * 8, "x86-64 pt_regs layout");

const volatile __u32 stack_size = 16384; /* 1..SS_EV_STACK_MAX, set by the loader */
const volatile __u32 self_tgid = 0;
const volatile bool system_wide = false;
const volatile __u32 wake_bytes = 1 << 20; /* wake the reader at this much data */

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 8 << 20); /* resized by the loader */
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

SEC("perf_event")
int snapshot(struct ss_perf_ctx *ctx)
{
    __u64 id = bpf_get_current_pid_tgid(), size = stack_size, len, sp;
    __u32 tgid = id >> 32, zero = 0;
    struct ss_counters *c;
    struct ss_event *e;
    struct pt_regs *r;

    if (system_wide) { /* every process but ours; kernel threads have no mm */
        if (tgid == self_tgid || !bpf_get_current_task_btf()->mm) return 0;
    } else if (!bpf_map_lookup_elem(&pids, &tgid)) {
        return 0;
    }
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    c->seen++;
    /* The user registers, saved at kernel entry even when the sample
     * interrupted kernel mode. Kernel threads have none. */
    r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    if ((r->cs & 3) != 3) {
        c->skipped++;
        return 0;
    }
    e = bpf_ringbuf_reserve(&events, sizeof(*e) + size, 0);
    if (!e) {
        c->dropped++;
        return 0;
    }
    *(__u64 *)e = id; /* tid, tgid */
    e->cpu = bpf_get_smp_processor_id();
    e->flags = ~ctx->regs.cs & SS_EV_KERNEL; /* cs RPL 0: interrupted the kernel */
    e->time_ns = bpf_ktime_get_ns();
    bpf_probe_read_kernel(e->regs, sizeof(e->regs), r);

    sp = r->sp;
    len = size;
    if (bpf_probe_read_user(e->stack, size, (void *)sp)) {
        len = copy_prefix(e->stack, sp, size);
        if (len)
            c->copy_partial++;
        else
            c->copy_failed++;
    }
    e->stack_len = len;
    /* Wake the reader only once enough has piled up: a wakeup per record
     * (an irq_work) would cost more than the whole copy. */
    bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
                              ? BPF_RB_FORCE_WAKEUP
                              : BPF_RB_NO_WAKEUP);
    c->emitted++;
    return 0;
}

/* Follow children: a fork by a selected process selects the child. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent, struct task_struct *child)
{
    __u32 ptgid = parent->tgid, ctgid = child->tgid;
    __u8 one = 1;

    if (ptgid != ctgid && bpf_map_lookup_elem(&pids, &ptgid))
        bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
    return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
