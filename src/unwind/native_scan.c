/* unwind/native_scan.c: stepping out of code without CFI (JIT code such as
 * PCRE2's sljit output, other JITs with or without perf maps; file code
 * without an FDE), validated as Breakpad and crash reporters do.
 *
 * From a frame f whose ip has no CFI, the snapshot is scanned from f's sp
 * upwards (SS_SCAN_BYTES), each 8-byte slot taken as a return address, the
 * caller's sp just above it and its other registers those of f (the code
 * without CFI may have changed callee-saved ones: only the CFI of the frames
 * above tells; they are marked lost, ss_nregs.lost, until a rule loads them
 * from a save slot); the first valid candidate is the caller. When the slot is
 * the one a frame-pointer chain gives ([rbp + 8], rbp in the snapshot at or
 * above sp) the caller's rbp is [rbp]. The chain is not taken on its own
 * before the scan: code without a frame of its own (a PLT stub, sljit code)
 * leaves rbp as its caller's frame pointer, and [rbp + 8] would skip that
 * caller, a frame that is on the stack.
 * A candidate is valid when its return address lies in an executable file
 * mapping whose CFI covers it, the instruction that ends just before it is a
 * call (decoded with capstone from the file's bytes), and the CFI walk from
 * it goes on validly: it reaches the root, SS_SCAN_TRIAL frames, the end of
 * the snapshot, or more code without CFI in executable memory (another JIT
 * frame, a LuaJIT trace) after at least one CFI step. A direct call must be
 * able to have made the frame above it (ret_addr, direct_ok): before f, a
 * call of code without CFI or of a function that tail-jumps; on the walk
 * from the candidate, a call into an executable file mapping; a zero
 * return address read there is not the root. The frame f is then
 * marked SS_NF_JIT (named "[jit] MODULE" / "[jit] [anon]" / its perf-map
 * name, one frame for all the code without CFI that was stepped over). No
 * valid candidate: the walk ends there (SS_TRUNC_NOINFO) rather than guess.
 * A scan that refused candidates as stale marks f SS_NF_STALE (the sample's
 * count, SS_FF_STALE).
 * arm64: the step is unwind/a64scan.c's (shared with an x86-64 build's
 * walk of an arm64 capture, foreign_scan.c), given this walk's CFI steps.
 * Reads only the snapshot and file bytes, so live and replay agree. */
#include <capstone/capstone.h>
#include <string.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/a64scan.h"
#include "unwind/native_int.h"

#define SS_CALL_MAX 8 /* longest call instruction looked for */

void ss_nscan_free(struct ss_nproc *np)
{
    if (np->cs_insn) cs_free(np->cs_insn, 1);
    if (np->cs_ok) cs_close((csh *)&np->cs);
    np->cs_insn = NULL;
    np->cs_ok = false;
}

#if defined(__x86_64__)
static bool cs_ready(struct ss_nproc *np)
{
    if (np->cs_ok) return np->cs_insn != NULL;
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) return false;
    np->cs = h;
    np->cs_ok = true;
    np->cs_insn = cs_malloc(h);
    return np->cs_insn != NULL;
}

/* File bytes [addr - len, addr) of mapping mp (code the process runs as
 * mapped: read from the file image, not the target). */
static const uint8_t *code_before(const struct ss_mapping *mp, uint64_t addr, size_t len)
{
    return addr >= len ? ss_mapping_file_bytes(mp, addr - len, len) : NULL;
}

/* The call instructions that may end at ra (the bytes before ra decoded
 * at each length): CALL_IND an indirect one, CALL_DIR a direct one (e8
 * rel32 on x86-64, bl on arm64) with its target in *target. */
enum { CALL_IND = 1, CALL_DIR = 2 };
static unsigned call_before(struct ss_nproc *np, const struct ss_mapping *mp, uint64_t ra,
                            uint64_t *target)
{
    unsigned kinds = 0;
    if (!cs_ready(np)) return 0;
    for (size_t k = 2; k <= SS_CALL_MAX; k++) {
        const uint8_t *b = code_before(mp, ra, k);
        if (!b) break;
        const uint8_t *b0 = b;
        size_t len = k;
        uint64_t at = ra - k;
        cs_insn *ci = np->cs_insn;
        if (!cs_disasm_iter((csh)np->cs, &b, &len, &at, ci) || len || ci->id != X86_INS_CALL)
            continue;
        if (k == 5 && b0[0] == 0xe8) {
            int32_t rel;
            memcpy(&rel, b0 + 1, 4);
            *target = ra + (uint64_t)(int64_t)rel;
            kinds |= CALL_DIR;
        } else {
            kinds |= CALL_IND;
        }
    }
    return kinds;
}

/* Is the walk from candidate c valid (see the header comment)? */
static bool ret_addr(struct ss_nproc *np, uint64_t ra, struct ss_nrule *rule, bool nocfi_callee);
static bool trial(struct ss_nproc *np, const struct ss_native_frame *c)
{
    struct ss_native_frame fr[2];
    fr[0] = *c;
    for (unsigned i = 0; i < SS_SCAN_TRIAL; i++) {
        struct ss_native_frame *f = &fr[i & 1], *up = &fr[(i + 1) & 1];
        enum ss_trunc why = SS_TRUNC_NONE;
        if (ss_native_cfi_step(np, f, up, &why)) {
            /* each return address on the way passes the candidate's checks
             * (but for the frame a signal interrupted, and code without
             * CFI: a JIT's or a file's, looked at below) */
            uint64_t ip = ss_nf_ip(up);
            const struct ss_mapping *mp = ss_proc_find_cached(np->proc, ip);
            if (!(f->flags & SS_NF_SIGNAL) && mp && mp->elf && (mp->d.prot & SS_MAP_X) &&
                ip >= 4096 && ss_native_rule(np, ip - 1)->kind != SS_NR_NOINFO &&
                !ret_addr(np, ip, NULL, false))
                return false;
            continue;
        }
        switch (why) {
        case SS_TRUNC_NONE:
            /* the root: not a zero read from the stack (a stale chain
             * runs into zeroed slots; the roots' CFI marks rip undefined) */
            if ((up->regs.valid & SS_DBIT(SS_DR_IP)) && ss_nf_ip(up) == 0 && i > 0) {
                np->st.nocfi_stale++;
                return false;
            }
            return true;
        case SS_TRUNC_SNAPSHOT:
            return true;
        case SS_TRUNC_NOINFO: { /* more code without CFI, in executable memory */
            const struct ss_mapping *mp = ss_proc_find_cached(np->proc, ss_nf_ip(f));
            return i > 0 && mp && (mp->d.prot & SS_MAP_X);
        }
        default:
            return false;
        }
    }
    return true;
}

static bool load8(struct ss_nproc *np, uint64_t addr, uint64_t *v)
{
    const void *p = ss_mem_peek_snap(np->mem, addr, 8);
    if (!p) return false;
    memcpy(v, p, 8);
    return true;
}

#define SS_TAIL_BYTES 512 /* of a function looked at for a tail jump */
#define SS_TAIL_INSNS 96

/* Can the function at target (in mp, with CFI) leave for other code without
 * a frame of its own: a tail jump through a register or memory in its first
 * instructions (a wrapper that jumps to a function pointer)? Not a PLT
 * stub: the function it jumps to is another library's, with CFI. */
static bool tail_jumps(struct ss_nproc *np, const struct ss_mapping *mp, uint64_t target)
{
    size_t len = SS_TAIL_BYTES;
    if (target + len > mp->d.end) len = (size_t)(mp->d.end - target);
    const uint8_t *b = code_before(mp, target + len, len);
    if (!b || !cs_ready(np)) return false;
    uint64_t at = target;
    cs_insn *ci = np->cs_insn;
    for (unsigned i = 0; i < SS_TAIL_INSNS && cs_disasm_iter((csh)np->cs, &b, &len, &at, ci); i++) {
        if (ci->id == X86_INS_ENDBR64) continue;
        bool ind = ci->id == X86_INS_JMP && ci->op_str[0] != '0';         /* not "0x..." */
        if (ind && i <= 1 && strstr(ci->op_str, "[rip + ")) return false; /* a PLT stub */
        if (ind) return true;
        if (ci->id == X86_INS_INT3 || ci->id == X86_INS_UD2) break;
    }
    return false;
}

/* Could the direct call to target have made the frame above it?
 * nocfi_callee: that frame is code without CFI, stepped over by the scan:
 * the target then is code without CFI in a file, or a function with CFI
 * that can tail-jump (tail_jumps); a function with CFI that called on
 * would have left its own frame, whose return address the scan finds
 * first, and so would a PLT stub's function. Else (a frame the CFI walk
 * reached) the target is in an executable file mapping: a file's direct
 * calls do not land in anonymous memory. */
static bool direct_ok(struct ss_nproc *np, uint64_t target, bool nocfi_callee)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, target);
    if (!mp || !mp->elf || !(mp->d.prot & SS_MAP_X)) return false;
    if (!nocfi_callee || ss_native_rule(np, target)->kind == SS_NR_NOINFO) return true;
    return tail_jumps(np, mp, target);
}

/* Could ra be a return address: in an executable file mapping whose CFI
 * covers it, right after a call that could have made the frame above it
 * (direct_ok; an indirect call could have made any)? */
static bool ret_addr(struct ss_nproc *np, uint64_t ra, struct ss_nrule *rule, bool nocfi_callee)
{
    if (ra < 4096) return false;
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, ra);
    if (!mp || !mp->elf || !(mp->d.prot & SS_MAP_X)) return false;
    const struct ss_nrule *r = ss_native_rule(np, ra - 1);
    if (r->kind == SS_NR_NOINFO) return false;
    struct ss_nrule keep = *r; /* a copy: the cache slot may be reused by the next lookup */
    uint64_t target = 0;
    unsigned kinds = call_before(np, mp, ra, &target);
    if (!(kinds & CALL_IND) && !((kinds & CALL_DIR) && direct_ok(np, target, nocfi_callee))) {
        if (kinds) np->st.nocfi_stale++;
        return false;
    }
    if (rule) *rule = keep;
    return true;
}

/* Check the candidate caller c of f (ip, sp and registers set). A caller
 * whose CFA is rbp-based (built with frame pointers) needs its own rbp,
 * which the code without CFI may have used for itself: if the walk fails
 * with rbp as it is, rbp is taken as the slot below the caller's own return
 * address, the first slot p above its sp where [p + 8] could be one and
 * the walk from it is valid. */
static bool valid(struct ss_nproc *np, const struct ss_native_frame *f, struct ss_native_frame *c,
                  bool fp)
{
    struct ss_nrule r;
    if (ss_nf_sp(c) <= ss_nf_sp(f) || !ret_addr(np, ss_nf_ip(c), &r, true)) return false;
    if (trial(np, c)) return true;
    if (fp || r.kind != SS_NR_OK || r.cfa_reg != SS_DR_FP) return false;
    uint64_t sp = ss_nf_sp(c), keep = c->regs.r[SS_DR_FP], ra;
    for (uint64_t p = sp; p - sp < SS_SCAN_BYTES && load8(np, p + 8, &ra); p += 8) {
        if (!ret_addr(np, ra, NULL, false)) continue;
        c->regs.r[SS_DR_FP] = p;
        if (trial(np, c)) return true;
    }
    c->regs.r[SS_DR_FP] = keep;
    return false;
}
#else
_Static_assert((int)SS_DR_COUNT == (int)SS_A64S_NREG && (int)SS_DR_SP == (int)SS_A64S_SP &&
                   (int)SS_DR_IP == (int)SS_A64S_PC && (int)SS_DR_X29 == (int)SS_A64S_X29 &&
                   (int)SS_DR_X30 == (int)SS_A64S_X30,
               "a64scan.h's frame is this build's registers");

static void to_native(const struct ss_a64sf *s, struct ss_native_frame *f)
{
    memset(f, 0, sizeof(*f));
    memcpy(f->regs.r, s->r, sizeof(s->r));
    f->regs.valid = s->valid;
    f->regs.lost = s->lost;
    f->flags = s->flags;
}

static void from_native(const struct ss_native_frame *f, struct ss_a64sf *s)
{
    memcpy(s->r, f->regs.r, sizeof(s->r));
    s->valid = f->regs.valid;
    s->lost = f->regs.lost;
    s->flags = f->flags;
}

/* The scan's view of this walk (a64scan.h): the rule cache's lookups; a
 * checked step is the walk's CFI step (ss_native_cfi_step), the other
 * libunwind's. */
static bool a64_has_cfi(void *ctx, uint64_t look)
{
    return ss_native_rule(ctx, look)->kind != SS_NR_NOINFO;
}

static bool a64_cfi_step(void *ctx, const struct ss_a64sf *f, struct ss_a64sf *up, bool checked,
                         enum ss_trunc *why)
{
    struct ss_native_frame t, c;
    to_native(f, &t);
    memset(&c, 0, sizeof(c));
    int r = checked ? ss_native_cfi_step(ctx, &t, &c, why) : ss_unw_step(ctx, &t, &c, why);
    from_native(&c, up);
    return r > 0;
}

static int a64_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                    enum ss_trunc *why)
{
    const struct ss_a64scan_ops o = {.ctx = np,
                                     .proc = np->proc,
                                     .mem = np->mem,
                                     .pac = np->pac_mask,
                                     .has_cfi = a64_has_cfi,
                                     .step = a64_cfi_step,
                                     .stale = &np->st.nocfi_stale};
    struct ss_a64sf sf, sc;
    struct ss_native_frame c;
    from_native(f, &sf);
    enum ss_a64s_how how = ss_a64scan(&o, &sf, &sc);
    if (how == SS_A64S_NONE) {
        np->st.nocfi_fail++;
        *why = SS_TRUNC_NOINFO;
        return 0;
    }
    to_native(&sc, &c);
    if (how == SS_A64S_LR) { /* a frameless leaf: f's CFA is its sp */
        np->st.nocfi_fp++;
        *caller = c;
        f->cfa = ss_nf_sp(f);
        return ss_native_check(np, f, caller, why);
    }
    if (!ss_native_check(np, f, &c, why)) return 0;
    if (how == SS_A64S_SCAN)
        np->st.nocfi_scan++;
    else
        np->st.nocfi_fp++;
    *caller = c;
    f->cfa = ss_nf_sp(&c);
    f->flags |= SS_NF_JIT;
    return 1;
}
#endif

static int scan_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                     enum ss_trunc *why)
{
    struct ss_mem *m = np->mem;
    uint64_t sp = ss_nf_sp(f), snap_end = m->snap_base + m->snap_len;
    np->nlog.opaque = true; /* not a rule step: the memo of native walks keeps no such walk */
    if (m->track) {         /* replay's memo: any register, the bytes looked at */
        m->track->dregs = UINT64_MAX;
        if (sp >= m->snap_base && sp < snap_end) {
            uint64_t hi = sp + SS_SCAN_BYTES < snap_end ? sp + SS_SCAN_BYTES : snap_end;
            ss_mem_track_snap(m->track, m, sp, (size_t)(hi - sp));
        }
    }
    if (!(f->regs.valid & SS_DBIT(SS_DR_SP))) {
        *why = SS_TRUNC_ERROR;
        return 0;
    }
#if !defined(__x86_64__)
    return a64_step(np, f, caller, why);
#else
    /* rbp as a frame pointer of the code without CFI: its return address
     * at [rbp + 8], the caller's rbp at [rbp] */
    uint64_t bp = f->regs.r[SS_DR_FP], fp_slot = 0, nbp = 0, ra;
    if ((f->regs.valid & (SS_DBIT(SS_DR_FP))) && bp >= sp && !(bp & 7) && bp - sp < SS_SCAN_BYTES &&
        load8(np, bp, &nbp))
        fp_slot = bp + 8;
    struct ss_native_frame c;
    for (uint64_t a = sp; a + 8 <= snap_end && a - sp < SS_SCAN_BYTES; a += 8) {
        if (!load8(np, a, &ra)) break;
        c.regs = f->regs;
        c.regs.r[SS_DR_IP] = ra;
        c.regs.r[SS_DR_SP] = a + 8;
        /* the other registers are what the code without CFI left (lost);
         * a frame pointer's chain gives the caller's rbp */
        c.regs.lost = f->regs.valid & ~(SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP));
        if (a == fp_slot) {
            c.regs.r[SS_DR_FP] = nbp;
            c.regs.lost &= ~SS_DBIT(SS_DR_FP);
        }
        c.cfa = 0;
        c.flags = SS_NF_NOCFI | (a == fp_slot ? 0 : SS_NF_SCAN);
        if (valid(np, f, &c, a == fp_slot)) {
            if (a == fp_slot)
                np->st.nocfi_fp++;
            else
                np->st.nocfi_scan++;
            *caller = c;
            f->cfa = a + 8;
            f->flags |= SS_NF_JIT;
            return 1;
        }
    }
    np->st.nocfi_fail++;
    *why = SS_TRUNC_NOINFO;
    return 0;
#endif
}

int ss_nscan_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                  enum ss_trunc *why)
{
    uint64_t stale = np->st.nocfi_stale;
    int r = scan_step(np, f, caller, why);
    if (np->st.nocfi_stale != stale) f->flags |= SS_NF_STALE; /* counted by the sample */
    return r;
}
