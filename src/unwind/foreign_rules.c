/* unwind/foreign_rules.c: compiling libdw's arm64 CFI rows into rules,
 * their per-process cache, and applying them (see foreign_rules.h). */
#if defined(__x86_64__)
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/foreign_rules.h"

/* One register's rule from libdw's location description of it (as
 * dwarf_frame_register gives it: DW_OP_call_frame_cfa, then
 * DW_OP_plus_uconst N when N != 0, then DW_OP_stack_value for a value).
 * false: another shape. */
static bool reg_rule(struct ss_a64rule *r, unsigned i, const Dwarf_Op *mem, const Dwarf_Op *o,
                     size_t n)
{
    uint32_t bit = 1u << i;
    if (n == 0) {
        if (o == NULL) r->same |= bit; /* o == mem: undefined */
        return o == NULL || o == mem;
    }
    if (o[0].atom != DW_OP_call_frame_cfa) return false;
    size_t k = 1;
    int64_t off = 0;
    if (k < n && o[k].atom == DW_OP_plus_uconst) off = (int64_t)o[k++].number;
    bool value = k < n && o[k].atom == DW_OP_stack_value;
    if (value) k++;
    if (k != n || off < INT16_MIN || off > INT16_MAX) return false;
    r->off[i] = (int16_t)off;
    if (value)
        r->val |= bit;
    else
        r->at |= bit;
    return true;
}

static void compile_frame(Dwarf_Frame *fr, struct ss_a64rule *r)
{
    Dwarf_Addr start, end;
    bool signal = false;
    int ra = dwarf_frame_info(fr, &start, &end, &signal);
    if (signal) {
        r->kind = SS_A64R_SIGNAL;
        return;
    }
    Dwarf_Op *ops;
    size_t nops;
    if (ra != SS_A64R_X30 || dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops != 1) return;
    uint64_t reg;
    int64_t off;
    if (ops[0].atom == DW_OP_bregx) {
        reg = ops[0].number;
        off = (int64_t)ops[0].number2;
    } else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
        reg = ops[0].atom - DW_OP_breg0;
        off = (int64_t)ops[0].number;
    } else {
        return;
    }
    if (reg >= SS_A64R_NREG || off < INT32_MIN || off > INT32_MAX) return;
    r->cfa_reg = (uint8_t)reg;
    r->cfa_off = (int32_t)off;
    for (unsigned i = 0; i < SS_A64R_NREG; i++) {
        Dwarf_Op mem[3], *o = NULL;
        size_t n = 0;
        if (dwarf_frame_register(fr, (int)i, mem, &o, &n) != 0 || !reg_rule(r, i, mem, o, n)) {
            r->same = r->at = r->val = 0;
            return;
        }
    }
    r->kind = SS_A64R_OK;
}

/* The row for look: from .eh_frame, else .debug_frame (libdwfl's order). */
static void compile(Dwfl *d, uint64_t look, struct ss_a64rule *r)
{
    memset(r, 0, sizeof(*r));
    r->kind = SS_A64R_NOINFO;
    Dwfl_Module *mod = dwfl_addrmodule(d, look);
    if (!mod) return;
    for (int k = 0; k < 2; k++) {
        Dwarf_Addr bias;
        Dwarf_CFI *c = k ? dwfl_module_dwarf_cfi(mod, &bias) : dwfl_module_eh_cfi(mod, &bias);
        Dwarf_Frame *fr = NULL;
        if (c && dwarf_cfi_addrframe(c, look - bias, &fr) == 0) {
            r->kind = SS_A64R_COMPLEX;
            compile_frame(fr, r);
            free(fr);
            return;
        }
    }
}

const struct ss_a64rule *ss_a64_rule(struct ss_a64rc_ent *c, Dwfl *d, uint64_t look)
{
    struct ss_a64rc_ent *e = &c[(look * 0x9e3779b97f4a7c15ull) >> (64 - SS_A64RC_BITS)];
    if (e->key != look || !look) {
        compile(d, look, &e->r);
        e->key = look;
    }
    return &e->r;
}

void ss_a64rc_flush(struct ss_a64rc_ent *c)
{
    memset(c, 0, sizeof(*c) << SS_A64RC_BITS);
}

int ss_a64_apply(const struct ss_a64rule *r, const struct ss_a64regs *in, struct ss_a64regs *out,
                 bool (*read)(void *ctx, uint64_t addr, uint64_t *val), void *ctx)
{
    uint32_t ra = 1u << SS_A64R_X30;
    if (r->kind != SS_A64R_OK) return 0;
    if (!((r->same | r->at | r->val) & ra)) return -1; /* the return address undefined */
    if (!(in->valid >> r->cfa_reg & 1)) return 0;
    uint64_t cfa = in->r[r->cfa_reg] + (uint64_t)(int64_t)r->cfa_off;
    out->valid = 0;
    for (unsigned i = 0; i < SS_A64R_NREG; i++) {
        uint32_t bit = 1u << i;
        uint64_t addr = cfa + (uint64_t)(int64_t)r->off[i];
        if (r->same & bit) {
            if (!(in->valid >> i & 1)) continue;
            out->r[i] = in->r[i];
        } else if (r->at & bit) {
            if (!read(ctx, addr, &out->r[i])) return 0;
        } else if (r->val & bit) {
            out->r[i] = addr;
        } else {
            continue;
        }
        out->valid |= 1ull << i;
    }
    if ((out->valid & ra) && out->r[SS_A64R_X30] == 0) return -1; /* libdw: pc 0 is undefined */
    uint64_t need = ra | 1ull << SS_A64R_SP;
    return (out->valid & need) == need;
}
#endif
