/* bpf/procevents.h: process markers (fork, exec, exit) in the sample stream.
 *
 * Included at the end of snapshot.bpf.c (ring buffer, tp_btf programs) and
 * snapshot_compat.bpf.c (perf buffer, classic tracepoints); both define
 * `events`, `pids` and how to emit (SS_PEV_RINGBUF or not). The loader
 * loads these programs only when a consumer asked for markers. A marker is
 * a small fixed record in the same buffer as the samples, so it is ordered
 * with them: a fork marker is written before the child can run, an exec
 * marker after the new image is in place and before it runs, an exit marker
 * after the last thread released the memory map. No loops, no bounds but
 * constants.
 *
 * The user-space side (src/capture/buffer.c) tells a marker from a sample by
 * SS_EV_PROC in the flags word both share. */
#ifndef STACKSNAP_BPF_PROCEVENTS_H
#define STACKSNAP_BPF_PROCEVENTS_H

#define SS_EV_PROC 0x80000000u /* flags: a struct ss_pev, not a struct ss_event */
#define SS_PEV_FORK 1u
#define SS_PEV_EXEC 2u
#define SS_PEV_EXIT 3u

/* Same first 24 bytes as struct ss_event (tid, tgid, cpu, flags, time). */
struct ss_pev {
    __u32 tid, tgid; /* the process the marker is about (fork: the child) */
    __u32 cpu, flags;
    __u64 time_ns;
    __u32 kind; /* SS_PEV_* */
    __u32 ppid; /* fork: the parent's tgid */
};

#ifdef SS_PEV_PROGRAMS

/* Is tgid one we sample? (system-wide: every process but ours) */
static __always_inline bool pev_selected(__u32 tgid, __u32 all, __u32 self)
{
    if (all) return tgid != self;
    return bpf_map_lookup_elem(&pids, &tgid) != NULL;
}

/* A marker the buffer had no room for counts as a dropped record. */
static __always_inline void pev_lost(void)
{
    __u32 zero = 0;
    struct ss_counters *c = bpf_map_lookup_elem(&counters, &zero);
    if (c) c->dropped++;
}

#ifdef SS_PEV_RINGBUF
static __always_inline void pev_emit(void *ctx, struct ss_pev *e)
{
    (void)ctx;
    e->cpu = bpf_get_smp_processor_id();
    e->flags = SS_EV_PROC;
    e->time_ns = bpf_ktime_get_ns();
    if (bpf_ringbuf_output(&events, e, sizeof(*e), BPF_RB_NO_WAKEUP)) pev_lost();
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(pev_fork, struct task_struct *parent, struct task_struct *child)
{
    struct ss_pev e = {.tid = child->pid, .tgid = child->tgid, .kind = SS_PEV_FORK};

    e.ppid = parent->tgid;
    if (e.ppid == e.tgid || !pev_selected(e.ppid, system_wide, self_tgid)) return 0;
    pev_emit(ctx, &e);
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(pev_exec, struct task_struct *p)
{
    struct ss_pev e = {.tid = p->pid, .tgid = p->tgid, .kind = SS_PEV_EXEC};

    if (!pev_selected(e.tgid, system_wide, self_tgid)) return 0;
    pev_emit(ctx, &e);
    return 0;
}

/* Every thread passes here; the process is gone with its last thread
 * (signal->live has dropped to 0 before the tracepoint). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(pev_exit, struct task_struct *p)
{
    struct ss_pev e = {.tid = p->pid, .tgid = p->tgid, .kind = SS_PEV_EXIT};

    if (p->signal->live.counter != 0 || !pev_selected(e.tgid, system_wide, self_tgid)) return 0;
    pev_emit(ctx, &e);
    return 0;
}

#else /* compat: classic tracepoints, formats stable since 3.x, no CO-RE */

static __always_inline void pev_emit(void *ctx, struct ss_pev *e)
{
    e->cpu = bpf_get_smp_processor_id();
    e->flags = SS_EV_PROC;
    e->time_ns = bpf_ktime_get_ns();
    if (bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, e, sizeof(*e))) pev_lost();
}

static __always_inline struct ss_config *pev_cfg(void)
{
    __u32 zero = 0;
    return bpf_map_lookup_elem(&settings, &zero);
}

/* task/task_newtask (struct newtask_ctx above), in the parent: a new task
 * without CLONE_THREAD is a new process whose pid is its tgid. */
SEC("tracepoint/task/task_newtask")
int pev_newtask(struct newtask_ctx *ctx)
{
    struct ss_config *cfg = pev_cfg();
    struct ss_pev e = {.tid = ctx->pid, .tgid = ctx->pid, .kind = SS_PEV_FORK};

    e.ppid = bpf_get_current_pid_tgid() >> 32;
    if (!cfg || (ctx->clone_flags & 0x00010000 /* CLONE_THREAD */) ||
        !pev_selected(e.ppid, cfg->all, cfg->self_tgid))
        return 0;
    pev_emit(ctx, &e);
    return 0;
}

/* sched/sched_process_exec, in the process after the exec succeeded (an
 * exec by another thread made it the group leader: tid == tgid). */
SEC("tracepoint/sched/sched_process_exec")
int pev_exec_tp(void *ctx)
{
    struct ss_config *cfg = pev_cfg();
    __u64 id = bpf_get_current_pid_tgid();
    struct ss_pev e = {.tid = (__u32)id, .tgid = id >> 32, .kind = SS_PEV_EXEC};

    if (!cfg || !pev_selected(e.tgid, cfg->all, cfg->self_tgid)) return 0;
    pev_emit(ctx, &e);
    return 0;
}

/* sched/sched_process_exit, in the exiting thread. Without CO-RE the
 * thread group's live count is out of reach: the group leader's exit
 * stands for the process's (user space keeps a view that is still sampled). */
SEC("tracepoint/sched/sched_process_exit")
int pev_exit_tp(void *ctx)
{
    struct ss_config *cfg = pev_cfg();
    __u64 id = bpf_get_current_pid_tgid();
    struct ss_pev e = {.tid = (__u32)id, .tgid = id >> 32, .kind = SS_PEV_EXIT};

    if (!cfg || e.tid != e.tgid || !pev_selected(e.tgid, cfg->all, cfg->self_tgid)) return 0;
    pev_emit(ctx, &e);
    return 0;
}
#endif

#endif /* SS_PEV_PROGRAMS */
#endif
