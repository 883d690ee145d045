/* unwind/luajit/stfn.c: the C functions that switch G->vmstate, which name
 * a sample's VM state from its call chain alone (vmstate.c).
 *
 * With a symbol table: lj_gc_step (and the wrappers it may be inlined into),
 * lj_gc_fullgc (GC), trace_state (record/optimise/assemble), lj_trace_exit
 * (runs under the exit handler's EXIT state).
 *
 * Stripped GC64 builds (Debian's luajit and libluajit, OpenResty luajit2)
 * keep the same facts in their code: setvmstate() compiles to a 32-bit
 * store of ~LJ_VMST_x (an immediate that GC64 never uses for TValue tags,
 * which are 64-bit stores) at G + G_vmstate (GC) or at the J-relative offset
 * of that field (trace_state: RECORD, OPT and ASM, one displacement, one
 * function); lj_trace_exit is the target of vm_exit_handler's call. The
 * function around each such place is its .eh_frame FDE. Measured on the
 * builds here: 2 GC functions, 1 compiler function, the exit target; any
 * other count makes the guess ambiguous and it is not used. */
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "unwind/luajit/ehscan.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/stfn.h"

enum { ST_GC = 2, ST_EXIT = 3, ST_REC = 4 }; /* LJ_VMST_*, as in ss_lj_stfn.state */

static void add(struct ss_lj_elfinfo *info, uint64_t lo, uint64_t hi, uint32_t state)
{
    for (uint32_t j = 0; j < info->nstfn; j++)
        if (info->stfn[j].lo == lo) return; /* .dynsym and .symtab, or two stores */
    if (info->nstfn < SS_LJ_STFN_MAX)
        info->stfn[info->nstfn++] = (struct ss_lj_stfn){.lo = lo, .hi = hi, .state = state};
}

void ss_lj_stfn_symbol(struct ss_lj_elfinfo *info, const char *nm, uint64_t value, uint64_t size)
{
    static const struct {
        const char *name;
        uint32_t state;
    } fns[] = {{"lj_gc_step", ST_GC},   {"lj_gc_step_fixtop", ST_GC}, {"lj_gc_step_jit", ST_GC},
               {"lj_gc_fullgc", ST_GC}, {"lj_trace_exit", ST_EXIT},   {"trace_state", ST_REC}};
    for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
        if (!strcmp(nm, fns[k].name)) {
            add(info, value, value + size, fns[k].state);
            return;
        }
}

#define MAX_SITES 32

struct site {
    uint64_t va;
    int32_t disp;
    uint32_t imm;
};

struct scan {
    uint32_t shift; /* Tarantool's fork: its states from GC on are 2 higher */
    struct site gc[MAX_SITES], rec[MAX_SITES];
    unsigned ngc, nrec;
    uint64_t exit_fn;
    /* results */
    uint64_t gcf[2 * MAX_SITES][2], recf[2];
    unsigned ngcf, nrecf;
    uint64_t exitf[2];
};

static bool gc_disp(int32_t disp)
{
    for (unsigned i = 0; i < ss_lj_nlayouts; i++)
        if (ss_lj_layouts[i].gc64 && (int64_t)ss_lj_layouts[i].G_vmstate == disp) return true;
    return false;
}

/* movl $imm32, disp32(%reg): [REX] C7 /0 with mod 10 (SIB 24 for rsp/r12). */
static void scan_code(const uint8_t *b, size_t n, uint64_t va, uint64_t vm_lo, uint64_t vm_hi,
                      struct scan *s)
{
    const uint32_t sh = s->shift;
    for (size_t i = 0; i + 10 <= n; i++) {
        if (b[i] != 0xc7 || (b[i + 1] & 0xf8) != 0x80) continue;
        size_t d = i + 2 + ((b[i + 1] & 7) == 4 ? 1 : 0);
        if ((b[i + 1] & 7) == 4 && b[i + 2] != 0x24) continue;
        if (d + 8 > n) continue;
        int32_t disp;
        uint32_t imm;
        memcpy(&disp, b + d, 4);
        memcpy(&imm, b + d + 4, 4);
        uint64_t at = va + i;
        if (at >= vm_lo && at < vm_hi) continue;
        if (imm == ~(uint32_t)(ST_GC + sh) && gc_disp(disp) && s->ngc < MAX_SITES)
            s->gc[s->ngc++] = (struct site){at, disp, ~(~imm - sh)};
        else if (imm >= ~(uint32_t)(6 + sh) && imm <= ~(uint32_t)(ST_REC + sh) && disp < 0 &&
                 s->nrec < MAX_SITES)
            s->rec[s->nrec++] = (struct site){at, disp, ~(~imm - sh)}; /* upstream's numbering */
    }
}

static bool in(uint64_t va, uint64_t lo, uint64_t hi)
{
    return va >= lo && va < hi;
}

static bool per_fde(void *ctx, uint64_t lo, uint64_t range, const char *aug, const uint8_t *p,
                    const uint8_t *e)
{
    (void)aug, (void)p, (void)e;
    struct scan *s = ctx;
    uint64_t hi = lo + range;
    for (unsigned i = 0; i < s->ngc; i++)
        if (in(s->gc[i].va, lo, hi) && s->ngcf < 2 * MAX_SITES) {
            s->gcf[s->ngcf][0] = lo, s->gcf[s->ngcf][1] = hi, s->ngcf++;
            break;
        }
    /* RECORD, OPT and ASM stores at one displacement in this function */
    for (unsigned i = 0; i < s->nrec; i++) {
        if (!in(s->rec[i].va, lo, hi)) continue;
        unsigned seen = 0;
        for (unsigned j = 0; j < s->nrec; j++)
            if (in(s->rec[j].va, lo, hi) && s->rec[j].disp == s->rec[i].disp)
                seen |= 1u << (~s->rec[j].imm & 7);
        if (seen == (1u << 4 | 1u << 5 | 1u << 6)) {
            if (!s->nrecf++) s->recf[0] = lo, s->recf[1] = hi;
            break;
        }
    }
    if (s->exit_fn == lo) s->exitf[0] = lo, s->exitf[1] = hi;
    return false;
}

void ss_lj_stfn_code(Elf *e, struct ss_lj_elfinfo *info, const uint8_t *eh, size_t ehlen,
                     uint64_t eh_addr)
{
    if (info->nstfn || !info->gc64 || !info->vm_found || !eh) return;
    struct scan s;
    memset(&s, 0, sizeof(s));
    s.shift = info->hints & SS_LJ_HINT_MISC ? 2 : 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf) continue;
        scan_code(d->d_buf, d->d_size, sh.sh_addr, info->vm_lo, info->vm_hi, &s);
        /* vm_exit_handler's call: e8 rel32 right before its return address */
        uint64_t c = info->exit_ret - 5;
        if (info->exit_ret && c >= sh.sh_addr && info->exit_ret <= sh.sh_addr + d->d_size) {
            const uint8_t *q = (const uint8_t *)d->d_buf + (c - sh.sh_addr);
            int32_t rel;
            memcpy(&rel, q + 1, 4);
            if (q[0] == 0xe8) s.exit_fn = info->exit_ret + (uint64_t)(int64_t)rel;
        }
    }
    if (!s.ngc && !s.nrec && !s.exit_fn) return;
    ss_eh_each_fde(eh, ehlen, eh_addr, per_fde, &s);
    if (s.ngcf >= 1 && s.ngcf <= 4)
        for (unsigned i = 0; i < s.ngcf; i++)
            add(info, s.gcf[i][0], s.gcf[i][1], ST_GC);
    if (s.nrecf == 1) add(info, s.recf[0], s.recf[1], ST_REC);
    if (s.exitf[1]) add(info, s.exitf[0], s.exitf[1], ST_EXIT);
}
