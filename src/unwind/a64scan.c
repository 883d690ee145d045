/* unwind/a64scan.c: the arm64 step out of code without CFI, the same in
 * the arm64 build's walk (native_scan.c) and in an x86-64 build's walk of
 * an arm64 capture (foreign_scan.c): the decisions are made here, the
 * walker gives its CFI steps and rule lookups (a64scan.h's ops).
 *
 * A call leaves the return address in x30. An interrupted frame without
 * CFI whose x30 (stripped of a pointer-authentication code) is a valid
 * return address either saved it in a frame record above its sp (code that
 * built a frame and has not called on yet: the scan for that value, the
 * caller's sp proven as below) or did not: a frameless leaf (the vDSO's
 * functions: its image has no .eh_frame) steps to x30 with its own sp.
 * Code that called on saved x30 in a frame record {x29, x30}: each slot
 * above f's sp (SS_SCAN_BYTES) is taken as that x30, the slot below as the
 * caller's x29, and the caller's sp is proven from its CFI and its own
 * frame record (a64_caller), else the candidate is refused; the first
 * valid one is the caller. At most SS_A64_BUDGET CFI steps per scan (then
 * refused: truncated).
 *
 * A candidate's return address must lie in an executable file mapping
 * whose CFI covers it, after a call (BL, BLR, BLRA*) that could have made
 * the frame above it (ret_addr, direct_ok), and the CFI walk from it must
 * go on validly (trial): the root, SS_SCAN_TRIAL frames, the snapshot's
 * end, or more code without CFI in executable memory after a CFI step;
 * a zero return address read there is not the root (a stale chain).
 * Reads only the snapshot and file bytes, so live and replay agree. */
#include <string.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/a64call.h"
#include "unwind/a64scan.h"
#include "unwind/native.h"
#include "util/pac.h"

#define SS_A64_SAVES 176   /* the most a frame record lies below its CFA, but at the bottom */
#define SS_A64_STRIDE 2048 /* between probes of a caller's CFA */
#define SS_A64_PROBES 32   /* of them (64 KiB), then the lowest sp */
#define SS_A64_BUDGET 256  /* CFI steps of those probes and checks in one scan */
#define SS_TAIL_BYTES 512  /* of a function looked at for a tail jump */
#define SS_TAIL_INSNS 96

typedef const struct ss_a64scan_ops ops_t;

static bool load8(ops_t *o, uint64_t addr, uint64_t *v)
{
    const void *p = ss_mem_peek_snap(o->mem, addr, 8);
    if (!p) return false;
    memcpy(v, p, 8);
    return true;
}

/* File bytes [addr - len, addr) of mapping mp (code as mapped: the file's). */
static const uint8_t *code_before(const struct ss_mapping *mp, uint64_t addr, size_t len)
{
    return addr >= len ? ss_mapping_file_bytes(mp, addr - len, len) : NULL;
}

static bool file_code(const struct ss_mapping *mp)
{
    return mp && mp->elf && (mp->d.prot & SS_MAP_X);
}

/* Can the function at target (in mp, with CFI) leave for other code
 * without a frame of its own: BR, BRAA, BRAB, BRAAZ or BRABZ (not RET) in
 * its first instructions (a wrapper that jumps to a function pointer)? Not
 * a PLT stub (adrp x16 first, after a BTI): the function it jumps to is
 * another library's, with CFI. */
static bool tail_jumps(const struct ss_mapping *mp, uint64_t target)
{
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

/* Could the direct call to target have made the frame above it?
 * nocfi_callee: that frame is code without CFI, stepped over by the scan:
 * the target then is code without CFI in a file, or a function with CFI
 * that can tail-jump; a function with CFI that called on would have left
 * its own frame, whose return address the scan finds first. Else (a frame
 * the CFI walk reached) the target is in an executable file mapping: a
 * file's direct calls do not land in anonymous memory. */
static bool direct_ok(ops_t *o, uint64_t target, bool nocfi_callee)
{
    const struct ss_mapping *mp = ss_proc_find_cached(o->proc, target);
    if (!file_code(mp)) return false;
    if (!nocfi_callee || !o->has_cfi(o->ctx, target)) return true;
    return tail_jumps(mp, target);
}

bool ss_a64scan_ret_addr(ops_t *o, uint64_t ra, bool nocfi_callee)
{
    if (ra < 4096) return false;
    const struct ss_mapping *mp = ss_proc_find_cached(o->proc, ra);
    if (!file_code(mp) || !o->has_cfi(o->ctx, ra - 1)) return false;
    const uint8_t *b = code_before(mp, ra, 4);
    uint64_t target = 0;
    unsigned kind = b ? ss_a64_call(b, ra, &target) : 0;
    if (kind == SS_A64_CALL_IND || (kind == SS_A64_CALL_DIR && direct_ok(o, target, nocfi_callee)))
        return true;
    if (kind) ++*o->stale;
    return false;
}

/* Is the walk from candidate c valid (see the header comment)? */
static bool trial(ops_t *o, const struct ss_a64sf *c)
{
    struct ss_a64sf fr[2];
    fr[0] = *c;
    for (unsigned i = 0; i < SS_SCAN_TRIAL; i++) {
        struct ss_a64sf *f = &fr[i & 1], *up = &fr[(i + 1) & 1];
        enum ss_trunc why = SS_TRUNC_NONE;
        up->valid = 0;
        if (o->step(o->ctx, f, up, true, &why)) {
            /* each return address on the way passes the candidate's checks
             * (but for the frame a signal interrupted, and code without
             * CFI: a JIT's or a file's, looked at below) */
            uint64_t ip = up->r[SS_A64S_PC];
            if (!(f->flags & SS_NF_SIGNAL) && ip >= 4096 &&
                file_code(ss_proc_find_cached(o->proc, ip)) && o->has_cfi(o->ctx, ip - 1) &&
                !ss_a64scan_ret_addr(o, ip, false))
                return false;
            continue;
        }
        switch (why) {
        case SS_TRUNC_NONE:
            /* the root: not a zero read from the stack (a stale chain
             * runs into zeroed slots; the roots' CFI marks x30 undefined) */
            if ((up->valid & SS_A64S_BIT(SS_A64S_PC)) && up->r[SS_A64S_PC] == 0 && i > 0) {
                ++*o->stale;
                return false;
            }
            return true;
        case SS_TRUNC_SNAPSHOT:
            return true;
        case SS_TRUNC_NOINFO: { /* more code without CFI, in executable memory */
            const struct ss_mapping *mp = ss_proc_find_cached(o->proc, f->r[SS_A64S_PC]);
            return i > 0 && mp && (mp->d.prot & SS_MAP_X);
        }
        default:
            return false;
        }
    }
    return true;
}

/* The CFA of c (its CFI step) with sp s, whatever the return address read
 * there. */
static bool a64_cfa(ops_t *o, const struct ss_a64sf *c, uint64_t s, uint64_t *cfa, unsigned *budget)
{
    if (!*budget) return false;
    --*budget;
    struct ss_a64sf t = *c, up;
    enum ss_trunc why = SS_TRUNC_NONE;
    t.r[SS_A64S_SP] = s;
    if (!o->step(o->ctx, &t, &up, false, &why)) return false;
    *cfa = up.r[SS_A64S_SP];
    return true;
}

/* c's CFA probed at sp s and at a neighbour (the return address read at
 * one may be 0, the root: no CFA there): 1 sp-based (CFA = sp + *k), 0
 * not, -1 no CFA at s or its neighbours, -2 neither. */
static int a64_probe(ops_t *o, const struct ss_a64sf *c, uint64_t s, uint64_t lo, uint64_t *k,
                     unsigned *budget)
{
    static const int64_t near[] = {16, -16, 32, -32, 48, -48};
    uint64_t c0, c1;
    if (!a64_cfa(o, c, s, &c0, budget)) return -1;
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
        uint64_t s1 = s + (uint64_t)near[i];
        if (s1 < lo || !a64_cfa(o, c, s1, &c1, budget)) continue;
        if (c1 == c0) return 0;
        if (c1 - c0 != s1 - s || c0 <= s) return -2;
        *k = c0 - s;
        return 1;
    }
    return -1;
}

/* Does c's CFI step with sp s restore the return address upra and x29
 * up29 (those of the frame record at c's x29)? Then c takes sp s. */
static bool a64_sp_ok(ops_t *o, struct ss_a64sf *c, uint64_t s, uint64_t lo, uint64_t upra,
                      uint64_t up29, unsigned *budget)
{
    if (s < lo || (s & 15) || s > c->r[SS_A64S_X29] || !*budget) return false;
    --*budget;
    struct ss_a64sf t = *c, up;
    enum ss_trunc why = SS_TRUNC_NONE;
    t.r[SS_A64S_SP] = s;
    if (!o->step(o->ctx, &t, &up, true, &why) || up.r[SS_A64S_PC] != upra ||
        !(up.valid & SS_A64S_BIT(SS_A64S_X29)) || up.r[SS_A64S_X29] != up29)
        return false;
    c->r[SS_A64S_SP] = s;
    return true;
}

/* The call before upra (the return address in c's caller, from c's
 * frame record): a direct one (bl) must have called c's function (the
 * start of the FDE holding c's ip), a PLT stub or other code without CFI
 * (unknown), or a function that tail-jumps; else the record is not c's (a
 * caller without frame pointers leaves x29 its caller's, whose record
 * then looks like c's: the frames between would be skipped). */
static bool a64_called(ops_t *o, uint64_t upra, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find_cached(o->proc, upra);
    const uint8_t *b = mp && mp->elf ? code_before(mp, upra, 4) : NULL;
    uint64_t target, lo, hi;
    if (!b || ss_a64_call(b, upra, &target) != SS_A64_CALL_DIR) return true;
    const struct ss_mapping *mc = ss_proc_find_cached(o->proc, ip);
    if (!mc || !mc->elf || !ss_elf_fde_range(mc->elf, ip - 1 - (uint64_t)mc->bias, &lo, &hi))
        return true; /* no .eh_frame FDE to tell (.debug_frame) */
    if (target == lo + (uint64_t)mc->bias) return true;
    const struct ss_mapping *mt = ss_proc_find_cached(o->proc, target);
    if (!mt || !mt->elf) return false;
    return !o->has_cfi(o->ctx, target) || tail_jumps(mt, target);
}

/* The candidate caller c of f from the frame record {x29, x30} at rec
 * (rec + 8 holds ra, stripped; rec the caller's x29, x29c). Code without
 * CFI that calls on saves x30 so, the caller's x29 beside it (stp x29,
 * x30, [sp, #-n]!; n unknown: its frame may go on above the record). The
 * caller called with bl/blr, so it saved its own x30; built with frame
 * pointers, x29c points to its frame record: {its caller's x29, its return
 * address}. The caller's sp is what its CFI and that record prove: its CFA
 * probed at two sp values tells whether the CFA is sp-based (CFA = sp + K:
 * the sp that puts its saved x29 at x29c, x29 saved at CFA - M for M = 16
 * (a record at the top), K (at the bottom) or up to SS_A64_SAVES, the one
 * whose CFI step restores the record's x29 and return address) or not (on
 * x29: the lowest sp its callee's record allows, the step checked alike).
 * A caller without such a record (built without frame pointers) is
 * refused. */
static bool a64_caller(ops_t *o, const struct ss_a64sf *f, uint64_t rec, uint64_t ra,
                       struct ss_a64sf *c, unsigned *budget)
{
    uint64_t x29c, up29, upra;
    if (!load8(o, rec, &x29c) || (x29c & 7) || x29c < rec + 16 || !load8(o, x29c, &up29) ||
        !load8(o, x29c + 8, &upra))
        return false;
    upra = ss_pac_strip(upra, o->pac);
    *c = *f;
    c->r[SS_A64S_PC] = ra;
    c->r[SS_A64S_X29] = x29c;
    c->valid = (c->valid & ~SS_A64S_BIT(SS_A64S_X30)) | SS_A64S_BIT(SS_A64S_X29);
    /* the other registers are what the code without CFI left (lost) */
    c->lost =
        c->valid & ~(SS_A64S_BIT(SS_A64S_PC) | SS_A64S_BIT(SS_A64S_SP) | SS_A64S_BIT(SS_A64S_X29));
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
        int r = a64_probe(o, c, s, lo, &k, budget);
        if (r == -2) return false;
        probed = r >= 0;
        sp_based = r == 1;
        if (s == lo) break;
    }
    if (!probed) return false;
    bool ok = false;
    if (!sp_based) { /* the CFA is not sp's: the lowest sp f's record allows */
        ok = a64_sp_ok(o, c, lo, lo, upra, up29, budget);
    } else {
        ok = a64_sp_ok(o, c, x29c + 16 - k, lo, upra, up29, budget) ||
             (k > 16 && a64_sp_ok(o, c, x29c, lo, upra, up29, budget));
        for (uint64_t m = 24; !ok && m < k && m <= SS_A64_SAVES; m += 8)
            ok = a64_sp_ok(o, c, x29c + m - k, lo, upra, up29, budget);
    }
    return ok && a64_called(o, upra, ra) && trial(o, c);
}

/* The first slot a above f's sp (SS_SCAN_BYTES) that holds the x30 of a
 * frame record at a - 8 whose caller a64_caller proves (only the value
 * want, stripped, when not 0), into *c; a frame-pointer step when f's x29
 * points to that record. */
static bool a64_scan(ops_t *o, const struct ss_a64sf *f, struct ss_a64sf *c, uint64_t want,
                     unsigned *budget)
{
    const struct ss_mem *m = o->mem;
    uint64_t sp = f->r[SS_A64S_SP], snap_end = m->snap_base + m->snap_len, ra;
    uint64_t fp = (f->valid & SS_A64S_BIT(SS_A64S_X29)) ? f->r[SS_A64S_X29] : 0;
    for (uint64_t a = sp + 8; a + 8 <= snap_end && a - sp < SS_SCAN_BYTES; a += 8) {
        if (!load8(o, a, &ra)) break;
        ra = ss_pac_strip(ra, o->pac);
        if ((want && ra != want) || !ss_a64scan_ret_addr(o, ra, true) ||
            !a64_caller(o, f, a - 8, ra, c, budget))
            continue;
        if (a - 8 == fp) c->flags &= ~SS_NF_SCAN;
        return true;
    }
    return false;
}

enum ss_a64s_how ss_a64scan(ops_t *o, const struct ss_a64sf *f, struct ss_a64sf *caller)
{
    unsigned budget = SS_A64_BUDGET;
    bool found = false;
    if (!(f->valid & SS_A64S_BIT(SS_A64S_SP))) return SS_A64S_NONE;
    if ((f->flags & SS_NF_EXACT) && (f->valid & SS_A64S_BIT(SS_A64S_X30))) {
        struct ss_a64sf lr = *f;
        /* a function built with pac-ret (the vDSO of kernels with pointer
         * authentication) signs x30 on entry: the signature is in the bits
         * of the PAC mask (util/pac.h) */
        lr.r[SS_A64S_PC] = ss_pac_strip(f->r[SS_A64S_X30], o->pac);
        lr.valid &= ~SS_A64S_BIT(SS_A64S_X30);
        lr.flags = SS_NF_NOCFI;
        if (ss_a64scan_ret_addr(o, lr.r[SS_A64S_PC], true)) {
            found = a64_scan(o, f, caller, lr.r[SS_A64S_PC], &budget);
            if (!found && trial(o, &lr)) {
                *caller = lr;
                return SS_A64S_LR;
            }
        }
    }
    if (found || a64_scan(o, f, caller, 0, &budget))
        return caller->flags & SS_NF_SCAN ? SS_A64S_SCAN : SS_A64S_FP;
    return SS_A64S_NONE;
}
