/* unwind/luajit/ljregs.h: the LuaJIT VM's registers by role, per
 * architecture, in enum ss_reg (sample registers) and DWARF numbering
 * (native frames' registers; unwind/native.h).
 *
 * x86-64 (vm_x64.dasc, GC64): BASE rdx, PC rbx, KBASE r15, DISPATCH r14
 * (G at a fixed offset below it), RB rbp; traces keep BASE where the
 * assembler chose (RID_* numbers: x86_to_ss in trace_load.c).
 *
 * arm64 (vm_arm64.dasc): BASE x19, KBASE x20, PC x21, GL x22 (global_State
 * itself: no DISPATCH register, dispatch goes through GL), L x23. All five
 * are callee-saved, so BASE also stands in for x86-64's RB (the BASE of an
 * ASM fast function that called C keeps living in x19). Traces keep GL in
 * x22 (RID_GL, fixed) and BASE where the assembler chose (RID_* = xN:
 * trace_load.c). Traces never write x29 (RSET_FIXED): it stays the VM
 * frame's frame pointer in trace code, what it calls and the exit handler.
 *
 * The walker itself (luajit/) takes a runtime's architecture from its ELF
 * (struct lj_arch, rt->arch: an arm64 capture replayed by an x86-64 build
 * walks with arm64's), and reads the sample's registers by those numbers
 * (perf's order of that architecture). The LJ_REG_ and LJ_DR_ macros below
 * are this build's, for the adapter of its own native walk (unwind/lua.c). */
#ifndef SS_UNWIND_LUAJIT_LJREGS_H
#define SS_UNWIND_LUAJIT_LJREGS_H

#include <stdbool.h>

#include "stacksnap/ss.h"
#include "unwind/native.h"

/* A LuaJIT VM's architecture: its registers by role, as sample register
 * numbers (perf's order: x86-64's enum perf_event_x86_regs, arm64's x0-x30,
 * sp, pc); 0xff none. */
struct lj_arch {
    bool a64;
    uint8_t base, pc, kbase, disp, rb; /* disp: DISPATCH (x86-64), GL (arm64) */
    uint8_t sp, ip, fp, lr;
    bool gl_is_g;        /* disp holds G itself (arm64), not G + G2DISP */
    bool funcc_kbase;    /* BC_FUNCC loads KBASE with the lua_CFunction it calls */
    uint32_t mcode_unit; /* SnapShot.mcofs units: bytes, 4-byte instructions */
    uint64_t va_end;     /* user addresses are below (ss.h's SS_USER_VA_END of that build) */
};
extern const struct lj_arch ss_lj_arch_x64, ss_lj_arch_a64;

#if defined(__x86_64__)
#define LJ_REG_BASE SS_REG_DX
#define LJ_REG_PC SS_REG_BX
#define LJ_REG_KBASE SS_REG_R15
#define LJ_REG_DISPATCH SS_REG_R14
#define LJ_REG_RB SS_REG_BP
#define LJ_DR_PC SS_DR_RBX
#define LJ_DR_KBASE SS_DR_R15
#define LJ_DR_DISPATCH SS_DR_R14
#define LJ_DR_RB SS_DR_RBP
#else
#define LJ_REG_BASE SS_REG_X19
#define LJ_REG_KBASE SS_REG_X20
#define LJ_REG_PC SS_REG_X21
#define LJ_REG_DISPATCH SS_REG_X22 /* GL: G itself, not G + G2DISP */
#define LJ_REG_RB SS_REG_X19       /* BASE: callee-saved on arm64 */
#define LJ_DR_BASE ((enum ss_dreg)19)
#define LJ_DR_KBASE ((enum ss_dreg)20)
#define LJ_DR_PC ((enum ss_dreg)21)
#define LJ_DR_DISPATCH ((enum ss_dreg)22)
#define LJ_DR_L ((enum ss_dreg)23)
#define LJ_DR_RB LJ_DR_BASE
#endif

#endif
