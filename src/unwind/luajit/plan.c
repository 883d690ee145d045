/* unwind/luajit/plan.c: the memory windows a LuaJIT runtime asks the BPF
 * program to copy at every sample (ss.h: struct ss_win_plan), so that the
 * Lua state the walker reads is the sample's, not what it became a few
 * milliseconds later. Chosen from the verified layout of the runtime's
 * global state; the kernel side learns nothing about LuaJIT.
 *
 *   0  the main lua_State, global_State and the head of jit_State up to
 *      J->sizetrace (GG_State keeps them in that order): vmstate, cur_L,
 *      jit_base, the trace array; fixed address
 *   1  the running lua_State's header: *(G + cur_L), one load
 *   2  the main thread's Lua stack below its L->base, one load: a coroutine
 *      resumed from the main thread (a request, a generator) runs on its
 *      own stack while the resumer's frames wait there
 *   3  the running Lua stack below BASE, the first of these that applies:
 *      a  BASE register (rdx) when the ip is in the VM's code
 *      b  G->jit_base when it is set (a trace, or C code called from one)
 *      c  cur_L->base (C code called from the interpreter), two loads
 *
 * Stack windows cover LJ_WIN_BELOW bytes below BASE (the callers' frames:
 * 40 frames of 20 slots) and LJ_WIN_ABOVE above; one whose start is not
 * readable keeps its last LJ_WIN_CLAMP bytes. Slots beyond it are read live
 * and validated as before. Prototypes, strings and traces do not change
 * while alive and stay live reads with their caches. */
#include <string.h>

#include "unwind/luajit/lj_internal.h"

#define LJ_WIN_ABOVE 512u
#define LJ_WIN_BELOW (SS_WIN_LEN_MAX - LJ_WIN_ABOVE)
#define LJ_WIN_CLAMP 2048u
#define LJ_WIN_MAIN_ABOVE 64u

static struct ss_win_spec *add(struct ss_win_plan *p, uint16_t dst, uint16_t len)
{
    struct ss_win_spec *w = &p->w[p->n++];
    memset(w, 0, sizeof(*w));
    w->reg = SS_WIN_ABS;
    w->dst = dst;
    w->len = len;
    w->mask[0] = w->mask[1] = ~0ull;
    return w;
}

int ss_lj_runtime_plan(const struct ss_lj_runtime *rt, uint64_t have_G, struct ss_win_plan *p,
                       uint64_t *Gp)
{
    const struct lj_layout *lay = rt->lay;
    if (rt->disabled || !lay || !rt->ngs) return -1;
    uint64_t G = rt->gs[0];
    if (G == have_G) return 0; /* the plan the caller has: nothing to build */
    *Gp = G;
    memset(p, 0, sizeof(*p));
    /* GC64: 64-bit pointers; otherwise GCRef/MRef are 32 bits. */
    uint64_t ref = lay->gc64 ? ~0ull : 0xffffffffull;
    uint32_t L = lay->sizeof_L;
    uint32_t glen = L + (lay->nojit ? lay->G_size : (uint32_t)lay->g2j + lay->J_sizetrace + 4);
    if (glen > 4096 || L > 512) return -1;

    struct ss_win_spec *w = add(p, 0, (uint16_t)glen);
    w->addr = G - L;

    w = add(p, 4096, (uint16_t)L);
    w->addr = G + lay->G_cur_L;
    w->nload = 1;
    w->mask[0] = ref;

    uint16_t mdst = (uint16_t)((4096 + L + 7) & ~7u), mlen = (uint16_t)(8192 - mdst);
    w = add(p, mdst, mlen); /* the main thread's stack */
    w->addr = G - L + lay->L_base;
    w->nload = 1;
    w->mask[0] = ref;
    w->off[2] = -(int64_t)(mlen - LJ_WIN_MAIN_ABOVE);
    w->clamp = LJ_WIN_CLAMP;

    uint16_t dst = SS_WIN_AREA - SS_WIN_LEN_MAX;
    w = add(p, dst, SS_WIN_LEN_MAX); /* a: BASE in the VM */
    w->reg = SS_REG_DX;
    w->flags = SS_WIN_IF_IP;
    w->ip_lo = rt->vm_lo;
    w->ip_hi = rt->vm_hi;
    w->off[2] = -(int64_t)LJ_WIN_BELOW;
    w->clamp = LJ_WIN_CLAMP;
    if (!lay->nojit) { /* b: G->jit_base */
        w = add(p, dst, SS_WIN_LEN_MAX);
        w->flags = SS_WIN_UNLESS_PREV;
        w->addr = G + lay->G_jit_base;
        w->nload = 1;
        w->mask[0] = ref;
        w->off[2] = -(int64_t)LJ_WIN_BELOW;
        w->clamp = LJ_WIN_CLAMP;
    }
    w = add(p, dst, SS_WIN_LEN_MAX); /* c: cur_L->base */
    w->flags = SS_WIN_UNLESS_PREV;
    w->addr = G + lay->G_cur_L;
    w->nload = 2;
    w->mask[0] = w->mask[1] = ref;
    w->off[1] = lay->L_base;
    w->off[2] = -(int64_t)LJ_WIN_BELOW;
    w->clamp = LJ_WIN_CLAMP;
    return 1;
}
