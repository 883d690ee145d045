/* test/native/plt_test.c: NAME@plt symbols for PLT entries (elf/plt.c)
 * against objdump's labels on real files: tarantool (non-PIE, .plt), luajit
 * (PIE, .plt + .plt.got), libc (IRELATIVE entries in the middle of .plt,
 * .plt.got, symbols from the separate debug file) and a small program built
 * with an IBT PLT (.plt.sec, PIE) and with a plain one (non-PIE). Every
 * entry's first byte, +5 and a return address at +6 go through
 * ss_symbolize_native on an explicit process view that maps the file the
 * way the loader would. Then hostile variants of the plain program
 * (truncated, oversized and misplaced .rela.plt, bad links, indices and
 * entry sizes, random bytes) must not crash and never give a wrong name. */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "elf/elf.h"
#include "process/process.h"
#include "symbolize/symbolize.h"

#define PLT_IBT SS_BINARY_DIR "/native_plt_ibt"
#define PLT_PLAIN SS_BINARY_DIR "/native_plt_plain"
#define PIE_BASE 0x7f3400000000ull

struct truth {
    uint64_t addr;
    char *name;
};

struct truths {
    struct truth *v;
    size_t n;
};

/* objdump's NAME@plt labels of .plt, .plt.sec and .plt.got. */
static struct truths objdump_plt(const char *file)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.sec -j .plt.got %s 2>/dev/null", file);
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen %s", cmd);
    struct truths t = {0};
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) > 0) {
        /* "0000000000439030 <curl_multi_socket_action@plt>:" */
        char *lt = strchr(line, '<');
        if (!lt || len < 8 || strcmp(line + len - 3, ">:\n")) continue;
        line[len - 3] = 0;
        size_t nl = strlen(lt + 1);
        if (nl < 5 || strcmp(lt + 1 + nl - 4, "@plt")) continue; /* "x@plt-0x10", "<.plt>" */
        if (t.n == cap) {
            cap = cap ? 2 * cap : 64;
            t.v = realloc(t.v, cap * sizeof(*t.v));
            cr_assert(t.v);
        }
        t.v[t.n].addr = strtoull(line, NULL, 16);
        t.v[t.n].name = strdup(lt + 1);
        t.n++;
    }
    free(line);
    pclose(f);
    return t;
}

static void truths_free(struct truths *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
}

static struct ss_elf_cache *cache;
static void setup(void)
{
    cr_assert_eq(ss_elf_cache_new(&cache, NULL), 0);
}
static void teardown(void)
{
    ss_elf_cache_free(cache);
}
TestSuite(plt, .init = setup, .fini = teardown);

static int open_path(void *ctx, const struct ss_map_desc *m)
{
    (void)ctx;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* A process view mapping path once per PT_LOAD (PIEs at PIE_BASE). */
static struct ss_proc *file_proc(const char *path, uint64_t *base)
{
    struct ss_elf *e;
    struct ss_err err = {0};
    cr_assert_eq(ss_elf_open_path(cache, path, &e, &err), 0, "%s: %s", path, err.msg);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    *base = e->e_type == ET_DYN ? PIE_BASE : 0;
    struct ss_map_desc d[SS_ELF_MAX_LOAD];
    size_t n = 0;
    for (unsigned i = 0; i < e->nload; i++) {
        const struct ss_elf_seg *s = &e->load[i];
        uint32_t prot = ((s->flags & PF_R) ? SS_MAP_R : 0) | ((s->flags & PF_W) ? SS_MAP_W : 0) |
                        ((s->flags & PF_X) ? SS_MAP_X : 0);
        d[n++] = (struct ss_map_desc){.start = *base + (s->vaddr & ~0xfffull),
                                      .end = *base + ((s->vaddr + s->memsz + 0xfff) & ~0xfffull),
                                      .offset = s->offset & ~0xfffull,
                                      .inode = st.st_ino,
                                      .dev_major = major(st.st_dev),
                                      .dev_minor = minor(st.st_dev),
                                      .prot = prot,
                                      .path = path};
    }
    ss_elf_put(e);
    struct ss_proc *p;
    cr_assert_eq(ss_proc_new(&p, 4242, d, n, open_path, NULL, cache, &err), 0, "%s", err.msg);
    return p;
}

/* Every objdump NAME@plt entry of path symbolizes as NAME: its first byte
 * and +5 as exact ips, +6 as a return address (looked up at +5), through
 * the cached and the uncached path. Returns the number of entries. */
static size_t check_file(const char *path, size_t min_entries)
{
    struct truths t = objdump_plt(path);
    cr_assert_geq(t.n, min_entries, "%s: objdump shows %zu NAME@plt entries", path, t.n);
    uint64_t base;
    struct ss_proc *p = file_proc(path, &base);
    struct ss_strpool *pool;
    struct ss_symcache *sc;
    cr_assert_eq(ss_strpool_new(&pool), 0);
    cr_assert_eq(ss_symcache_new(&sc), 0);
    size_t ok = 0, abs = 0;
    for (size_t i = 0; i < t.n; i++) {
        const struct {
            uint64_t off;
            bool exact;
        } probe[] = {{0, true}, {5, true}, {6, false}};
        bool good = true;
        for (int k = 0; k < 3; k++)
            for (int cached = 0; cached < 2; cached++) {
                struct ss_frame f;
                uint64_t ip = base + t.v[i].addr + probe[k].off;
                ss_symbolize_native(cached ? sc : NULL, pool, p, ip, probe[k].exact, &f);
                bool m = f.name && !strcmp(f.name, t.v[i].name) && f.sym_offset == probe[k].off;
                cr_expect(m, "%s: %#lx+%lu: got %s+%#lx, objdump says %s", path,
                          (unsigned long)t.v[i].addr, (unsigned long)probe[k].off,
                          f.name ? f.name : "(none)", (unsigned long)f.sym_offset, t.v[i].name);
                good &= m;
            }
        ok += good;
        abs += !strncmp(t.v[i].name, "*ABS*", 5);
    }
    fprintf(stderr, "plt: %s: %zu of %zu objdump NAME@plt entries match (%zu *ABS*)\n", path, ok,
            t.n, abs);
    cr_assert_eq(ok, t.n);
    ss_symcache_free(sc);
    ss_strpool_free(pool);
    ss_proc_free(p);
    truths_free(&t);
    return ok;
}

Test(plt, tarantool)
{
    check_file("/usr/bin/tarantool", 20);
    /* _init (zero-sized, right before .plt) keeps its own bytes and PLT0 */
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, "/usr/bin/tarantool", &e, NULL), 0);
    size_t size;
    uint64_t init, plt;
    cr_assert(ss_elf_section(e, ".init", &size, &init));
    cr_assert(ss_elf_section(e, ".plt", &size, &plt));
    const struct ss_sym *s = ss_elf_symbol(e, init);
    cr_assert(s && !strcmp(s->name, "_init"), "got %s", s ? s->name : "-");
    s = ss_elf_symbol(e, plt + 4); /* PLT0: objdump says _init+0x24 */
    cr_assert(s && !strcmp(s->name, "_init"), "got %s", s ? s->name : "-");
    ss_elf_put(e);
}

Test(plt, luajit)
{
    check_file("/usr/bin/luajit", 20);
}

Test(plt, libc)
{
    cr_assert_geq(check_file("/lib/x86_64-linux-gnu/libc.so.6", 20), 40);
}

Test(plt, ibt_pie)
{
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, PLT_IBT, &e, NULL), 0);
    cr_assert(ss_elf_section(e, ".plt.sec", NULL, NULL), "no .plt.sec: ld without -z ibtplt?");
    ss_elf_put(e);
    check_file(PLT_IBT, 20);
}

Test(plt, plain_nopie)
{
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, PLT_PLAIN, &e, NULL), 0);
    cr_assert_null(ss_elf_section(e, ".plt.sec", NULL, NULL));
    ss_elf_put(e);
    check_file(PLT_PLAIN, 20);
}

/* ---- hostile variants of the plain program ---- */

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*size);
    cr_assert(b && fread(b, 1, *size, f) == *size);
    fclose(f);
    return b;
}

static Elf64_Shdr *shdr_named(uint8_t *img, const char *name, int *index)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff);
    const char *str = (const char *)img + sh[eh->e_shstrndx].sh_offset;
    for (int i = 0; i < eh->e_shnum; i++)
        if (!strcmp(str + sh[i].sh_name, name)) {
            if (index) *index = i;
            return &sh[i];
        }
    cr_assert_fail("no section %s", name);
    return NULL;
}

/* Open a mutated copy and look up every truth entry (+0, +5, +15) and the
 * bytes around: no crash (ASan builds check the reads), and any NAME@plt
 * answer is objdump's name for that entry. Returns how many entries still
 * have their name. */
static size_t probe_image(const uint8_t *img, size_t size, const struct truths *t)
{
    uint8_t *copy = malloc(size);
    cr_assert(copy);
    memcpy(copy, img, size);
    struct ss_elf *e = ss_elf_open_image(copy, size, 1, "hostile");
    if (!e) {
        free(copy);
        return 0;
    }
    size_t named = 0;
    for (size_t i = 0; i < t->n; i++) {
        bool all = true;
        for (uint64_t off = 0; off < 16; off++) {
            const struct ss_sym *s = ss_elf_symbol(e, t->v[i].addr + off);
            bool plt = s && strstr(s->name, "@plt");
            cr_assert(!plt || !strcmp(s->name, t->v[i].name), "%#lx+%lu: %s, objdump says %s",
                      (unsigned long)t->v[i].addr, (unsigned long)off, s->name, t->v[i].name);
            all &= plt;
        }
        named += all;
    }
    ss_elf_close_image(e);
    return named;
}

Test(plt, hostile_rela_plt)
{
    struct truths t = objdump_plt(PLT_PLAIN);
    cr_assert_geq(t.n, 20);
    size_t size;
    uint8_t *orig = read_file(PLT_PLAIN, &size), *img = malloc(size);
    cr_assert(img);
#define FRESH() memcpy(img, orig, size)
    FRESH();
    cr_assert_eq(probe_image(img, size, &t), t.n);

    /* .rela.plt cut to 2 entries: exactly the two entries it still names;
     * to 2.5 (libelf refuses the section): no more */
    FRESH();
    Elf64_Shdr *rp = shdr_named(img, ".rela.plt", NULL);
    size_t nrel = rp->sh_size / sizeof(Elf64_Rela);
    cr_assert_geq(nrel, 20);
    rp->sh_size = 2 * sizeof(Elf64_Rela);
    cr_assert_eq(probe_image(img, size, &t), 2);
    rp->sh_size = 2 * sizeof(Elf64_Rela) + 12;
    cr_assert_leq(probe_image(img, size, &t), 2);
    /* running past the end of the file, or starting there */
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_size = size;
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_size = ~0ull / 2;
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_offset = size - 30;
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_offset = ~0ull - 8;
    probe_image(img, size, &t);
    /* wrong entry size: nothing from it */
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_entsize = 16;
    cr_assert_eq(probe_image(img, size, &t), 0);
    /* sh_link to a non-symbol-table section, to nowhere; a short .dynsym */
    int plt_index;
    FRESH();
    shdr_named(img, ".plt", &plt_index);
    shdr_named(img, ".rela.plt", NULL)->sh_link = plt_index;
    cr_assert_leq(probe_image(img, size, &t), 1); /* the IRELATIVE one only */
    FRESH();
    shdr_named(img, ".rela.plt", NULL)->sh_link = 0xffff;
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".dynsym", NULL)->sh_size = 2 * sizeof(Elf64_Sym);
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".dynstr", NULL)->sh_size = 3;
    probe_image(img, size, &t);
    /* symbol indices out of range */
    FRESH();
    rp = shdr_named(img, ".rela.plt", NULL);
    Elf64_Rela *r = (Elf64_Rela *)(img + rp->sh_offset);
    for (size_t i = 0; i < nrel; i++)
        r[i].r_info = ELF64_R_INFO(0xfffffff0u - i, ELF64_R_TYPE(r[i].r_info));
    cr_assert_leq(probe_image(img, size, &t), 1);
    /* .plt entry size, size and address */
    uint64_t bad_ent[] = {1, 5, 65, 1ull << 40, ~0ull};
    for (int i = 0; i < 5; i++) {
        FRESH();
        shdr_named(img, ".plt", NULL)->sh_entsize = bad_ent[i];
        cr_assert_eq(probe_image(img, size, &t), 0);
    }
    FRESH();
    shdr_named(img, ".plt", NULL)->sh_size = ~0ull / 2;
    probe_image(img, size, &t);
    FRESH();
    shdr_named(img, ".plt", NULL)->sh_addr = ~0ull - 20;
    probe_image(img, size, &t);
    /* a real symbol over PLT entries wins: main moved onto entries 3 to 5
     * (the first half of 5) drops their NAME@plt, entry 6 keeps its own */
    FRESH();
    Elf64_Shdr *st = shdr_named(img, ".symtab", NULL);
    Elf64_Sym *sym = (Elf64_Sym *)(img + st->sh_offset);
    const char *str = (const char *)img +
                      ((Elf64_Shdr *)(img + ((Elf64_Ehdr *)img)->e_shoff))[st->sh_link].sh_offset;
    size_t nsym = st->sh_size / sizeof(*sym), mi = 0;
    while (mi < nsym && strcmp(str + sym[mi].st_name, "main"))
        mi++;
    cr_assert_lt(mi, nsym);
    sym[mi].st_value = t.v[3].addr;
    sym[mi].st_size = 40;
    uint8_t *moved = malloc(size);
    cr_assert(moved);
    struct ss_elf *e = ss_elf_open_image(memcpy(moved, img, size), size, 1, "moved");
    cr_assert(e);
    const uint64_t at[] = {t.v[3].addr, t.v[4].addr + 5, t.v[5].addr, t.v[6].addr};
    for (int i = 0; i < 4; i++) {
        const struct ss_sym *ms = ss_elf_symbol(e, at[i]);
        const char *want = i < 3 ? "main" : t.v[6].name;
        cr_assert(ms && !strcmp(ms->name, want), "%#lx: got %s, want %s", (unsigned long)at[i],
                  ms ? ms->name : "-", want);
    }
    ss_elf_close_image(e);
    /* random bytes in the relocations, the symbols, their strings and the
     * PLT code: no crash (names may then legitimately differ) */
    const char *secs[] = {".rela.plt", ".dynsym", ".dynstr", ".plt"};
    srand(1234);
    for (int it = 0; it < 400; it++) {
        FRESH();
        Elf64_Shdr *sh = shdr_named(img, secs[it % 4], NULL);
        for (int k = 0; k < 1 + it % 16; k++)
            img[sh->sh_offset + (size_t)rand() % sh->sh_size] = (uint8_t)rand();
        uint8_t *copy = malloc(size);
        cr_assert(copy);
        memcpy(copy, img, size);
        struct ss_elf *e = ss_elf_open_image(copy, size, 1, "random");
        if (!e) {
            free(copy);
            continue;
        }
        for (size_t i = 0; i < t.n; i++)
            ss_elf_symbol(e, t.v[i].addr + (uint64_t)(it % 16));
        ss_elf_close_image(e);
    }
#undef FRESH
    free(img);
    free(orig);
    truths_free(&t);
}
