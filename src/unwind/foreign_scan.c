/* unwind/foreign_scan.c: an x86-64 build's step out of code without CFI
 * in an arm64 capture (PCRE2's JIT code, other JITs, file code without an
 * FDE): the arm64 build's stack scan (a64scan.c) given this walk's CFI
 * steps (ss_fstep: the rule cache's, else libdw's), so that the replay
 * takes the caller the live walk took, or stops where it stopped
 * (native_scan.c). The caller's registers that the code without CFI may
 * have changed (lost: a64scan.h) are not the walk's from there on: only a
 * save slot gives them back, so no VM register of a Lua frame comes from
 * them. */
#if defined(__x86_64__)
#include <string.h>

#include "process/process.h"
#include "unwind/a64scan.h"
#include "unwind/foreign_int.h"

#define GPRS ((1ull << SS_A64R_NREG) - 1) /* x0-x30, sp */

/* The scan's rule lookups: a CFI row, or the entry's code (the root, as
 * native.c's rule cache has it) */
static bool fs_has_cfi(void *ctx, uint64_t look)
{
    struct ss_fproc *fp = ctx;
    return ss_fhas_cfi(fp, look) || ss_fat_entry(fp->up->proc, look);
}

/* The scan's step: ss_fstep, checked as native.c's ss_native_check checks
 * (and as add_frame does) when checked. */
static bool fs_step(void *ctx, const struct ss_a64sf *f, struct ss_a64sf *up, bool checked,
                    enum ss_trunc *why)
{
    struct ss_fproc *fp = ctx;
    bool dec = !(f->flags & SS_NF_EXACT), act;
    uint64_t pc = f->r[SS_A64S_PC], npc = 0, sp = f->r[SS_A64S_SP];
    up->valid = 0;
    if (!ss_fhas_cfi(fp, pc - dec)) {
        *why = ss_fat_entry(fp->up->proc, pc) ? SS_TRUNC_NONE : SS_TRUNC_NOINFO;
        return false;
    }
    struct ss_a64regs in = {.valid = f->valid & GPRS}, g;
    memcpy(in.r, f->r, sizeof(in.r));
    if (!ss_fstep(fp, &in, pc, dec, &g, &npc, &act, why)) {
        /* a rule read a zero return address: the caller's pc 0 */
        if (*why == SS_TRUNC_NONE && (g.valid >> SS_A64R_X30 & 1) && g.r[SS_A64R_X30] == 0) {
            up->r[SS_A64S_PC] = 0;
            up->valid = SS_A64S_BIT(SS_A64S_PC);
        }
        return false;
    }
    memcpy(up->r, g.r, sizeof(g.r));
    up->r[SS_A64S_PC] = npc;
    up->valid = (g.valid & GPRS) | SS_A64S_BIT(SS_A64S_PC);
    up->lost = 0;
    up->flags = act ? SS_NF_EXACT : 0;
    if (ss_a64_rule(fp->rc, fp->dwfl, npc - !act)->kind == SS_A64R_SIGNAL)
        up->flags |= SS_NF_SIGNAL;
    if (!checked) return true;
    if (!(up->valid & SS_A64S_BIT(SS_A64S_SP))) {
        *why = SS_TRUNC_ERROR;
        return false;
    }
    uint64_t nsp = up->r[SS_A64S_SP];
    const struct ss_mapping *mp;
    if (npc == 0) {
        *why = SS_TRUNC_NONE;
    } else if ((npc == pc && nsp == sp) ||
               (!(nsp > sp || (nsp == sp && (f->flags & SS_NF_EXACT))) &&
                !(f->flags & SS_NF_SIGNAL))) {
        *why = SS_TRUNC_LOOP;
    } else if (!(mp = ss_proc_find(fp->up->proc, npc)) || !(mp->d.prot & SS_MAP_X)) {
        *why = SS_TRUNC_BADIP;
    } else {
        return true;
    }
    return false;
}

bool ss_fscan(struct ss_fproc *fp, struct fwalk *w)
{
    /* in every mode (the steps libdw's alone but in SS_NATIVE_RULES): the
     * modes' walks give the same frames (cli_fixtures) */
    if (!w->nocfi || w->why != SS_TRUNC_NOINFO || !w->n) return false;
    struct ss_native_frame *f = &w->nf[w->n - 1];
    if (f->flags & SS_NF_TRACE_CUT) return false;
    uint64_t stale = 0;
    const struct ss_a64scan_ops o = {.ctx = fp,
                                     .proc = fp->up->proc,
                                     .mem = &fp->up->mem,
                                     .pac = fp->pac,
                                     .has_cfi = fs_has_cfi,
                                     .step = fs_step,
                                     .stale = &stale};
    struct ss_a64sf sf = {.valid = w->cur.valid & GPRS, .flags = f->flags & SS_NF_EXACT}, c;
    memcpy(sf.r, w->cur.r, sizeof(w->cur.r));
    sf.r[SS_A64S_PC] = ss_nf_ip(f);
    sf.valid |= SS_A64S_BIT(SS_A64S_PC);
    enum ss_a64s_how how = ss_a64scan(&o, &sf, &c);
    if (stale) f->flags |= SS_NF_STALE; /* counted by the sample */
    if (how == SS_A64S_NONE) return false;
    if (how == SS_A64S_LR) {
        f->cfa = ss_nf_sp(f);
    } else {
        f->cfa = c.r[SS_A64S_SP];
        f->flags |= SS_NF_JIT;
    }
    if (w->n == w->max) {
        w->why = SS_TRUNC_DEPTH;
        return false;
    }
    /* the walk on from the caller, a return address (ss_fwalk's checks:
     * the caller's sp not below f's, its ip in executable memory) */
    uint64_t keep = c.valid & ~c.lost & GPRS;
    memset(fp->regs, 0, sizeof(fp->regs));
    for (unsigned i = 0; i < SS_A64R_NREG; i++)
        if (keep >> i & 1) fp->regs[i] = c.r[i];
    fp->regs[A64_PC] = c.r[SS_A64S_PC] - 1;
    fp->valid = keep;
    w->restart = true;
    ss_fwalk(fp, w);
    return true;
}
#endif
