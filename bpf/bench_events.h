/* bpf/bench_events.h: what the bench's in-kernel comparators
 * (bench_fp.bpf.c, bench_lua.bpf.c) and the bench driver (bench/) share:
 * ring buffer records, per-CPU counters and the LuaJIT walker's settings.
 * Used by the bench only, never by the profiler.
 *
 * Include after the __u32/__u64 types are defined (vmlinux.h on the BPF side,
 * <linux/types.h> in user space). */
#ifndef STACKSNAP_BPF_BENCH_EVENTS_H
#define STACKSNAP_BPF_BENCH_EVENTS_H

#define BENCH_FP_MAX 127 /* bpf_get_stack's limit (kernel.perf_event_max_stack) */

/* Frame-pointer comparator: one sample. */
struct bench_fp_event {
    __u32 tid, tgid; /* bpf_get_current_pid_tgid() order */
    __s64 nbytes;    /* bpf_get_stack's return: bytes of ips[] or -errno */
    __u64 ips[BENCH_FP_MAX];
};

#define BENCH_LUA_MAX 64 /* Lua frames per sample (bounded loop) */

/* How the LuaJIT walker found its starting frame. */
enum bench_lua_start {
    BENCH_LUA_START_NONE = 0, /* no valid lua_State: no frames */
    BENCH_LUA_START_VM,       /* ip in the VM: BASE register (rdx) */
    BENCH_LUA_START_TRACE,    /* vmstate >= 0 (in a trace): G->jit_base */
    BENCH_LUA_START_LBASE,    /* elsewhere (C function, helper): L->base */
};

/* How the walk ended. */
enum bench_lua_end {
    BENCH_LUA_END_BOTTOM = 0, /* reached the bottom of the Lua stack */
    BENCH_LUA_END_NOSTATE,    /* no lua_State (G/L checks failed) */
    BENCH_LUA_END_READ,       /* a read failed */
    BENCH_LUA_END_BAD,        /* a slot was not a function / link out of range */
    BENCH_LUA_END_DEPTH,      /* BENCH_LUA_MAX frames */
};

struct bench_lua_frame {
    __u64 fn;   /* GCfunc */
    __u64 pt;   /* GCproto of a Lua function, 0 for C/fast functions */
    __u64 link; /* frame link: return pc (Lua frame) or delta|type */
};

/* LuaJIT walker: one sample. */
struct bench_lua_event {
    __u32 tid, tgid;
    __u32 n;    /* frames[] used, leaf first; fn 0 = VARG/dummy slot (no frame) */
    __u8 start; /* enum bench_lua_start */
    __u8 end;   /* enum bench_lua_end */
    __u8 g_reg; /* G came from DISPATCH (r14), not the fallback */
    __u8 pad;
    __u64 ip;
    struct bench_lua_frame frames[BENCH_LUA_MAX];
};

/* LuaJIT walker settings (ARRAY map, one entry), filled by the bench driver
 * from the per-build layout the profiler verified (src/unwind/luajit/
 * layout.c). GC64 builds only (the bench's luajit). */
struct bench_lua_cfg {
    __u64 vm_lo, vm_hi; /* VM machine code, run-time addresses */
    __u64 G;            /* global_State, fallback when r14 is not DISPATCH */
    __s64 g2disp;       /* DISPATCH - G */
    __u32 G_cur_L, G_vmstate, G_jit_base;
    __u32 L_glref, L_base, L_stack, L_stacksize;
    __u32 fn_ffid, fn_pc, pt_size;
};

/* Per-CPU counters of both comparators (one PERCPU_ARRAY entry). */
struct bench_counters {
    __u64 seen, emitted, dropped;
};

#endif
