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
    /* the facts the table rows hold beyond the derived ones */
    P("L_stack", offsetof(lua_State, stack));
    P("L_stacksize", offsetof(lua_State, stacksize));
    P("G_mainthref", offsetof(global_State, mainthref));
    P("G_strempty", offsetof(global_State, strempty));
    P("str_len", offsetof(GCstr, len));
    P("str_data", sizeof(GCstr));
    P("fn_ffid", offsetof(GCfuncL, ffid));
    P("fn_pc", offsetof(GCfuncL, pc));
    P("fn_uvptr", offsetof(GCfuncL, uvptr));
    P("fn_cf", offsetof(GCfuncC, f));
    P("pt_sizebc", offsetof(GCproto, sizebc));
    P("pt_k", offsetof(GCproto, k));
    P("pt_sizekgc", offsetof(GCproto, sizekgc));
    P("pt_sizept", offsetof(GCproto, sizept));
    P("pt_sizeuv", offsetof(GCproto, sizeuv));
    P("pt_chunkname", offsetof(GCproto, chunkname));
    P("pt_firstline", offsetof(GCproto, firstline));
    P("pt_numline", offsetof(GCproto, numline));
    P("pt_lineinfo", offsetof(GCproto, lineinfo));
    P("pt_uvinfo", offsetof(GCproto, uvinfo));
    P("pt_varinfo", offsetof(GCproto, varinfo));
    P("pt_size", sizeof(GCproto));
    P("uv_v", offsetof(GCupval, v));
#if LJ_HASJIT
    P("g2j", offsetof(GG_State, J) - offsetof(GG_State, g));
    P("J_trace", offsetof(jit_State, trace));
    P("T_mcode", offsetof(GCtrace, mcode));
    P("G_size", offsetof(GG_State, J) - offsetof(GG_State, g));
    P("J_sizetrace", offsetof(jit_State, sizetrace));
    P("T_nsnap", offsetof(GCtrace, nsnap));
    P("T_nins", offsetof(GCtrace, nins));
    P("T_ir", offsetof(GCtrace, ir));
    P("T_nk", offsetof(GCtrace, nk));
    P("T_nsnapmap", offsetof(GCtrace, nsnapmap));
    P("T_snap", offsetof(GCtrace, snap));
    P("T_snapmap", offsetof(GCtrace, snapmap));
    P("T_startpt", offsetof(GCtrace, startpt));
    P("T_startpc", offsetof(GCtrace, startpc));
    P("T_szmcode", offsetof(GCtrace, szmcode));
    P("T_mcloop", offsetof(GCtrace, mcloop));
    P("T_spadjust", offsetof(GCtrace, spadjust));
    P("T_traceno", offsetof(GCtrace, traceno));
    P("T_root", offsetof(GCtrace, root));
    P("T_size", sizeof(GCtrace));
    P("snap_size", sizeof(SnapShot));
    P("snap_ref", offsetof(SnapShot, ref));
    P("snap_mcofs", offsetof(SnapShot, mcofs));
    P("snap_nent", offsetof(SnapShot, nent));
    P("ir_base", IR_BASE);
    P("ir_kgc", IR_KGC);
    P("ir_knum", IR_KNUM);
    P("ir_nop", IR_NOP);
    P("ir_loop", IR_LOOP);
    P("ir_use", IR_USE);
    P("ir_phi", IR_PHI);
    P("ir_rename", IR_RENAME);
#else
    P("G_size", GG_G2DISP);
#endif
    return 0;
}
