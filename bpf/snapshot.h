/* bpf/snapshot.h: what the snapshot BPF programs and the loader (src/capture/)
 * share: the event record, the per-CPU counters and the compat config.
 *
 * Include after the __u32/__u64 types are defined (vmlinux.h on the BPF side,
 * <linux/types.h> in user space). */
#ifndef STACKSNAP_BPF_SNAPSHOT_H
#define STACKSNAP_BPF_SNAPSHOT_H

/* The user registers as the kernel saves them (x86-64 struct pt_regs); the
 * loader reorders them into perf's order (enum ss_reg). */
enum ss_ev_reg {
    SS_PT_R15,
    SS_PT_R14,
    SS_PT_R13,
    SS_PT_R12,
    SS_PT_BP,
    SS_PT_BX,
    SS_PT_R11,
    SS_PT_R10,
    SS_PT_R9,
    SS_PT_R8,
    SS_PT_AX,
    SS_PT_CX,
    SS_PT_DX,
    SS_PT_SI,
    SS_PT_DI,
    SS_PT_ORIG_AX,
    SS_PT_IP,
    SS_PT_CS,
    SS_PT_FLAGS,
    SS_PT_SP,
    SS_PT_SS,
    SS_PT_NREGS
};
#define SS_EV_STACK_MAX 65528u /* == SS_STACK_MAX */
#define SS_EV_KERNEL 0x2u      /* == SS_SAMPLE_KERNEL */

/* perf raw records carry a u16 size: 8 (header) + 4 (raw size) + event must
 * stay <= 65535 after 8-byte padding, so the compat variant copies less. */
#define SS_EV_COMPAT_STACK_MAX 65312u

/* One sample: this header, then stack_len bytes starting at regs[SS_PT_SP].
 * tid and tgid are in bpf_get_current_pid_tgid()'s order (one store). The
 * snapshot size asked for is the loader's setting, so a record is partial
 * when stack_len is below it. */
struct ss_event {
    __u32 tid, tgid;
    __u32 cpu, flags;        /* flags: SS_EV_KERNEL */
    __u64 time_ns;           /* bpf_ktime_get_ns() */
    __u64 stack_len;         /* bytes copied (a readable prefix) */
    __u64 regs[SS_PT_NREGS]; /* enum ss_ev_reg; cs, ss: low 16 bits */
    __u8 stack[];
};

/* Per-CPU counters (one PERCPU_ARRAY entry); user space sums them. */
struct ss_counters {
    __u64 seen;         /* runs for a selected process */
    __u64 emitted;      /* records written to the buffer */
    __u64 dropped;      /* buffer full */
    __u64 copy_failed;  /* not even one byte of stack */
    __u64 copy_partial; /* only a prefix was readable */
    __u64 skipped;      /* no user registers (kernel thread; kernel mode in compat) */
};

/* Compat variant's settings (ARRAY map, one entry): 4.x kernels have no
 * global data, so this replaces the main variant's .rodata. */
struct ss_config {
    __u32 stack_size; /* <= SS_EV_COMPAT_STACK_MAX */
    __u32 self_tgid;  /* never sampled in system-wide mode */
    __u32 all;        /* system-wide */
    __u32 follow;     /* add forked children of selected processes */
};

/* The perf_event program context as the uapi defines it (struct
 * bpf_perf_event_data: struct pt_regs of <asm/ptrace.h>, all longs). The
 * programs take the kernel's type by name and read it through this copy,
 * so ctx loads need no CO-RE and stay 8 bytes wide. */
struct ss_uapi_regs {
    unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
    unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
struct ss_perf_ctx {
    struct ss_uapi_regs regs;
    __u64 sample_period, addr;
};

#endif
