/* unwind/luajit/exit.c: the VM frame under a trace that is exiting. The
 * native walk cannot step through vm_exit_handler (the VM's one FDE has the
 * wrong CFA rule there); the handler's fixed stack layout and the ExitState
 * it builds give the trace's stack pointer, and the VM frame the trace ran
 * on is the first plausible cframe above it that the thread's live cframe
 * chain reaches. detect.c finds x86-64's handler by its byte pattern,
 * derive_a64.c arm64's by its code; arm64's ExitState also holds the
 * trace's x29, the VM frame's own frame pointer. */
#include "unwind/luajit/layout.h"
#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"

/* Is c a VM frame's cframe that the live cframe chain of its SAVE_L
 * reaches (L's newest cframe, or an older one: lj_trace_exit runs the
 * snapshot restore under lj_vm_cpcall, whose cframe links to c)? */
static bool chain_reaches(const struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t c)
{
    const struct lj_layout *lay = rt->lay;
    unsigned gct = rt->info.gc64 ? 9 : 5;
    uint64_t L = 0;
    if (!ss_lj_trace_plausible(rt, m, c + rt->info.vm_cfa_off) ||
        ss_mem_read(m, c + lay->cf_L, &L, 8))
        return false;
    if (!lay->gc64) L = (uint32_t)L;
    uint8_t lb[128];
    if (lay->L_cframe + 8 > sizeof(lb) || ss_mem_read(m, L, lb, lay->L_cframe + 8) ||
        lb[gct] != LJ_GCT_THREAD)
        return false;
    uint64_t cf = lj_u64(lb + lay->L_cframe) & ~(uint64_t)3;
    for (int k = 0; k < 4 && cf && cf <= c; k++) {
        if (cf == c) return true;
        if (ss_mem_read(m, cf + lay->cf_prev, &cf, 8)) break;
        cf &= ~(uint64_t)3;
    }
    return false;
}

/* ExitState (lj_target_x86.h): fpr[16] then gpr[16] in register order;
 * gpr[RID_RSP] holds the trace's rsp, which the handler's pushes (2 exit
 * number slots, 14 registers) and its 128 bytes for the FPRs put exactly
 * 256 bytes above the ExitState it passes to lj_trace_exit. */
#define EXIT_GPR_RSP (16 * 8 + 4 * 8)
#define EXIT_FRAME 256
#define EXIT_SCAN 4096 /* bytes of trace spill area searched for the cframe */

/* The trace's rsp for a leaf at vaddr `at` in vm_exit_handler: the exit
 * stub pushed 2 slots, the handler pushes 14 registers (instruction ends
 * at these offsets of its prologue: exit_pushes[k] pushes done when k
 * bytes are), then `sub rsp, 128`. 0 outside, or in the sub itself. */
static uint64_t exit_leaf_t(const struct ss_lj_elfinfo *in, uint64_t at, uint64_t rsp)
{
    static const int8_t pushes[26] = {0, -1, 1, -1, 2,  -1, 3,  -1, 4,  -1, 5,  -1, 6,
                                      7, 8,  9, -1, -1, -1, -1, 9,  10, 11, 12, 13, 14};
    if (!in->exit_lo || !in->exit_body || at < in->exit_lo || at > in->exit_ret - 5) return 0;
    uint64_t k = at - in->exit_lo;
    if (k < sizeof(pushes)) return pushes[k] < 0 ? 0 : rsp + 16 + 8 * (uint64_t)pushes[k];
    if (at <= in->exit_body - 7) return rsp + 16 + 8 * 14; /* up to the sub */
    return at >= in->exit_body ? rsp + EXIT_FRAME : 0;
}

static uint64_t exit_cfa_x64(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t ip, uint64_t rsp,
                             bool leaf)
{
    uint64_t ret = rt->bias + rt->info.exit_ret, T = 0;
    if (!leaf && ip != ret) return 0;
    if (leaf && !(T = exit_leaf_t(&rt->info, ip - rt->bias, rsp))) return 0;
    const struct lj_layout *lay = rt->lay;
    /* past its pushes the ExitState holds T itself: check it */
    if ((!leaf || ip - rt->bias >= rt->info.exit_body) &&
        (ss_mem_read(m, rsp + EXIT_GPR_RSP, &T, 8) || T != rsp + EXIT_FRAME))
        return 0;
    /* the VM frame the trace runs on: cframe = T + 16 + spadjust */
    for (uint64_t c = T + lay->trace_sp_bias; c < T + lay->trace_sp_bias + EXIT_SCAN; c += 16)
        if (chain_reaches(rt, m, c)) return c + rt->info.vm_cfa_off;
    return 0;
}

/* arm64 (vm_arm64.dasc vm_exit_handler, lj_target_arm64.h ExitState): the
 * exit stub stores lr at the trace's sp and calls the handler, which
 * lowers sp by 512 and saves fpr[32] then gpr[32] there: gpr[31] is the
 * trace's sp (sp + 512), gpr[29] its x29, the VM frame's frame pointer
 * (traces never write x29: CFA = x29 + 16). Only the handler's call of
 * lj_trace_exit is known (a leaf in the handler itself keeps its native
 * frames). */
#define EXIT_FRAME_A64 512
#define EXIT_GPR(n) ((32u + (n)) * 8)

static uint64_t exit_cfa_a64(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t ip, uint64_t sp,
                             bool leaf)
{
    if (leaf || ip != rt->bias + rt->info.exit_ret) return 0;
    uint64_t T = 0, fp = 0;
    if (ss_mem_read(m, sp + EXIT_GPR(31), &T, 8) || T != sp + EXIT_FRAME_A64 ||
        ss_mem_read(m, sp + EXIT_GPR(29), &fp, 8))
        return 0;
    uint64_t cfa = fp + LJ_A64_CFA_FP;
    if (fp & 15 || cfa < T + rt->lay->trace_sp_bias + rt->info.vm_cfa_off || cfa - T > (1u << 20) ||
        !chain_reaches(rt, m, cfa - rt->info.vm_cfa_off))
        return 0;
    return cfa;
}

/* The VM frame's CFA under the exiting trace of the first runtime whose
 * exit handler ip is in (each by its VM's architecture). */
static uint64_t exit_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *m,
                         uint64_t ip, uint64_t rsp, bool leaf)
{
    for (uint32_t i = 0; i < nrts; i++) {
        struct ss_lj_runtime *rt = rts[i];
        if (!rt || !rt->lay || rt->disabled || !rt->info.exit_ret) continue;
        uint64_t cfa =
            rt->arch->a64 ? exit_cfa_a64(rt, m, ip, rsp, leaf) : exit_cfa_x64(rt, m, ip, rsp, leaf);
        if (cfa || (!leaf && ip == rt->bias + rt->info.exit_ret)) return cfa;
        if (leaf && !rt->arch->a64 && exit_leaf_t(&rt->info, ip - rt->bias, rsp)) return 0;
    }
    return 0;
}

bool ss_lj_exit_ret(struct ss_lj_runtime *const *rts, uint32_t nrts, uint64_t ip)
{
    for (uint32_t i = 0; i < nrts; i++) {
        const struct ss_lj_runtime *rt = rts[i];
        if (rt && rt->lay && !rt->disabled && rt->info.exit_ret &&
            ip == rt->bias + rt->info.exit_ret)
            return true;
    }
    return false;
}

uint64_t ss_lj_exit_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *m,
                        uint64_t ip, uint64_t rsp)
{
    return exit_cfa(rts, nrts, m, ip, rsp, false);
}

uint64_t ss_lj_exit_leaf_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *m,
                             uint64_t ip, uint64_t rsp)
{
    return exit_cfa(rts, nrts, m, ip, rsp, true);
}
