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
 * arm64 (a64_step): a call leaves the return address in x30; code without
 * CFI that did not call on steps to x30 (the vDSO); code that called on
 * saved x30 in a frame record {x29, x30}: the scan takes each slot as that
 * x30, the slot below as the caller's x29, and proves the caller's sp from
 * its CFI and its own frame record (a64_caller), else refuses.
 * Reads only the snapshot and file bytes, so live and replay agree. */
#include <capstone/capstone.h>
#include <string.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/a64call.h"
#include "unwind/native_int.h"
#include "util/pac.h"

#define SS_SCAN_BYTES 8192 /* of the snapshot above f's sp */
#define SS_SCAN_TRIAL 16   /* CFI frames a candidate's walk must make (or end validly) */
#define SS_CALL_MAX 8      /* longest call instruction looked for */

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
#endif

/* File bytes [addr - len, addr) of mapping mp (code the process runs as
 * mapped: read from the file image, not the target). */
static const uint8_t *code_before(const struct ss_mapping *mp, uint64_t addr, size_t len)
{
    return addr >= len ? ss_mapping_file_bytes(mp, addr - len, len) : NULL;
}

/* The call instructions that may end at ra (the bytes before ra decoded
 * at each length): CALL_IND an indirect one, CALL_DIR a direct one (e8
 * rel32 on x86-64, bl on arm64) with its target in *target. */
enum { CALL_IND = SS_A64_CALL_IND, CALL_DIR = SS_A64_CALL_DIR };
#if defined(__x86_64__)
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
#else
/* arm64: BL (direct), BLR, or one of BLRAA, BLRAB, BLRAAZ, BLRABZ */
static unsigned call_before(struct ss_nproc *np, const struct ss_mapping *mp, uint64_t ra,
                            uint64_t *target)
{
    (void)np;
    const uint8_t *b = code_before(mp, ra, 4);
    return b ? ss_a64_call(b, ra, target) : 0;
}
#endif

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
#if defined(__x86_64__)
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
#else
/* arm64: BR, BRAA, BRAB, BRAAZ or BRABZ (not RET); a PLT stub starts with
 * adrp x16 (after a BTI) */
static bool tail_jumps(struct ss_nproc *np, const struct ss_mapping *mp, uint64_t target)
{
    (void)np;
    size_t len = SS_TAIL_BYTES;
    if (target + len > mp->d.end) len = (size_t)(mp->d.end - target);
    const uint8_t *b = code_before(mp, target + len, len & ~(size_t)3);
    if (!b) return false;
    for (size_t k = 0; k + 4 <= len && k / 4 < SS_TAIL_INSNS; k += 4) {
        uint32_t i =
            b[k] | (uint32_t)b[k + 1] << 8 | (uint32_t)b[k + 2] << 16 | (uint32_t)b[k + 3] << 24;
        if ((i & 0xffffff3fu) == 0xd503241fu) continue;               /* bti */
        if ((i & 0x9f00001fu) == 0x90000010u && k <= 4) return false; /* adrp x16: a PLT stub */
        if ((i & 0xfffffc1fu) == 0xd61f0000u || (i & 0xfefff800u) == 0xd61f0800u) return true;
        if ((i & 0xffe0001fu) == 0xd4200000u || (i >> 16) == 0) break; /* brk, udf */
    }
    return false;
}
#endif

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

#if defined(__x86_64__)
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
#endif

#if !defined(__x86_64__)
#define SS_A64_SAVES 176   /* the most a frame record lies below its CFA, but at the bottom */
#define SS_A64_STRIDE 2048 /* between probes of a caller's CFA */
#define SS_A64_PROBES 32   /* of them (64 KiB), then the lowest sp */
#define SS_A64_BUDGET 256  /* CFI steps of those probes and checks in one scan */

/* The CFA of c (its CFI step by libunwind) with sp s, whatever the return
 * address read there. */
static bool a64_cfa(struct ss_nproc *np, const struct ss_native_frame *c, uint64_t s, uint64_t *cfa,
                    unsigned *budget)
{
    if (!*budget) return false;
    --*budget;
    struct ss_native_frame t = *c, up;
    enum ss_trunc why = SS_TRUNC_NONE;
    t.regs.r[SS_DR_SP] = s;
    if (!ss_unw_step(np, &t, &up, &why)) return false;
    *cfa = ss_nf_sp(&up);
    return true;
}

/* c's CFA probed at sp s and at a neighbour (the return address read at
 * one may be 0, the root: no CFA there): 1 sp-based (CFA = sp + *k), 0
 * not, -1 no CFA at s or its neighbours, -2 neither. */
static int a64_probe(struct ss_nproc *np, const struct ss_native_frame *c, uint64_t s, uint64_t lo,
                     uint64_t *k, unsigned *budget)
{
    static const int64_t near[] = {16, -16, 32, -32, 48, -48};
    uint64_t c0, c1;
    if (!a64_cfa(np, c, s, &c0, budget)) return -1;
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
        uint64_t s1 = s + (uint64_t)near[i];
        if (s1 < lo || !a64_cfa(np, c, s1, &c1, budget)) continue;
        if (c1 == c0) return 0;
        if (c1 - c0 != s1 - s || c0 <= s) return -2;
        *k = c0 - s;
        return 1;
    }
    return -1;
}

/* Does c's CFI step with sp s restore the return address upra and x29
 * up29 (those of the frame record at c's x29)? Then c takes sp s. */
static bool a64_sp_ok(struct ss_nproc *np, struct ss_native_frame *c, uint64_t s, uint64_t lo,
                      uint64_t upra, uint64_t up29, unsigned *budget)
{
    if (s < lo || (s & 15) || s > c->regs.r[SS_DR_X29] || !*budget) return false;
    --*budget;
    struct ss_native_frame t = *c, up;
    enum ss_trunc why = SS_TRUNC_NONE;
    t.regs.r[SS_DR_SP] = s;
    if (!ss_native_cfi_step(np, &t, &up, &why) || ss_nf_ip(&up) != upra ||
        !(up.regs.valid & SS_DBIT(SS_DR_X29)) || up.regs.r[SS_DR_X29] != up29)
        return false;
    c->regs.r[SS_DR_SP] = s;
    return true;
}

/* The call before upra (the return address in c's caller, from c's
 * frame record): a direct one (bl) must have called c's function (the
 * start of the FDE holding c's ip), a PLT stub or other code without CFI
 * (unknown), or a function that tail-jumps; else the record is not c's (a
 * caller without frame pointers leaves x29 its caller's, whose record
 * then looks like c's: the frames between would be skipped). */
static bool a64_called(struct ss_nproc *np, uint64_t upra, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, upra);
    const uint8_t *b = mp && mp->elf ? code_before(mp, upra, 4) : NULL;
    uint64_t target, lo, hi;
    if (!b || ss_a64_call(b, upra, &target) != SS_A64_CALL_DIR) return true;
    const struct ss_mapping *mc = ss_proc_find_cached(np->proc, ip);
    if (!mc || !mc->elf || !ss_elf_fde_range(mc->elf, ip - 1 - (uint64_t)mc->bias, &lo, &hi))
        return true; /* no .eh_frame FDE to tell (.debug_frame) */
    if (target == lo + (uint64_t)mc->bias) return true;
    const struct ss_mapping *mt = ss_proc_find_cached(np->proc, target);
    if (!mt || !mt->elf) return false;
    return ss_native_rule(np, target)->kind == SS_NR_NOINFO || tail_jumps(np, mt, target);
}

/* arm64: the candidate caller c of f from the frame record {x29, x30} at
 * rec (rec + 8 holds ra, stripped; rec the caller's x29, x29c). Code
 * without CFI that calls on saves x30 so, the caller's x29 beside it (stp
 * x29, x30, [sp, #-n]!; n unknown: its frame may go on above the record).
 * The caller called with bl/blr, so it saved its own x30; built with frame
 * pointers, x29c points to its frame record: {its caller's x29, its return
 * address}. The caller's sp is what its CFI and that record prove: its CFA
 * probed at two sp values tells whether the CFA is sp-based (CFA = sp + K:
 * the sp that puts its saved x29 at x29c, x29 saved at CFA - M for M = 16
 * (a record at the top), K (at the bottom) or up to SS_A64_SAVES, the one
 * whose CFI step restores the record's x29 and return address) or not (on
 * x29: the lowest sp its callee's record allows, the step checked alike).
 * A caller without such a record (built without frame pointers) is
 * refused. */
static bool a64_caller(struct ss_nproc *np, const struct ss_native_frame *f, uint64_t rec,
                       uint64_t ra, struct ss_native_frame *c, unsigned *budget)
{
    uint64_t x29c, up29, upra;
    if (!load8(np, rec, &x29c) || (x29c & 7) || x29c < rec + 16 || !load8(np, x29c, &up29) ||
        !load8(np, x29c + 8, &upra))
        return false;
    upra = ss_pac_strip(upra, np->pac_mask);
    c->regs = f->regs;
    c->regs.r[SS_DR_IP] = ra;
    c->regs.r[SS_DR_X29] = x29c;
    c->regs.valid = (c->regs.valid & ~SS_DBIT(SS_DR_X30)) | SS_DBIT(SS_DR_X29);
    /* the other registers are what the code without CFI left (lost) */
    c->regs.lost = c->regs.valid & ~(SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP) | SS_DBIT(SS_DR_X29));
    c->cfa = 0;
    c->flags = SS_NF_NOCFI | SS_NF_SCAN;
    /* the caller's sp is above f's record */
    uint64_t lo = (rec + 16 + 15) & ~(uint64_t)15, top = x29c & ~(uint64_t)15, k = 0, s;
    if (lo > top) return false;
    /* probes from the record down (a frame's locals may lie below its
     * record, in pages never touched: not in the snapshot), lo last */
    bool sp_based = false, probed = false;
    for (unsigned j = 0; !probed && j <= SS_A64_PROBES; j++) {
        s = j == SS_A64_PROBES || top - lo < (uint64_t)j * SS_A64_STRIDE ? lo
                                                                         : top - j * SS_A64_STRIDE;
        int r = a64_probe(np, c, s, lo, &k, budget);
        if (r == -2) return false;
        probed = r >= 0;
        sp_based = r == 1;
        if (s == lo) break;
    }
    if (!probed) return false;
    bool ok = false;
    if (!sp_based) { /* the CFA is not sp's: the lowest sp f's record allows */
        ok = a64_sp_ok(np, c, lo, lo, upra, up29, budget);
    } else {
        ok = a64_sp_ok(np, c, x29c + 16 - k, lo, upra, up29, budget) ||
             (k > 16 && a64_sp_ok(np, c, x29c, lo, upra, up29, budget));
        for (uint64_t m = 24; !ok && m < k && m <= SS_A64_SAVES; m += 8)
            ok = a64_sp_ok(np, c, x29c + m - k, lo, upra, up29, budget);
    }
    return ok && a64_called(np, upra, ra) && trial(np, c);
}

/* arm64: the first slot a above f's sp (SS_SCAN_BYTES) that holds the x30
 * of a frame record at a - 8 whose caller a64_caller proves (only the value
 * want, stripped, when not 0), into *c; a frame-pointer step when f's x29
 * points to that record. */
static bool a64_scan(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *c,
                     uint64_t want, unsigned *budget)
{
    struct ss_mem *m = np->mem;
    uint64_t sp = ss_nf_sp(f), snap_end = m->snap_base + m->snap_len, ra;
    uint64_t fp = (f->regs.valid & SS_DBIT(SS_DR_X29)) ? f->regs.r[SS_DR_X29] : 0;
    for (uint64_t a = sp + 8; a + 8 <= snap_end && a - sp < SS_SCAN_BYTES; a += 8) {
        if (!load8(np, a, &ra)) break;
        ra = ss_pac_strip(ra, np->pac_mask);
        if ((want && ra != want) || !ret_addr(np, ra, NULL, true) ||
            !a64_caller(np, f, a - 8, ra, c, budget))
            continue;
        if (a - 8 == fp) c->flags &= ~SS_NF_SCAN;
        return true;
    }
    return false;
}

/* arm64: a call leaves the return address in x30, not on the stack. An
 * interrupted frame without CFI whose x30 (stripped of a pointer-
 * authentication code) is a valid return address as above either saved it
 * in a frame record above its sp (code that built a frame and has not
 * called on yet: a64_scan for that value, the caller's sp proven as below)
 * or did not: a frameless leaf (the vDSO's functions: its image has no
 * .eh_frame) steps to x30 with its own sp. Else (code that called on) the
 * scan: each slot a above f's sp taken as the x30 of a frame record at
 * a - 8 (a64_caller); the first valid candidate is the caller. Looked for
 * with SS_A64_BUDGET CFI steps at most (then refused: truncated). */
static int a64_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                    enum ss_trunc *why)
{
    unsigned budget = SS_A64_BUDGET;
    struct ss_native_frame c;
    bool found = false;
    if ((f->flags & SS_NF_EXACT) && (f->regs.valid & SS_DBIT(SS_DR_X30))) {
        struct ss_native_frame lr = {.regs = f->regs, .flags = SS_NF_NOCFI};
        /* a function built with pac-ret (the vDSO of kernels with pointer
         * authentication) signs x30 on entry: the signature is in the bits
         * of the PAC mask (util/pac.h) */
        lr.regs.r[SS_DR_IP] = ss_pac_strip(f->regs.r[SS_DR_X30], np->pac_mask);
        lr.regs.valid &= ~SS_DBIT(SS_DR_X30);
        if (ret_addr(np, ss_nf_ip(&lr), NULL, true)) {
            found = a64_scan(np, f, &c, ss_nf_ip(&lr), &budget);
            if (!found && trial(np, &lr)) {
                np->st.nocfi_fp++;
                *caller = lr;
                f->cfa = ss_nf_sp(f);
                return ss_native_check(np, f, caller, why);
            }
        }
    }
    if (found || a64_scan(np, f, &c, 0, &budget)) {
        if (!ss_native_check(np, f, &c, why)) return 0;
        if (c.flags & SS_NF_SCAN)
            np->st.nocfi_scan++;
        else
            np->st.nocfi_fp++;
        *caller = c;
        f->cfa = ss_nf_sp(&c);
        f->flags |= SS_NF_JIT;
        return 1;
    }
    np->st.nocfi_fail++;
    *why = SS_TRUNC_NOINFO;
    return 0;
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
