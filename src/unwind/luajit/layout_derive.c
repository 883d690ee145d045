/* unwind/luajit/layout_derive.c: a layout descriptor built from the facts
 * derive.c read from the binary's code, on top of a table row (layout.c)
 * for the facts the code does not show.
 *
 * Per fact (docs/design.md, "LuaJIT layouts"):
 *  - derived from the code: L_glref, L_base, L_top, L_cframe, G2DISP,
 *    G_vmstate, G_cur_L, G_gc_total, the cframe size and its SAVE_L/SAVE_PC/
 *    SAVE_CFRAME/SAVE_NRES slots; with the JIT also G_jit_base, G2J, J_trace,
 *    GCtrace.mcode;
 *  - derived at run time from the live global state: sizeof(lua_State) =
 *    G - G->mainthref (the main thread precedes global_State in GG_State);
 *  - placed relative to a derived fact as in every 2.1 tree (the template
 *    row's distance): G_mainthref from G_vmstate, L_stack/L_stacksize from
 *    L_cframe, J_sizetrace from J_trace, G_jit_base from G_cur_L without
 *    the JIT;
 *  - taken from the template row: GCproto, GCfunc, GCstr, GCupval, GCtrace
 *    (except mcode), SnapShot, IR opcodes, G_strempty, fast-function names
 *    (chosen by the static hints: OpenResty, Tarantool, JIT or not, the Lua
 *    5.2 extensions).
 * All of it is verified against the live state (check_one, the dispatch
 * table) before use, like a table row. */
#include <string.h>

#include "unwind/luajit/layout.h"

bool ss_lj_layout_derivable(const struct ss_lj_elfinfo *info)
{
    const struct ss_lj_derived *d = &info->derived;
    if (!(d->have & SS_LJ_D_ENTRY)) return false;
    /* a JIT build (its exit handler was found) needs its J facts too */
    if (info->exit_lo &&
        (d->have & (SS_LJ_D_EXIT | SS_LJ_D_JLOOP)) != (SS_LJ_D_EXIT | SS_LJ_D_JLOOP))
        return false;
    return true;
}

static const char *derived_name(bool gc64, bool nojit)
{
    return gc64 ? (nojit ? "derived-gc64-nojit" : "derived-gc64-jit")
                : (nojit ? "derived-nogc64-nojit" : "derived-nogc64-jit");
}

void ss_lj_layout_apply(const struct ss_lj_elfinfo *info, const struct lj_layout *t,
                        uint32_t sizeof_L, struct lj_layout *o)
{
    const struct ss_lj_derived *d = &info->derived;
    bool nojit = info->exit_lo == 0;
    *o = *t;
    o->name = derived_name(t->gc64, nojit);
    o->nojit = nojit;
    o->sizeof_L = sizeof_L;
    o->L_glref = d->L_glref;
    o->L_base = d->L_base;
    o->L_top = d->L_top;
    o->L_stack = d->L_cframe - (t->L_cframe - t->L_stack);
    o->L_stacksize = d->L_cframe + (t->L_stacksize - t->L_cframe);
    o->L_cframe = d->L_cframe;
    o->cf_size = d->cf_size;
    o->cf_L = d->cf_L;
    o->cf_pc = d->cf_pc;
    o->cf_prev = d->cf_prev;
    o->cf_nres = d->cf_nres;
    o->G_mainthref = d->G_vmstate + (t->G_mainthref - t->G_vmstate);
    o->G_vmstate = d->G_vmstate;
    o->G_gc_total = d->have & SS_LJ_D_GC ? d->G_gc_total : 0;
    o->g2disp = d->g2disp;
    if (nojit) {
        o->G_jit_base = d->G_cur_L + (t->G_jit_base - t->G_cur_L);
        o->G_size = (uint32_t)d->g2disp; /* no jit_State: the dispatch table follows G */
        o->g2j = 0;
        o->J_trace = o->J_sizetrace = 0;
    } else {
        o->G_jit_base = d->G_jit_base;
        o->g2j = d->g2j;
        o->G_size = (uint32_t)d->g2j; /* jit_State follows global_State */
        o->J_sizetrace = d->J_trace + (t->J_sizetrace - t->J_trace);
        o->J_trace = d->J_trace;
        o->T_mcode = d->T_mcode;
    }
    o->G_cur_L = d->G_cur_L;
    /* fast-function ids differ per library set, not per offset: by hints */
    if (info->hints & SS_LJ_HINT_MISC) {
        o->ff = nojit ? ss_lj_ff_ttfork_nojit : ss_lj_ff_ttfork;
        o->nff = nojit ? &ss_lj_ff_ttfork_nojit_n : &ss_lj_ff_ttfork_n;
    } else if ((info->hints & SS_LJ_HINT_LJ52) && !(info->hints & SS_LJ_HINT_TARANTOOL)) {
        /* the ids of one such build are known; others are not named
         * (builtin#N) rather than named wrong */
        bool known = (info->hints & SS_LJ_HINT_EXDATA) && !nojit;
        o->ff = known ? ss_lj_ff_openresty52 : ss_lj_ff_openresty;
        o->nff = known ? &ss_lj_ff_openresty52_n : &ss_lj_ff_none_n;
    } else if (info->hints & SS_LJ_HINT_EXDATA) {
        o->ff = nojit ? ss_lj_ff_openresty_nojit : ss_lj_ff_openresty;
        o->nff = nojit ? &ss_lj_ff_openresty_nojit_n : &ss_lj_ff_openresty_n;
    } else if (!(info->hints & SS_LJ_HINT_TARANTOOL)) {
        o->ff = nojit ? ss_lj_ff_debian_nojit : ss_lj_ff_debian;
        o->nff = nojit ? &ss_lj_ff_debian_nojit_n : &ss_lj_ff_debian_n;
    }
}

bool ss_lj_layout_same(const struct lj_layout *a, const struct lj_layout *b)
{
    struct lj_layout x = *a;
    x.name = b->name;
    x.hints_req = b->hints_req;
    x.hints_forbid = b->hints_forbid;
    return !memcmp(&x, b, sizeof(x));
}
