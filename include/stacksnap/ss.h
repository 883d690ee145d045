/* stacksnap public types: errors, samples, frames.
 *
 * Everything user space passes between modules is one of these. Errors are
 * negative errno-style ints; functions that can fail also take a message
 * buffer (struct ss_err) that says which file/pid/offset is concerned. */
#ifndef STACKSNAP_SS_H
#define STACKSNAP_SS_H

#include <stddef.h>
#include <stdint.h>

/* Error message buffer: filled by the function that fails first. */
struct ss_err {
    int code; /* negative errno, 0 = none */
    char msg[512];
};
void ss_err_set(struct ss_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The architecture this build records and unwinds, as `uname -m` names it
 * and as the capture header records it (snapfile.h: ss_snap_header.arch). */
#if defined(__x86_64__)
#define SS_ARCH "x86_64"
#define SS_USER_VA_END (1ull << 47) /* user addresses are below (4-level paging) */
#elif defined(__aarch64__)
#define SS_ARCH "aarch64"
#define SS_USER_VA_END (1ull << 48) /* 48-bit VA (Debian's kernels; PIEs at 0xaaaa...) */
#else
#error "stacksnap builds for x86-64 and arm64 (aarch64) only"
#endif

#if defined(__x86_64__)
/* x86-64 user registers in perf's order (enum perf_event_x86_regs). */
enum ss_reg {
    SS_REG_AX,
    SS_REG_BX,
    SS_REG_CX,
    SS_REG_DX,
    SS_REG_SI,
    SS_REG_DI,
    SS_REG_BP,
    SS_REG_SP,
    SS_REG_IP,
    SS_REG_FLAGS,
    SS_REG_CS,
    SS_REG_SS,
    SS_REG_DS,
    SS_REG_ES,
    SS_REG_FS,
    SS_REG_GS,
    SS_REG_R8,
    SS_REG_R9,
    SS_REG_R10,
    SS_REG_R11,
    SS_REG_R12,
    SS_REG_R13,
    SS_REG_R14,
    SS_REG_R15,
    SS_NREGS
};
#define SS_REG_FP SS_REG_BP /* the frame pointer */
#else
/* arm64 user registers in user_pt_regs order (x0-x30, sp, pc, pstate; the
 * first 33 are also perf's order, enum perf_event_arm64_regs). */
enum ss_reg {
    SS_REG_X0,
    SS_REG_X19 = 19,
    SS_REG_X20,
    SS_REG_X21,
    SS_REG_X22,
    SS_REG_X23,
    SS_REG_X24,
    SS_REG_X25,
    SS_REG_X26,
    SS_REG_X27,
    SS_REG_X28,
    SS_REG_X29, /* the frame pointer */
    SS_REG_X30, /* the link register */
    SS_REG_SP,
    SS_REG_IP, /* pc */
    SS_REG_PSTATE,
    SS_NREGS
};
#define SS_REG_FP SS_REG_X29
#define SS_REG_LR SS_REG_X30
#endif

#define SS_STACK_DEFAULT 16384u
#define SS_STACK_MAX 65528u

/* One sample as delivered by capture/ (live) or snapfile/ (replay).
 * stack[0] is the byte at regs[SS_REG_SP]; stack_len bytes were copied. */
/* Memory windows: what a runtime walker asks the BPF program to copy at
 * every sample of a process besides the stack (capture.h applies a plan).
 * Each window starts at an anchor (a register, or addr), goes through nload
 * (0-2) dependent 8-byte loads: p = *(p + off[i]) & mask[i], a zero p skips
 * the window; then copies len bytes at p + off[2]. SS_WIN_IF_IP: only when
 * ip_lo <= ip < ip_hi; SS_WIN_UNLESS_PREV: only when the window before (and
 * the chain of such windows it ends) copied nothing. A copy that fails
 * (its start in a page not present) is made from the next page boundary on.
 * dst places it in the sample's window area (dst <= SS_WIN_AREA -
 * SS_WIN_LEN_MAX). */
#define SS_WIN_MAX 8
#define SS_WIN_AREA 16384u
#define SS_WIN_LEN_MAX 8192u
#define SS_WIN_ABS 0xffu /* reg: anchored at addr */
#define SS_WIN_IF_IP 0x1u
#define SS_WIN_UNLESS_PREV 0x2u
struct ss_win_spec {
    uint8_t reg; /* enum ss_reg, or SS_WIN_ABS */
    uint8_t nload, flags;
    uint16_t len, dst;
    uint64_t addr;
    int64_t off[3];
    uint64_t mask[2];
    uint64_t ip_lo, ip_hi;
};
struct ss_win_plan {
    uint32_t n;
    struct ss_win_spec w[SS_WIN_MAX];
};

/* One window as copied with a sample. */
struct ss_window {
    uint64_t addr; /* target address of data[0] */
    uint32_t len;  /* bytes copied; 0 when not */
    int32_t err;   /* 0, -ENOENT (skipped by its conditions), -EFAULT (read failed) */
    const uint8_t *data;
};

struct ss_sample {
    uint32_t pid, tid, cpu;
    uint32_t flags;   /* SS_SAMPLE_* */
    uint64_t time_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
    uint64_t regs[SS_NREGS];
    uint32_t stack_len; /* bytes actually copied */
    uint32_t stack_req; /* bytes requested */
    uint32_t holes;     /* pages of the copy that could not be read (never touched: a read from
                           the sampling context does not fault pages in), zero-filled and not
                           stack bytes: bit i = the i-th page counted from the page of sp */
    const uint8_t *stack;
    uint32_t nwin; /* windows of the process's plan, 0 without */
    struct ss_window win[SS_WIN_MAX];
    uint32_t nkernel;       /* kernel return addresses (--kernel), innermost first */
    const uint64_t *kernel; /* nkernel of them (<= SS_KSTACK_MAX) */
    uint64_t weight;        /* SS_SAMPLE_OFFCPU: ns until the thread ran again */
};
#define SS_KSTACK_MAX 127
#define SS_SAMPLE_PARTIAL 0x1u /* stack copy shorter than requested */
#define SS_SAMPLE_OFFCPU 0x4u  /* taken when the thread blocked (--off-cpu); weight */
#define SS_SAMPLE_EXECSTACK                                                                        \
    0x8u /* inside an exec, after the memory map changed: stack copied at the exec's entry */
#define SS_SAMPLE_KERNEL                                                                           \
    0x2u /* interrupted kernel mode; regs are the user regs (all zero:                             \
            none, compat --kernel) */

/* A process marker from the same stream as the samples, in order with
 * them (capture.h: ss_capture_opts.proc_event): a fork is delivered before
 * any sample of the child, an exec before any sample of the new image, an
 * exit after the process's last sample. */
enum ss_proc_event_kind { SS_PROC_FORK = 1, SS_PROC_EXEC = 2, SS_PROC_EXIT = 3 };
struct ss_proc_event {
    uint32_t kind; /* enum ss_proc_event_kind */
    uint32_t pid;  /* the process (fork: the child) */
    uint32_t tid;  /* the thread that did it (fork: the child's) */
    uint32_t ppid; /* fork: the parent; else 0 */
    uint32_t cpu;
    uint64_t time_ns; /* same clock as ss_sample.time_ns */
};
const char *ss_proc_event_str(uint32_t kind); /* "fork", "exec", "exit", "?" */

/* What the kernel says a process mapped (executable mappings only), or that
 * it exec'd (SS_MAP_EV_EXEC: its earlier mappings are gone), from perf's
 * side band (capture.h: ss_capture_opts.map_event), stamped with the
 * samples' clock. For processes that exit before /proc shows their maps. */
enum ss_map_event_kind { SS_MAP_EV_MMAP = 1, SS_MAP_EV_EXEC = 2 };
struct ss_map_event {
    uint32_t kind; /* enum ss_map_event_kind */
    uint32_t pid;
    uint64_t time_ns;
    uint64_t start, len, pgoff, inode; /* SS_MAP_EV_MMAP */
    uint32_t dev_major, dev_minor;
    uint32_t prot;    /* PROT_* of mmap */
    const char *path; /* the file as the kernel names it; valid during the call */
    char comm[16];    /* SS_MAP_EV_EXEC: the new command name */
};

enum ss_frame_kind {
    SS_FRAME_NATIVE = 0,
    SS_FRAME_LUA = 1,
    SS_FRAME_KERNEL = 2,
    SS_FRAME_PSEUDO = 3, /* "[GC]", "[JIT compiler]", truncation markers */
};

/* ss_frame.flags */
enum {
    SS_FF_NOCFI = 1u << 0,     /* native: code without CFI (JIT code) that the walk stepped over
                                  by a validated frame-pointer chain or stack scan */
    SS_FF_TRACE_CUT = 1u << 1, /* native: the walk ended here, at (or at a return into)
                                  LuaJIT trace code the Lua walk could not claim */
    SS_FF_STALE = 1u << 2,     /* native: the stack scan out of this frame (code without
                                  CFI) refused return addresses as stale */
};

/* One frame. Strings are owned by whoever produced the frame (interned in a
 * context) and stay valid until that context is destroyed. */
struct ss_frame {
    uint8_t kind; /* enum ss_frame_kind */
    uint8_t build_id_len;
    uint8_t build_id[20];
    uint8_t unproven;        /* Lua: frames above this one the walk could not prove on the stack and
                                left out (JIT trace code between snapshots; counted, never shown) */
    uint8_t flags;           /* SS_FF_* */
    uint64_t addr;           /* native: pc; Lua: bytecode address (0 if none) */
    uint64_t offset;         /* native: file offset of addr in its module */
    const char *name;        /* symbol / Lua NAME; NULL when unknown */
    const char *module;      /* native: module path; Lua: chunk name (no @/=) */
    uint32_t line;           /* Lua: current line */
    uint32_t first_line;     /* Lua: line where the function is defined */
    uint64_t sym_offset;     /* native/kernel with a name: addr - symbol start */
    const char *system_name; /* native: the symbol as the file spells it (mangled) when name
                                is its demangled form; NULL otherwise */
};

/* Why a stack walk ended. */
enum ss_trunc {
    SS_TRUNC_NONE = 0, /* reached the root */
    SS_TRUNC_SNAPSHOT, /* ran off the end of the stack snapshot */
    SS_TRUNC_NOINFO,   /* no unwind info for an ip */
    SS_TRUNC_BADIP,    /* ip outside any mapping */
    SS_TRUNC_LOOP,     /* repeated frame */
    SS_TRUNC_DEPTH,    /* frame cap reached */
    SS_TRUNC_ERROR,    /* other unwinder error */
};
const char *ss_trunc_str(enum ss_trunc t);

/* A walked stack, leaf first. */
struct ss_stack {
    uint32_t pid, tid, cpu;
    uint64_t time_ns;
    char comm[16];
    uint32_t nframes;
    struct ss_frame *frames;
    uint8_t trunc;   /* enum ss_trunc */
    uint64_t weight; /* off-CPU sample: ns off the CPU (ss_sample.weight); 0: a CPU sample */
};

#endif
