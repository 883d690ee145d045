/* unwind/luajit/ljops.h: the bytecode, IR opcode, IR type and IR field
 * numbers the trace walkers read (trace_fwd.c, trace_fwdcalls.c,
 * trace_irfacts.c, trace_post.c, trace_load.c, names.c), stated once.
 *
 * BC_*: lj_bc.h BCDEF, the same in every tree here (Debian's 2.1 builds,
 * OpenResty's luajit2, Tarantool's fork). IR_*, IRT_*, IRFL_*: lj_ir.h
 * IRDEF / IRTDEF / IRFLDEF of the 2.1 trees whose CALLXS is 99 (not
 * Tarantool's fork: 97); the forward replay that reads them proves nothing
 * on a tree whose layout says otherwise (trace_fwdcalls.c checks lj_layout's
 * ir_callxs and ir_kgc, layout.c). */
#ifndef SS_LJOPS_H
#define SS_LJOPS_H

// clang-format off
enum {
    BC_ISNEP = 11, BC_IST = 14, BC_ISF = 15, BC_MOV = 18, BC_NOT = 19, BC_UNM = 20, BC_LEN = 21,
    BC_ADDVN = 22, BC_MODNV = 31, BC_ADDVV = 32, BC_POW = 37, BC_KSTR = 39, BC_KCDATA = 40,
    BC_KSHORT = 41, BC_KNUM = 42, BC_KPRI = 43, BC_KNIL = 44, BC_UGET = 45, BC_UCLO = 50,
    BC_GGET = 54, BC_TGETS = 57, BC_CALLM = 65, BC_CALL = 66, BC_CALLT = 68, BC_ITERC = 69,
    BC_ISNEXT = 72, BC_RETM = 73, BC_RET = 74, BC_RET0 = 75, BC_RET1 = 76, BC_FORI = 77,
    BC_JFORI = 78, BC_FORL = 79, BC_IFORL = 80, BC_ITERL = 82, BC_IITERL = 83, BC_LOOP = 85,
    BC_ILOOP = 86, BC_JMP = 88, BC_FUNCF = 89, BC_JFUNCF = 91
};
enum {
    IR_EQ = 8, IR_RETF = 11, IR_NOP = 12, IR_KGC = 24, IR_KSLOT = 30, IR_HREFK = 57,
    IR_HREF = 58, IR_NEWREF = 59, IR_UREFO = 60, IR_UREFC = 61, IR_HLOAD = 67, IR_ULOAD = 68,
    IR_FLOAD = 69, IR_SLOAD = 71, IR_ASTORE = 74, IR_USTORE = 76, IR_XSTORE = 78,
    IR_BUFHDR = 85, IR_BUFPUT = 86, IR_BUFSTR = 87, IR_CALLL = 97, IR_CALLS = 98,
    IR_CALLXS = 99, IR_CARG = 100
};
enum {
    IRT_FALSE = 1, IRT_TRUE = 2, IRT_STR = 4, IRT_FUNC = 8, IRT_P64 = 9, IRT_CDATA = 10,
    IRT_TAB = 11, IRT_NUM = 14, IRT_I8 = 15, IRT_U32 = 20
};
enum { IRFL_FUNC_ENV = 1 };
// clang-format on

#endif
