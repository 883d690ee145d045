// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bpf/bench_lua.bpf.c: the bench's in-kernel LuaJIT walker (comparator).
 *
 * What an in-kernel LuaJIT profiler does (the upstream eBPF profiler's
 * luajit tracer: bpf_probe_read_user per slot, a bounded loop over frames),
 * complete enough to compare cost and coverage with stacksnap on the bench's
 * workloads. Per sample of a selected process:
 *   G    = r14 (DISPATCH) - G2DISP, checked by cur_L->glref == G; else the
 *          G the driver found (cfg.G), with the same check;
 *   L    = G->cur_L;
 *   base = rdx (BASE) when the ip is in the VM, G->jit_base when vmstate >= 0
 *          (a trace runs), else L->base (C function or helper on top);
 *   then frame by frame down to L->stack: the function slot and the link
 *   (one 16-byte read), the function's ffid and pc (prototype = pc -
 *   sizeof(GCproto)), and for Lua links the A operand of the CALL before
 *   the return pc. VARG pseudo-frames are skipped, dummy frames dropped.
 * Records (fn, proto, link) per frame, leaf first; names, chunks and lines
 * are user space's job, as upstream. Offsets come from the profiler's
 * per-build layout table through the cfg map. GC64 only. Bench only. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "bench_events.h"

#define LJ_GCVMASK ((1ull << 47) - 1)
#define LJ_FUNC_TAG 0x1fff7ull
#define LJ_FRAME_LUA 0
#define LJ_FRAME_VARG 3

#include "bench_maps.h"

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct bench_lua_cfg);
} cfg SEC(".maps");

static __always_inline int rd(void *dst, __u32 len, __u64 addr)
{
    return bpf_probe_read_user(dst, len, (const void *)addr);
}

/* L = G->cur_L with L->glref == G; 0 when that does not hold. */
static __always_inline __u64 state_of(const struct bench_lua_cfg *k, __u64 G)
{
    __u64 L = 0, glref = 0;

    if (rd(&L, 8, G + k->G_cur_L) || !L || rd(&glref, 8, L + k->L_glref) || glref != G) return 0;
    return L;
}

SEC("perf_event")
int bench_lua(struct bpf_perf_event_data *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = id >> 32, zero = 0, ssize = 0, n = 0, i, end;
    __u64 G, L, base = 0, stack = 0, hi, frame;
    struct bench_counters *c;
    struct bench_lua_event *e;
    const struct bench_lua_cfg *k;
    struct pt_regs *r;
    __s32 vmstate = -1;

    if (!bpf_map_lookup_elem(&pids, &tgid)) return 0;
    c = bpf_map_lookup_elem(&counters, &zero);
    k = bpf_map_lookup_elem(&cfg, &zero);
    if (!c || !k) return 0;
    c->seen++;
    r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    if ((r->cs & 3) != 3) return 0;
    e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        c->dropped++;
        return 0;
    }
    *(__u64 *)e = id;
    e->ip = r->ip;
    e->start = BENCH_LUA_START_NONE;
    e->end = BENCH_LUA_END_NOSTATE;
    e->pad = 0;

    /* global_State and lua_State */
    G = r->r14 - k->g2disp;
    e->g_reg = 1;
    L = state_of(k, G);
    if (!L) {
        G = k->G;
        e->g_reg = 0;
        L = G ? state_of(k, G) : 0;
    }
    if (!L || rd(&stack, 8, L + k->L_stack) || rd(&ssize, 4, L + k->L_stacksize)) goto out;
    hi = stack + 8ull * ssize;

    /* first frame */
    if (r->ip >= k->vm_lo && r->ip < k->vm_hi && r->dx > stack && r->dx <= hi && !(r->dx & 7)) {
        base = r->dx;
        e->start = BENCH_LUA_START_VM;
    } else if (!rd(&vmstate, 4, G + k->G_vmstate) && vmstate >= 0 &&
               !rd(&base, 8, G + k->G_jit_base)) {
        e->start = BENCH_LUA_START_TRACE;
    } else if (!rd(&base, 8, L + k->L_base)) {
        e->start = BENCH_LUA_START_LBASE;
    }
    if (base <= stack || base > hi || (base & 7)) {
        e->start = BENCH_LUA_START_NONE;
        goto out;
    }

    /* the frames: slot i holds frame i, fn 0 for a VARG/dummy pseudo-frame
     * (one counter only, so the verifier's states stay few per iteration) */
    frame = base - 8;
    end = BENCH_LUA_END_DEPTH;
    for (i = 0; i < BENCH_LUA_MAX; i++) {
        struct bench_lua_frame *f = &e->frames[i];
        __u64 slot[2], fn, link, pc = 0, prev;
        __u8 ffid = 0;
        __u32 ins;

        if (frame <= stack + 8) {
            end = BENCH_LUA_END_BOTTOM;
            break;
        }
        if (rd(slot, sizeof(slot), frame - 8)) {
            end = BENCH_LUA_END_READ;
            break;
        }
        link = slot[1];
        if ((slot[0] >> 47) != LJ_FUNC_TAG) {
            end = BENCH_LUA_END_BAD;
            break;
        }
        fn = slot[0] & LJ_GCVMASK;
        f->fn = 0;
        f->pt = 0;
        f->link = link;
        if ((link & 7) != LJ_FRAME_VARG && fn != L) {
            if (rd(&ffid, 1, fn + k->fn_ffid) || rd(&pc, 8, fn + k->fn_pc)) {
                end = BENCH_LUA_END_READ;
                break;
            }
            f->fn = fn;
            f->pt = ffid == 0 && pc > k->pt_size ? pc - k->pt_size : 0;
        }
        if ((link & 3) == LJ_FRAME_LUA) {
            if (rd(&ins, 4, link - 4)) {
                end = BENCH_LUA_END_READ;
                break;
            }
            prev = frame - 8 * (2 + ((ins >> 8) & 0xff));
        } else {
            prev = frame - (link & ~7ull);
        }
        if (prev >= frame || prev < stack) {
            end = BENCH_LUA_END_BAD;
            break;
        }
        frame = prev;
    }
    n = i;
    e->end = end;
out:
    e->n = n;
    bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
                              ? BPF_RB_FORCE_WAKEUP
                              : BPF_RB_NO_WAKEUP);
    c->emitted++;
    return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
