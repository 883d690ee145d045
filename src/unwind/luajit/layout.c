/* unwind/luajit/layout.c: the ONE table of per-build LuaJIT layouts, and the
 * run-time self-checks that choose and verify a descriptor for a live
 * global_State.
 *
 * The descriptor tried first is the one built from the facts derived from
 * the binary's code (derive.c, layout_derive.c); these rows are its
 * templates for the facts the code does not show, the fallback when
 * derivation fails, and the record the derived facts are tested against
 * (test_derive.c). Debian 13's 2.1.0+openresty20250117 has no row on
 * purpose: it runs on derived layouts only (measured by offsetof() on its
 * tree: GC64 sizeof L 112, G2DISP 4016, G2J 744; non-GC64 sizeof L 80,
 * G2DISP 3216, G2J 496; everything else as OpenResty 20230119 / the
 * Debian 12 non-GC64 row).
 *
 * Every offset below was measured, not guessed:
 *  - Debian 2.1.0-beta3+git20220320 (GC64) and the same tree with
 *    -DLUAJIT_DISABLE_GC64: offsetof() on the tree from `apt-get source
 *    luajit` (lj_obj.h, lj_frame.h, lj_jit.h, lj_dispatch.h);
 *  - OpenResty luajit2 2.1-20230119: offsetof() on `apt-get source luajit2`;
 *    only lua_State (+16: exdata, exdata2) and everything behind it moves;
 *  - Tarantool 2.6.0 (non-GC64): `ptype/o` on the DWARF of /usr/bin/tarantool
 *    (older tree: GCstr has no sid, global_State starts with strhash);
 *  - the same Debian tree with -DLUAJIT_DISABLE_JIT (GC64 and not): offsetof()
 *    on the tree the build matrix builds (test/luajit/build-luajit.sh);
 *  - Tarantool's LuaJIT fork b52fe979 (2024-10), four builds: offsetof() on
 *    its tree (test/luajit/build-ttlj.sh; luajit_derive checks every fact);
 *  - upstream v2.1 GC64 (2023+): from the reference notes only (not verified
 *    here, the self-checks decide).
 * Opcode numbers (CALL=66, GGET=54, ...) are identical in all of these and
 * live in names.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unwind/luajit/layout.h"

/* Trace facts shared by every 2.1 tree here (lj_ir.h IRDEF: NOP 12, BASE 13,
 * LOOP 17, USE 18, PHI 19, RENAME 20, KGC 24, KNUM 28 -- the trees differ
 * from ABS on; vm_x64.dasc/vm_x86.dasc JLOOP: sub rsp, 16 after saving
 * r12/r13). */
#define IR_21                                                                                      \
    .ir_base = 13, .ir_kgc = 24, .ir_knum = 28, .ir_nop = 12, .ir_loop = 17, .ir_use = 18,         \
    .ir_phi = 19, .ir_rename = 20
#define TRACE_X64_COMMON IR_21, .trace_sp_bias = 16
/* SnapShot.mcofs exists since 2.1 (2020, LJ_UNWIND_JIT); Tarantool 2.6's tree
 * predates it: {mapofs, ref, nslots, topslot, nent, count}. */
/* IR calls with side effects and what converts their result (lj_ir.h
 * IRDEF; numbered the same in Debian 12's, Debian 13's and upstream's 2.1,
 * two lower in Tarantool's fork): trace_load.c post_call. 0: not known. */
#define IR_CALLS_21 .ir_cnewi = 84, .ir_conv = 91, .ir_calls = 98, .ir_callxs = 99
#define IR_CALLS_TTFORK .ir_cnewi = 82, .ir_conv = 89, .ir_calls = 96, .ir_callxs = 97
#define SNAP_MCOFS .snap_ref = 4, .snap_mcofs = 6, .snap_nent = 10
#define SNAP_NO_MCOFS .snap_ref = 4, .snap_mcofs = 0, .snap_nent = 8

/* The cframe's size and SAVE_CFRAME slot: 80/+32 in every 2.1 tree;
 * Tarantool's fork saves the VM state in it too: 96/+48 (lj_frame.h). */
#define CFRAME_80 .cf_prev = 32, .cf_size = 80
#define CFRAME_96 .cf_prev = 48, .cf_size = 96

#define GC64_OBJECTS                                                                               \
    .gc64 = true, .L_glref = 16, .L_base = 32, .L_top = 40, .L_stack = 56, .L_cframe = 80,         \
    .L_stacksize = 88, .gct = 9, .fn_ffid = 10, .fn_pc = 32, .fn_uvptr = 40, .fn_cf = 40,          \
    .fn_size = 48, .pt_sizebc = 12, .pt_k = 32, .pt_sizekgc = 48, .pt_sizept = 56,                 \
    .pt_sizeuv = 60, .pt_chunkname = 64, .pt_firstline = 72, .pt_numline = 76, .pt_lineinfo = 80,  \
    .pt_uvinfo = 88, .pt_varinfo = 96, .pt_size = 104, .uv_v = 32, .T_nsnap = 10, .T_ir = 32,      \
    .T_snap = 48, .T_snapmap = 56, .T_startpt = 64, .T_startpc = 72, .T_szmcode = 84,              \
    .T_mcode = 88, .T_mcloop = 96, .T_spadjust = 102, .T_traceno = 104, .T_root = 108,             \
    .T_nins = 12, .T_nk = 40, .T_nsnapmap = 44, .T_size = 120, .snap_size = 12
#define GC64_COMMON GC64_OBJECTS, .cf_L = 16, .cf_pc = 24, .cf_nres = 8, TRACE_X64_COMMON

#define NOGC64_COMMON                                                                              \
    .gc64 = false, .L_glref = 8, .L_base = 16, .L_top = 24, .L_stack = 36, .L_cframe = 48,         \
    .L_stacksize = 56, .gct = 5, .fn_ffid = 6, .fn_pc = 16, .fn_uvptr = 20, .fn_cf = 24,           \
    .fn_size = 32, .pt_sizebc = 8, .pt_k = 16, .pt_sizekgc = 24, .pt_sizept = 32, .pt_sizeuv = 36, \
    .pt_chunkname = 40, .pt_firstline = 44, .pt_numline = 48, .pt_lineinfo = 52, .pt_uvinfo = 56,  \
    .pt_varinfo = 60, .pt_size = 64, .uv_v = 16, .cf_L = 24, .cf_pc = 28, .cf_nres = 16,           \
    .T_nsnap = 6, .T_ir = 16, .T_snap = 32, .T_snapmap = 40, .T_startpt = 48, .T_startpc = 52,     \
    .T_szmcode = 60, .T_mcode = 64, .T_mcloop = 72, .T_spadjust = 78, .T_traceno = 80,             \
    .T_root = 84, .T_nins = 8, .T_nk = 24, .T_nsnapmap = 28, .T_size = 96, .snap_size = 12,        \
    TRACE_X64_COMMON

const struct lj_layout ss_lj_layouts[] = {
    {.name = "openresty-luajit2-2.1-20230119",
     SNAP_MCOFS,
     IR_CALLS_21,
     GC64_COMMON,
     CFRAME_80,
     .hints_req = SS_LJ_HINT_EXDATA,
     .hints_forbid = SS_LJ_HINT_LJ52, /* other fast-function ids */
     .sizeof_L = 112,
     .G_vmstate = 184,
     .G_gc_total = 16,
     .G_mainthref = 192,
     .G_strempty = 120,
     .G_cur_L = 368,
     .G_jit_base = 376,
     .G_size = 736,
     .g2disp = 4008,
     .g2j = 736,
     .J_trace = 384,
     .J_sizetrace = 396,
     .str_len = 20,
     .str_data = 24,
     .ff = ss_lj_ff_openresty,
     .nff = &ss_lj_ff_openresty_n},
    {.name = "debian-luajit-2.1.0-beta3-git20220320",
     SNAP_MCOFS,
     IR_CALLS_21,
     GC64_COMMON,
     CFRAME_80,
     .hints_forbid = SS_LJ_HINT_EXDATA,
     .sizeof_L = 96,
     .G_vmstate = 184,
     .G_gc_total = 16,
     .G_mainthref = 192,
     .G_strempty = 120,
     .G_cur_L = 368,
     .G_jit_base = 376,
     .G_size = 728,
     .g2disp = 3968,
     .g2j = 728,
     .J_trace = 384,
     .J_sizetrace = 396,
     .str_len = 20,
     .str_data = 24,
     .ff = ss_lj_ff_debian,
     .nff = &ss_lj_ff_debian_n},
    {.name = "luajit-2.1-upstream-gc64",
     SNAP_MCOFS,
     IR_CALLS_21,
     GC64_COMMON,
     CFRAME_80,
     .hints_forbid = SS_LJ_HINT_EXDATA,
     .sizeof_L = 96,
     .G_vmstate = 184,
     .G_gc_total = 16,
     .G_mainthref = 192,
     .G_strempty = 120,
     .G_cur_L = 376,
     .G_jit_base = 384,
     .G_size = 744,
     .g2disp = 4000,
     .g2j = 744,
     .J_trace = 384,
     .J_sizetrace = 396,
     .str_len = 20,
     .str_data = 24,
     .ff = ss_lj_ff_debian,
     .nff = &ss_lj_ff_debian_n},
    {.name = "tarantool-2.6-luajit-nogc64",
     SNAP_NO_MCOFS,
     NOGC64_COMMON,
     CFRAME_80,
     .sizeof_L = 64,
     .G_vmstate = 120,
     .G_gc_total = 64 /* strhash, strmask, strnum, strbloom first */,
     .G_mainthref = 160,
     .G_strempty = 140,
     .G_cur_L = 280,
     .G_jit_base = 284,
     .G_size = 448,
     .g2disp = 3144,
     .g2j = 448,
     .J_trace = 368,
     .J_sizetrace = 380,
     .str_len = 12,
     .str_data = 16,
     .ff = ss_lj_ff_tarantool,
     .nff = &ss_lj_ff_tarantool_n},
    /* LUAJIT_DISABLE_JIT: GG_State has no jit_State, so the dispatch table
     * follows global_State (G2DISP = sizeof(global_State)); nothing else
     * moves. The dispatch-table check tells them from the JIT builds. */
    {.name = "luajit-2.1-git20220320-gc64-nojit",
     SNAP_MCOFS,
     GC64_COMMON,
     CFRAME_80,
     .hints_forbid = SS_LJ_HINT_EXDATA,
     .nojit = true,
     .sizeof_L = 96,
     .G_vmstate = 184,
     .G_gc_total = 16,
     .G_mainthref = 192,
     .G_strempty = 120,
     .G_cur_L = 368,
     .G_jit_base = 376,
     .G_size = 728,
     .g2disp = 728,
     .str_len = 20,
     .str_data = 24,
     .ff = ss_lj_ff_debian_nojit,
     .nff = &ss_lj_ff_debian_nojit_n},
    {.name = "luajit-2.1-git20220320-nogc64-nojit",
     SNAP_MCOFS,
     NOGC64_COMMON,
     CFRAME_80,
     .nojit = true,
     .sizeof_L = 64,
     .G_vmstate = 136,
     .G_gc_total = 16,
     .G_mainthref = 140,
     .G_strempty = 76,
     .G_cur_L = 288,
     .G_jit_base = 292,
     .G_size = 488,
     .g2disp = 488,
     .str_len = 16,
     .str_data = 20,
     .ff = ss_lj_ff_debian_nojit,
     .nff = &ss_lj_ff_debian_nojit_n},
    {.name = "luajit-2.1-git20220320-nogc64",
     SNAP_MCOFS,
     NOGC64_COMMON,
     CFRAME_80,
     .sizeof_L = 64,
     .G_vmstate = 136,
     .G_gc_total = 16,
     .G_mainthref = 140,
     .G_strempty = 76,
     .G_cur_L = 288,
     .G_jit_base = 292,
     .G_size = 488,
     .g2disp = 3176,
     .g2j = 488,
     .J_trace = 360,
     .J_sizetrace = 372,
     .str_len = 16,
     .str_data = 20,
     .ff = ss_lj_ff_debian,
     .nff = &ss_lj_ff_debian_n},
    /* Tarantool's LuaJIT fork (tarantool/luajit b52fe979, 2024-10, what
     * Tarantool 2.11/3.x link in), measured by offsetof() on its tree
     * (test/luajit/lj_offsets.c; test/luajit/build-ttlj.sh builds it):
     * global_State starts with strhash/strmask/strnum, the smart-string
     * bloom filters and hit/miss counters; vmstate sits after uvhead,
     * mem_L between cur_L and jit_base, sysprof's top_frame_info at the
     * end; GCstr has no sid (len +16/+12); the cframe is 96 bytes with
     * SAVE_CFRAME at +48 (SAVE_VMSTATE at +32, vm_x64.dasc/vm_x86.dasc);
     * VM states LFUNC, FFUNC, CFUNC after INTERP (lj_obj.h). */
    {.name = "tarantool-luajit-b52fe979-gc64",
     SNAP_MCOFS,
     IR_CALLS_TTFORK,
     GC64_COMMON,
     .hints_req = SS_LJ_HINT_MISC,
     .vmst_shift = 2,
     CFRAME_96,
     .sizeof_L = 96,
     .G_vmstate = 440,
     .G_gc_total = 80,
     .G_mainthref = 336,
     .G_strempty = 304,
     .G_cur_L = 480,
     .G_jit_base = 496,
     .G_size = 840,
     .g2disp = 4112,
     .g2j = 840,
     .J_trace = 392,
     .J_sizetrace = 404,
     .str_len = 16,
     .str_data = 24,
     .ff = ss_lj_ff_ttfork,
     .nff = &ss_lj_ff_ttfork_n},
    {.name = "tarantool-luajit-b52fe979-gc64-nojit",
     SNAP_MCOFS,
     GC64_COMMON,
     .hints_req = SS_LJ_HINT_MISC,
     .vmst_shift = 2,
     .nojit = true,
     CFRAME_96,
     .sizeof_L = 96,
     .G_vmstate = 440,
     .G_gc_total = 80,
     .G_mainthref = 336,
     .G_strempty = 304,
     .G_cur_L = 480,
     .G_jit_base = 496,
     .G_size = 840,
     .g2disp = 840,
     .str_len = 16,
     .str_data = 24,
     .ff = ss_lj_ff_ttfork_nojit,
     .nff = &ss_lj_ff_ttfork_nojit_n},
    {.name = "tarantool-luajit-b52fe979-nogc64",
     SNAP_MCOFS,
     NOGC64_COMMON,
     .hints_req = SS_LJ_HINT_MISC,
     .vmst_shift = 2,
     CFRAME_96,
     .sizeof_L = 64,
     .G_vmstate = 352,
     .G_gc_total = 80,
     .G_mainthref = 272,
     .G_strempty = 248,
     .G_cur_L = 392,
     .G_jit_base = 400,
     .G_size = 584,
     .g2disp = 3304,
     .g2j = 584,
     .J_trace = 368,
     .J_sizetrace = 380,
     .str_len = 12,
     .str_data = 16,
     .ff = ss_lj_ff_ttfork,
     .nff = &ss_lj_ff_ttfork_n},
    {.name = "tarantool-luajit-b52fe979-nogc64-nojit",
     SNAP_MCOFS,
     NOGC64_COMMON,
     .hints_req = SS_LJ_HINT_MISC,
     .vmst_shift = 2,
     .nojit = true,
     CFRAME_96,
     .sizeof_L = 64,
     .G_vmstate = 352,
     .G_gc_total = 80,
     .G_mainthref = 272,
     .G_strempty = 248,
     .G_cur_L = 392,
     .G_jit_base = 400,
     .G_size = 584,
     .g2disp = 584,
     .str_len = 12,
     .str_data = 16,
     .ff = ss_lj_ff_ttfork_nojit,
     .nff = &ss_lj_ff_ttfork_nojit_n},
    /* Debian 12's arm64 luajit/libluajit-5.1-2: offsetof() on its tree
     * built with aarch64-linux-gnu-gcc. Only GG_State's tail differs from
     * x86-64 (jit_State is 24 bytes smaller: G2DISP 3944, J.trace 360) and
     * the cframe (layout.h). GCtrace, SnapShot and the IR are x86-64's;
     * vm_arm64.dasc BC_JLOOP: sub sp, sp, #16 (SPS_FIXED). */
    {.name = "debian-luajit-2.1.0-beta3-git20220320-arm64",
     SNAP_MCOFS,
     IR_CALLS_21,
     GC64_OBJECTS,
     .cf_prev = LJ_A64_CF_PREV,
     .cf_pc = LJ_A64_CF_PC,
     .cf_L = LJ_A64_CF_L,
     .cf_nres = LJ_A64_CF_NRES,
     .cf_size = LJ_A64_CFRAME_SIZE,
     IR_21,
     .trace_sp_bias = 16,
     .hints_forbid = SS_LJ_HINT_EXDATA,
     .sizeof_L = 96,
     .G_vmstate = 184,
     .G_gc_total = 16,
     .G_mainthref = 192,
     .G_strempty = 120,
     .G_cur_L = 368,
     .G_jit_base = 376,
     .G_size = 728,
     .g2disp = 3944,
     .g2j = 728,
     .J_trace = 360,
     .J_sizetrace = 372,
     .str_len = 20,
     .str_data = 24,
     .ff = ss_lj_ff_debian,
     .nff = &ss_lj_ff_debian_n},
    /* Tarantool's LuaJIT fork b52fe979 on arm64 (GC64 always there):
     * offsetof() on its tree built with aarch64-linux-gnu-gcc
     * (test/luajit/build-ttlj-arm64.sh). Its x86-64 row but for the arm64
     * cframe (208 bytes, no SAVE_VMSTATE slot) and GG_State's tail
     * (jit_State 32 bytes smaller: G2DISP 4080, J.trace 360). The template
     * of the facts its code does not show: without it the derived layout
     * took Debian's row (G->mainthref 8 after vmstate, where the fork has
     * it 104 before) and no layout fitted: no Lua frame at all. */
    {.name = "tarantool-luajit-b52fe979-gc64-arm64",
     SNAP_MCOFS,
     IR_CALLS_TTFORK,
     GC64_OBJECTS,
     .cf_prev = LJ_A64_CF_PREV,
     .cf_pc = LJ_A64_CF_PC,
     .cf_L = LJ_A64_CF_L,
     .cf_nres = LJ_A64_CF_NRES,
     .cf_size = LJ_A64_CFRAME_SIZE,
     IR_21,
     .trace_sp_bias = 16,
     .hints_req = SS_LJ_HINT_MISC,
     .vmst_shift = 2,
     .sizeof_L = 96,
     .G_vmstate = 440,
     .G_gc_total = 80,
     .G_mainthref = 336,
     .G_strempty = 304,
     .G_cur_L = 480,
     .G_jit_base = 496,
     .G_size = 840,
     .g2disp = 4080,
     .g2j = 840,
     .J_trace = 360,
     .J_sizetrace = 372,
     .str_len = 16,
     .str_data = 24,
     .ff = ss_lj_ff_ttfork,
     .nff = &ss_lj_ff_ttfork_n},
};
const unsigned ss_lj_nlayouts = sizeof(ss_lj_layouts) / sizeof(ss_lj_layouts[0]);

/* The first words of the dispatch table at G + G2DISP are the opcode
 * handlers: addresses inside the VM code [lo, hi). Tells builds apart that
 * differ only in what sits between global_State and the dispatch table
 * (jit_State, OpenResty's extra fields) when no DISPATCH register is known. */
#define DISP_WORDS 8
static const char *check_dispatch(const struct lj_layout *lay, struct ss_mem *m, uint64_t G,
                                  uint64_t lo, uint64_t hi)
{
    uint64_t d[DISP_WORDS];
    if (ss_mem_read(m, G + (uint64_t)(int64_t)lay->g2disp, d, sizeof(d)))
        return "cannot read the dispatch table";
    for (unsigned i = 0; i < DISP_WORDS; i++)
        if (d[i] < lo || d[i] >= hi) return "dispatch table entries are not VM code";
    return NULL;
}

/* Check one layout against the bytes around G. buf holds [G - 128, G + 896). */
static const char *check_one(const struct lj_layout *lay, const uint8_t *buf, uint64_t G,
                             uint64_t dispatch)
{
    const uint8_t *g = buf + 128;
    const uint8_t *mainL = g - lay->sizeof_L;
    if (lj_ref(lay, g + lay->G_mainthref) != G - lay->sizeof_L)
        return "G->mainthref != G - sizeof(lua_State)";
    if (mainL[lay->gct] != LJ_GCT_THREAD) return "main thread type byte";
    if (lj_ref(lay, mainL + lay->L_glref) != G) return "mainthread->glref != G";
    const uint8_t *se = g + lay->G_strempty;
    if (se[lay->gct] != LJ_GCT_STR || lj_u32(se + lay->str_len) != 0)
        return "G->strempty is not an empty string";
    if (se[lay->str_data] != 0) /* stremptyz follows the empty string */
        return "G->strempty terminator";
    int32_t vms = (int32_t)lj_u32(g + lay->G_vmstate);
    if (vms < -16) return "G->vmstate out of range";
    if (dispatch && dispatch != G + (uint64_t)(int64_t)lay->g2disp)
        return "DISPATCH register != G + G2DISP";
    return NULL;
}

int ss_lj_layout_verify(const struct ss_lj_elfinfo *info, struct ss_mem *m, uint64_t G,
                        uint64_t dispatch, struct lj_layout *scratch, const struct lj_layout **out,
                        bool *derived, char *why, size_t whylen)
{
    return ss_lj_layout_verify_vm(info, 0, 0, m, G, dispatch, scratch, out, derived, why, whylen);
}

/* Is row lay of the VM's architecture (every build holds both's rows: an
 * arm64 capture replays on x86-64)? arm64's VM FDE gave its cframe size. */
static bool arch_row(const struct ss_lj_elfinfo *info, const struct lj_layout *lay)
{
    return (lay->cf_size == LJ_A64_CFRAME_SIZE) == (info->vm_cfa_off == LJ_A64_CFRAME_SIZE);
}

static bool hinted_row(const struct ss_lj_elfinfo *info, const struct lj_layout *lay)
{
    return (info->hints & lay->hints_req) == lay->hints_req && !(info->hints & lay->hints_forbid);
}

/* The layout from the derived facts over each compatible row as template
 * (layout_derive.c), first the rows the static hints point at; a derived
 * layout equal to a row is reported as that row. */
static const char *try_derived(const struct ss_lj_elfinfo *info, const uint8_t *buf, uint64_t G,
                               uint64_t dispatch, struct ss_mem *m, uint64_t vm_lo, uint64_t vm_hi,
                               struct lj_layout *d, const struct lj_layout **out)
{
    const char *first = NULL;
    bool nojit = info->exit_lo == 0;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < ss_lj_nlayouts; i++) {
            const struct lj_layout *t = &ss_lj_layouts[i];
            if (t->gc64 != info->gc64 || t->nojit != nojit || !arch_row(info, t) ||
                hinted_row(info, t) != (pass == 0))
                continue;
            ss_lj_layout_apply(info, t, 0, d);
            /* sizeof(lua_State): the main thread sits just below G */
            uint64_t mainL = lj_ref(d, buf + 128 + d->G_mainthref);
            if (mainL >= G || G - mainL < 32 || G - mainL > 128 || ((G - mainL) & 7)) {
                if (!first) first = "G->mainthref is not just below G";
                continue;
            }
            d->sizeof_L = (uint32_t)(G - mainL);
            const char *bad = check_one(d, buf, G, dispatch);
            if (!bad && vm_hi) bad = check_dispatch(d, m, G, vm_lo, vm_hi);
            if (bad) {
                if (!first) first = bad;
                continue;
            }
            *out = d;
            for (unsigned k = 0; k < ss_lj_nlayouts; k++)
                if (ss_lj_layout_same(d, &ss_lj_layouts[k])) *out = &ss_lj_layouts[k];
            return NULL;
        }
    return first ? first : "no template row for this mode";
}

int ss_lj_layout_verify_vm(const struct ss_lj_elfinfo *info, uint64_t vm_lo, uint64_t vm_hi,
                           struct ss_mem *m, uint64_t G, uint64_t dispatch,
                           struct lj_layout *scratch, const struct lj_layout **out, bool *derived,
                           char *why, size_t whylen)
{
    uint8_t buf[128 + 896];
    *derived = false;
    if (G < 4096 || (G & 7)) {
        snprintf(why, whylen, "global_State pointer 0x%llx is not plausible",
                 (unsigned long long)G);
        return -EINVAL;
    }
    int rc = ss_mem_read(m, G - 128, buf, sizeof(buf));
    if (rc) {
        snprintf(why, whylen, "cannot read global_State at 0x%llx (%d)", (unsigned long long)G, rc);
        return rc;
    }
    const char *dbad = NULL;
    if (scratch && ss_lj_layout_derivable(info)) {
        dbad = try_derived(info, buf, G, dispatch, m, vm_lo, vm_hi, scratch, out);
        if (!dbad) {
            *derived = true;
            return 0;
        }
    }
    const char *first = NULL, *firstname = NULL;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: layouts whose static hints match; pass 1: the others */
        for (unsigned i = 0; i < ss_lj_nlayouts; i++) {
            const struct lj_layout *lay = &ss_lj_layouts[i];
            if (lay->gc64 != info->gc64 || !arch_row(info, lay)) continue;
            if (hinted_row(info, lay) != (pass == 0)) continue;
            const char *bad = check_one(lay, buf, G, dispatch);
            if (!bad && vm_hi) bad = check_dispatch(lay, m, G, vm_lo, vm_hi);
            if (!bad) {
                *out = lay;
                return 0;
            }
            if (!first) {
                first = bad;
                firstname = lay->name;
            }
        }
    }
    snprintf(why, whylen, "no known LuaJIT layout fits (%s%s, %s): %s%s%s",
             info->version[0] ? info->version : "unknown version", info->gc64 ? " GC64" : "",
             firstname ? firstname : "no candidate", first ? first : "no layout for this mode",
             dbad ? "; derived layout: " : "", dbad ? dbad : "");
    return -ENOENT;
}
