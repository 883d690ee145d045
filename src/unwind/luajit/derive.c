/* unwind/luajit/derive.c: LuaJIT layout facts read from the binary's own
 * machine code, decoded with capstone (Debian libcapstone), so that a build
 * nobody has listed still gets its offsets.
 *
 * Where the facts come from (vm_x64.dasc / vm_x86.dasc, every 2.1 tree):
 *  - the VM entries lj_vm_resume and lj_vm_pcall/lj_vm_call (the targets of
 *    the calls in the exported lua_resume, lua_pcall, lua_call): saveregs
 *    (pushes + sub rsp = the cframe size), `mov [rsp+SAVE_L], rdi`,
 *    `mov DISPATCH, L:RB->glref; add DISPATCH, GG_G2DISP`,
 *    `mov L:RB->cframe, ...`, `cmp byte L:RB->status, ...`,
 *    `mov [DISPATCH+cur_L], L:RB`, `mov dword [DISPATCH+vmstate], -1`,
 *    `mov BASE, L:RB->base`, `mov RD, L:RB->top`, and in the pcall path
 *    SAVE_NRES (CARG3d), SAVE_CFRAME (KBASE), SAVE_PC (L:RB);
 *    resume and pcall/call are decoded separately and must agree;
 *  - vm_exit_handler: `mov BASE, [DISPATCH+jit_base]`, `lea CARG1,
 *    [DISPATCH+GG_DISP2J]` (g2j), `mov [DISPATCH+jit_base], 0`, and after
 *    the call SAVE_L / SAVE_PC through the cframe (must agree with the
 *    entries);
 *  - the GC checks of allocating bytecodes: gc.total and gc.threshold
 *    (gc_facts);
 *  - BC_JLOOP: `mov RA, [DISPATCH+J.trace]; mov TRACE:RD, [RA+RD*8];
 *    mov RD, TRACE:RD->mcode; ...; mov [DISPATCH+jit_base], BASE`, found
 *    by a sweep of the VM code; exactly one match.
 * Registers (both .dasc files on x64): RB = rbp holds L, BASE = rdx,
 * RD = rax, KBASE = r15, DISPATCH = r14, CARG1..4 = rdi, rsi, rdx, rcx.
 * Everything is range- and alignment-checked here and verified again at
 * run time against the live global state (layout.c). */
#include <capstone/capstone.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/derive.h"
#include "unwind/luajit/layout.h"

#define MAXINS 96
#define UNSET LJ_DUNSET

struct ins {
    unsigned id;
    uint64_t addr, size;
    unsigned nops;
    struct op {
        uint8_t type, size;
        int reg;                /* REG: 64-bit family */
        int base, index, scale; /* MEM (base/index: 64-bit family, 0 none) */
        int64_t disp, imm;
    } op[2];
};

/* The 64-bit register of the family r belongs to (eax -> rax, r14d -> r14). */
static int reg64(int r)
{
    static const int fam[][4] = {
        {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL},
        {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL},
        {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL},
        {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL},
        {X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL},
        {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL},
        {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL},
        {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL},
        {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B},
        {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B},
        {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B},
        {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B},
        {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B},
        {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B},
        {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B},
        {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B},
    };
    if (r == X86_REG_INVALID) return 0;
    for (unsigned i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
        for (unsigned j = 0; j < 4; j++)
            if (fam[i][j] == r) return fam[i][0];
    return r;
}

static void conv(const cs_insn *ci, struct ins *o)
{
    memset(o, 0, sizeof(*o));
    o->id = ci->id;
    o->addr = ci->address;
    o->size = ci->size;
    const cs_x86 *x = &ci->detail->x86;
    o->nops = x->op_count > 2 ? 2 : x->op_count;
    for (unsigned i = 0; i < o->nops; i++) {
        const cs_x86_op *s = &x->operands[i];
        struct op *d = &o->op[i];
        d->type = (uint8_t)s->type;
        d->size = s->size;
        if (s->type == X86_OP_REG) d->reg = reg64(s->reg);
        if (s->type == X86_OP_IMM) d->imm = s->imm;
        if (s->type == X86_OP_MEM) {
            d->base = reg64(s->mem.base);
            d->index = reg64(s->mem.index);
            d->scale = s->mem.scale;
            d->disp = s->mem.disp;
        }
    }
}

/* Decode up to cap instructions from va (stops after ret, an indirect jmp,
 * or a jmp that leaves [lo, hi); follows one direct jmp inside it when
 * follow). Returns the count. */
static unsigned decode(csh h, Elf *e, uint64_t va, uint64_t lo, uint64_t hi, bool follow,
                       struct ins *out, unsigned cap)
{
    unsigned n = 0;
    cs_insn *ci = cs_malloc(h);
    if (!ci) return 0;
    for (int hop = 0; hop < 2 && n < cap; hop++) {
        size_t len = 512;
        const uint8_t *b = NULL;
        while (len >= 64 && !(b = ss_lj_vaddr_bytes(e, va, len)))
            len /= 2;
        if (!b) break;
        uint64_t addr = va, next = 0;
        while (n < cap && cs_disasm_iter(h, &b, &len, &addr, ci)) {
            conv(ci, &out[n++]);
            const struct ins *l = &out[n - 1];
            if (l->id == X86_INS_RET) goto done;
            if (l->id == X86_INS_JMP) {
                if (l->nops == 1 && l->op[0].type == X86_OP_IMM && follow && !hop &&
                    (uint64_t)l->op[0].imm >= lo && (uint64_t)l->op[0].imm < hi)
                    next = (uint64_t)l->op[0].imm;
                break;
            }
        }
        if (!next) break;
        va = next;
    }
done:
    cs_free(ci, 1);
    return n;
}

static bool is_mem(const struct op *o, int base)
{
    return o->type == X86_OP_MEM && o->base == base && o->index == 0;
}
static bool is_reg(const struct op *o, int reg)
{
    return o->type == X86_OP_REG && o->reg == reg;
}

void ss_lj_dentry_init(struct lj_dentry *f)
{
    for (int32_t *p = &f->cf_size; p <= &f->top; p++)
        *p = UNSET;
}

void ss_lj_dset(int32_t *f, int64_t v)
{
    if (*f == UNSET && v >= -65536 && v < 65536) *f = (int32_t)v;
}
#define set1 ss_lj_dset

static void entry_facts(const struct ins *d, unsigned n, struct lj_dentry *f)
{
    ss_lj_dentry_init(f);
    unsigned pushes = 0;
    bool sub = false;
    const int L = X86_REG_RBP, DISP = X86_REG_R14, SP = X86_REG_RSP;
    for (unsigned i = 0; i < n; i++) {
        const struct ins *x = &d[i];
        const struct op *a = &x->op[0], *b = &x->op[1];
        if (!sub && x->id == X86_INS_PUSH) {
            pushes++;
            continue;
        }
        if (!sub && x->id == X86_INS_SUB && is_reg(a, SP) && b->type == X86_OP_IMM) {
            sub = true;
            set1(&f->cf_size, 8 + 8 * (int64_t)pushes + b->imm);
            continue;
        }
        if (x->nops != 2) continue;
        if (x->id == X86_INS_ADD && is_reg(a, DISP) && b->type == X86_OP_IMM)
            set1(&f->g2disp, b->imm);
        if (x->id == X86_INS_CMP && is_mem(a, L) && a->size == 1) set1(&f->status, a->disp);
        if (x->id != X86_INS_MOV) continue;
        if (is_mem(a, SP) && b->type == X86_OP_REG) { /* cframe slots */
            if (b->reg == X86_REG_RDI) set1(&f->cf_L, a->disp);
            if (b->reg == X86_REG_RDX && b->size == 4) set1(&f->cf_nres, a->disp);
            if (b->reg == X86_REG_R15) set1(&f->cf_prev, a->disp);
            if (b->reg == L) set1(&f->cf_pc, a->disp);
        }
        if (a->type == X86_OP_REG && is_mem(b, L)) { /* loads from L */
            if (a->reg == DISP) set1(&f->glref, b->disp);
            if (a->reg == X86_REG_R15) set1(&f->cframe, b->disp);
            if (a->reg == X86_REG_RDX) set1(&f->base, b->disp);
            if (a->reg == X86_REG_RAX) set1(&f->top, b->disp);
        }
        if (is_mem(a, L) && (is_reg(b, X86_REG_R15) || is_reg(b, SP))) set1(&f->cframe, a->disp);
        if (is_mem(a, DISP) && is_reg(b, L)) set1(&f->cur_L, a->disp);
        if (is_mem(a, DISP) && a->size == 4 && b->type == X86_OP_IMM &&
            (b->imm == -1 || b->imm == 0xffffffff))
            set1(&f->vmstate, a->disp);
    }
}

/* A direct call/jmp into [lo, hi) among d[0..n), or 0; *tail: the last
 * unconditional direct jmp leaving it (a tail call), or 0. */
static uint64_t call_into(const struct ins *d, unsigned n, uint64_t lo, uint64_t hi, uint64_t *tail)
{
    *tail = 0;
    for (unsigned i = 0; i < n; i++) {
        if ((d[i].id != X86_INS_CALL && d[i].id != X86_INS_JMP) || d[i].nops != 1 ||
            d[i].op[0].type != X86_OP_IMM)
            continue;
        uint64_t t = (uint64_t)d[i].op[0].imm;
        if (t >= lo && t < hi) return t;
        if (d[i].id == X86_INS_JMP && !*tail) *tail = t;
    }
    return 0;
}

/* Every instruction of [va, va + size) (size known from the symbol table,
 * at most 4 KiB), past early returns. Returns the count. */
static unsigned sweep(csh h, Elf *e, uint64_t va, uint64_t size, struct ins *out, unsigned cap)
{
    if (!size || size > 4096) return 0;
    const uint8_t *b = ss_lj_vaddr_bytes(e, va, size);
    cs_insn *ci = b ? cs_malloc(h) : NULL;
    if (!ci) return 0;
    size_t len = size;
    uint64_t addr = va;
    unsigned n = 0;
    while (n < cap && cs_disasm_iter(h, &b, &len, &addr, ci))
        conv(ci, &out[n++]);
    cs_free(ci, 1);
    return n;
}

/* The VM entry that API function va (size bytes, 0: unknown) calls, or 0.
 * With its size, the whole function is searched (Tarantool's lua_resume
 * returns early before its jmp to lj_vm_resume), else its code up to the
 * first ret/jmp; a tail jmp to a helper outside the VM is followed once
 * (Tarantool's lua_call -> jit_secure_call -> lj_vm_call). */
static uint64_t vm_target(csh h, Elf *e, uint64_t va, uint64_t size, uint64_t lo, uint64_t hi)
{
    static const unsigned cap = 1024;
    struct ins *d = malloc(cap * sizeof(*d));
    if (!d) return 0;
    uint64_t t = 0, tail = 0;
    for (int depth = 0; depth < 2 && va && !t; depth++) {
        unsigned n = depth ? 0 : sweep(h, e, va, size, d, cap);
        if (!n) n = decode(h, e, va, 0, 0, false, d, MAXINS);
        t = call_into(d, n, lo, hi, &tail);
        va = tail;
    }
    free(d);
    return t;
}

bool ss_lj_dplausible(int32_t v, uint32_t align, int32_t max)
{
    return v != UNSET && v >= 0 && v < max && (v % (int32_t)align) == 0;
}
#define plausible ss_lj_dplausible

const char *ss_lj_dentry_merge(const struct lj_dentry *e, unsigned n, struct lj_dentry *m)
{
    *m = e[0];
    for (unsigned k = 1; k < n; k++) {
        const int32_t *a = &m->cf_size, *b = &e[k].cf_size;
        int32_t *w = &m->cf_size;
        for (unsigned i = 0; &a[i] <= &m->top; i++) {
            if (b[i] == UNSET) continue;
            if (a[i] == UNSET)
                w[i] = b[i];
            else if (a[i] != b[i])
                return "the VM entries disagree on a fact";
        }
    }
    return NULL;
}

void ss_lj_dentry_apply(const struct lj_dentry *m, int32_t vms, int32_t cur,
                        struct ss_lj_derived *dv)
{
    dv->cf_size = (uint32_t)m->cf_size;
    dv->cf_L = (uint32_t)m->cf_L;
    dv->cf_pc = (uint32_t)m->cf_pc;
    dv->cf_prev = (uint32_t)m->cf_prev;
    dv->cf_nres = (uint32_t)m->cf_nres;
    dv->L_glref = (uint32_t)m->glref;
    dv->L_base = (uint32_t)m->base;
    dv->L_top = (uint32_t)m->top;
    dv->L_cframe = (uint32_t)m->cframe;
    dv->L_status = m->status == UNSET ? 0 : (uint32_t)m->status; /* resume path only */
    dv->g2disp = m->g2disp;
    dv->G_vmstate = (uint32_t)vms;
    dv->G_cur_L = (uint32_t)cur;
}

/* The entry facts every path shows must agree; the cframe slots the resume
 * path does not store come from the pcall/call path. */
static const char *merge_entries(const struct ss_lj_elfinfo *info, const struct lj_dentry *e,
                                 unsigned n, struct ss_lj_derived *dv)
{
    struct lj_dentry m;
    const char *why = ss_lj_dentry_merge(e, n, &m);
    if (why) return why;
    uint32_t ra = info->gc64 ? 8 : 4; /* GCRef/MRef size */
    if (m.cf_size != (int32_t)info->vm_cfa_off)
        return "cframe size (saveregs) differs from the VM's CFA offset";
    if (!plausible(m.cf_L, 4, m.cf_size)) return "SAVE_L (mov [rsp+N], CARG1) not found";
    if (!plausible(m.cf_pc, 4, m.cf_size)) return "SAVE_PC (mov [rsp+N], L:RB) not found";
    if (!plausible(m.cf_prev, 8, m.cf_size)) return "SAVE_CFRAME (mov [rsp+N], KBASE) not found";
    if (!plausible(m.cf_nres, 4, m.cf_size)) return "SAVE_NRES (mov [rsp+N], CARG3d) not found";
    if (!plausible(m.glref, ra, 64)) return "L->glref (mov DISPATCH, L:RB->glref) not found";
    if (!plausible(m.base, ra, 128)) return "L->base (mov BASE, L:RB->base) not found";
    if (!plausible(m.top, ra, 128)) return "L->top (mov RD, L:RB->top) not found";
    if (!plausible(m.cframe, ra, 128)) return "L->cframe not found";
    if (m.g2disp == UNSET || m.g2disp < 256 || m.g2disp > 65536)
        return "GG_G2DISP (add DISPATCH, imm) not found";
    if (m.vmstate == UNSET) return "G->vmstate (mov dword [DISPATCH+N], -1) not found";
    if (m.cur_L == UNSET) return "G->cur_L (mov [DISPATCH+N], L:RB) not found";
    int32_t vms = m.g2disp + m.vmstate, cur = m.g2disp + m.cur_L;
    if (!plausible(vms, 4, m.g2disp)) return "G->vmstate outside global_State";
    if (!plausible(cur, ra, m.g2disp)) return "G->cur_L outside global_State";
    ss_lj_dentry_apply(&m, vms, cur, dv);
    return NULL;
}

/* vm_exit_handler from its first instruction to the two cframe accesses
 * after `call lj_trace_exit`. */
static const char *exit_facts(csh h, Elf *e, const struct ss_lj_elfinfo *info,
                              struct ss_lj_derived *dv)
{
    struct ins d[MAXINS];
    if (!info->exit_lo || !info->exit_ret) return "no vm_exit_handler (a build without the JIT)";
    unsigned n = decode(h, e, info->exit_lo, 0, 0, false, d, MAXINS);
    const int DISP = X86_REG_R14;
    int32_t jb = UNSET, jb0 = UNSET, disp2j = UNSET, savel = UNSET, savepc = UNSET;
    bool cur = false, vms = false, after = false;
    int ra = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct ins *x = &d[i];
        const struct op *a = &x->op[0], *b = &x->op[1];
        if (x->addr == info->exit_ret) after = true;
        if (x->nops != 2) continue;
        if (!after) {
            if (x->id == X86_INS_MOV && is_reg(a, X86_REG_RDX) && is_mem(b, DISP))
                set1(&jb, b->disp);
            if (x->id == X86_INS_MOV && is_mem(a, DISP) && b->type == X86_OP_IMM && b->imm == 0)
                set1(&jb0, a->disp);
            if (x->id == X86_INS_LEA && is_reg(a, X86_REG_RDI) && is_mem(b, DISP))
                set1(&disp2j, b->disp);
            if (x->id == X86_INS_MOV && is_reg(a, X86_REG_RBP) && is_mem(b, DISP) &&
                b->disp + dv->g2disp == (int64_t)dv->G_cur_L)
                cur = true;
            if (x->id == X86_INS_MOV && a->type == X86_OP_REG && is_mem(b, DISP) &&
                b->disp + dv->g2disp == (int64_t)dv->G_vmstate)
                vms = true;
            continue;
        }
        /* mov RA, L:RB->cframe; and RA, mask; mov [RA+SAVE_L], L:RB; mov PC, [RA+SAVE_PC] */
        if (x->id == X86_INS_MOV && a->type == X86_OP_REG && is_mem(b, X86_REG_RBP) &&
            b->disp == (int64_t)dv->L_cframe)
            ra = a->reg;
        if (ra && x->id == X86_INS_MOV && is_mem(a, ra) && is_reg(b, X86_REG_RBP))
            set1(&savel, a->disp);
        if (ra && x->id == X86_INS_MOV && is_reg(a, X86_REG_RBX) && is_mem(b, ra))
            set1(&savepc, b->disp);
    }
    if (jb == UNSET || jb != jb0) return "vm_exit_handler: G->jit_base load and clear not found";
    if (disp2j == UNSET) return "vm_exit_handler: GG_DISP2J (lea CARG1, [DISPATCH+N]) not found";
    if (!cur || !vms)
        return "vm_exit_handler: no G->cur_L / G->vmstate access at the entries' offsets";
    if (savel != (int32_t)dv->cf_L || savepc != (int32_t)dv->cf_pc)
        return "vm_exit_handler: SAVE_L/SAVE_PC differ from the entries'";
    int32_t g2j = dv->g2disp + disp2j, jbase = dv->g2disp + jb;
    if (g2j <= 0 || g2j >= dv->g2disp || (g2j & 7)) return "vm_exit_handler: G2J not plausible";
    if (!plausible(jbase, info->gc64 ? 8 : 4, g2j)) return "G->jit_base outside global_State";
    dv->G_jit_base = (uint32_t)jbase;
    dv->g2j = g2j;
    return NULL;
}

/* The VM's code bytes (at most 1 MiB), or NULL. */
static const uint8_t *vm_code(Elf *e, const struct ss_lj_elfinfo *info, size_t *len)
{
    uint64_t lo = info->vm_lo, hi = info->vm_hi;
    if (hi <= lo || hi - lo > (1u << 20)) return NULL;
    *len = hi - lo;
    return ss_lj_vaddr_bytes(e, lo, hi - lo);
}

/* BC_JLOOP: the one store of BASE to jit_base, after the trace lookup. */
static const char *jloop_facts(csh h, Elf *e, const struct ss_lj_elfinfo *info,
                               struct ss_lj_derived *dv)
{
    size_t len;
    const uint8_t *b = vm_code(e, info, &len);
    cs_insn *ci = b ? cs_malloc(h) : NULL;
    if (!ci) return "BC_JLOOP: VM code not readable";
    struct ins win[8];
    unsigned nw = 0, found = 0;
    int32_t jt = UNSET, mc = UNSET;
    uint64_t addr = info->vm_lo;
    const int DISP = X86_REG_R14;
    int64_t want = (int64_t)dv->G_jit_base - dv->g2disp;
    while (cs_disasm_iter(h, &b, &len, &addr, ci)) {
        memmove(win, win + 1, sizeof(win) - sizeof(win[0]));
        conv(ci, &win[7]);
        if (nw < 8) nw++;
        const struct ins *x = &win[7];
        if (x->id != X86_INS_MOV || !is_mem(&x->op[0], DISP) || x->op[0].disp != want ||
            !is_reg(&x->op[1], X86_REG_RDX))
            continue;
        /* look back for trace = [DISP+J.trace]; T = [trace+n*s]; mcode = [T+ofs] */
        for (unsigned i = 8 - nw; i + 2 < 7; i++) {
            const struct ins *p = &win[i], *q = &win[i + 1], *r = &win[i + 2];
            if (p->id != X86_INS_MOV || q->id != X86_INS_MOV || r->id != X86_INS_MOV) continue;
            if (p->op[0].type != X86_OP_REG || !is_mem(&p->op[1], DISP)) continue;
            const struct op *qm = &q->op[1];
            if (q->op[0].type != X86_OP_REG || qm->type != X86_OP_MEM || qm->base != p->op[0].reg ||
                qm->disp != 0 || (qm->scale != 8 && qm->scale != 4))
                continue;
            if (r->op[0].type != X86_OP_REG || !is_mem(&r->op[1], q->op[0].reg)) continue;
            found++;
            jt = (int32_t)(p->op[1].disp + dv->g2disp - dv->g2j);
            mc = (int32_t)r->op[1].disp;
            break;
        }
    }
    cs_free(ci, 1);
    if (found != 1) return found ? "BC_JLOOP: more than one match" : "BC_JLOOP: not found";
    if (!plausible(jt, 8, 4096) || !plausible(mc, 8, 256))
        return "BC_JLOOP: J->trace / GCtrace.mcode not plausible";
    dv->J_trace = (uint32_t)jt;
    dv->T_mcode = (uint32_t)mc;
    return NULL;
}

/* The GC check of allocating bytecodes and fast functions (BC_TNEW, TDUP,
 * FNEW, CAT, ffgccheck): `mov R, [DISPATCH+gc.total]; cmp R, [DISPATCH+
 * gc.threshold]`, GCSize wide (8 bytes GC64, else 4), threshold right after
 * total. A sweep of the VM code: the most frequent such pair, seen at least
 * three times and no other pair as often. */
static const char *gc_facts(csh h, Elf *e, const struct ss_lj_elfinfo *info,
                            struct ss_lj_derived *dv)
{
    size_t len;
    const uint8_t *b = vm_code(e, info, &len);
    cs_insn *ci = b ? cs_malloc(h) : NULL;
    if (!ci) return "GC checks: VM code not readable";
    const int DISP = X86_REG_R14;
    const unsigned w = info->gc64 ? 8 : 4;
    struct gcpair {
        int64_t disp;
        unsigned n;
    } seen[8];
    unsigned ns = 0;
    struct ins prev = {0}, cur;
    uint64_t addr = info->vm_lo;
    while (cs_disasm_iter(h, &b, &len, &addr, ci)) {
        conv(ci, &cur);
        const struct op *pa = &prev.op[0], *pb = &prev.op[1], *ca = &cur.op[0], *cb = &cur.op[1];
        if (prev.id == X86_INS_MOV && cur.id == X86_INS_CMP && prev.nops == 2 && cur.nops == 2 &&
            pa->type == X86_OP_REG && is_mem(pb, DISP) && pb->size == w && is_reg(ca, pa->reg) &&
            is_mem(cb, DISP) && cb->size == w && cb->disp == pb->disp + w) {
            unsigned k = 0;
            while (k < ns && seen[k].disp != pb->disp)
                k++;
            if (k == ns && ns < 8) seen[ns++] = (struct gcpair){pb->disp, 0};
            if (k < ns) seen[k].n++;
        }
        prev = cur;
    }
    cs_free(ci, 1);
    unsigned best = 0, second = 0;
    int64_t disp = 0;
    for (unsigned k = 0; k < ns; k++) {
        if (seen[k].n > best) {
            second = best;
            best = seen[k].n;
            disp = seen[k].disp;
        } else if (seen[k].n > second) {
            second = seen[k].n;
        }
    }
    int64_t total = disp + dv->g2disp;
    if (best < 3 || second == best) return "GC checks (gc.total vs gc.threshold) not found";
    if (total < 0 || total > 256 || total % w) return "G->gc.total not plausible";
    dv->G_gc_total = (uint32_t)total;
    return NULL;
}

void ss_lj_derive(Elf *e, struct ss_lj_elfinfo *info, const uint64_t *api, const uint64_t *apisz,
                  unsigned napi)
{
    struct ss_lj_derived *dv = &info->derived;
    memset(dv, 0, sizeof(*dv));
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) return;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    struct lj_dentry ent[3];
    unsigned ne = 0;
    uint64_t seen[3] = {0};
    for (unsigned i = 0; i < napi && i < 3; i++) {
        if (!api[i]) continue;
        uint64_t t = vm_target(h, e, api[i], apisz[i], info->vm_lo, info->vm_hi);
        bool dup = false;
        for (unsigned k = 0; k < ne; k++)
            dup |= seen[k] == t;
        if (!t || dup) continue;
        struct ins d[MAXINS];
        unsigned n = decode(h, e, t, info->vm_lo, info->vm_hi, true, d, MAXINS);
        seen[ne] = t;
        entry_facts(d, n, &ent[ne++]);
    }
    /* the first failure, for diagnostics (record -v, info) */
    const char *why = ne < 2 ? "fewer than 2 VM entries found from lua_resume/lua_pcall/lua_call"
                             : merge_entries(info, ent, ne, dv);
    if (!why) {
        dv->have |= SS_LJ_D_ENTRY;
        dv->nentries = ne;
        const char *g = gc_facts(h, e, info, dv);
        if (!g) dv->have |= SS_LJ_D_GC;
        why = info->exit_lo ? exit_facts(h, e, info, dv) : NULL;
        if (!why) {
            if (info->exit_lo) dv->have |= SS_LJ_D_EXIT;
            why = info->exit_lo ? jloop_facts(h, e, info, dv) : NULL;
            if (!why && info->exit_lo) dv->have |= SS_LJ_D_JLOOP;
        }
        if (!why) why = g;
    }
    if (why) snprintf(info->derive_why, sizeof(info->derive_why), "%s", why);
    cs_close(&h);
}

/* A group's facts as derive() leaves them: all checked when its bit is set,
 * all zero when it is not. */
static bool derived_plausible(const struct ss_lj_elfinfo *info, const struct ss_lj_derived *d)
{
    const uint32_t all = SS_LJ_D_ENTRY | SS_LJ_D_EXIT | SS_LJ_D_JLOOP | SS_LJ_D_GC;
    const int32_t ra = info->gc64 ? 8 : 4, w = ra;
    if (d->have & ~all) return false;
    if (!(d->have & SS_LJ_D_ENTRY)) return d->have == 0;
    int32_t cf = (int32_t)d->cf_size;
    if (d->cf_size != info->vm_cfa_off || (cf != 80 && cf != 96 && cf != LJ_A64_CFRAME_SIZE) ||
        !plausible((int32_t)d->cf_L, 4, cf) || !plausible((int32_t)d->cf_pc, 4, cf) ||
        !plausible((int32_t)d->cf_prev, 8, cf) || !plausible((int32_t)d->cf_nres, 4, cf) ||
        !plausible((int32_t)d->L_glref, (uint32_t)ra, 64) ||
        !plausible((int32_t)d->L_base, (uint32_t)ra, 128) ||
        !plausible((int32_t)d->L_top, (uint32_t)ra, 128) ||
        !plausible((int32_t)d->L_cframe, (uint32_t)ra, 128) || d->g2disp < 256 ||
        d->g2disp > 65536 || !plausible((int32_t)d->G_vmstate, 4, d->g2disp) ||
        !plausible((int32_t)d->G_cur_L, (uint32_t)ra, d->g2disp) || d->nentries < 2 ||
        d->nentries > 3)
        return false;
    if (d->have & SS_LJ_D_EXIT) {
        if (d->g2j <= 0 || d->g2j >= d->g2disp || (d->g2j & 7) ||
            !plausible((int32_t)d->G_jit_base, (uint32_t)ra, d->g2j))
            return false;
    } else if (d->g2j || d->G_jit_base || (d->have & SS_LJ_D_JLOOP)) {
        return false;
    }
    if (d->have & SS_LJ_D_JLOOP) {
        if (!plausible((int32_t)d->J_trace, 8, 4096) || !plausible((int32_t)d->T_mcode, 8, 256))
            return false;
    } else if (d->J_trace || d->T_mcode) {
        return false;
    }
    if (d->have & SS_LJ_D_GC) return d->G_gc_total <= 256 && !((int32_t)d->G_gc_total % w);
    return d->G_gc_total == 0;
}

bool ss_lj_elfinfo_plausible(const struct ss_lj_elfinfo *info)
{
    if (info->nstfn > SS_LJ_STFN_MAX || !memchr(info->version, 0, sizeof(info->version)) ||
        !memchr(info->derive_why, 0, sizeof(info->derive_why)))
        return false;
    if (info->vm_found && !info->is_luajit) return false;
    if (info->vm_found && (info->vm_lo >= info->vm_hi || info->vm_hi - info->vm_lo > (1u << 30)))
        return false;
    if (!info->vm_found && info->derived.have) return false;
    return derived_plausible(info, &info->derived);
}
