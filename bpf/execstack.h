/* bpf/execstack.h: BPF side only: the user stack at the entry of execve and
 * execveat, for the samples the kernel takes inside them (ring buffer
 * variant, loaded with the process markers; included by snapshot.bpf.c).
 *
 * A sample that interrupts an exec after the kernel switched the memory map
 * still has the old image's user registers (they are restored or replaced
 * only when the system call returns), but its stack is gone: the copy at sp
 * fails in the new map. While a thread is in a system call its registers and
 * stack do not change (execve kills the other threads before it switches the
 * map), so the copy taken here, at the system call's entry, is the stack
 * such a sample would have copied. It goes into the same buffer, in order,
 * as a record in a sample's shape with flags SS_EV_EXECSTACK; user space
 * keeps it for the thread until its exec or exit marker and hands it to the
 * thread's samples whose copy failed at the same ip and sp
 * (src/capture/execstack.c). One copy per exec of a selected process; other
 * system calls do not run this. */
#ifndef STACKSNAP_BPF_EXECSTACK_H
#define STACKSNAP_BPF_EXECSTACK_H

static __always_inline int execstack(void)
{
    struct task_struct *t = bpf_get_current_task_btf();
    __u64 id = bpf_get_current_pid_tgid(), size = stack_size, len = size;
    __u32 zero = 0;
    struct ss_counters *c;
    struct ss_event *e;
    ss_kregs_t *r;

    if (!pev_selected(id >> 32, system_wide, self_tgid)) return 0;
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    r = SS_TASK_REGS(t);
    e = bpf_ringbuf_reserve(&events, sizeof(*e) + size, 0);
    if (!e) {
        COUNT(c->dropped);
        return 0;
    }
    *(__u64 *)e = id;
    e->cpu = bpf_get_smp_processor_id();
    e->flags = SS_EV_EXECSTACK;
    e->time_ns = bpf_ktime_get_ns();
    bpf_probe_read_kernel(e->regs, sizeof(e->regs), r);
    e->stack_room = size;
    e->nwin = 0;
    e->holes = 0;
    e->stack_len = len;
    if (bpf_probe_read_user(e->stack, size, (void *)r->sp)) {
        e->stack_len = 0;
        copy_pages(e, size);
    }
    bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
    return 0;
}

SEC("tracepoint/syscalls/sys_enter_execve")
int execstack_execve(void *ctx)
{
    return execstack();
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int execstack_execveat(void *ctx)
{
    return execstack();
}

#endif
