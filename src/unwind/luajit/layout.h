/* unwind/luajit/layout.h: what the LuaJIT walker knows of a LuaJIT build's
 * memory layout: the layout descriptor (struct offsets and sizes, type
 * bytes, IR opcodes, fast-function names) of each known build (layout.c's
 * table, or derived from the binary's code: layout_derive.c), its
 * verification against a live global state, and reading its fields. */
#ifndef SS_LJ_LAYOUT_H
#define SS_LJ_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"

struct lj_layout {
    const char *name;
    bool gc64;
    bool nojit;                       /* LUAJIT_DISABLE_JIT: no jit_State (g2j, J_* unused) */
    uint32_t hints_req, hints_forbid; /* static hints (SS_LJ_HINT_*) */
    /* lua_State */
    uint32_t sizeof_L, L_glref, L_base, L_top, L_stack, L_cframe, L_stacksize;
    uint32_t gct; /* GCHeader type byte: 9 (GC64) / 5 */
    /* global_State */
    uint32_t G_vmstate, G_mainthref, G_strempty, G_cur_L, G_jit_base, G_size;
    /* GCState gc.total (gc.c reads the collector's state after it); 0: not
     * known (no proof that no GC ran between a sample and its walk) */
    uint32_t G_gc_total;
    int32_t g2disp, g2j;
    uint32_t J_trace, J_sizetrace;
    /* GCfunc */
    uint32_t fn_ffid, fn_pc, fn_uvptr, fn_size;
    uint32_t fn_cf; /* GCfuncC.f, the lua_CFunction (within fn_size) */
    /* GCproto */
    uint32_t pt_sizebc, pt_k, pt_sizekgc, pt_sizept, pt_sizeuv, pt_chunkname;
    uint32_t pt_firstline, pt_numline, pt_lineinfo, pt_uvinfo, pt_varinfo, pt_size;
    /* GCstr */
    uint32_t str_len, str_data;
    /* GCupval */
    uint32_t uv_v;
    /* cframe (x86-64 POSIX) */
    uint32_t cf_prev, cf_L, cf_pc, cf_nres, cf_size;
    /* GCtrace (issue 5) */
    uint32_t T_nsnap, T_ir, T_snap, T_snapmap, T_startpt, T_startpc, T_szmcode, T_mcode, T_mcloop,
        T_spadjust, T_traceno, T_root;
    uint32_t T_nins, T_nk, T_nsnapmap, T_size; /* T_size = sizeof(GCtrace) */
    /* SnapShot: size, first IR ref, mcode offset (0 = the build has no
     * mcofs), entry count */
    uint32_t snap_size, snap_ref, snap_mcofs, snap_nent;
    /* IR opcodes (lj_ir.h IRDEF) checked on every trace: ir[REF_BASE].o ==
     * ir_base, frame links are ir_knum constants; the ones that emit no
     * code (guards.c) */
    uint8_t ir_base, ir_kgc, ir_knum;
    uint8_t ir_nop, ir_loop, ir_use, ir_phi, ir_rename;
    /* side-effecting calls and their result's boxing/conversion (0 unknown:
     * no exact frames at calls out of traces, trace_load.c post_call) */
    uint8_t ir_cnewi, ir_conv, ir_calls, ir_callxs;
    /* x86-64: bytes JLOOP/JFUNC push below the cframe before entering a
     * trace (r12, r13); trace rsp = cframe - trace_sp_bias - spadjust */
    uint32_t trace_sp_bias;
    /* LJ_VMST_* states inserted after INTERP: 2 in Tarantool's fork (LFUNC,
     * FFUNC, CFUNC replace C; GC is 4 there, not 2), 0 upstream */
    uint8_t vmst_shift;
    /* fast-function names, index = ffid - 2 */
    const char *const *ff;
    const unsigned *nff;
};

/* The arm64 VM frame (vm_arm64.dasc: CFRAME_SPACE, saveregs; lj_frame.h
 * CFRAME_OFS_*; measured by offsetof() on Debian 12's tree built with
 * aarch64-linux-gnu-gcc). The VM's FDE says CFA = x29 + 16, and x29 =
 * sp + 192 everywhere in the VM, so the cframe (sp inside the VM, what
 * L->cframe holds) is CFA - 208. In it: SAVE_CFRAME +0, SAVE_PC +8, SAVE_L
 * +16, MULTRES +32, ERRF +36, NRES +40; the caller's d8-d15 from +48, x28
 * .. x19 from +112, fp/lr at +192/+200. Relative to the CFA, as the FDE
 * states them: lr -8, fp -16, x19 -24, x20 -32, ... x28 -96. */
#define LJ_A64_CFRAME_SIZE 208u
#define LJ_A64_CF_PREV 0u
#define LJ_A64_CF_PC 8u
#define LJ_A64_CF_L 16u
#define LJ_A64_CF_NRES 40u
#define LJ_A64_CFA_LR 8u   /* CFA - 8: the caller's x30 (return address) */
#define LJ_A64_CFA_FP 16u  /* CFA - 16: the caller's x29 */
#define LJ_A64_CFA_X19 24u /* CFA - 24 - 8 * (r - 19): the caller's x19..x28 */

enum {
    LJ_GCT_STR = 4,
    LJ_GCT_UPVAL = 5,
    LJ_GCT_THREAD = 6,
    LJ_GCT_PROTO = 7,
    LJ_GCT_FUNC = 8,
    LJ_GCT_TRACE = 9
};
#define LJ_GC64_FUNC_TAG 0x1fff7ull /* top 17 bits of a GC64 function TValue */
#define LJ_GCVMASK ((1ull << 47) - 1)

/* Frame types (lj_frame.h). */
enum {
    LJ_FRAME_LUA,
    LJ_FRAME_C,
    LJ_FRAME_CONT,
    LJ_FRAME_VARG,
    LJ_FRAME_LUAP,
    LJ_FRAME_CP,
    LJ_FRAME_PCALL,
    LJ_FRAME_PCALLH
};

extern const struct lj_layout ss_lj_layouts[];
extern const unsigned ss_lj_nlayouts;
extern const char *const ss_lj_ff_debian[], *const ss_lj_ff_openresty[],
                                                *const ss_lj_ff_tarantool[];
extern const unsigned ss_lj_ff_debian_n, ss_lj_ff_openresty_n, ss_lj_ff_tarantool_n;
extern const char *const ss_lj_ff_debian_nojit[], *const ss_lj_ff_openresty_nojit[];
extern const unsigned ss_lj_ff_debian_nojit_n, ss_lj_ff_openresty_nojit_n;
extern const char *const ss_lj_ff_openresty52[];
extern const unsigned ss_lj_ff_openresty52_n, ss_lj_ff_none_n;
extern const char *const ss_lj_ff_ttfork[], *const ss_lj_ff_ttfork_nojit[];
extern const unsigned ss_lj_ff_ttfork_n, ss_lj_ff_ttfork_nojit_n;

/* Read a GCRef/MRef field (64-bit GC64, 32-bit otherwise) from a buffer. */
static inline uint64_t lj_ref(const struct lj_layout *lay, const uint8_t *p)
{
    if (lay->gc64) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        return v;
    }
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline uint64_t lj_u64(const uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
static inline uint32_t lj_u32(const uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* Verify a global state G: first the layout built from the facts derived
 * from the binary's code (into *scratch, or the table row it equals; then
 * *derived = true), else the table rows compatible with info. dispatch:
 * DISPATCH register value or 0. 0 or negative errno. */
int ss_lj_layout_verify(const struct ss_lj_elfinfo *info, struct ss_mem *m, uint64_t G,
                        uint64_t dispatch, struct lj_layout *scratch, const struct lj_layout **out,
                        bool *derived, char *why, size_t whylen);
/* The same, and (vm_hi != 0) the dispatch table at G + G2DISP must hold
 * addresses inside the VM code [vm_lo, vm_hi) (run-time addresses). */
int ss_lj_layout_verify_vm(const struct ss_lj_elfinfo *info, uint64_t vm_lo, uint64_t vm_hi,
                           struct ss_mem *m, uint64_t G, uint64_t dispatch,
                           struct lj_layout *scratch, const struct lj_layout **out, bool *derived,
                           char *why, size_t whylen);

/* Derived layouts (layout_derive.c): whether info's derived facts suffice;
 * the layout from them over template row t (sizeof_L: from the live state);
 * whether two layouts have the same facts (names and hints aside). */
bool ss_lj_layout_derivable(const struct ss_lj_elfinfo *info);
void ss_lj_layout_apply(const struct ss_lj_elfinfo *info, const struct lj_layout *t,
                        uint32_t sizeof_L, struct lj_layout *o);
bool ss_lj_layout_same(const struct lj_layout *a, const struct lj_layout *b);

#endif
