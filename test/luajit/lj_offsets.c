/* test/luajit/lj_offsets.c: the layout facts of a LuaJIT source tree by
 * offsetof(), the ground truth for the facts derive.c reads from the built
 * binary (test_derive.c compiles this against the tree with the build's
 * flags: cc -I TREE/src [-DLUAJIT_DISABLE_GC64] [-DLUAJIT_DISABLE_JIT]).
 * Prints "NAME VALUE" lines. */
#include <stddef.h>
#include <stdio.h>

#include "lj_dispatch.h"
#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_obj.h"

#define P(n, v) printf("%s %d\n", n, (int)(v))

int main(void)
{
    P("sizeof_L", sizeof(lua_State));
    P("L_glref", offsetof(lua_State, glref));
    P("L_base", offsetof(lua_State, base));
    P("L_top", offsetof(lua_State, top));
    P("L_cframe", offsetof(lua_State, cframe));
    P("G_vmstate", offsetof(global_State, vmstate));
    P("G_cur_L", offsetof(global_State, cur_L));
    P("G_jit_base", offsetof(global_State, jit_base));
    P("G_gc_total", offsetof(global_State, gc.total));
    P("G_gc_currentwhite", offsetof(global_State, gc.currentwhite));
    P("G_gc_state", offsetof(global_State, gc.state));
    P("G_gc_estimate", offsetof(global_State, gc.estimate));
    P("g2disp", GG_G2DISP);
    P("cf_size", CFRAME_SIZE);
    P("cf_L", CFRAME_OFS_L);
    P("cf_pc", CFRAME_OFS_PC);
    P("cf_prev", CFRAME_OFS_PREV);
    P("cf_nres", CFRAME_OFS_NRES);
#if LJ_HASJIT
    P("g2j", offsetof(GG_State, J) - offsetof(GG_State, g));
    P("J_trace", offsetof(jit_State, trace));
    P("T_mcode", offsetof(GCtrace, mcode));
#endif
    return 0;
}
