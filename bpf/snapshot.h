/* bpf/snapshot.h: what the snapshot BPF programs and the loader (src/capture/)
 * share: the event record, the per-CPU counters and the compat config.
 *
 * Include after the __u32/__u64 types are defined (vmlinux.h on the BPF side,
 * <linux/types.h> in user space). */
#ifndef STACKSNAP_BPF_SNAPSHOT_H
#define STACKSNAP_BPF_SNAPSHOT_H

/* The architecture: the BPF objects are built with clang -target bpf
 * -D__TARGET_ARCH_x86 or -D__TARGET_ARCH_arm64 (bpf_tracing.h's names), the
 * loader for its own architecture. */
#if defined(__bpf__) ? defined(__TARGET_ARCH_arm64) : defined(__aarch64__)
#define SS_EV_ARM64 1
#endif

#ifndef SS_EV_ARM64
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
/* user mode: the RPL of cs is 3 */
#define SS_EV_USER_MODE(cs_or_pstate) (((cs_or_pstate)&3) == 3)
/* SS_EV_KERNEL when cs's RPL is 0 (bit 1 clear): two instructions, no branch
 * (the ring buffer program stays under 400) */
#define SS_EV_KFLAG(cs_or_pstate) (~(cs_or_pstate)&SS_EV_KERNEL)
/* registers no window may be anchored on (not addresses) */
#define SS_PT_NO_ANCHOR(r) ((r) == SS_PT_CS || (r) == SS_PT_SS)
#else
/* arm64: struct user_pt_regs, the first 34 words of the kernel's struct
 * pt_regs (x0-x30, sp, pc, pstate); perf's order too (enum ss_reg). */
enum ss_ev_reg {
    SS_PT_X0,
    SS_PT_X29 = 29,
    SS_PT_X30,
    SS_PT_SP,
    SS_PT_IP, /* pc */
    SS_PT_PSTATE,
    SS_PT_NREGS
};
/* user mode: pstate's M[3:0] is EL0t (0) */
#define SS_EV_USER_MODE(cs_or_pstate) (((cs_or_pstate)&0xf) == 0)
#define SS_EV_KFLAG(cs_or_pstate) (SS_EV_USER_MODE(cs_or_pstate) ? 0 : SS_EV_KERNEL)
#define SS_PT_NO_ANCHOR(r) ((r) == SS_PT_PSTATE)
#endif
#define SS_EV_STACK_MAX 65528u /* == SS_STACK_MAX */
#define SS_EV_KERNEL 0x2u      /* == SS_SAMPLE_KERNEL */
#define SS_EV_OFFCPU 0x4u      /* == SS_SAMPLE_OFFCPU: the record ends in a __u64 weight (ns) */
#define SS_EV_EXECSTACK 0x8u   /* not a sample: the stack at an exec's entry (execstack.h) */

/* Memory windows: per process, user space may describe up to SS_EV_WIN_MAX
 * windows to copy at every sample (struct ss_plan in the plans map). Each
 * starts from an anchor (a user register, or a fixed address), goes through
 * at most two dependent 8-byte loads (offset added before each, mask ANDed
 * after; a zero result skips the window), adds a last offset and copies len
 * bytes there into the record's window area at dst. The programs know
 * nothing of what the windows hold. */
#define SS_EV_WIN_MAX 8
#define SS_EV_WIN_BYTES 16384u  /* window area of a sample with a plan */
#define SS_EV_WIN_LEN_MAX 8192u /* one window */
#define SS_WIN_ABS 0xffu        /* anchor: ss_win.addr, not a register */
#define SS_WIN_IF_IP 0x1u       /* only when ip_lo <= the sample's ip < ip_lo + ip_span */
#define SS_WIN_UNLESS_PREV 0x2u /* only when the window before copied nothing */
struct ss_win {
    __u8 reg;   /* enum ss_ev_reg, or SS_WIN_ABS */
    __u8 nload; /* dependent loads: 0, 1 or 2 */
    __u8 flags; /* SS_WIN_* */
    __u8 pad;
    __u16 len; /* bytes to copy, <= SS_EV_WIN_LEN_MAX */
    __u16 dst; /* offset in the window area, <= SS_EV_WIN_BYTES - SS_EV_WIN_LEN_MAX */
    __u16 pad2[4];
    __u64 addr;    /* the anchor with SS_WIN_ABS */
    __s64 off[3];  /* added before load 1, before load 2, before the copy */
    __u64 mask[2]; /* ANDed with the value of load 1, load 2 */
    /* copied only when ip - ip_lo < ip_span (unsigned): the loader gives
     * windows without SS_WIN_IF_IP 0 and ~0, so the program tests no flag */
    __u64 ip_lo, ip_span;
};
struct ss_plan {
    __u32 nwin, pad;
    struct ss_win win[SS_EV_WIN_MAX];
};
/* Per window of a sample: where its bytes came from; err 0, SS_WERR_SKIP
 * (condition not met, zero pointer, no such window) or SS_WERR_FAULT (a
 * load or the copy failed). */
#define SS_WERR_SKIP (-2)   /* -ENOENT */
#define SS_WERR_FAULT (-14) /* -EFAULT */
struct ss_ev_win {
    __u64 addr;
    __u32 len;
    __u16 dst; /* the plan's: offset in the window area */
    __s16 err;
};

/* Kernel stack (--kernel): an area of SS_EV_KSTACK_BYTES after the stack
 * (and window) area of every record: what bpf_get_stack(ctx, ip, ..., 0)
 * returned (bytes of ip[] filled, or a negative errno), then the return
 * addresses, innermost first (bpf/kstack.h). */
#define SS_EV_KSTACK_MAX 127 /* kernel.perf_event_max_stack's default */
struct ss_ev_kstack {
    __s64 len;
    __u64 ip[SS_EV_KSTACK_MAX];
};
#define SS_EV_KSTACK_BYTES ((__u32)sizeof(struct ss_ev_kstack))

/* perf raw records carry a u16 size: 8 (header) + 4 (raw size) + event must
 * stay <= 65535 after 8-byte padding, so the compat variant copies less
 * (and less again for a process with windows: SS_EV_WIN_BYTES). */
#define SS_EV_COMPAT_STACK_MAX 65176u

/* One sample: this header, then stack_room bytes of which the first
 * stack_len were copied starting at regs[SS_PT_SP] (but for the holes), then, when nwin > 0,
 * the SS_EV_WIN_BYTES window area (win[0..nwin) say what is where). tid and tgid are in
 * bpf_get_current_pid_tgid()'s order (one store). The snapshot size asked
 * for is the loader's setting, so a record is partial when stack_len is
 * below it. */
struct ss_event {
    __u32 tid, tgid;
    __u32 cpu, flags;        /* flags: SS_EV_KERNEL */
    __u64 time_ns;           /* bpf_ktime_get_ns() */
    __u32 stack_len;         /* bytes copied from sp (up to a readable page's end) */
    __u32 holes;             /* pages below stack_len that were unreadable, zero-filled:
                                bit i = the i-th page counted from sp's page (pages.h) */
    __u64 regs[SS_PT_NREGS]; /* enum ss_ev_reg; x86-64 cs, ss: low 16 bits */
    __u32 stack_room;        /* where the window area starts: stack_len with a plan (ring buffer
                                without --kernel, compat), else the snapshot size */
    __u32 nwin;              /* windows of the plan applied; 0: no window area */
    struct ss_ev_win win[SS_EV_WIN_MAX];
    __u8 stack[];
};

/* Per-CPU counters (one PERCPU_ARRAY entry); user space sums them. Each
 * run for a selected process ends in exactly one of emitted, dropped or
 * skipped (their sum is the runs). */
struct ss_counters {
    __u64 emitted;      /* records written to the buffer */
    __u64 dropped;      /* buffer full */
    __u64 copy_failed;  /* not even one byte of stack */
    __u64 copy_partial; /* less than the snapshot size was readable */
    __u64 skipped;      /* no user registers (kernel thread; kernel mode in compat) */
    /* --off-cpu (offcpu.h) */
    __u64 off_blocks;    /* a selected thread blocked */
    __u64 off_short;     /* ran again within --off-cpu-min-us: no sample */
    __u64 off_unmatched; /* blocked outside a system call (page fault, ...) or moved since */
};

#ifdef __bpf__
/* The user registers a task saved at kernel entry (bpf_task_pt_regs):
 * vmlinux.h's struct pt_regs on x86-64 (CO-RE), on arm64 the kernel's
 * struct pt_regs read through its first words, struct user_pt_regs (plain
 * loads at fixed offsets: a uapi layout). */
#ifndef SS_EV_ARM64
#define ss_kregs_t struct pt_regs /* not a typedef: CO-RE relocates by the type's name */
#define SS_KR_IP(r) ((r)->ip)
#define SS_KR_USER(r) (((r)->cs & 3) == 3)
#else
typedef struct {
    __u64 regs[31], sp, pc, pstate;
} ss_kregs_t;
#define SS_KR_IP(r) ((r)->pc)
#define SS_KR_USER(r) (((r)->pstate & 0xf) == 0)
#endif
#define SS_TASK_REGS(t) ((ss_kregs_t *)bpf_task_pt_regs(t))

/* One atomic add instruction (BPF_XADD), not a load, an add and a store:
 * per-CPU values need no atomicity, but it is the shortest code. */
#define COUNT(field) __sync_fetch_and_add(&(field), 1)
#endif

/* Compat variant's settings (ARRAY map, one entry): 4.x kernels have no
 * global data, so this replaces the main variant's .rodata. */
struct ss_config {
    __u32 stack_size; /* <= SS_EV_COMPAT_STACK_MAX */
    __u32 self_tgid;  /* never sampled in system-wide mode */
    __u32 all;        /* system-wide */
    __u32 follow;     /* add forked children of selected processes */
    __u32 windows;    /* apply the plans map (0: --no-lua-window) */
    __u32 pad;
};

/* The perf_event program context as the uapi defines it (struct
 * bpf_perf_event_data: struct pt_regs of <asm/ptrace.h>, all longs). The
 * programs take the kernel's type by name and read it through this copy,
 * so ctx loads need no CO-RE and stay 8 bytes wide. */
#ifndef SS_EV_ARM64
struct ss_uapi_regs {
    unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
    unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define SS_UAPI_MODE(r) ((r).cs)
#else
struct ss_uapi_regs { /* struct user_pt_regs */
    unsigned long regs[31], sp, pc, pstate;
};
#define SS_UAPI_MODE(r) ((r).pstate)
#endif
struct ss_perf_ctx {
    struct ss_uapi_regs regs;
    __u64 sample_period, addr;
};

#endif
