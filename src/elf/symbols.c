/* elf/symbols.c: the sorted function-symbol table of one ELF file.
 *
 * Gathered once per file from .dynsym plus the best full symbol table:
 * the file's own .symtab, else the separate debug file's, else a fetched
 * debug file's (debuginfod, elf/fetched.c), else the MiniDebugInfo
 * (.gnu_debugdata) one. Where several symbols share an
 * address the same one perf picks wins (sized, non-weak, global, fewest
 * leading underscores, longest name); version suffixes ("@@GLIBC_2.34") are
 * dropped. PLT entries get synthetic NAME@plt symbols (elf/plt.c) where no
 * real sized symbol overlaps them. Files without a full table also get the
 * cache's synthetic symbols (the LuaJIT internals of stripped builds,
 * unwind/luajit/vmsyms.c), sized by their FDE when they say no size. Zero-sized symbols (such as
 * _init right before .plt) extend to the next symbol, synthetic ones included. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"

struct ss_symtab {
    struct ss_sym *v;
    size_t n, cap;
    char **strs; /* names we had to copy (version suffix cut) */
    size_t nstrs, capstrs;
    struct ss_elf *mini; /* MiniDebugInfo ELF kept alive for its strings */
};

struct cand {
    struct ss_sym s;
    uint8_t bind;
    bool synth; /* NAME@plt */
};

struct cands {
    struct cand *v;
    size_t n, cap;
};

void ss_symtab_free(struct ss_symtab *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nstrs; i++)
        free(t->strs[i]);
    free(t->strs);
    free(t->v);
    if (t->mini) ss_elf_close_image(t->mini);
    free(t);
}

/* Keep the malloc'd string c with the table; NULL (c freed) on failure. */
static const char *own(struct ss_symtab *t, char *c)
{
    if (!c) return NULL;
    if (t->nstrs == t->capstrs) {
        size_t nc = t->capstrs ? 2 * t->capstrs : 64;
        char **ns = realloc(t->strs, nc * sizeof(*ns));
        if (!ns) {
            free(c);
            return NULL;
        }
        t->strs = ns;
        t->capstrs = nc;
    }
    t->strs[t->nstrs++] = c;
    return c;
}

static const char *keep_name(struct ss_symtab *t, const char *name)
{
    const char *at = strchr(name, '@');
    if (!at) return name;
    const char *c = own(t, strndup(name, at - name));
    return c ? c : name;
}

/* Room for n more candidates, if memory allows (cand_add grows it anyway). */
static void cand_reserve(struct cands *cs, size_t n)
{
    if (cs->cap - cs->n >= n || n > SIZE_MAX / sizeof(*cs->v) - cs->n) return;
    struct cand *nv = realloc(cs->v, (cs->n + n) * sizeof(*nv));
    if (!nv) return;
    cs->v = nv;
    cs->cap = cs->n + n;
}

static struct cand *cand_add(struct cands *cs)
{
    if (cs->n == cs->cap) {
        size_t nc = cs->cap ? 2 * cs->cap : 1024;
        struct cand *nv = realloc(cs->v, nc * sizeof(*nv));
        if (!nv) return NULL;
        cs->v = nv;
        cs->cap = nc;
    }
    return &cs->v[cs->n++];
}

static void add_cand(struct ss_symtab *t, struct cands *cs, const char *name, uint64_t value,
                     uint64_t size, uint8_t info, uint16_t shndx)
{
    int st = GELF_ST_TYPE(info);
    if (st != STT_FUNC && st != STT_GNU_IFUNC) return;
    if (shndx == SHN_UNDEF || value == 0 || !name || !*name) return;
    struct cand *c = cand_add(cs);
    if (!c) return;
    c->s.addr = value;
    c->s.size = size;
    c->s.name = keep_name(t, name);
    c->bind = GELF_ST_BIND(info);
    c->synth = false;
}

/* The string table of a symbol table in memory, NUL-terminated at its end
 * (so every offset inside it starts a terminated string), or NULL. */
static const char *strtab(Elf *elf, size_t link, size_t *len)
{
    Elf_Scn *scn = elf_getscn(elf, link);
    GElf_Shdr sh;
    Elf_Data *d =
        scn && gelf_getshdr(scn, &sh) && sh.sh_type == SHT_STRTAB ? elf_getdata(scn, NULL) : NULL;
    if (!d || !d->d_buf || !d->d_size || ((const char *)d->d_buf)[d->d_size - 1]) return NULL;
    *len = d->d_size;
    return d->d_buf;
}

/* Collect function symbols of one symbol table section: read in place when
 * the table is native ELF64 symbols (what libelf hands out on x86-64), else
 * through gelf (the same symbols, the same names). */
static void collect(struct ss_symtab *t, struct cands *cs, const struct ss_elf *e, uint32_t type)
{
    Elf *elf = e->elf;
    Elf_Scn *scn = NULL;
    bool c64 = gelf_getclass(elf) == ELFCLASS64;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d) continue;
        size_t n = sh.sh_size / sh.sh_entsize, slen = 0;
        cand_reserve(cs, n); /* one allocation, not a doubling per 2^k (a hint: may fail) */
        const char *str = strtab(elf, sh.sh_link, &slen);
        const Elf64_Sym *v = d->d_buf;
        if (c64 && str && v && d->d_type == ELF_T_SYM && !((uintptr_t)v % _Alignof(Elf64_Sym))) {
            if (n > d->d_size / sizeof(*v)) n = d->d_size / sizeof(*v);
            for (size_t i = 0; i < n; i++) {
                if (i && i % SS_ELF_RELEASE_EVERY == 0)
                    ss_elf_release_range(e, (const uint8_t *)(v + i - SS_ELF_RELEASE_EVERY),
                                         SS_ELF_RELEASE_EVERY * sizeof(*v));
                const Elf64_Sym *y = &v[i];
                add_cand(t, cs, y->st_name < slen ? str + y->st_name : NULL, y->st_value,
                         y->st_size, y->st_info, y->st_shndx);
            }
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym)) break;
            if (i && i % SS_ELF_RELEASE_EVERY == 0 && d->d_buf)
                ss_elf_release_range(
                    e, (const uint8_t *)d->d_buf + (i - SS_ELF_RELEASE_EVERY) * sizeof(Elf64_Sym),
                    SS_ELF_RELEASE_EVERY * sizeof(Elf64_Sym));
            int st = GELF_ST_TYPE(sym.st_info);
            if (st != STT_FUNC && st != STT_GNU_IFUNC) continue;
            add_cand(t, cs, elf_strptr(elf, sh.sh_link, sym.st_name), sym.st_value, sym.st_size,
                     sym.st_info, sym.st_shndx);
        }
    }
}

struct plt_ctx {
    struct ss_symtab *t;
    struct cands *cs;
};

static void add_plt(void *ctx, uint64_t addr, uint64_t size, char *name)
{
    struct plt_ctx *p = ctx;
    const char *n = own(p->t, name);
    struct cand *c = n ? cand_add(p->cs) : NULL;
    if (!c) return;
    *c = (struct cand){.s = {addr, size, n}, .bind = STB_GLOBAL, .synth = true};
}

struct synth_ctx {
    struct ss_elf *e;
    struct cands *cs;
};

/* A symbol of the cache's synthesizer: local, so a real exported one at the
 * same address wins; without a size, up to the end of its FDE. */
static void add_synth(void *ctx, uint64_t addr, uint64_t size, const char *name)
{
    struct synth_ctx *s = ctx;
    uint64_t lo, hi;
    if (!size && ss_elf_fde_range(s->e, addr, &lo, &hi) && lo == addr) size = hi - lo;
    struct cand *c = cand_add(s->cs);
    if (c) *c = (struct cand){.s = {addr, size, name}, .bind = STB_LOCAL, .synth = false};
}

/* Candidates are sorted by address with a stable LSD radix sort of small
 * (address, index) keys (8 bits a pass, passes whose byte is the same in
 * every key skipped): ties keep the order they were collected in, so the
 * best name per address (better() below, a total order but for identical
 * names) is the one a stable comparison sort would give. */
struct cand_key {
    uint64_t addr;
    size_t idx;
};

/* The keys of cs sorted by address (malloc'd; NULL: out of memory). */
static struct cand_key *sort_cands(const struct cands *cs)
{
    size_t n = cs->n;
    struct cand_key *k = malloc(n * sizeof(*k)), *tmp = malloc(n * sizeof(*tmp));
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return NULL;
    }
    uint64_t any = 0, all = ~0ull;
    for (size_t i = 0; i < n; i++) {
        k[i] = (struct cand_key){cs->v[i].s.addr, i};
        any |= k[i].addr;
        all &= k[i].addr;
    }
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (!(((any ^ all) >> shift) & 0xff)) continue; /* this byte is the same in all */
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[((k[i].addr >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++)
            cnt[d + 1] += cnt[d];
        for (size_t i = 0; i < n; i++)
            tmp[cnt[(k[i].addr >> shift) & 0xff]++] = k[i];
        struct cand_key *t = k;
        k = tmp;
        tmp = t;
    }
    free(tmp);
    return k;
}

/* Drop the synthetic symbols that overlap a real sized one (v: n symbols
 * sorted by address, one per address, synth[i] set for NAME@plt); real
 * symbols always win. Returns the symbols kept (compacted in place). */
static size_t drop_covered_plt(struct ss_sym *v, uint8_t *synth, size_t n)
{
    uint64_t reach = 0; /* highest end of the real sized symbols so far */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ss_sym c = v[i];
        bool keep = true;
        if (!synth[i]) {
            if (c.size) {
                uint64_t end = c.addr + c.size;
                if (end < c.addr) end = UINT64_MAX;
                if (end > reach) reach = end;
            }
        } else {
            keep = reach <= c.addr;
            for (size_t j = i + 1; keep && j < n && v[j].addr - c.addr < c.size; j++)
                keep = synth[j] || !v[j].size;
        }
        if (keep) {
            synth[m] = synth[i];
            v[m++] = c;
        }
    }
    return m;
}

static int underscores(const char *s)
{
    int n = 0;
    while (*s++ == '_')
        n++;
    return n;
}

/* 1 if a is a better name for the address than b (perf's choose_best_symbol). */
static int better(const struct cand *a, const struct cand *b)
{
    if (a->synth != b->synth) return !a->synth;
    if ((a->s.size != 0) != (b->s.size != 0)) return a->s.size != 0;
    if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK)) return a->bind != STB_WEAK;
    if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL)) return a->bind == STB_GLOBAL;
    int ua = underscores(a->s.name), ub = underscores(b->s.name);
    if (ua != ub) return ua < ub;
    size_t la = strlen(a->s.name), lb = strlen(b->s.name);
    if (la != lb) return la > lb;
    return strcmp(a->s.name, b->s.name) < 0;
}

static bool has_symtab(Elf *elf)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size > sh.sh_entsize)
            return true;
    }
    return false;
}

static struct ss_symtab *load(struct ss_elf *e)
{
    struct ss_symtab *t = calloc(1, sizeof(*t));
    struct cands cs = {0};
    if (!t) return NULL;
    Elf *elf = e->elf;
    collect(t, &cs, e, SHT_DYNSYM);
    bool full = true;
    struct ss_elf *dbg = NULL;
    if (has_symtab(elf)) {
        collect(t, &cs, e, SHT_SYMTAB);
    } else {
        dbg = ss_elf_debug(e);
        if (!dbg || !has_symtab(dbg->elf)) dbg = ss_elf_fetched_debug(e);
        if (dbg && has_symtab(dbg->elf)) {
            collect(t, &cs, dbg, SHT_SYMTAB);
        } else {
            dbg = NULL;
            full = false;
            size_t sz = 0;
            void *img = ss_elf_minidebuginfo(e, &sz);
            if (img) {
                t->mini = ss_elf_open_image(img, sz, 1, ".gnu_debugdata");
                if (t->mini)
                    collect(t, &cs, t->mini, SHT_SYMTAB);
                else
                    free(img);
            }
        }
    }
    ss_elf_synth_fn synth = ss_elf_cache_synth(e->cache);
    if (!full && synth) {
        struct synth_ctx sc = {e, &cs};
        synth(ss_elf_cache_synth_ctx(e->cache), e, add_synth, &sc);
    }
    struct plt_ctx pc = {t, &cs};
    ss_elf_plt_symbols(e, add_plt, &pc);
    struct cand_key *k = cs.n ? sort_cands(&cs) : NULL;
    if (cs.n && !k) {
        free(cs.v);
        ss_symtab_free(t);
        return NULL;
    }
    /* the best candidate per address, in address order (one pass of reads in
     * the keys' order), then the PLT entries real symbols cover dropped */
    t->v = malloc((cs.n ? cs.n : 1) * sizeof(*t->v));
    uint8_t *isplt = malloc(cs.n ? cs.n : 1);
    if (!t->v || !isplt) {
        free(isplt);
        free(k);
        free(cs.v);
        ss_symtab_free(t);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < cs.n;) {
        size_t j = i, best = i;
        while (j < cs.n && k[j].addr == k[i].addr) {
            if (j > i && better(&cs.v[k[j].idx], &cs.v[k[best].idx])) best = j;
            j++;
        }
        const struct cand *c = &cs.v[k[best].idx];
        t->v[m] = c->s;
        isplt[m++] = c->synth;
        i = j;
    }
    t->n = drop_covered_plt(t->v, isplt, m);
    free(isplt);
    free(k);
    free(cs.v);
    for (size_t i = 0; i < t->n; i++) /* zero-sized: up to the next symbol */
        if (!t->v[i].size && i + 1 < t->n) t->v[i].size = t->v[i + 1].addr - t->v[i].addr;
    /* Building read every symbol, name and relocation of the tables; from
     * now on only the names of the symbols looked up are read (the names
     * point into the mapped string tables), so give the pages back and let
     * those lookups fault in the few they need. */
    ss_elf_release_tables(e);
    ss_elf_release_tables(dbg);
    return t;
}

static struct ss_symtab *syms(struct ss_elf *e)
{
    if (e->syms_state == 0) {
        e->syms = load(e);
        e->syms_state = e->syms ? 1 : -1;
    }
    return e->syms;
}

size_t ss_elf_symbol_count(struct ss_elf *e)
{
    struct ss_symtab *t = syms(e);
    return t ? t->n : 0;
}

const struct ss_sym *ss_elf_symbol(struct ss_elf *e, uint64_t vaddr)
{
    struct ss_symtab *t = syms(e);
    if (!t || !t->n) return NULL;
    size_t lo = 0, hi = t->n; /* first entry with addr > vaddr */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->v[mid].addr <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* the closest start at or below vaddr, or an enclosing bigger symbol */
    for (size_t k = 0; k < 4 && lo > k; k++) {
        const struct ss_sym *s = &t->v[lo - 1 - k];
        if (vaddr < s->addr + s->size) return s;
    }
    return NULL;
}
