/* unwind/native_pac.c: libunwind's steps over arm64 code built with
 * pointer authentication (-mbranch-protection, pac-ret: Debian 13's
 * default). Such a function signs its return address (paciasp) before it
 * saves it, and its CFI says so with DW_CFA_AARCH64_negate_ra_state (0x2d,
 * no operand). libunwind before 1.7 (Debian 12's 1.6.2) does not know that
 * opcode: it rejects the whole FDE and steps by x30, which ends the walk
 * at the first frame that is not the leaf. ss_pac_cfi_fix hands it a copy
 * of the CFI programs with the opcode as DW_CFA_nop (served by
 * ss_pac_cfi_peek at addresses no user mapping has); the return address it
 * then loads keeps its signature, which native_unw.c strips with the PAC
 * mask (util/pac.h). The signing state a row is in does not matter: a user
 * code address never has a bit of the mask set, so stripping is always
 * right. libunwind 1.7 and later parse the opcode themselves. */
#include <stdlib.h>
#include <string.h>

#include "memory/memory.h"
#include "unwind/native_int.h"

#if defined(__aarch64__) && UNW_VERSION_MAJOR == 1 && UNW_VERSION_MINOR < 7
#define PAC_CFI_FIX 1
#else
#define PAC_CFI_FIX 0
#endif

/* where the copies are served: kernel half of the address space, never a
 * user address (remote programs); local (.debug_frame) ones by pointer */
#define PAC_CFI_BASE 0xfffe000000000000ull
#define PAC_CFI_CAP 4096

#if PAC_CFI_FIX
/* libunwind 1.6's struct dwarf_cie_info begins so (include/dwarf.h): what an
 * unw_proc_info_t's unwind_info points to after find_proc_info. */
struct dci_head {
    unw_word_t cie_instr_start, cie_instr_end, fde_instr_start, fde_instr_end;
};

static bool skip_leb(const uint8_t *p, size_t n, size_t *i)
{
    while (*i < n)
        if (!(p[(*i)++] & 0x80)) return true;
    return false;
}

/* a uleb block length then that many bytes */
static bool skip_block(const uint8_t *p, size_t n, size_t *i)
{
    uint64_t len = 0;
    unsigned sh = 0;
    while (*i < n && sh < 64) {
        uint8_t b = p[(*i)++];
        len |= (uint64_t)(b & 0x7f) << sh;
        sh += 7;
        if (!(b & 0x80)) {
            if (len > n - *i) return false;
            *i += (size_t)len;
            return true;
        }
    }
    return false;
}

/* Copy the CFI program p[0, n) to out with every negate_ra_state opcode a
 * DW_CFA_nop: how many there were, or -1 for an opcode this decoder does
 * not know the operands of (the program is then left as it is). */
static int fix(const uint8_t *p, size_t n, uint8_t *out)
{
    int k = 0;
    memcpy(out, p, n);
    for (size_t i = 0; i < n;) {
        uint8_t op = p[i++];
        bool ok = true;
        switch (op >> 6) {
        case 1: /* advance_loc */
        case 3: /* restore */
            continue;
        case 2: /* offset: uleb */
            ok = skip_leb(p, n, &i);
            break;
        default:
            switch (op) {
            case 0x00: /* nop */
            case 0x0a: /* remember_state */
            case 0x0b: /* restore_state */
                break;
            case 0x2d: /* AARCH64_negate_ra_state */
                out[i - 1] = 0x00;
                k++;
                break;
            case 0x02: /* advance_loc1, 2, 4 */
            case 0x03:
            case 0x04: {
                size_t w = op == 0x02 ? 1 : op == 0x03 ? 2 : 4;
                ok = w <= n - i;
                i += ok ? w : 0;
                break;
            }
            case 0x06: /* restore_extended: reg */
            case 0x07: /* undefined */
            case 0x08: /* same_value */
            case 0x0d: /* def_cfa_register */
            case 0x0e: /* def_cfa_offset */
            case 0x13: /* def_cfa_offset_sf */
            case 0x2e: /* GNU_args_size */
                ok = skip_leb(p, n, &i);
                break;
            case 0x05: /* offset_extended: reg, offset */
            case 0x09: /* register */
            case 0x0c: /* def_cfa */
            case 0x11: /* offset_extended_sf */
            case 0x12: /* def_cfa_sf */
            case 0x14: /* val_offset */
            case 0x15: /* val_offset_sf */
            case 0x2f: /* GNU_negative_offset_extended */
                ok = skip_leb(p, n, &i) && skip_leb(p, n, &i);
                break;
            case 0x0f: /* def_cfa_expression: block */
                ok = skip_block(p, n, &i);
                break;
            case 0x10: /* expression: reg, block */
            case 0x16: /* val_expression */
                ok = skip_leb(p, n, &i) && skip_block(p, n, &i);
                break;
            default: /* set_loc (encoded address), negate_ra_state_with_pc, vendor ones */
                ok = false;
            }
        }
        if (!ok) return -1;
    }
    return k;
}

#endif /* PAC_CFI_FIX */

void ss_pac_cfi_fix(struct ss_nproc *np, unw_proc_info_t *pi, bool local)
{
#if PAC_CFI_FIX
    if (!pi->unwind_info || (size_t)pi->unwind_info_size < sizeof(struct dci_head)) return;
    struct dci_head *d = pi->unwind_info;
    if (d->cie_instr_end < d->cie_instr_start || d->fde_instr_end < d->fde_instr_start) return;
    uint64_t nc = d->cie_instr_end - d->cie_instr_start, nf = d->fde_instr_end - d->fde_instr_start;
    uint64_t fo = (nc + 7) & ~7ull; /* the FDE's program, 8-aligned after the CIE's */
    if (fo + nf + 8 > PAC_CFI_CAP) return;
    const uint8_t *c = (const uint8_t *)"", *f = c;
    if (local) {
        if (nc) c = (const uint8_t *)(uintptr_t)d->cie_instr_start;
        if (nf) f = (const uint8_t *)(uintptr_t)d->fde_instr_start;
    } else {
        if (nc) c = ss_mem_peek(np->mem, d->cie_instr_start, (size_t)nc);
        if (nf) f = ss_mem_peek(np->mem, d->fde_instr_start, (size_t)nf);
    }
    if (!c || !f) return;
    if (!np->pac_cfi && !(np->pac_cfi = calloc(1, PAC_CFI_CAP))) return;
    uint8_t *b = np->pac_cfi;
    int kc = fix(c, (size_t)nc, b), kf = fix(f, (size_t)nf, b + fo);
    if (kc < 0 || kf < 0 || kc + kf == 0) return;
    memset(b + fo + nf, 0, PAC_CFI_CAP - fo - nf);
    uint64_t base = local ? (uint64_t)(uintptr_t)b : PAC_CFI_BASE;
    d->cie_instr_start = base;
    d->cie_instr_end = base + nc;
    d->fde_instr_start = base + fo;
    d->fde_instr_end = base + fo + nf;
#else
    (void)np, (void)pi, (void)local;
#endif
}

const void *ss_pac_cfi_peek(const struct ss_nproc *np, uint64_t addr)
{
    if (!np->pac_cfi || addr < PAC_CFI_BASE || addr - PAC_CFI_BASE > PAC_CFI_CAP - 8) return NULL;
    return np->pac_cfi + (addr - PAC_CFI_BASE);
}
