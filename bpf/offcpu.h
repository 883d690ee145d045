/* bpf/offcpu.h: BPF side only: the off-CPU programs of the ring buffer
 * variant (--off-cpu), included by snapshot.bpf.c after its maps.
 *
 * A selected thread that leaves the CPU to block (sched_switch, its state
 * not TASK_RUNNING) gets its block time and its user ip and sp noted in task
 * storage, with --kernel also the kernel stack of the blocking point. When
 * it is switched in again, the time off the CPU is added up. Its snapshot
 * is taken when the system call it blocked in returns (sys_exit, in the
 * thread's own context, user memory readable): while a thread is off the
 * CPU its user registers and user memory do not change, so what is copied
 * then is what it blocked with, and only waits of at least offcpu_min_ns
 * cost a copy. A wait outside a system call (a page fault) is dropped at
 * the next system call: its user ip or sp is not the noted one. The record
 * is a CPU sample's (snapshot.h), flags SS_EV_OFFCPU, time_ns the block
 * time, then the __u64 weight (ns off the CPU) as its last 8 bytes.
 * For every other thread the cost is a task storage lookup at each switch
 * (two when it is preempted) and each system call exit, and the state test
 * of the thread that leaves. */
#ifndef STACKSNAP_BPF_OFFCPU_H
#define STACKSNAP_BPF_OFFCPU_H

const volatile __u64 offcpu_min_ns = 100000; /* --off-cpu-min-us */

struct offcpu_state {
    __u64 start;           /* switched out at (0: on the CPU) */
    __u64 first;           /* the first block of this wait */
    __u64 acc;             /* ns off the CPU so far in this wait */
    __u64 ip, sp;          /* user registers when it blocked */
    struct ss_ev_kstack k; /* --kernel: where it blocked */
};
struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct offcpu_state);
} offcpu SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    struct offcpu_state *st = bpf_task_storage_get(&offcpu, next, 0, 0);
    __u32 tgid = prev->tgid, zero = 0;
    struct ss_counters *c;
    ss_kregs_t *r;
    __u64 now;

    if (st && st->start) { /* a selected thread runs again */
        now = bpf_ktime_get_ns();
        st->acc += now - st->start;
        st->start = 0;
    }
    if (preempt || prev->__state == 0) { /* TASK_RUNNING: still runnable */
        /* preempted on its way back from a wait: that counts too */
        st = bpf_task_storage_get(&offcpu, prev, 0, 0);
        if (st && st->acc) st->start = bpf_ktime_get_ns();
        return 0;
    }
    if (system_wide) {
        if (tgid == self_tgid || !prev->mm) return 0;
    } else if (!bpf_map_lookup_elem(&pids, &tgid)) {
        return 0;
    }
    c = bpf_map_lookup_elem(&counters, &zero);
    st = bpf_task_storage_get(&offcpu, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!c || !st) return 0;
    COUNT(c->off_blocks);
    r = SS_TASK_REGS(prev);
    if (!SS_KR_USER(r)) return 0; /* a kernel thread */
    now = bpf_ktime_get_ns();
    if (st->acc && (st->ip != SS_KR_IP(r) || st->sp != r->sp)) { /* the last wait never returned */
        COUNT(c->off_unmatched);
        st->acc = 0;
    }
    if (!st->acc) {
        st->first = now;
        st->ip = SS_KR_IP(r);
        st->sp = r->sp;
        if (kernel_stack) copy_kstack_traced(ctx, &st->k);
    }
    st->start = now;
    return 0;
}

/* The record of a wait that ended: a CPU sample's copy, in this thread. */
static __noinline void offcpu_emit(struct offcpu_state *st, struct ss_counters *c, ss_kregs_t *r,
                                   __u64 w)
{
    __u64 id = bpf_get_current_pid_tgid(), size = stack_size, len = size, wb = 0, kb = 0;
    __u32 tgid = id >> 32;
    struct ss_plan *plan = NULL;
    struct ss_event *e;
    __u8 *tail;

    if (windows) plan = bpf_map_lookup_elem(&plans, &tgid);
    if (plan) wb = SS_EV_WIN_BYTES;
    if (kernel_stack) kb = SS_EV_KSTACK_BYTES;
    e = bpf_ringbuf_reserve(&events, sizeof(*e) + size + wb + kb + 8, 0);
    if (!e) {
        COUNT(c->dropped);
        return;
    }
    *(__u64 *)e = id;
    e->cpu = bpf_get_smp_processor_id();
    e->flags = SS_EV_OFFCPU;
    e->time_ns = st->first;
    bpf_probe_read_kernel(e->regs, sizeof(e->regs), r);
    e->stack_room = size;
    e->nwin = 0;
    e->holes = 0;
    if (bpf_probe_read_user(e->stack, size, (void *)r->sp)) {
        e->stack_len = 0;
        copy_pages(e, size);
        len = e->stack_len;
        if (len)
            COUNT(c->copy_partial);
        else
            COUNT(c->copy_failed);
    }
    e->stack_len = len;
    if (plan) apply_plan(plan, e, e->stack + size);
    tail = e->stack + size + wb;
    if (kb) {
        bpf_probe_read_kernel(tail, SS_EV_KSTACK_BYTES, &st->k);
        tail += SS_EV_KSTACK_BYTES;
    }
    *(__u64 *)tail = w;
    bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
                              ? BPF_RB_FORCE_WAKEUP
                              : BPF_RB_NO_WAKEUP);
    COUNT(c->emitted);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(offcpu_exit, struct pt_regs *regs, long ret)
{
    struct task_struct *t = bpf_get_current_task_btf();
    struct offcpu_state *st = bpf_task_storage_get(&offcpu, t, 0, 0);
    struct ss_counters *c;
    ss_kregs_t *r;
    __u32 zero = 0;
    __u64 w;

    if (!st || !st->acc) return 0;
    w = st->acc;
    st->acc = 0;
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    r = SS_TASK_REGS(t);
    if (st->ip != SS_KR_IP(r) || st->sp != r->sp) {
        COUNT(c->off_unmatched);
        return 0;
    }
    if (w < offcpu_min_ns) {
        COUNT(c->off_short);
        return 0;
    }
    offcpu_emit(st, c, r, w);
    return 0;
}

#endif
