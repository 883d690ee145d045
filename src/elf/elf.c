/* elf/elf.c: opening ELF files (mmap + libelf; their facts are read by
 * elf_facts.c), access to their bytes and sections, and the cache that
 * shares one ss_elf per build-id. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"
#include "util/safeopen.h"

/* Files seen not to be ELF (locale archives, caches, fonts: every new
 * process maps a few), by identity, so the next process's mapping of one
 * is skipped before it is opened for reading. */
#define SS_ELF_OTHER_MAX 64
struct other_file {
    uint64_t dev, ino, size, mtime;
};

struct ss_elf_cache {
    struct ss_elf *head;
    size_t count;
    struct other_file other[SS_ELF_OTHER_MAX];
    unsigned nother, other_next;
    char *debug_root;
    ss_elf_synth_fn synth;
    struct ss_elf_fetch_state fetch; /* fetched.c */
    void *synth_ctx;
    uint64_t pools; /* string pools given an id (ss_elf_cache_pool_id) */
};

struct ss_elf_fetch_state *ss_elf_cache_fetch_state(struct ss_elf_cache *c)
{
    return &c->fetch;
}

uint64_t ss_elf_cache_pool_id(struct ss_elf_cache *c)
{
    return ++c->pools;
}

uint64_t ss_elf_cache_names_gen(const struct ss_elf_cache *c)
{
    return c ? c->fetch.gen : 0;
}

struct ss_elf *ss_elf_cache_find(struct ss_elf_cache *c, const uint8_t *id, size_t len)
{
    for (struct ss_elf *e = c->head; e; e = e->next)
        if (len && e->build_id_len == len && !memcmp(e->build_id, id, len)) return e;
    return NULL;
}

int ss_elf_cache_new(struct ss_elf_cache **out, const char *debug_root)
{
    struct ss_elf_cache *c = calloc(1, sizeof(*c));
    if (!c) return -ENOMEM;
    c->debug_root = strdup(debug_root && *debug_root ? debug_root : "");
    if (!c->debug_root) {
        free(c);
        return -ENOMEM;
    }
    if (elf_version(EV_CURRENT) == EV_NONE) {
        free(c->debug_root);
        free(c);
        return -ENOTSUP;
    }
    *out = c;
    return 0;
}

const char *ss_elf_cache_debug_root(const struct ss_elf_cache *c)
{
    return c ? c->debug_root : "";
}

void ss_elf_cache_set_synth(struct ss_elf_cache *c, ss_elf_synth_fn fn, void *sctx)
{
    c->synth_ctx = sctx;
    c->synth = fn;
}

ss_elf_synth_fn ss_elf_cache_synth(const struct ss_elf_cache *c)
{
    return c ? c->synth : NULL;
}

void *ss_elf_cache_synth_ctx(const struct ss_elf_cache *c)
{
    return c ? c->synth_ctx : NULL;
}

static void elf_destroy(struct ss_elf *e)
{
    if (e->unwind_priv && e->unwind_priv_free) e->unwind_priv_free(e->unwind_priv);
    if (e->sym_priv && e->sym_priv_free) e->sym_priv_free(e->sym_priv);
    if (e->syms) ss_symtab_free(e->syms);
    if (e->dframe) ss_dframe_free(e->dframe);
    if (e->debug) ss_elf_close_image(e->debug);
    if (e->fetched) ss_elf_close_image(e->fetched);
    if (e->elf) elf_end(e->elf);
    if (e->image) munmap((void *)e->image, e->size);
    free(e->path);
    free(e);
}

void ss_elf_cache_free(struct ss_elf_cache *c)
{
    if (!c) return;
    struct ss_elf *e = c->head;
    while (e) {
        struct ss_elf *n = e->next;
        elf_destroy(e);
        e = n;
    }
    free(c->debug_root);
    ss_elf_fetch_state_free(&c->fetch);
    free(c);
}

/* Files no mapping refers to stay open for a few collections (a compiler
 * or shell started again a second later finds its files parsed, their
 * symbol tables and unwind rows built), at most SS_ELF_IDLE_MAX of them:
 * past that the longest idle go first. */
#define SS_ELF_IDLE_ROUNDS 8
#define SS_ELF_IDLE_MAX 16

void ss_elf_cache_gc(struct ss_elf_cache *c)
{
    unsigned idle = 0, hist[SS_ELF_IDLE_ROUNDS + 1] = {0};
    for (struct ss_elf *e = c->head; e; e = e->next) {
        if (e->refs > 0) {
            e->idle_rounds = 0;
            continue;
        }
        if (e->idle_rounds < SS_ELF_IDLE_ROUNDS) e->idle_rounds++;
        idle++;
        hist[e->idle_rounds]++;
    }
    /* the idle age from which files go: the oldest until SS_ELF_IDLE_MAX remain */
    unsigned cut = SS_ELF_IDLE_ROUNDS;
    while (cut > 1 && idle > SS_ELF_IDLE_MAX) {
        idle -= hist[cut];
        cut--;
    }
    struct ss_elf **pp = &c->head;
    while (*pp) {
        struct ss_elf *e = *pp;
        if (e->refs <= 0 && e->idle_rounds >= cut) {
            *pp = e->next;
            c->count--;
            elf_destroy(e);
        } else {
            pp = &e->next;
        }
    }
}

size_t ss_elf_cache_count(const struct ss_elf_cache *c)
{
    return c->count;
}

struct ss_elf *ss_elf_ref(struct ss_elf *e)
{
    if (e) e->refs++;
    return e;
}

/* Files stay in the cache at refcount 0 until ss_elf_cache_gc, so a module
 * that is unmapped and mapped again is not parsed twice. */
void ss_elf_put(struct ss_elf *e)
{
    if (e) e->refs--;
}

void ss_elf_build_id_hex(const struct ss_elf *e, char *out)
{
    for (unsigned i = 0; i < e->build_id_len; i++)
        sprintf(out + 2 * i, "%02x", e->build_id[i]);
    out[2 * e->build_id_len] = 0;
}

struct ss_elf *ss_elf_open_image(const uint8_t *image, size_t size, int owned, const char *path)
{
    struct ss_elf *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->path = strdup(path ? path : "?");
    e->image = image;
    e->size = size;
    if (!e->path || ss_elf_parse(e, NULL) < 0) {
        if (e->elf) elf_end(e->elf);
        free(e->path);
        free(e);
        return NULL;
    }
    e->image_owned = owned;
    e->image_mmapped = owned == 2;
    return e;
}

void ss_elf_close_image(struct ss_elf *e)
{
    if (!e) return;
    int owned = e->image_owned;
    const uint8_t *img = e->image;
    size_t size = e->size;
    e->image = NULL;
    if (e->unwind_priv && e->unwind_priv_free) e->unwind_priv_free(e->unwind_priv);
    if (e->sym_priv && e->sym_priv_free) e->sym_priv_free(e->sym_priv);
    if (e->syms) ss_symtab_free(e->syms);
    if (e->dframe) ss_dframe_free(e->dframe);
    if (e->debug) ss_elf_close_image(e->debug);
    if (e->fetched) ss_elf_close_image(e->fetched);
    if (e->elf) elf_end(e->elf);
    if (owned == 1)
        free((void *)img);
    else if (owned == 2)
        munmap((void *)img, size);
    free(e->path);
    free(e);
}

/* Is e the file with this device, inode, size and mtime? */
static bool same_file(const struct ss_elf *e, uint64_t dev, uint64_t ino, uint64_t size,
                      uint64_t mtime)
{
    return e->dev == dev && e->ino == ino && e->fsize == size && e->mtime == mtime;
}

static struct ss_elf *cache_find(struct ss_elf_cache *c, const struct ss_elf *k)
{
    for (struct ss_elf *e = c->head; e; e = e->next) {
        if (k->build_id_len) {
            if (e->build_id_len == k->build_id_len &&
                !memcmp(e->build_id, k->build_id, k->build_id_len))
                return e;
        } else if (!e->build_id_len && same_file(e, k->dev, k->ino, k->fsize, k->mtime)) {
            return e;
        }
    }
    return NULL;
}

static uint64_t stat_mtime(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

struct ss_elf *ss_elf_cache_lookup_stat(struct ss_elf_cache *c, const struct stat *st)
{
    uint64_t mtime = stat_mtime(st);
    for (struct ss_elf *o = c->head; o; o = o->next)
        if (same_file(o, st->st_dev, st->st_ino, st->st_size, mtime)) return ss_elf_ref(o);
    return NULL;
}

static bool same_other(const struct other_file *o, const struct stat *st)
{
    return o->dev == st->st_dev && o->ino == st->st_ino && o->size == (uint64_t)st->st_size &&
           o->mtime == stat_mtime(st);
}

void ss_elf_cache_note_other(struct ss_elf_cache *c, const struct stat *st)
{
    if (ss_elf_cache_is_other(c, st)) return;
    c->other[c->other_next] =
        (struct other_file){st->st_dev, st->st_ino, (uint64_t)st->st_size, stat_mtime(st)};
    c->other_next = (c->other_next + 1) % SS_ELF_OTHER_MAX;
    if (c->nother < SS_ELF_OTHER_MAX) c->nother++;
}

bool ss_elf_cache_is_other(const struct ss_elf_cache *c, const struct stat *st)
{
    for (unsigned i = 0; i < c->nother; i++)
        if (same_other(&c->other[i], st)) return true;
    return false;
}

int ss_elf_open_fd(struct ss_elf_cache *c, int fd, const char *path, struct ss_elf **out,
                   struct ss_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        close(fd);
        ss_err_set(err, r, "%s: fstat: %s", path, strerror(-r));
        return r;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        ss_err_set(err, -EINVAL, "%s: not a regular ELF file", path);
        return -EINVAL;
    }
    /* the same file (device, inode, size, mtime) already open: no new
     * mapping, no parse (every process of a host maps the same libraries) */
    uint64_t mtime = stat_mtime(&st);
    struct ss_elf *o = ss_elf_cache_lookup_stat(c, &st);
    if (o) {
        close(fd);
        *out = o;
        return 0;
    }
    void *img = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED) {
        int r = -errno;
        ss_err_set(err, r, "%s: mmap: %s", path, strerror(-r));
        return r;
    }
    struct ss_elf *e = calloc(1, sizeof(*e));
    if (!e || !(e->path = strdup(path))) {
        free(e);
        munmap(img, st.st_size);
        return -ENOMEM;
    }
    e->image = img;
    e->image_mmapped = true;
    e->size = st.st_size;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->fsize = st.st_size;
    e->mtime = mtime;
    int r = ss_elf_parse(e, err);
    if (r < 0) {
        elf_destroy(e);
        return r;
    }
    struct ss_elf *old = cache_find(c, e);
    if (old) {
        elf_destroy(e);
        *out = ss_elf_ref(old);
        return 0;
    }
    e->cache = c;
    e->next = c->head;
    c->head = e;
    c->count++;
    *out = ss_elf_ref(e);
    return 0;
}

int ss_elf_open_path(struct ss_elf_cache *c, const char *path, struct ss_elf **out,
                     struct ss_err *err)
{
    int fd = ss_open_regular(path);
    if (fd < 0) {
        int r = fd;
        ss_err_set(err, r, "%s: %s", path, strerror(-r));
        return r;
    }
    return ss_elf_open_fd(c, fd, path, out, err);
}

const struct ss_elf_seg *ss_elf_seg_for_offset(const struct ss_elf *e, uint64_t off, uint64_t len)
{
    for (unsigned i = 0; i < e->nload; i++) {
        const struct ss_elf_seg *s = &e->load[i];
        uint64_t lo = s->offset & ~0xfffull, hi = s->offset + s->filesz;
        if (s->filesz == 0) /* pure .bss: match on the page it starts in */
            hi = lo + 1;
        if (off < hi && off + len > lo && off >= lo) return s;
    }
    for (unsigned i = 0; i < e->nload; i++) { /* mapping that starts inside */
        const struct ss_elf_seg *s = &e->load[i];
        if (off >= s->offset && off < s->offset + s->filesz) return s;
    }
    return NULL;
}

const void *ss_elf_vaddr_ptr(const struct ss_elf *e, uint64_t vaddr, size_t len)
{
    for (unsigned i = 0; i < e->nload; i++) {
        const struct ss_elf_seg *s = &e->load[i];
        /* segment fields are untrusted: no sum may wrap */
        if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz &&
            len <= s->filesz - (vaddr - s->vaddr)) {
            uint64_t off = s->offset + (vaddr - s->vaddr);
            if (off >= s->offset && off <= e->size && len <= e->size - off) return e->image + off;
            return NULL;
        }
    }
    return NULL;
}

static bool table_section(const GElf_Shdr *sh)
{
    switch (sh->sh_type) {
    case SHT_SYMTAB:
    case SHT_DYNSYM:
    case SHT_STRTAB:
    case SHT_RELA:
    case SHT_REL:
    case SHT_HASH:
    case SHT_GNU_HASH:
    case SHT_GNU_versym:
    case SHT_GNU_verdef:
    case SHT_GNU_verneed:
        return !(sh->sh_flags & SHF_COMPRESSED);
    default:
        return false;
    }
}

void ss_elf_release_range(const struct ss_elf *e, const void *p, size_t len)
{
    if (!e || !e->image_mmapped || !p) return;
    uintptr_t img = (uintptr_t)e->image, lo = (uintptr_t)p;
    if (lo < img || lo - img > e->size || len > e->size - (lo - img)) return; /* not ours */
    const uintptr_t page = 4096;
    uintptr_t hi = lo + len;
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void ss_elf_release_tables(const struct ss_elf *e)
{
    if (!e || !e->image_mmapped || !e->elf) return;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e->elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !table_section(&sh)) continue;
        if (sh.sh_offset > e->size || sh.sh_size > e->size - sh.sh_offset) continue;
        ss_elf_release_range(e, e->image + sh.sh_offset, sh.sh_size);
    }
}

const void *ss_elf_section(struct ss_elf *e, const char *name, size_t *size, uint64_t *vaddr)
{
    Elf *elf = e->elf;
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return NULL;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
        const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!n || strcmp(n, name)) continue;
        if (sh.sh_flags & SHF_COMPRESSED) {
            if (elf_compress(scn, 0, 0) < 0) return NULL;
            if (!gelf_getshdr(scn, &sh)) return NULL;
        }
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf) return NULL;
        if (size) *size = d->d_size;
        if (vaddr) *vaddr = sh.sh_addr;
        return d->d_buf;
    }
    return NULL;
}
