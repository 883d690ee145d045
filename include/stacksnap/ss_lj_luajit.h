/* LuaJIT frames: public API of src/unwind/luajit/.
 *
 * Three steps, used by process/ (detection), unwind/stack.c (splicing):
 *
 *  1. Detection (per mapped ELF file, by content, never by file name):
 *       struct ss_lj_elfinfo info;
 *       ss_lj_detect_file("/proc/PID/map_files/...", &info, &err);
 *     info.is_luajit says whether the file embeds LuaJIT; vm_lo/vm_hi is the
 *     VM machine code (ELF virtual addresses, add the module's load bias).
 *
 *  2. One runtime per (process, LuaJIT module):
 *       ss_lj_runtime_new(&rt, &info, load_bias, pid, &err);
 *     The per-build layout descriptor is chosen and verified lazily on the
 *     first walk (self-checks on the live lua_State/global_State). If no
 *     descriptor verifies, ss_lj_runtime_diag() returns one message and every
 *     later splice leaves the native frames untouched (never garbage frames).
 *
 *  3. Per sample, after native unwinding:
 *       ss_lj_splice(rts, nrts, mem, regs, natives, n, &out);
 *     natives[] is the native frame list leaf first (ip, CFA, recovered
 *     rbx/r14 per frame). out.items[] is the merged list leaf first: an item
 *     with native >= 0 keeps natives[native] as is, an item with native < 0
 *     is a Lua frame (out.items[i].lua). Each native frame whose ip is in a
 *     VM range is replaced by the Lua frames of the VM entry it runs; C
 *     functions called from Lua keep their native frames above the Lua frame
 *     that called them. Strings in Lua frames are owned by the runtime and
 *     stay valid until ss_lj_runtime_free.
 */
#ifndef STACKSNAP_SS_LJ_LUAJIT_H
#define STACKSNAP_SS_LJ_LUAJIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"

struct ss_mem;

/* ---- 1. detection ---- */

#define SS_LJ_HINT_EXDATA 0x1u    /* exports lua_setexdata: OpenResty luajit2 */
#define SS_LJ_HINT_STRBUF 0x2u    /* exports luaopen_string_buffer: 2.1 >= 2021 */
#define SS_LJ_HINT_TARANTOOL 0x4u /* exports luaL_register_module etc. */
#define SS_LJ_HINT_MISC 0x8u      /* exports luaM_metrics: Tarantool's LuaJIT fork (>= 2.7) */
/* .rodata's library definitions hold rawlen and debug.getuservalue (built
 * with LUAJIT_ENABLE_LUA52COMPAT): four more fast functions, other ids */
#define SS_LJ_HINT_LJ52 0x10u

#define SS_LJ_CHECK_PCALL 0x1u  /* lua_pcall calls into the VM range */
#define SS_LJ_CHECK_CALL 0x2u   /* lua_call calls into the VM range */
#define SS_LJ_CHECK_RESUME 0x4u /* lua_resume calls into the VM range */

#define SS_LJ_STFN_MAX 8

/* Layout facts read from the binary's own machine code (derive.c), in
 * groups: a group's bit is set only when every fact in it was found and the
 * functions it was read from agree. Offsets in bytes. */
#define SS_LJ_D_ENTRY 0x1u /* VM entries: L_glref..L_status, g2disp, G_vmstate, G_cur_L, cf_* */
#define SS_LJ_D_EXIT 0x2u  /* vm_exit_handler: G_jit_base, g2j */
#define SS_LJ_D_JLOOP 0x4u /* BC_JLOOP: J_trace, T_mcode */
#define SS_LJ_D_GC 0x8u    /* the VM's GC checks: G_gc_total (gc.threshold follows it) */
struct ss_lj_derived {
    uint32_t have; /* SS_LJ_D_* */
    int32_t g2disp, g2j;
    uint32_t L_glref, L_base, L_top, L_cframe, L_status;
    uint32_t G_vmstate, G_cur_L, G_jit_base, G_gc_total;
    uint32_t J_trace, T_mcode;
    uint32_t cf_size, cf_L, cf_pc, cf_prev, cf_nres;
    uint32_t nentries; /* VM entry functions decoded that agreed (>= 2) */
};

struct ss_lj_elfinfo {
    bool is_luajit;        /* Lua C API + luaJIT_setmode/luaopen_jit defined */
    bool vm_found;         /* single "zPR" FDE found AND cross-checked */
    bool gc64;             /* "\x02le\x04gc64" present in read-only data */
    uint64_t vm_lo, vm_hi; /* ELF vaddr range of the VM's machine code */
    uint32_t vm_cfa_off;   /* CFA = rsp + vm_cfa_off inside the VM (80/96) */
    uint32_t hints;        /* SS_LJ_HINT_* */
    uint32_t checks;       /* SS_LJ_CHECK_* that confirmed the range */
    char version[40];      /* e.g. "LuaJIT 2.1.0-beta3", "" if not found */
    /* Functions that switch G->vmstate (from .symtab, absent when stripped):
     * code in [lo, hi) runs in VM state `state` (LJ_VMST_*: 2 GC, 3 trace
     * exit, 4 JIT compiler) unless a function called from it switches again. */
    struct ss_lj_stfn {
        uint64_t lo, hi;
        uint32_t state;
    } stfn[SS_LJ_STFN_MAX];
    uint32_t nstfn;
    /* vm_exit_handler's return address after `call lj_trace_exit` (ELF
     * vaddr; 0: no JIT, or not found). Found by the handler's byte pattern,
     * so stripped builds have it too. */
    uint64_t exit_ret;
    uint64_t exit_lo;   /* the handler's first instruction */
    uint64_t exit_body; /* first instruction after its `sub rsp, 128` (0: not found) */
    struct ss_lj_derived derived;
    /* The first derivation step that failed and why ("" when every group
     * the build has was derived; a build without the JIT has no exit
     * handler, BC_JLOOP: not a failure). For diagnostics. */
    char derive_why[96];
};

/* The version of what detection and derivation compute for a file: bumped
 * whenever a change makes them give some file another ss_lj_elfinfo, so a
 * result recorded in a capture (docs/capture-format.md, record type 12) by
 * another version is computed again, not used. */
#define SS_LJ_DETECT_VERSION 2
/* Whether info could be what detection gives (the bounds derive.c checks
 * its facts against, counts and strings in range): for results read from a
 * capture, which is untrusted input. */
bool ss_lj_elfinfo_plausible(const struct ss_lj_elfinfo *info);

/* Inspect one ELF file. Returns 0 (info->is_luajit says the verdict) or a
 * negative errno when the file cannot be read or is not ELF. */
int ss_lj_detect_file(const char *path, struct ss_lj_elfinfo *info, struct ss_err *err);
/* The same on a file image already in memory (name is for messages). */
int ss_lj_detect_image(const uint8_t *img, size_t size, const char *name,
                       struct ss_lj_elfinfo *info, struct ss_err *err);

/* ---- 2. runtime ---- */

struct ss_lj_runtime;

int ss_lj_runtime_new(struct ss_lj_runtime **out, const struct ss_lj_elfinfo *info,
                      uint64_t load_bias, uint32_t pid, struct ss_err *err);
void ss_lj_runtime_free(struct ss_lj_runtime *rt);
/* Detection result this runtime was made from. */
const struct ss_lj_elfinfo *ss_lj_runtime_info(const struct ss_lj_runtime *rt);
/* The VM's architecture (its ELF's machine), this build's until set: its
 * registers (sample register numbers of that architecture, perf's order),
 * cframe and trace code; an arm64 capture replayed by an x86-64 build. */
void ss_lj_runtime_set_arch(struct ss_lj_runtime *rt, bool a64);
/* Is ip inside this runtime's VM code? */
bool ss_lj_in_vm(const struct ss_lj_runtime *rt, uint64_t ip);
/* Name of the verified layout descriptor, or NULL while none is chosen. */
const char *ss_lj_runtime_layout(const struct ss_lj_runtime *rt);
/* Whether the chosen layout was built from facts derived from the binary's
 * code (its name is then the table row it equals, or "derived-..."). */
bool ss_lj_runtime_layout_derived(const struct ss_lj_runtime *rt);
/* The one diagnostic for this runtime ("" when all is well). */
const char *ss_lj_runtime_diag(const struct ss_lj_runtime *rt);
/* Diagnostics as one line of text (report.c; record -v, info): what
 * detection and derivation found in the file (version, GC64, JIT, VM
 * range, the derived fact groups, the first step that failed and why);
 * the layout in use (table row or derived, GC64, JIT) or why none is.
 * Return the length written (truncated to cap - 1). */
size_t ss_lj_found_text(const struct ss_lj_elfinfo *info, char *buf, size_t cap);
size_t ss_lj_layout_text(const struct ss_lj_runtime *rt, char *buf, size_t cap);

struct ss_lj_stats {
    uint64_t walks, frames, rounds, bad_walks;
    uint64_t proto_hits, proto_misses;
    uint64_t trace_samples; /* samples attributed to a validated trace snapshot */
    uint64_t trace_loads;   /* traces read and decoded */
    /* calls with side effects (FFI) in loaded traces whose frames are
     * proven exact (the snapshot after them), and trace samples at one */
    uint64_t trace_xcalls, trace_xcall_samples;
    /* helper calls (string.rep, table.concat) whose frames the forward
     * replay from the snapshot before proves, and trace samples at one */
    uint64_t trace_fwd_calls, trace_fwd_samples;
    uint64_t g_rejects; /* global_State candidates that did not verify */
    /* with ss_lj_runtime_check_guards: trace samples where the snapshot the
     * guards place (builds without mcofs) was also checked against mcofs,
     * and how many of them showed the same frames */
    uint64_t guard_checked, guard_same;
    /* walks whose objects were read after the sample: proved (no GC step
     * between the sample and the reads), moved (a GC step ran: walked again
     * from live memory); function headers taken from the cache */
    uint64_t gc_proved, gc_moved, hdr_trusted;
    /* prototype headers equal to a cached one whose chunk name had changed
     * (a freed prototype's memory reused by one of the same shape) */
    uint64_t proto_renamed;
    /* walks whose GC proof failed, kept because every object they read had
     * the content an earlier proof saw at its address */
    uint64_t gc_content;
};
void ss_lj_runtime_stats(const struct ss_lj_runtime *rt, struct ss_lj_stats *st);
/* What of rt's state, beyond a sample's inputs, a walk's result may depend
 * on (unwind/memo.c compares it exactly): at most SS_LJ_STATE_WORDS words
 * into w, returns how many. */
#define SS_LJ_STATE_WORDS 72
size_t ss_lj_runtime_state(const struct ss_lj_runtime *rt, uint64_t *w);
/* Self-check for builds without SnapShot.mcofs: on x86-64 non-GC64 builds
 * that have it, also place snapshots by their guards and count agreement
 * in guard_checked/guard_same (costs one more read per trace load). */
void ss_lj_runtime_check_guards(struct ss_lj_runtime *rt, bool on);

/* The memory windows this runtime wants copied at every sample (plan.c):
 * 1 with p and *key filled (the plan's global state and window sizes); 0
 * when the caller's plan (have, a key this returned before, 0: none) is
 * still good (p untouched); -1 until a global state verified (or when Lua
 * walking is off). Cheap when 0 (per sample). */
int ss_lj_runtime_plan(const struct ss_lj_runtime *rt, uint64_t have, struct ss_win_plan *p,
                       uint64_t *key);

/* ---- 3. splicing ---- */

#define SS_LJ_HAVE_RBX 0x1u
#define SS_LJ_HAVE_R14 0x2u
#define SS_LJ_HAVE_R15 0x4u
#define SS_LJ_HAVE_RBP 0x8u

/* One native frame as the native unwinder reports it. For frame 0 (the
 * leaf) the sample's registers are used instead of rbx/r14. */
struct ss_lj_native {
    uint64_t ip;
    uint64_t cfa;           /* canonical frame address of this frame */
    uint64_t rbx, r14, r15; /* PC, DISPATCH, KBASE inside the VM */
    uint64_t rbp;           /* RB: BASE, saved there by ASM fast functions calling C */
    uint32_t have;          /* SS_LJ_HAVE_* */
    uint32_t lost;          /* SS_LJ_HAVE_* of registers a stack scan below left as the code
                               without CFI had them (unwind/native.h: ss_nregs.lost): no
                               proof of anything, unlike registers merely unknown */
    bool signal;            /* interrupted by a signal (ip is exact, not a return address) */
    uint32_t trace;         /* nonzero: ip is in JIT trace code, the token ss_lj_trace_cfa
                               returned for this frame (cfa is the VM frame's CFA) */
};

struct ss_lj_item {
    int32_t native;      /* >= 0: keep natives[native]; -1: Lua frame below */
    struct ss_frame lua; /* kind SS_FRAME_LUA when native < 0 */
    uint64_t cf;         /* a library C function's frame (os.clock): its lua_CFunction */
};

struct ss_lj_out {
    struct ss_lj_item *items; /* caller-provided array */
    uint32_t cap, n;
    uint32_t lua_frames; /* Lua frames produced */
    uint32_t vm_frames;  /* VM frames found */
    uint32_t vm_failed;  /* VM frames left native (no/invalid Lua state) */
};

/* For a sample whose ip is in rt's VM: the VM frame's true CFA. Inside the
 * interpreter it is rsp + vm_cfa_off (what .eh_frame says), but inside VM
 * helpers reached by an internal call (vm_mod, vm_floor, ...) rsp is 8 lower
 * and .eh_frame is wrong: then [rsp] is a return address into the VM. Reads
 * the snapshot only; ss_lj_splice verifies the choice (SAVE_L->cframe must be
 * this cframe) and leaves the VM frame native when it does not hold. 0 when
 * [rsp] is unreadable. The caller of the VM frame is: ip = [CFA-8],
 * rsp = CFA, rbp = [CFA-16], rbx = [CFA-24], r15 = [CFA-32], r14 = [CFA-40].
 * stack.c should use this CFA for the leaf instead of the CFI one, and pass
 * it in natives[0].cfa. */
uint64_t ss_lj_leaf_cfa(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs);

/* arm64: for a leaf in a VM helper that trace code called with bl (where
 * ss_lj_leaf_cfa finds no interpreter frame: sp is the trace's), the return
 * address into the trace (x30), whose frame is then the trace's; 0 when the
 * instruction before x30 is no bl to at most 128 bytes below the leaf, and
 * always for an x86-64 VM. regs: the sample's, in the VM's architecture's
 * numbering (ss_lj_runtime_set_arch), as for ss_lj_leaf_cfa. */
uint64_t ss_lj_helper_ret(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs);

/* A return address into vm_exit_handler right after its call to
 * lj_trace_exit (rsp: that call's CFA, where the handler's ExitState sits):
 * the CFA of the VM frame the exiting trace ran on, found above the trace's
 * rsp (ExitState.gpr[rsp]) and checked against its thread's live cframe.
 * 0 when ip is no such address or nothing checks out. */
uint64_t ss_lj_exit_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                        uint64_t ip, uint64_t rsp);
/* Whether ss_lj_exit_cfa could answer for ip (the return address of one of
 * rts' vm_exit_handler): a check without reads, for every native frame. */
bool ss_lj_exit_ret(struct ss_lj_runtime *const *rts, uint32_t nrts, uint64_t ip);
/* The same for a sample whose leaf ip is in vm_exit_handler up to that
 * call (rsp: the sample's); its registers there are the trace's, not the
 * interpreter's. */
uint64_t ss_lj_exit_leaf_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                             uint64_t ip, uint64_t rsp);

/* For a native frame whose ip is in JIT-compiled trace code (an anonymous
 * executable mapping): the CFA of the VM frame the trace runs on
 * (rsp + 16 + spadjust + vm_cfa_off on x86-64), found through the trace that
 * holds ip (validated against the live J->trace table for this sample).
 * regs (enum ss_reg order, bit i of known = regs[i] valid) are the frame's
 * registers: sp (the sample's rsp for the leaf, the callee's CFA for a
 * return address) is required; r14 (DISPATCH on GC64 traces) and the
 * register a trace keeps BASE in are used when known. exact: ip is the
 * interrupted instruction, not a return address. time_ns: the sample's
 * time (rescans of the trace table are rate-limited on it, so that replay
 * stays identical to the live walk). Returns 0 when ip is
 * in no known trace; else the CFA, *token identifies the validated trace
 * sample for ss_lj_native.trace. The VM frame's caller is read from that CFA
 * as for VM frames (ss_lj_leaf_cfa). */
uint64_t ss_lj_trace_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                         uint64_t ip, bool exact, const uint64_t *regs, uint64_t known,
                         uint64_t time_ns, uint32_t *token);

/* Is look (the interrupted instruction, or a return address's ip - 1) in
 * the mcode of a trace that ss_lj_trace_cfa calls found (known even when
 * they could not give the VM frame), or is there such a trace in
 * [lo, hi) (look's mapping: a LuaJIT mcode area, whose other traces may be
 * newer or flushed)? Reads nothing. */
bool ss_lj_in_trace(struct ss_lj_runtime *const *rts, uint32_t nrts, uint64_t look, uint64_t lo,
                    uint64_t hi);

/* Merge Lua frames into a native frame list (see the file comment). regs
 * are the sample's user registers (enum ss_reg). Returns 0 or a negative
 * errno (-ENOSPC when out->cap is too small: out holds a prefix). */
int ss_lj_splice(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                 const uint64_t *regs, const struct ss_lj_native *natives, uint32_t n,
                 struct ss_lj_out *out);

#endif
