/* test/fuzz/lj_input.h: the input format of the LuaJIT walker fuzzer
 * (lj_fuzz.c), shared with its seed generator (lj_mkseed.c).
 *
 * All integers little-endian, nothing aligned:
 *   u8  flags      LJF_* below (GC64, CFA offset, detection hints, version)
 *   u8  nnat       native frames that follow (at most LJF_MAX_NAT)
 *   u64 vm_lo, vm_hi               the VM's code range (load bias 0)
 *   u64 regs[SS_NREGS]             the sample's user registers (perf order)
 *   nnat x { u64 ip, cfa, rbx, r14; u8 have; u8 nflags
 *            [LJN_EXT:   u64 r15, rbp]
 *            [LJN_TRACE: u8 tflags; u32 known; u64 time_ns; u64 regs[SS_NREGS]] }
 *   then memory regions until the end of the input:
 *       { u64 addr; u32 len; u8 bytes[len] }   (len is cut to what is left)
 *   A region whose len has LJF_WINDOW set is also one of the sample's memory
 *   windows (the first 8 such: memory layer 1, as the BPF program copied
 *   them; the torn pass changes only the target's copy).
 * have: SS_LJ_HAVE_RBX/R14, and with LJN_EXT also R15/RBP. nflags: LJN_*.
 * A LJN_TRACE frame is in JIT trace code: before each splice lj_fuzz calls
 * ss_lj_trace_cfa for it as unwind/lua.c does (ip, exact, the frame's
 * registers regs/known, the sample time) and, when that finds the trace,
 * stores the CFA and token it returns in the frame (else the frame keeps
 * its CFA, token 0). tflags: LJT_*; any frame with LJT_CHECK_GUARDS turns
 * ss_lj_runtime_check_guards on. Inputs written before LJN_EXT/LJN_TRACE
 * (nflags 0 or 1) read as before. lj_fuzz's second (torn) pass: see there.
 * The region that holds regs[SP] (the first one) becomes the stack
 * snapshot (memory layer 1); every other read is served from the regions
 * through a target backend (layer 3) and fails with EFAULT outside them. */
#ifndef LJ_INPUT_H
#define LJ_INPUT_H

#define LJF_GC64 0x01u
#define LJF_CFA96 0x02u  /* vm_cfa_off 96 instead of 80 */
#define LJF_HINT_SHIFT 2 /* 3 bits: SS_LJ_HINT_* */
#define LJF_VER_SHIFT 5  /* 3 bits: index into lj_versions[] */

#define LJN_SIGNAL 0x01u /* ss_lj_native.signal */
#define LJN_EXT 0x02u    /* r15 and rbp follow; have keeps R15/RBP */
#define LJN_TRACE 0x04u  /* a trace frame: its ss_lj_trace_cfa arguments follow */

#define LJT_EXACT 0x01u        /* ip is the interrupted instruction */
#define LJT_CHECK_GUARDS 0x02u /* ss_lj_runtime_check_guards(rt, true) */

#define LJF_WINDOW 0x80000000u /* region len flag: also a memory window */
#define LJF_MAX_NAT 64
#define LJF_MAX_REGIONS 1024
#define LJF_HDR_SIZE (2 + 16 + 8 * SS_NREGS)
#define LJF_NAT_SIZE 34
#define LJF_EXT_SIZE 16
#define LJF_TRACE_SIZE (1 + 4 + 8 + 8 * SS_NREGS)

static const char *const lj_versions[8] = {
    "",
    "LuaJIT 2.1.0-beta3",
    "LuaJIT 2.1.1700008891",
    "LuaJIT 2.1.ROLLING",
    "LuaJIT 2.0.5",
    "LuaJIT 2.1.0-beta2",
    "LuaJIT 2.1.0-beta3 tarantool",
    "LuaJIT",
};

#endif
