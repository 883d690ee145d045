/* elf/plt.c: synthetic NAME@plt symbols for x86-64 PLT entries, as perf
 * (dso__synthesize_plt_symbols) and objdump show them.
 *
 * PLT layout (x86-64, GNU ld): .plt starts with PLT0 (16 bytes, pushes
 * GOT[1] and jumps through GOT[2]); every following 16-byte entry is
 * `jmp *SLOT(%rip); push $i; jmp PLT0` (lazy binding). With IBT
 * (-z ibtplt / CET) the entries that callers reach live in .plt.sec (16
 * bytes: `endbr64; bnd jmp *SLOT(%rip); nop`) and the .plt entries only
 * hold the lazy push/jmp. .plt.got holds 8- or 16-byte `jmp *SLOT(%rip)`
 * stubs for functions whose address is also taken (GLOB_DAT relocations in
 * .rela.dyn). SLOT is a GOT entry, and the dynamic relocation whose r_offset
 * is that slot names the entry: R_X86_64_JUMP_SLOT / GLOB_DAT through the
 * relocation section's symbol table (sh_link, normally .dynsym),
 * R_X86_64_IRELATIVE (a local IFUNC, no symbol) as "*ABS*+0xADDEND@plt"
 * like perf and objdump.
 *
 * "Entry i+1 of .plt (entry i of .plt.sec) belongs to relocation i" is not
 * true in general: ld appends the IRELATIVE relocations at the end of
 * .rela.plt while their PLT entries sit between the others in GOT order
 * (libc.so.6 has 39 of its 53 .plt entries like that), so every entry is
 * matched through the GOT slot its jmp reads, which is what objdump does.
 * Entries that do not start with that jmp (PLT0, the lazy half of an IBT
 * .plt, other linkers' formats) get no name. Every field is untrusted:
 * sizes come from libelf's section data, entry sizes from sh_entsize
 * (checked), and no read leaves an entry. */
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"

#ifndef R_X86_64_IRELATIVE
#define R_X86_64_IRELATIVE 37
#endif

#define MAX_RELOCS (1u << 22) /* bounds work and memory on hostile files */

struct prel {
    uint64_t slot; /* r_offset: the GOT entry */
    uint64_t addend;
    const char *name; /* NULL: IRELATIVE */
    size_t order;     /* file order, for a deterministic pick among duplicates */
};

struct prels {
    struct prel *v;
    size_t n, cap;
};

static int prel_cmp(const void *a, const void *b)
{
    const struct prel *x = a, *y = b;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Symbol name of index idx in the symbol table section symscn, or NULL. */
static const char *sym_name(Elf *elf, Elf_Scn *symscn, Elf_Data *symd, size_t idx)
{
    GElf_Shdr sh;
    GElf_Sym sym;
    if (!idx || idx > INT32_MAX || !gelf_getshdr(symscn, &sh)) return NULL;
    if (!gelf_getsym(symd, (int)idx, &sym)) return NULL;
    const char *n = elf_strptr(elf, sh.sh_link, sym.st_name);
    return n && *n ? n : NULL;
}

/* The JUMP_SLOT, GLOB_DAT and IRELATIVE relocations of one allocated
 * SHT_RELA section (.rela.plt, .rela.dyn). */
static void collect_relocs(const struct ss_elf *e, Elf_Scn *scn, const GElf_Shdr *sh,
                           struct prels *rs)
{
    Elf *elf = e->elf;
    if (sh->sh_entsize && sh->sh_entsize != sizeof(Elf64_Rela)) return;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || !d->d_buf) return;
    Elf_Scn *symscn = elf_getscn(elf, sh->sh_link);
    GElf_Shdr ssh;
    Elf_Data *symd = NULL;
    if (symscn && gelf_getshdr(symscn, &ssh) &&
        (ssh.sh_type == SHT_DYNSYM || ssh.sh_type == SHT_SYMTAB) &&
        ssh.sh_entsize == sizeof(Elf64_Sym))
        symd = elf_getdata(symscn, NULL);
    size_t n = d->d_size / sizeof(Elf64_Rela);
    for (size_t i = 0; i < n && i <= INT32_MAX && rs->n < MAX_RELOCS; i++) {
        GElf_Rela r;
        if (!gelf_getrela(d, (int)i, &r)) break;
        if (i && i % SS_ELF_RELEASE_EVERY == 0)
            ss_elf_release_range(
                e, (const uint8_t *)d->d_buf + (i - SS_ELF_RELEASE_EVERY) * sizeof(Elf64_Rela),
                SS_ELF_RELEASE_EVERY * sizeof(Elf64_Rela));
        uint32_t type = GELF_R_TYPE(r.r_info);
        const char *name = NULL;
        if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
            if (!symd || !(name = sym_name(elf, symscn, symd, GELF_R_SYM(r.r_info)))) continue;
        } else if (type != R_X86_64_IRELATIVE) {
            continue;
        }
        if (rs->n == rs->cap) {
            size_t nc = rs->cap ? 2 * rs->cap : 256;
            struct prel *nv = realloc(rs->v, nc * sizeof(*nv));
            if (!nv) return;
            rs->v = nv;
            rs->cap = nc;
        }
        rs->v[rs->n] = (struct prel){r.r_offset, (uint64_t)r.r_addend, name, rs->n};
        rs->n++;
    }
}

static const struct prel *find_slot(const struct prels *rs, uint64_t slot)
{
    size_t lo = 0, hi = rs->n; /* first entry with slot >= slot */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->v[mid].slot < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rs->n && rs->v[lo].slot == slot ? &rs->v[lo] : NULL;
}

/* The GOT slot an entry at vaddr jumps through: [endbr64] [bnd] jmp
 * *disp32(%rip). 0 when the entry does not start that way. */
static uint64_t entry_slot(const uint8_t *p, size_t len, uint64_t vaddr)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    size_t i = 0;
    if (len >= 4 && !memcmp(p, endbr64, 4)) i = 4;
    if (i < len && p[i] == 0xf2) i++; /* bnd prefix (MPX, IBT PLTs) */
    if (len < 6 || i > len - 6 || p[i] != 0xff || p[i + 1] != 0x25) return 0;
    int32_t disp = (int32_t)((uint32_t)p[i + 2] | (uint32_t)p[i + 3] << 8 |
                             (uint32_t)p[i + 4] << 16 | (uint32_t)p[i + 5] << 24);
    return vaddr + i + 6 + (uint64_t)(int64_t)disp; /* wraps harmlessly */
}

static char *plt_name(const struct prel *r)
{
    char buf[40];
    const char *base = r->name;
    if (!base) {
        snprintf(buf, sizeof(buf), "*ABS*+0x%" PRIx64, r->addend);
        base = buf;
    }
    size_t len = strlen(base);
    char *s = malloc(len + sizeof("@plt"));
    if (!s) return NULL;
    memcpy(s, base, len);
    memcpy(s + len, "@plt", sizeof("@plt"));
    return s;
}

/* Name the entries of one PLT section. */
static void scan_plt(Elf_Scn *scn, const GElf_Shdr *sh, uint64_t def_entsize,
                     const struct prels *rs, ss_plt_fn fn, void *ctx)
{
    uint64_t ent = sh->sh_entsize ? sh->sh_entsize : def_entsize;
    if (ent < 6 || ent > 64) return;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || !d->d_buf || d->d_size > UINT64_MAX - sh->sh_addr) return;
    const uint8_t *b = d->d_buf;
    for (uint64_t off = 0; off + ent <= d->d_size; off += ent) {
        uint64_t addr = sh->sh_addr + off;
        uint64_t slot = entry_slot(b + off, ent, addr);
        const struct prel *r = slot ? find_slot(rs, slot) : NULL;
        if (!r) continue;
        char *name = plt_name(r);
        if (name) fn(ctx, addr, ent, name);
    }
}

void ss_elf_plt_symbols(struct ss_elf *e, ss_plt_fn fn, void *ctx)
{
    Elf *elf = e->elf;
    GElf_Ehdr eh;
    size_t shstrndx;
    if (!elf || !gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
        elf_getshdrstrndx(elf, &shstrndx) != 0)
        return;
    struct prels rs = {0};
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA && (sh.sh_flags & SHF_ALLOC))
            collect_relocs(e, scn, &sh, &rs);
    }
    if (!rs.n) {
        free(rs.v);
        return;
    }
    qsort(rs.v, rs.n, sizeof(*rs.v), prel_cmp);
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
            continue;
        const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!n) continue;
        if (!strcmp(n, ".plt") || !strcmp(n, ".plt.sec"))
            scan_plt(scn, &sh, 16, &rs, fn, ctx);
        else if (!strcmp(n, ".plt.got"))
            scan_plt(scn, &sh, 8, &rs, fn, ctx);
    }
    free(rs.v);
}
