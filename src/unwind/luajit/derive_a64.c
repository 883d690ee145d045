/* unwind/luajit/derive_a64.c: LuaJIT layout facts read from an arm64 VM's
 * own machine code (capstone's ARM64 decoder), the arm64 counterpart of
 * derive.c: the same groups, checks and ss_lj_derived fields, offsets
 * relative to G where x86-64's are relative to DISPATCH (arm64 has none:
 * GL, x22, is G itself).
 *
 * Where the facts come from (vm_arm64.dasc, Debian 12's 2.1 tree):
 *  - the VM entries lj_vm_resume and lj_vm_pcall/lj_vm_call (the targets of
 *    the bl/b in the exported lua_resume, lua_pcall, lua_call): saveregs
 *    (`sub sp, sp, #CFRAME_SPACE`), `str L, SAVE_L` then `str L, SAVE_PC`
 *    (both store L: the first is SAVE_L), `str CARG3w, SAVE_NRES`, `str
 *    RC|xzr, SAVE_CFRAME`, `ldr GL, L->glref`, `ldr RC, L->cframe` or `str
 *    sp(+1), L->cframe`, `ldrb L->status`, `str L, GL->cur_L`, `str
 *    ST_INTERP (w26 = -1), GL->vmstate`, `ldp BASE|RB, CARG1, L->base`
 *    (base, then top), and in the pcall path's first dispatch `add TMP1, GL,
 *    INS, uxtb #3; ldr TMP0, [TMP1, #GG_G2DISP]`; L is x0 until the entry
 *    moves it to x23;
 *  - the GC checks: `ldp CARGn, CARGm, GL->gc.total; cmp` (threshold
 *    follows total);
 *  - vm_exit_handler: `sub sp, sp, #512; stp d0, d1, [sp]; stp x0, x1,
 *    [sp, #256]`, then `ldr BASE, GL->jit_base`, `str xzr, GL->jit_base`,
 *    `add CARG1, GL, #GG_G2J`, `bl lj_trace_exit` (exit_ret), and after it
 *    `ldr CARG2, L->cframe`, `ldr PC, SAVE_PC`, `str L, SAVE_L` (must agree
 *    with the entries);
 *  - BC_JLOOP: `ldr CARG1, [GL, #GL_J(trace)]; ldr RC, [CARG1, RC, lsl #3];
 *    ldr RA, TRACE:RC->mcode; str BASE, GL->jit_base; ...; br RA`.
 * Everything is checked here and verified again at run time against the
 * live global state (layout.c). */
#include <capstone/capstone.h>
#include <stdio.h>
#include <string.h>

#include "unwind/luajit/derive.h"
#include "unwind/luajit/layout.h"

#define A64_MAXINS 96
#define UNSET LJ_DUNSET
#define set1 ss_lj_dset
#define plausible ss_lj_dplausible

enum { RX0 = ARM64_REG_X0, RW0 = ARM64_REG_W0 };
#define X(n) (RX0 + (n)) /* x0..x28 are consecutive in capstone 4 */
#define W(n) (RW0 + (n))

static const cs_arm64_op *op(const cs_insn *ci, unsigned i)
{
    const cs_arm64 *a = &ci->detail->arm64;
    return i < a->op_count ? &a->operands[i] : NULL;
}
static bool is_reg(const cs_arm64_op *o, unsigned r)
{
    return o && o->type == ARM64_OP_REG && o->reg == r;
}
static bool is_mem(const cs_arm64_op *o, unsigned base)
{
    return o && o->type == ARM64_OP_MEM && o->mem.base == base && o->mem.index == 0;
}
static bool uncond_b(const cs_insn *ci)
{
    return ci->id == ARM64_INS_B && ci->detail->arm64.cc == ARM64_CC_INVALID;
}

/* The first bl/b in [va, va + size) that lands in [lo, hi), or 0. */
static uint64_t vm_target(Elf *e, uint64_t va, uint64_t size, uint64_t lo, uint64_t hi)
{
    size_t n = size && size <= 4096 ? size : 512;
    const uint8_t *b = NULL;
    while (n >= 64 && !(b = ss_lj_vaddr_bytes(e, va, n)))
        n /= 2;
    for (size_t i = 0; b && i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, b + i, 4);
        if ((w & 0x7c000000u) != 0x14000000u) continue; /* b, bl */
        uint64_t t = va + i + (uint64_t)((int64_t)((int32_t)(w << 6) >> 6) * 4);
        if (t >= lo && t < hi) return t;
    }
    return 0;
}

/* Facts of the entry path from va: straight-line code, one forward b
 * inside the VM followed (lj_vm_pcall's `b >1` into lj_vm_call), up to an
 * indirect branch, a return or another unconditional b. */
static void entry_facts(csh h, Elf *e, uint64_t va, uint64_t hi, struct lj_dentry *f)
{
    ss_lj_dentry_init(f);
    cs_insn *ci = cs_malloc(h);
    if (!ci) return;
    bool x0_is_L = true, neg1 = false, followed = false;
    unsigned lstores = 0, disp_reg = 0;
    uint32_t spregs = 0; /* x0..x28 holding sp (+ a flag) */
    unsigned n = 0;
    while (n < A64_MAXINS) {
        size_t len = hi > va && hi - va < 512 ? hi - va : 512;
        const uint8_t *b = va < hi ? ss_lj_vaddr_bytes(e, va, len) : NULL;
        uint64_t addr = va, next = 0;
        if (!b) break;
        while (n < A64_MAXINS && cs_disasm_iter(h, &b, &len, &addr, ci)) {
            n++;
            const cs_arm64_op *a = op(ci, 0), *o1 = op(ci, 1), *o2 = op(ci, 2);
            bool isL0 = is_reg(a, X(23)) || (x0_is_L && is_reg(a, X(0)));
            switch (ci->id) {
            case ARM64_INS_SUB:
                if (is_reg(a, ARM64_REG_SP) && is_reg(o1, ARM64_REG_SP) && o2 &&
                    o2->type == ARM64_OP_IMM)
                    set1(&f->cf_size, o2->imm);
                break;
            case ARM64_INS_MOVN:
                if ((is_reg(a, X(26)) || is_reg(a, W(26))) && o1 && o1->type == ARM64_OP_IMM &&
                    o1->imm == 0)
                    neg1 = true;
                break;
            case ARM64_INS_MOV:
            case ARM64_INS_ADD:
                if (a && a->type == ARM64_OP_REG && a->reg >= X(0) && a->reg <= X(28) &&
                    is_reg(o1, ARM64_REG_SP))
                    spregs |= 1u << (a->reg - X(0));
                if (ci->id == ARM64_INS_ADD && a && a->type == ARM64_OP_REG && is_reg(o1, X(22)) &&
                    o2 && o2->type == ARM64_OP_REG && o2->ext == ARM64_EXT_UXTB)
                    disp_reg = a->reg;
                break;
            case ARM64_INS_LDR:
                if (a && a->type == ARM64_OP_REG && o1 && o1->type == ARM64_OP_MEM &&
                    !o1->mem.index) {
                    unsigned base = o1->mem.base;
                    bool fromL = base == X(23) || (x0_is_L && base == X(0));
                    if (fromL && a->reg == X(22)) set1(&f->glref, o1->mem.disp);
                    if (fromL && a->reg == X(28)) set1(&f->cframe, o1->mem.disp);
                    if (disp_reg && base == disp_reg) set1(&f->g2disp, o1->mem.disp);
                }
                break;
            case ARM64_INS_LDP:
                if (is_reg(o1, X(0)) && (is_mem(o2, X(23)) || (x0_is_L && is_mem(o2, X(0))))) {
                    set1(&f->base, o2->mem.disp);
                    set1(&f->top, (int64_t)o2->mem.disp + 8);
                }
                break;
            case ARM64_INS_LDRB:
                if (is_mem(o1, X(23)) || (x0_is_L && is_mem(o1, X(0))))
                    set1(&f->status, o1->mem.disp);
                break;
            case ARM64_INS_STR:
                if (is_mem(o1, ARM64_REG_SP)) { /* cframe slots */
                    if (isL0 && lstores++ == 0)
                        set1(&f->cf_L, o1->mem.disp);
                    else if (isL0)
                        set1(&f->cf_pc, o1->mem.disp);
                    if (is_reg(a, W(2))) set1(&f->cf_nres, o1->mem.disp);
                    if (is_reg(a, X(28)) || is_reg(a, ARM64_REG_XZR))
                        set1(&f->cf_prev, o1->mem.disp);
                } else if ((is_mem(o1, X(23)) || (x0_is_L && is_mem(o1, X(0)))) && a &&
                           a->type == ARM64_OP_REG && a->reg >= X(0) && a->reg <= X(28) &&
                           (spregs >> (a->reg - X(0)) & 1)) {
                    set1(&f->cframe, o1->mem.disp);
                } else if (is_mem(o1, X(22))) {
                    if (isL0) set1(&f->cur_L, o1->mem.disp);
                    if (neg1 && is_reg(a, W(26))) set1(&f->vmstate, o1->mem.disp);
                }
                break;
            default:
                break;
            }
            /* x0 stops being L once written (a store, compare or branch
             * only reads it) */
            if ((is_reg(a, X(0)) || is_reg(a, W(0)) ||
                 (ci->id == ARM64_INS_LDP && is_reg(o1, X(0)))) &&
                ci->id != ARM64_INS_STR && ci->id != ARM64_INS_STUR && ci->id != ARM64_INS_STP &&
                ci->id != ARM64_INS_CMP && ci->id != ARM64_INS_CBZ && ci->id != ARM64_INS_CBNZ)
                x0_is_L = false;
            if (ci->id == ARM64_INS_BR || ci->id == ARM64_INS_RET) goto done;
            if (uncond_b(ci)) {
                uint64_t t = a && a->type == ARM64_OP_IMM ? (uint64_t)a->imm : 0;
                if (!followed && t > ci->address && t < hi) next = t;
                break;
            }
        }
        if (!next) break;
        followed = true;
        va = next;
    }
done:
    cs_free(ci, 1);
}

static const char *merge_entries(const struct ss_lj_elfinfo *info, const struct lj_dentry *e,
                                 unsigned n, struct ss_lj_derived *dv)
{
    struct lj_dentry m;
    if (ss_lj_dentry_merge(e, n, &m)) return "arm64: the VM entries disagree on a fact";
    if (m.cf_size != (int32_t)info->vm_cfa_off)
        return "arm64: cframe size (sub sp, sp, #N) differs from the VM FDE's";
    if (!plausible(m.cf_L, 8, m.cf_size)) return "arm64: SAVE_L (str L, [sp, #N]) not found";
    if (!plausible(m.cf_pc, 8, m.cf_size)) return "arm64: SAVE_PC (str L, [sp, #N]) not found";
    if (!plausible(m.cf_prev, 8, m.cf_size)) return "arm64: SAVE_CFRAME not found";
    if (!plausible(m.cf_nres, 4, m.cf_size)) return "arm64: SAVE_NRES (str w2, [sp, #N]) not found";
    if (!plausible(m.glref, 8, 64)) return "arm64: L->glref (ldr x22, [L, #N]) not found";
    if (!plausible(m.base, 8, 128)) return "arm64: L->base (ldp BASE, x0, [L, #N]) not found";
    if (!plausible(m.top, 8, 128)) return "arm64: L->top not found";
    if (!plausible(m.cframe, 8, 128)) return "arm64: L->cframe not found";
    if (!plausible(m.g2disp, 8, 65536) || m.g2disp < 256)
        return "arm64: GG_G2DISP (ldr x, [GL + INS*8, #N]) not found";
    if (!plausible(m.vmstate, 4, m.g2disp))
        return "arm64: G->vmstate (str w26 = -1, [x22, #N]) not found";
    if (!plausible(m.cur_L, 8, m.g2disp)) return "arm64: G->cur_L (str L, [x22, #N]) not found";
    ss_lj_dentry_apply(&m, m.vmstate, m.cur_L, dv);
    return NULL;
}

/* Every instruction of the VM code, in order, to fn (false: stop). */
static void sweep(csh h, Elf *e, const struct ss_lj_elfinfo *info,
                  bool (*fn)(void *ctx, const cs_insn *ci), void *ctx)
{
    uint64_t lo = info->vm_lo, hi = info->vm_hi;
    if (hi <= lo || hi - lo > (1u << 20)) return;
    const uint8_t *b = ss_lj_vaddr_bytes(e, lo, hi - lo);
    cs_insn *ci = b ? cs_malloc(h) : NULL;
    if (!ci) return;
    size_t len = hi - lo;
    uint64_t addr = lo;
    while (len >= 4) {
        if (!cs_disasm_iter(h, &b, &len, &addr, ci)) { /* data or an unknown word */
            b += 4, len -= 4, addr += 4;
            continue;
        }
        if (!fn(ctx, ci)) break;
    }
    cs_free(ci, 1);
}

/* GC checks: `ldp xA, xB, [x22, #N]; cmp xA, xB`, the most frequent N
 * (at least three, no other as often). */
struct gcscan {
    unsigned ra, rb, n[8];
    int64_t disp, seen[8];
    unsigned ns;
};
static bool gc_one(void *ctx, const cs_insn *ci)
{
    struct gcscan *g = ctx;
    const cs_arm64_op *a = op(ci, 0), *b = op(ci, 1), *c = op(ci, 2);
    if (ci->id == ARM64_INS_CMP && g->ra && is_reg(a, g->ra) && is_reg(b, g->rb)) {
        unsigned k = 0;
        while (k < g->ns && g->seen[k] != g->disp)
            k++;
        if (k == g->ns && g->ns < 8) g->seen[g->ns++] = g->disp, g->n[k] = 0;
        if (k < g->ns) g->n[k]++;
    }
    g->ra = 0;
    if (ci->id == ARM64_INS_LDP && a && b && a->type == ARM64_OP_REG && b->type == ARM64_OP_REG &&
        is_mem(c, X(22))) {
        g->ra = a->reg, g->rb = b->reg;
        g->disp = c->mem.disp;
    }
    return true;
}

/* vm_exit_handler: found by its prologue, decoded to the cframe accesses
 * after `bl lj_trace_exit`. */
struct exitscan {
    uint64_t at; /* the sub's address once its two stp follow */
    unsigned k;
};
static bool exit_one(void *ctx, const cs_insn *ci)
{
    struct exitscan *x = ctx;
    const cs_arm64_op *a = op(ci, 0), *b = op(ci, 1), *c = op(ci, 2);
    if (ci->id == ARM64_INS_SUB && is_reg(a, ARM64_REG_SP) && is_reg(b, ARM64_REG_SP) && c &&
        c->type == ARM64_OP_IMM && c->imm == 512) {
        x->k = 1;
        x->at = ci->address;
        return true;
    }
    if (x->k == 1 && ci->id == ARM64_INS_STP && is_reg(a, ARM64_REG_D0) &&
        is_reg(b, ARM64_REG_D1) && is_mem(c, ARM64_REG_SP) && c->mem.disp == 0) {
        x->k = 2;
        return true;
    }
    if (x->k == 2 && ci->id == ARM64_INS_STP && is_reg(a, X(0)) && is_reg(b, X(1)) &&
        is_mem(c, ARM64_REG_SP) && c->mem.disp == 256)
        return false; /* found */
    x->k = 0;
    x->at = 0;
    return true;
}

static const char *exit_facts(csh h, Elf *e, struct ss_lj_elfinfo *info, struct ss_lj_derived *dv)
{
    struct exitscan x = {0};
    sweep(h, e, info, exit_one, &x);
    if (x.k != 2 || !x.at) return "arm64: no vm_exit_handler (a build without the JIT)";
    size_t len = 1024;
    const uint8_t *b = NULL;
    while (len >= 256 && !(b = ss_lj_vaddr_bytes(e, x.at, len)))
        len /= 2;
    cs_insn *ci = b ? cs_malloc(h) : NULL;
    if (!ci) return "arm64: vm_exit_handler not readable";
    int32_t jb = UNSET, jb0 = UNSET, g2j = UNSET, savel = UNSET, savepc = UNSET;
    uint64_t addr = x.at, ret = 0;
    unsigned n = 0, cfreg = 0;
    while (n++ < 2 * A64_MAXINS && cs_disasm_iter(h, &b, &len, &addr, ci)) {
        const cs_arm64_op *a = op(ci, 0), *o1 = op(ci, 1), *o2 = op(ci, 2);
        if (!ret) {
            if (ci->id == ARM64_INS_LDR && is_reg(a, X(19)) && is_mem(o1, X(22)))
                set1(&jb, o1->mem.disp);
            if (ci->id == ARM64_INS_STR && is_reg(a, ARM64_REG_XZR) && is_mem(o1, X(22)))
                set1(&jb0, o1->mem.disp);
            if (ci->id == ARM64_INS_ADD && is_reg(a, X(0)) && is_reg(o1, X(22)) && o2 &&
                o2->type == ARM64_OP_IMM)
                set1(&g2j, o2->imm);
            if (ci->id == ARM64_INS_BL) ret = ci->address + 4;
            continue;
        }
        if (ci->id == ARM64_INS_LDR && a && a->type == ARM64_OP_REG && is_mem(o1, X(23)) &&
            o1->mem.disp == (int64_t)dv->L_cframe)
            cfreg = a->reg;
        if (ci->id == ARM64_INS_LDR && is_reg(a, X(21)) && is_mem(o1, ARM64_REG_SP))
            set1(&savepc, o1->mem.disp);
        if (ci->id == ARM64_INS_STR && is_reg(a, X(23)) && is_mem(o1, ARM64_REG_SP))
            set1(&savel, o1->mem.disp);
        if (uncond_b(ci) || ci->id == ARM64_INS_BR || ci->id == ARM64_INS_RET) break;
    }
    cs_free(ci, 1);
    if (!ret) return "arm64: vm_exit_handler: no call to lj_trace_exit";
    info->exit_lo = x.at; /* a JIT build, whether its facts check out or not */
    info->exit_ret = ret;
    if (jb == UNSET || jb != jb0)
        return "arm64: vm_exit_handler: G->jit_base load and clear not found";
    if (!cfreg || savel != (int32_t)dv->cf_L || savepc != (int32_t)dv->cf_pc)
        return "arm64: vm_exit_handler: L->cframe/SAVE_L/SAVE_PC differ from the entries'";
    if (g2j == UNSET || g2j <= 0 || g2j >= dv->g2disp || (g2j & 7))
        return "arm64: vm_exit_handler: G2J not plausible";
    if (!plausible(jb, 8, g2j)) return "arm64: G->jit_base outside global_State";
    dv->G_jit_base = (uint32_t)jb;
    dv->g2j = g2j;
    return NULL;
}

/* BC_JLOOP: `ldr xA, [x22, #J]; ...; ldr xC, [xA, xB, lsl #3]; ...; ldr xD,
 * [xC, #mcode]; str x19, [x22, #jit_base]; ...; br xD`, within the 11
 * instructions before the br; exactly one. */
#define JL_WIN 12
struct jlrec {
    unsigned id, r0, base, index;
    int64_t disp;
    uint64_t addr;
};
struct jlscan {
    const struct ss_lj_derived *dv;
    struct jlrec w[JL_WIN];
    unsigned nw, found;
    int32_t jt, mc;
};
static bool jl_rec(void *ctx, const cs_insn *ci)
{
    struct jlscan *j = ctx;
    const cs_arm64_op *a = op(ci, 0), *b = op(ci, 1);
    memmove(j->w, j->w + 1, sizeof(j->w) - sizeof(j->w[0]));
    struct jlrec *r = &j->w[JL_WIN - 1];
    memset(r, 0, sizeof(*r));
    r->id = ci->id;
    r->addr = ci->address;
    if (a && a->type == ARM64_OP_REG) r->r0 = a->reg;
    if (b && b->type == ARM64_OP_MEM) {
        r->base = b->mem.base;
        r->index = b->mem.index;
        r->disp = b->mem.disp;
    }
    if (j->nw < JL_WIN) j->nw++;
    if (ci->id != ARM64_INS_BR || !r->r0) return true;
    /* br xD: look back for the chain */
    int32_t jt = UNSET, mc = UNSET;
    unsigned trace_arr = 0, tr = 0;
    bool jbase = false;
    for (unsigned i = JL_WIN - j->nw; i < JL_WIN - 1; i++) {
        const struct jlrec *p = &j->w[i];
        if (p->id == ARM64_INS_LDR && p->base == X(22) && !p->index) {
            jt = (int32_t)p->disp;
            trace_arr = p->r0;
        }
        if (p->id == ARM64_INS_LDR && trace_arr && p->base == trace_arr && p->index) tr = p->r0;
        if (p->id == ARM64_INS_LDR && tr && p->base == tr && !p->index && p->r0 == r->r0)
            mc = (int32_t)p->disp;
        if (p->id == ARM64_INS_STR && p->r0 == X(19) && p->base == X(22) &&
            p->disp == (int64_t)j->dv->G_jit_base)
            jbase = true;
    }
    if (jt != UNSET && mc != UNSET && jbase) {
        j->found++;
        j->jt = jt;
        j->mc = mc;
    }
    return true;
}

static const char *jloop_facts(csh h, Elf *e, const struct ss_lj_elfinfo *info,
                               struct ss_lj_derived *dv)
{
    struct jlscan j = {.dv = dv};
    sweep(h, e, info, jl_rec, &j);
    if (j.found != 1)
        return j.found ? "arm64: BC_JLOOP: more than one match" : "arm64: BC_JLOOP: not found";
    int32_t jt = j.jt - dv->g2j;
    if (!plausible(jt, 8, 4096) || !plausible(j.mc, 8, 256))
        return "arm64: BC_JLOOP: J->trace / GCtrace.mcode not plausible";
    dv->J_trace = (uint32_t)jt;
    dv->T_mcode = (uint32_t)j.mc;
    return NULL;
}

void ss_lj_derive_a64(Elf *e, struct ss_lj_elfinfo *info, const uint64_t *api,
                      const uint64_t *apisz, unsigned napi)
{
    struct ss_lj_derived *dv = &info->derived;
    memset(dv, 0, sizeof(*dv));
    csh h;
    if (cs_open(CS_ARCH_ARM64, CS_MODE_ARM, &h) != CS_ERR_OK) {
        snprintf(info->derive_why, sizeof(info->derive_why), "arm64: no capstone ARM64 decoder");
        return;
    }
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    struct lj_dentry ent[3];
    unsigned ne = 0;
    uint64_t seen[3] = {0};
    for (unsigned i = 0; i < napi && i < 3; i++) {
        uint64_t t = api[i] ? vm_target(e, api[i], apisz[i], info->vm_lo, info->vm_hi) : 0;
        bool dup = false;
        for (unsigned k = 0; k < ne; k++)
            dup |= seen[k] == t;
        if (!t || dup) continue;
        seen[ne] = t;
        entry_facts(h, e, t, info->vm_hi, &ent[ne++]);
    }
    const char *why = ne < 2 ? "arm64: fewer than 2 VM entries found from the API"
                             : merge_entries(info, ent, ne, dv);
    if (!why) {
        dv->have |= SS_LJ_D_ENTRY;
        dv->nentries = ne;
        struct gcscan g = {0};
        sweep(h, e, info, gc_one, &g);
        unsigned best = 0, second = 0;
        int64_t disp = 0;
        for (unsigned k = 0; k < g.ns; k++) {
            if (g.n[k] > best) {
                second = best;
                best = g.n[k];
                disp = g.seen[k];
            } else if (g.n[k] > second) {
                second = g.n[k];
            }
        }
        const char *gw = NULL;
        if (best < 3 || second == best)
            gw = "arm64: GC checks (ldp gc.total, gc.threshold; cmp) not found";
        else if (disp < 0 || disp > 256 || disp % 8)
            gw = "arm64: G->gc.total not plausible";
        else
            dv->G_gc_total = (uint32_t)disp, dv->have |= SS_LJ_D_GC;
        why = exit_facts(h, e, info, dv);
        if (!why) {
            dv->have |= SS_LJ_D_EXIT;
            why = jloop_facts(h, e, info, dv);
            if (!why) dv->have |= SS_LJ_D_JLOOP;
        } else if (!info->exit_lo) {
            why = NULL; /* no JIT: nothing to derive there */
        }
        if (!why) why = gw;
    }
    if (why) snprintf(info->derive_why, sizeof(info->derive_why), "%s", why);
    cs_close(&h);
}
