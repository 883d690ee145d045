/* unwind/luajit/guards.c: which snapshot a trace's code belongs to, for
 * builds whose SnapShot has no mcofs (Tarantool 2.6's tree).
 *
 * The assembler works backwards through the IR and every guard branches to
 * the exit stub of the snapshot current at its IR instruction (lj_asm_x86.h
 * asm_guardcc: "jcc rel32" to exitstub_addr(J, snapno), or after a loop
 * inversion "jmp rel32"). So a guard found in the mcode names the snapshot
 * whose code holds it, and guards appear in snapshot order. Exit stubs are
 * generated in groups of 32 (asm_exitstub_gen):
 *     push lo0; jmp short +; push lo1; jmp short +; ... push lo31;
 *     push hi; ...; jmp lj_vm_exit_handler
 * with 4 bytes per stub, loK = (32 * group + K) & 0xff and hi its high byte,
 * so the exit number of a branch target follows from the 128 bytes of its
 * group; a group is accepted only when every byte of that pattern is there.
 * Guards whose exit has been patched to a side trace no longer branch to a
 * stub and are not seen.
 *
 * Placement: a snapshot's code starts where the code of the IR instruction
 * before its ref ends. Anchors say exactly where some instructions end: the
 * first and last guard of each snapshot (its first and last guard IR
 * instruction), T->mcloop (the LOOP), the trace's start and end; between
 * two anchors the bytes are shared out evenly over the instructions that
 * emit code. Checked against the real mcofs of the non-GC64 build (same
 * code generator): the same frames for 99.3-100% of trace samples. */
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/frames.h"

#define GROUP 32
#define GROUP_BYTES 128 /* 32 stubs of (push imm8; jmp short) ... push hi */
#define MAX_TARGETS 512 /* distinct stubs looked at per trace */

struct cand {
    uint32_t ofs;
    uint64_t target;
};

static int by_target(const void *a, const void *b)
{
    uint64_t x = ((const struct cand *)a)->target, y = ((const struct cand *)b)->target;
    return x < y ? -1 : x > y;
}

static int by_ofs(const void *a, const void *b)
{
    uint32_t x = ((const struct ss_lj_guard *)a)->ofs, y = ((const struct ss_lj_guard *)b)->ofs;
    return x < y ? -1 : x > y;
}

/* Exit number of stub i of the group g (128 bytes), or -1 when g is not
 * an exit stub group. */
static int stub_exit(const uint8_t *g, unsigned i)
{
    if (g[0] != 0x6a || g[1] % GROUP || g[126] != 0x6a) return -1;
    for (unsigned s = 1; s < GROUP; s++)
        if (g[4 * s - 2] != 0xeb || g[4 * s - 1] != 4 * (GROUP - s) - 2 || g[4 * s] != 0x6a ||
            g[4 * s + 1] != (uint8_t)(g[1] + s))
            return -1;
    return (int)((unsigned)g[127] << 8 | g[4 * i + 1]);
}

int ss_lj_guards(struct ss_mem *m, uint64_t mcode, const uint8_t *mc, uint32_t sz, uint32_t nsnap,
                 struct ss_lj_guard *out, uint32_t cap)
{
    struct cand *c = malloc(sizeof(*c) * MAX_TARGETS * 4);
    uint64_t *tg = malloc(sizeof(*tg) * MAX_TARGETS * 2);
    uint8_t *w = malloc((size_t)MAX_TARGETS * (4 + GROUP_BYTES));
    struct ss_iov *iov = malloc(sizeof(*iov) * MAX_TARGETS);
    int n = -1;
    if (!c || !tg || !w || !iov) goto out;
    uint32_t nc = 0;
    for (uint32_t o = 0; o + 5 <= sz && nc < MAX_TARGETS * 4; o++) {
        uint32_t len = mc[o] == 0x0f && (mc[o + 1] & 0xf0) == 0x80 ? 6 : mc[o] == 0xe9 ? 5 : 0;
        if (!len || o + len > sz) continue;
        int32_t rel;
        memcpy(&rel, mc + o + len - 4, 4);
        uint64_t t = mcode + o + len + (uint64_t)(int64_t)rel;
        if (t >= mcode && t < mcode + sz) continue; /* a branch inside the trace */
        c[nc++] = (struct cand){o, t};
    }
    /* round 1: the first bytes at each distinct target ("push lo") */
    qsort(c, nc, sizeof(*c), by_target);
    uint64_t *gs = tg + MAX_TARGETS; /* its group's start */
    uint32_t nt = 0;
    for (uint32_t i = 0; i < nc && nt < MAX_TARGETS; i++)
        if (!nt || tg[nt - 1] != c[i].target) tg[nt++] = c[i].target;
    for (uint32_t i = 0; i < nt; i++)
        iov[i] = (struct ss_iov){.addr = tg[i], .dst = w + 4 * i, .len = 2};
    if (nt && ss_mem_readv(m, iov, (int)nt)) goto out;
    /* round 2: each distinct group once */
    uint32_t ng = 0;
    uint8_t *gb = w + 4 * MAX_TARGETS;
    for (uint32_t i = 0; i < nt; i++) {
        gs[i] = 0;
        if (iov[i].err || w[4 * i] != 0x6a) continue;
        gs[i] = tg[i] - 4 * (w[4 * i + 1] % GROUP);
        if (ng && iov[ng - 1].addr == gs[i]) continue; /* targets are sorted */
        iov[ng] = (struct ss_iov){
            .addr = gs[i], .dst = gb + (size_t)ng * GROUP_BYTES, .len = GROUP_BYTES};
        ng++;
    }
    if (ng && ss_mem_readv(m, iov, (int)ng)) goto out;
    n = 0;
    for (uint32_t i = 0, t = 0, g = 0; i < nc && (uint32_t)n < cap; i++) {
        while (t < nt && tg[t] < c[i].target)
            t++;
        if (t == nt || tg[t] != c[i].target || !gs[t]) continue;
        while (g < ng && iov[g].addr < gs[t])
            g++;
        if (g == ng || iov[g].addr != gs[t] || iov[g].err) continue;
        int e = stub_exit(gb + (size_t)g * GROUP_BYTES, (unsigned)(tg[t] - gs[t]) / 4);
        if (e >= 0 && (uint32_t)e < nsnap) out[n++] = (struct ss_lj_guard){c[i].ofs, (uint32_t)e};
    }
    qsort(out, (size_t)n, sizeof(*out), by_ofs);
out:
    free(iov);
    free(w);
    free(tg);
    free(c);
    return n;
}

/* ---- snapshot starts from the guards ---- */

/* Anchors: mcode offsets known to end the code of an IR instruction. */
struct anchor {
    uint32_t ofs, ref;
};

/* Does IR instruction ins (8 bytes: op1 op2 t o r s) emit code? Structure
 * ops (NOP, LOOP, USE, PHI, RENAME) do not; the rest count one each. */
static uint32_t weight(const struct lj_layout *lay, const uint8_t *ins)
{
    uint8_t o = ins[5];
    return o == lay->ir_nop || o == lay->ir_loop || o == lay->ir_use || o == lay->ir_phi ||
                   o == lay->ir_rename
               ? 0
               : 1;
}

static int by_anchor(const void *x, const void *y)
{
    const struct anchor *a = x, *b = y;
    if (a->ofs != b->ofs) return a->ofs < b->ofs ? -1 : 1;
    return a->ref < b->ref ? -1 : a->ref > b->ref;
}

void ss_lj_guard_starts(const struct lj_layout *lay, const struct ss_lj_guard *g, uint32_t ng,
                        const uint8_t *mc, uint32_t sz, const uint8_t *ir, uint32_t nins,
                        uint32_t mcloop, const uint32_t *snapref, uint32_t nsnap, uint32_t *starts)
{
    /* per instruction index i = ref - SS_IR_BIAS (1 <= i < n): cw[i] the
     * weight of 1..i, nxt[i] the first guard instruction >= i (n: none),
     * prv[i] the last guard instruction <= i (0: none) */
    uint32_t n = nins > SS_IR_BIAS ? nins - SS_IR_BIAS : 1, loopref = 0;
    uint32_t *cw = calloc(3 * ((size_t)n + 1), sizeof(*cw)), *nxt = cw + n + 1, *prv = nxt + n + 1;
    struct anchor *a = malloc(sizeof(*a) * (2 * (size_t)nsnap + 3));
    int32_t *gf = malloc(sizeof(*gf) * 2 * (size_t)nsnap), *gl = gf + nsnap;
    uint32_t na = 0;
    if (!cw || !a || !gf) {
        for (uint32_t k = 0; k < nsnap; k++)
            starts[k] = k ? sz : 0;
        goto out;
    }
    for (uint32_t i = 1; i < n; i++) {
        const uint8_t *ins = ir + 8 * (size_t)i;
        cw[i] = cw[i - 1] + weight(lay, ins);
        prv[i] = ins[4] & 0x80 ? i : prv[i - 1];
        if (ins[5] == lay->ir_loop && !loopref) loopref = i;
    }
    cw[n] = cw[n - 1] + 1; /* the trace's tail */
    nxt[n] = n;
    for (uint32_t i = n; i-- > 1;)
        nxt[i] = ir[8 * (size_t)i + 4] & 0x80 ? i : nxt[i + 1];
    /* first and last guard (in the code) of each exit */
    for (uint32_t k = 0; k < nsnap; k++)
        gf[k] = gl[k] = -1;
    for (uint32_t i = 0; i < ng; i++) {
        uint32_t e = g[i].exitno;
        if (e >= nsnap) continue;
        if (gf[e] < 0) gf[e] = (int32_t)i;
        gl[e] = (int32_t)i;
    }
    a[na++] = (struct anchor){0, 0};
    /* each exit's first and last jcc end the code of the first and last
     * guard instruction in its snapshot's IR range */
    for (uint32_t k = 0; k < nsnap; k++) {
        uint32_t lo = snapref[k] > SS_IR_BIAS ? snapref[k] - SS_IR_BIAS : 1;
        uint32_t hi =
            k + 1 < nsnap && snapref[k + 1] > SS_IR_BIAS ? snapref[k + 1] - SS_IR_BIAS : n;
        if (hi > n) hi = n;
        if (lo >= hi || gf[k] < 0) continue;
        uint32_t first = nxt[lo], last = prv[hi - 1];
        if (first >= hi || last < lo || !last) continue;
        const struct ss_lj_guard *f = &g[gf[k]], *l = &g[gl[k]];
        a[na++] = (struct anchor){f->ofs + (mc[f->ofs] == 0x0f ? 6 : 5), first};
        if (l != f) a[na++] = (struct anchor){l->ofs + (mc[l->ofs] == 0x0f ? 6 : 5), last};
    }
    if (loopref && mcloop && mcloop < sz) a[na++] = (struct anchor){mcloop, loopref};
    a[na++] = (struct anchor){sz, n};
    /* keep the anchors increasing in both offset and instruction */
    qsort(a, na, sizeof(*a), by_anchor);
    uint32_t m = 1;
    for (uint32_t i = 1; i < na; i++)
        if (a[i].ref > a[m - 1].ref && a[i].ofs >= a[m - 1].ofs) a[m++] = a[i];
    na = m;
    /* snapshot k's code starts where the code of the instruction before
     * its ref ends: between the two anchors around it, by weight */
    uint32_t prev = 0;
    for (uint32_t k = 0; k < nsnap; k++) {
        uint32_t x = snapref[k] > SS_IR_BIAS ? snapref[k] - SS_IR_BIAS - 1 : 0, s = prev;
        if (x >= n) x = n - 1;
        uint32_t lo = 0, hi = na; /* last anchor with ref <= x */
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (a[mid].ref <= x)
                lo = mid;
            else
                hi = mid;
        }
        if (lo + 1 < na) {
            uint64_t w = cw[a[lo + 1].ref] - cw[a[lo].ref], d = cw[x] - cw[a[lo].ref];
            s = a[lo].ofs + (uint32_t)(w ? (uint64_t)(a[lo + 1].ofs - a[lo].ofs) * d / w : 0);
        } else {
            s = a[lo].ofs;
        }
        starts[k] = k == 0 ? 0 : s < prev ? prev : s > sz ? sz : s;
        prev = starts[k];
    }
out:
    free(gf);
    free(a);
    free(cw);
}
