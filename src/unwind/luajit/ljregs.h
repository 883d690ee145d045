/* unwind/luajit/ljregs.h: the LuaJIT VM's registers by role, per
 * architecture, in enum ss_reg (sample registers) and DWARF numbering
 * (native frames' registers; unwind/native.h).
 *
 * x86-64 (vm_x64.dasc, GC64): BASE rdx, PC rbx, KBASE r15, DISPATCH r14
 * (G at a fixed offset below it), RB rbp; traces keep BASE where the
 * assembler chose (RID_* numbers: x86_to_ss in trace_load.c).
 *
 * arm64 (vm_arm64.dasc): BASE x19, KBASE x20, PC x21, GL x22 (global_State
 * itself: no DISPATCH register, dispatch goes through GL), L x23; no RB
 * that survives a call (the frame pointer x29 stands in). The LuaJIT walker
 * does not run on arm64 yet: detect.c refuses arm64 VMs with a reason that
 * record and info print, so these only keep the code building for the
 * day it does. */
#ifndef SS_UNWIND_LUAJIT_LJREGS_H
#define SS_UNWIND_LUAJIT_LJREGS_H

#include "stacksnap/ss.h"
#include "unwind/native.h"

#if defined(__x86_64__)
#define LJ_WALKS 1 /* the LuaJIT walker runs on this architecture */
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
#define LJ_WALKS 0
#define LJ_REG_BASE SS_REG_X19
#define LJ_REG_KBASE SS_REG_X20
#define LJ_REG_PC SS_REG_X21
#define LJ_REG_DISPATCH SS_REG_X22 /* GL */
#define LJ_REG_RB SS_REG_X29
#define LJ_DR_KBASE ((enum ss_dreg)20)
#define LJ_DR_PC ((enum ss_dreg)21)
#define LJ_DR_DISPATCH ((enum ss_dreg)22)
#define LJ_DR_RB SS_DR_X29
#endif

#endif
