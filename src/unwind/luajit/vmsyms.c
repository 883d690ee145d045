/* unwind/luajit/vmsyms.c: LuaJIT internals named in stripped builds.
 *
 * A stripped luajit/libluajit keeps no lj_vm_* symbols, but its code still
 * says what is where:
 *  - the VM object: lj_bc_ofs[] (read-only data, the source of the dispatch
 *    table: the offsets of the bytecode handlers and assembler fast functions
 *    from lj_vm_asm_begin) is the same array exactly when buildvm emitted the
 *    same VM, so a build whose array equals one of the tables' (vmsyms_tab.c,
 *    generated from unstripped builds of the same trees) has that build's
 *    labels at vm_lo + offset, once verified: every call site of the table
 *    holds a `call rel32` and vm_exit_handler, found by its own pattern
 *    (detect.c), is at the table's offset;
 *  - C functions the VM calls: the target of the `call rel32` at a known
 *    offset of the VM (checked to be a call);
 *  - IR-call targets: lj_ir_callinfo[] ({function, flags} per IRCALLDEF
 *    entry, then {NULL, 0}) is found in relocated read-only data as the run
 *    of entries whose argument counts equal a tree's IRCALLDEF list and whose
 *    functions are NULL or executable; entry i is IRCALLDEF name i.
 * All reads are bounded by the file's sections. */
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "elf/elf.h"
#include "stacksnap/ss_lj_luajit.h"
#include "unwind/luajit/derive.h"
#include "unwind/luajit/detcache.h"
#include "unwind/luajit/vmsyms.h"

static const struct ss_lj_vmbuild *match_build(Elf *e)
{
    size_t shstr;
    if (elf_getshdrstrndx(e, &shstr) != 0) return NULL;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf) continue;
        for (unsigned i = 0; i < ss_lj_nvmbuilds; i++) {
            const struct ss_lj_vmbuild *b = &ss_lj_vmbuilds[i];
            if (memmem(d->d_buf, d->d_size, b->bc_ofs, b->nbc * sizeof(b->bc_ofs[0]))) return b;
        }
    }
    return NULL;
}

static bool exec_va(Elf *e, uint64_t va)
{
    size_t n;
    if (elf_getphdrnum(e, &n) != 0) return false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
            va >= ph.p_vaddr && va < ph.p_vaddr + ph.p_memsz)
            return true;
    }
    return false;
}

/* Does lj_ir_callinfo of list ir start at p (n + 1 entries of 16 bytes)? */
static bool callinfo_at(Elf *e, const uint8_t *p, const struct ss_lj_ircall *ir, unsigned n)
{
    for (unsigned i = 0; i <= n; i++) {
        uint64_t fn;
        uint32_t flags;
        memcpy(&fn, p + 16 * i, 8);
        memcpy(&flags, p + 16 * i + 8, 4);
        if (i == n) return fn == 0 && flags == 0;
        if ((flags & 0xff) != ir[i].nargs || (fn && !exec_va(e, fn))) return false;
        if (i == 0 && !fn) return false;
    }
    return false;
}

/* The file bytes of lj_ir_callinfo of list ir (n entries), NULL when absent. */
static const uint8_t *callinfo(Elf *e, const struct ss_lj_ircall *ir, unsigned n)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            (sh.sh_flags & SHF_EXECINSTR))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size < 16 * (size_t)(n + 1)) continue;
        const uint8_t *b = d->d_buf;
        uint8_t first = ir[0].nargs;
        for (size_t o = (8 - (sh.sh_addr & 7)) & 7; o + 16 * (size_t)(n + 1) <= d->d_size; o += 8)
            if (b[o + 8] == first && callinfo_at(e, b + o, ir, n)) return b + o;
    }
    return NULL;
}

static void ircalls(Elf *e, const struct ss_lj_ircall *ir, unsigned n, uint64_t vm_lo,
                    uint64_t vm_hi, ss_elf_synth_add fn, void *ctx)
{
    const uint8_t *b = callinfo(e, ir, n);
    for (unsigned i = 0; b && i < n; i++) {
        uint64_t f;
        memcpy(&f, b + 16 * i, 8);
        if (f && (f < vm_lo || f >= vm_hi)) fn(ctx, f, 0, ir[i].name);
    }
}

/* The VM code is that build's: it fits, every call site of the table is a
 * `call rel32` and vm_exit_handler (found by its own pattern) is where the
 * table has it. */
static bool same_code(Elf *e, const struct ss_lj_vmbuild *b, const struct ss_lj_elfinfo *info)
{
    if (b->vm_end < info->vm_hi - info->vm_lo) return false;
    for (unsigned i = 0; i < b->ncall; i++) {
        const uint8_t *p = ss_lj_vaddr_bytes(e, info->vm_lo + b->call[i].off, 5);
        if (!p || p[0] != 0xe8) return false;
    }
    for (unsigned i = 0; info->exit_lo && i < b->nlab; i++)
        if (!strcmp(b->lab[i].name, "lj_vm_exit_handler") &&
            info->vm_lo + b->lab[i].off != info->exit_lo)
            return false;
    return true;
}

void ss_lj_internal_syms(void *detcache, struct ss_elf *ef, ss_elf_synth_add fn, void *ctx)
{
    struct ss_lj_elfinfo info;
    if (ss_lj_detcache_get(detcache, ef, &info) != 0 || !info.is_luajit || !info.vm_found) return;
    Elf *e = ef->elf;
    const struct ss_lj_vmbuild *b = match_build(e);
    uint64_t lo = info.vm_lo, hi = info.vm_hi;
    if (b && !same_code(e, b, &info)) b = NULL;
    if (b) {
        hi = lo + b->vm_end;
        for (unsigned i = 0; i < b->nlab; i++) {
            const struct ss_lj_vmlabel *l = &b->lab[i];
            uint64_t end = i + 1 < b->nlab ? b->lab[i + 1].off : b->vm_end;
            fn(ctx, lo + l->off, l->size ? l->size : end - l->off, l->name);
        }
        for (unsigned i = 0; i < b->ncall; i++) {
            uint64_t at = lo + b->call[i].off;
            const uint8_t *p = ss_lj_vaddr_bytes(e, at, 5);
            if (!p) continue;
            int32_t rel;
            memcpy(&rel, p + 1, 4);
            uint64_t to = at + 5 + (int64_t)rel;
            if ((to < lo || to >= hi) && exec_va(e, to)) fn(ctx, to, 0, b->call[i].name);
        }
    }
    /* a build the tables do not know: the VM stays MODULE+0xOFFSET per
     * address (an empty name), not one frame for its single FDE */
    if (!b) fn(ctx, lo, hi - lo, "");
    /* the IR-call targets: the matched build's tree first, then every other */
    const struct ss_lj_ircall *done[8];
    unsigned nd = 0;
    if (b && b->ircall) {
        ircalls(e, b->ircall, b->nircall, lo, hi, fn, ctx);
        done[nd++] = b->ircall;
    }
    for (unsigned i = 0; i < ss_lj_nvmbuilds && !b; i++) {
        const struct ss_lj_vmbuild *o = &ss_lj_vmbuilds[i];
        bool seen = !o->ircall;
        for (unsigned k = 0; k < nd && !seen; k++)
            seen = done[k] == o->ircall;
        if (seen || nd == 8) continue;
        done[nd++] = o->ircall;
        ircalls(e, o->ircall, o->nircall, lo, hi, fn, ctx);
    }
}

void ss_lj_ircall_fns(void *detcache, const struct ss_elf *ef, const char *const *want,
                      unsigned nwant, uint16_t *id, uint64_t *fn)
{
    struct ss_lj_elfinfo info;
    memset(fn, 0, nwant * sizeof(*fn));
    if (ss_lj_detcache_get(detcache, ef, &info) != 0 || !info.is_luajit || !info.vm_found) return;
    Elf *e = ef->elf;
    const struct ss_lj_vmbuild *b = match_build(e);
    if (b && !same_code(e, b, &info)) b = NULL;
    /* the matched build's list, else the one list whose table the file holds */
    const struct ss_lj_ircall *list = NULL;
    const uint8_t *t = NULL;
    unsigned n = 0;
    for (unsigned i = 0; i < ss_lj_nvmbuilds; i++) {
        const struct ss_lj_vmbuild *o = b ? b : &ss_lj_vmbuilds[i];
        const uint8_t *at =
            o->ircall && o->ircall != list ? callinfo(e, o->ircall, o->nircall) : NULL;
        if (at && t) return; /* two lists fit: neither is proven */
        if (at) t = at, list = o->ircall, n = o->nircall;
        if (b) break;
    }
    for (unsigned w = 0; t && w < nwant; w++)
        for (unsigned i = 0; i < n; i++) {
            if (strcmp(list[i].name, want[w])) continue;
            id[w] = (uint16_t)i;
            memcpy(&fn[w], t + 16 * i, 8);
            break;
        }
}
