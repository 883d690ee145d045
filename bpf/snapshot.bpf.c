// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bpf/snapshot.bpf.c: the perf_event program (ring buffer variant).
 *
 * Per sample of a selected process: tgid, tid, cpu, time, the user registers
 * (struct pt_regs as saved at kernel entry, read in one go) and a copy of the
 * user stack from sp up, straight into the ring buffer record. The registers
 * come from the task's user pt_regs, so a sample that interrupted kernel mode
 * still gets them. When the full copy fails, the stack is copied page by
 * page instead, unreadable pages left as marked holes (pages.h), and the end
 * of the last readable page is kept per thread (stack_ends) so the next
 * sample copies just that much at once (page by page again if that fails). No unwinding, no loops,
 * no tail calls. For a process with a window plan (windows.h), the windows are copied right after
 * the copied stack (stack_room = stack_len); with
 * --kernel (entry point snapshot_k), the kernel stack after the stack and
 * window areas (kstack.h).
 * A tp_btf program on sched_process_fork follows children (loaded only when
 * asked for); procevents.h adds the fork/exec/exit markers, execstack.h the
 * stack at each exec's entry. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "snapshot.h"
#define SS_PROBE_READ bpf_probe_read_user
#define SS_COPY_MAX SS_EV_STACK_MAX
#include "pages.h"
#include "windows.h"
#include "kstack.h"

#ifndef SS_EV_ARM64
_Static_assert(sizeof(struct pt_regs) == SS_PT_NREGS * 8, "x86-64 pt_regs layout");
#endif

const volatile __u32 stack_size = 16384; /* 1..SS_EV_STACK_MAX, set by the loader */
const volatile __u32 self_tgid = 0;
const volatile bool system_wide = false;
const volatile __u32 wake_bytes = 1 << 20; /* wake the reader at this much data */
const volatile bool windows = true;        /* apply the plans map (--no-lua-window: no) */
const volatile bool kernel_stack = false;  /* --kernel: the kernel stack area (kstack.h) */

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

/* Per thread: where its readable stack ended at the last partial copy and
 * the process's memory map version then (mm_lock_seq, bumped by every
 * mmap/munmap/mprotect/brk). While the version is unchanged, the next sample
 * copies exactly up to that end at once: a failed read costs a page fault
 * (~2 us on a VM), the failed full copy and the search took four or more.
 * Kernels without a seqcount mm_lock_seq (before 6.12) check the end with
 * one failed read every time. */
struct stack_end {
    __u64 end; /* 0: not known */
    __u32 seq;
    __u32 pad;
};
struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct stack_end);
} stack_ends SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct ss_counters);
} counters SEC(".maps");

/* The context is declared as the kernel's struct bpf_perf_event_data: the
 * verifiers of 6.1 and 6.12 accept a main program's context argument only
 * under that name ("reg type unsupported for arg#0"; 7.2 takes any). It is
 * read through snapshot.h's uapi copy, with no CO-RE relocation. */
static __always_inline int snapshot_body(struct bpf_perf_event_data *pctx, const bool kstack)
{
    struct ss_perf_ctx *ctx = (void *)pctx;
    __u64 id = bpf_get_current_pid_tgid(), size = stack_size, len, sp;
    __u32 tgid = id >> 32, zero = 0;
    struct ss_counters *c;
    struct ss_event *e;
    struct ss_plan *plan = NULL;
    struct stack_end *end;
    struct task_struct *t;
    ss_kregs_t *r;
    __u32 seq = 1; /* odd: no version, the cache is not used */

    t = bpf_get_current_task_btf();
    /* every process but ours, or the selected ones; kernel threads, and
     * exiting tasks past exit_mm, have no mm (and no user stack) */
    if (!t->mm) return 0;
    if (system_wide) {
        if (tgid == self_tgid) return 0;
    } else if (!bpf_map_lookup_elem(&pids, &tgid)) {
        return 0;
    }
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    /* The user registers, saved at kernel entry even when the sample
     * interrupted kernel mode. Kernel threads have none. */
    r = SS_TASK_REGS(t);
    if (!SS_KR_USER(r)) {
        COUNT(c->skipped);
        return 0;
    }
    /* With the window area for a process with a plan, without it for the
     * others: a constant size on each path (the ring buffer takes no other). */
    if (windows) plan = bpf_map_lookup_elem(&plans, &tgid);
    if (kstack) { /* the kernel stack after the stack and windows */
        e = reserve_kstack(&events, pctx, sizeof(*e) + size + (plan ? SS_EV_WIN_BYTES : 0));
    } else {
        e = bpf_ringbuf_reserve(&events, sizeof(*e) + size + (plan ? SS_EV_WIN_BYTES : 0), 0);
    }
    if (!e) {
        COUNT(c->dropped);
        return 0;
    }
    *(__u64 *)e = id; /* tid, tgid */
    e->cpu = bpf_get_smp_processor_id();
    e->flags = SS_EV_KFLAG(SS_UAPI_MODE(ctx->regs)); /* interrupted the kernel */
    e->time_ns = bpf_ktime_get_ns();
    bpf_probe_read_kernel(e->regs, sizeof(e->regs), r);
    e->stack_room = size;
    e->nwin = 0;

    sp = r->sp;
    /* The known end of this thread's readable stack is within reach: copy
     * up to it in one go. It still is the end of the readable pages if the
     * memory map has not changed since it was found (an odd version: a
     * change under way), or else if the byte there is unreadable (one
     * failed read, not one per page up to the snapshot size). Otherwise
     * copy as without it; if that copy fails (a hole below the end, or a
     * page paged out), page by page. */
    if (bpf_core_field_exists(t->mm->mm_lock_seq.sequence)) seq = t->mm->mm_lock_seq.sequence;
    end = bpf_task_storage_get(&stack_ends, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    len = end ? end->end - sp : 0;
    /* 0 < len < size, tested on len itself: folded into "len - 1 < size - 1"
     * the bound is lost on 6.1 ("R2 min value is negative"); barrier_var
     * keeps clang from folding the two tests. */
    if (len < size)
        barrier_var(len);
    else
        len = 0;
    e->holes = 0;
    if (len) {
        if (bpf_probe_read_user(e->stack, len, (void *)sp)) goto pages; /* a hole below it */
        if ((!(seq & 1) && end->seq == seq) ||
            bpf_probe_read_user(&e->stack_len, 1, (void *)end->end)) {
            end->seq = seq;
            COUNT(c->copy_partial);
            goto out;
        }
    }
    len = size;
    if (bpf_probe_read_user(e->stack, size, (void *)sp)) {
    pages:
        e->stack_len = 0;
        copy_pages(e, size);
        len = e->stack_len;
        if (len)
            COUNT(c->copy_partial);
        else
            COUNT(c->copy_failed);
    }
    if (end) {
        end->end = len && len < size ? sp + len : 0;
        end->seq = seq;
    }
out:
    e->stack_len = len;
    /* The windows right after the copied stack: every page of the buffer a
     * record touches costs more than its bytes (~0.2 us in a VM). The
     * kernel stack stays after the whole area (user space looks there). */
    if (plan) {
        if (len > size) len = size;
        e->stack_room = len;
        apply_plan(plan, e, e->stack + len);
    }
    /* Wake the reader only once enough has piled up: a wakeup per record
     * (an irq_work) would cost more than the whole copy. */
    bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
                              ? BPF_RB_FORCE_WAKEUP
                              : BPF_RB_NO_WAKEUP);
    COUNT(c->emitted);
    return 0;
}

SEC("perf_event")
int snapshot(struct bpf_perf_event_data *pctx)
{
    return snapshot_body(pctx, false);
}

/* --kernel: a second entry point of the same body, loaded instead of
 * snapshot, so that the default program holds no kernel stack code at all
 * (its size budget, test/capture/prog_test.c). */
SEC("perf_event")
int snapshot_k(struct bpf_perf_event_data *pctx)
{
    return snapshot_body(pctx, true);
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

#include "offcpu.h" /* --off-cpu: loaded only when asked for */
/* Fork, exec and exit markers (loaded only when asked for). */
#define SS_PEV_RINGBUF
#define SS_PEV_PROGRAMS
#include "procevents.h"
#include "execstack.h" /* the stack at exec entry, loaded with the markers */

char LICENSE[] SEC("license") = "Dual BSD/GPL";
