/* snapfile/bundle.c: bundle records. A bundle is the whole mapped ELF file
 * (or its separate debug file), zstd-compressed, keyed and deduplicated by
 * (build-id, kind), with the contents of non-loadable .debug_* sections other
 * than .debug_frame zeroed (same size and offsets; nothing in stacksnap reads
 * them, and they are most of an unstripped binary). The build-id is read from
 * the file itself with libelf (SHT_NOTE sections, else PT_NOTE segments), so a
 * file that changed on disk since it was mapped is detected when the caller
 * passes the expected id. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapfile/writer.h"
#include "util/safeopen.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* Scan one note area for the GNU build-id. */
static int note_build_id(Elf_Data *d, uint8_t *id, uint8_t *len)
{
    if (!d || !d->d_buf) return 0;
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off, next;
    while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
            nh.n_descsz <= SS_SNAP_BUILD_ID_MAX) {
            memcpy(id, (const uint8_t *)d->d_buf + desc_off, nh.n_descsz);
            *len = (uint8_t)nh.n_descsz;
            return 1;
        }
        off = next;
    }
    return 0;
}

/* writer.h: 1 found, 0 none, -ENOEXEC not ELF. */
int snap_elf_build_id(const void *img, size_t size, uint8_t *id, uint8_t *len)
{
    elf_version(EV_CURRENT);
    Elf *e = elf_memory((char *)img, size);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        if (e) elf_end(e);
        return -ENOEXEC;
    }
    int found = 0;
    for (Elf_Scn *s = NULL; !found && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (gelf_getshdr(s, &sh) && sh.sh_type == SHT_NOTE)
            found = note_build_id(elf_getdata(s, NULL), id, len);
    }
    size_t nph = 0;
    if (!found && elf_getphdrnum(e, &nph) == 0) {
        for (size_t i = 0; !found && i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_NOTE)
                found = note_build_id(
                    elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR), id,
                    len);
        }
    }
    elf_end(e);
    return found;
}

/* A copy of img with the unused debug sections zeroed, or NULL when there is
 * nothing to zero (or no memory: the whole file is then stored as is). */
static uint8_t *strip_debug(const void *img, size_t size)
{
    elf_version(EV_CURRENT);
    Elf *e = elf_memory((char *)img, size);
    size_t shstrndx, nph = 0;
    if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx) != 0 ||
        elf_getphdrnum(e, &nph) != 0) {
        if (e) elf_end(e);
        return NULL;
    }
    uint8_t *copy = NULL;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS ||
            sh.sh_size == 0 || sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name || strncmp(name, ".debug_", 7) != 0 || strcmp(name, ".debug_frame") == 0)
            continue;
        bool loaded = false; /* never touch bytes a segment maps */
        for (size_t i = 0; i < nph && !loaded; i++) {
            GElf_Phdr ph;
            loaded = gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
                     sh.sh_offset < ph.p_offset + ph.p_filesz &&
                     ph.p_offset < sh.sh_offset + sh.sh_size;
        }
        if (loaded) continue;
        if (!copy) {
            if (!(copy = malloc(size))) break;
            memcpy(copy, img, size);
        }
        memset(copy + sh.sh_offset, 0, sh.sh_size);
    }
    elf_end(e);
    return copy;
}

bool ss_snap_has_bundle(const struct ss_snap_writer *w, const uint8_t *id, size_t len,
                        enum ss_snap_bundle_kind kind)
{
    for (size_t i = 0; i < w->nbundles; i++) {
        const struct snap_bundle_key *k = &w->bundles[i];
        if (k->kind == (uint32_t)kind && k->len == len && memcmp(k->id, id, len) == 0) return true;
    }
    return false;
}

static int add_key(struct ss_snap_writer *w, const uint8_t *id, uint8_t len, uint32_t kind)
{
    if (w->nbundles == w->bundles_cap) {
        size_t cap = w->bundles_cap ? w->bundles_cap * 2 : 16;
        void *p = realloc(w->bundles, cap * sizeof(*w->bundles));
        if (!p) return -ENOMEM;
        w->bundles = p;
        w->bundles_cap = cap;
    }
    struct snap_bundle_key *k = &w->bundles[w->nbundles++];
    k->kind = kind;
    k->len = len;
    memcpy(k->id, id, len);
    return 0;
}

int ss_snap_write_bundle(struct ss_snap_writer *w, const char *open_path, const char *name,
                         enum ss_snap_bundle_kind kind, const uint8_t *expect_id, size_t expect_len,
                         struct ss_err *err)
{
    if (w->err) {
        ss_err_set(err, w->err, "%s", w->errmsg);
        return w->err;
    }
    if (!name) name = open_path;
    if (expect_id && ss_snap_has_bundle(w, expect_id, expect_len, kind)) return 0;
    int fd = ss_open_regular(open_path); /* a target's path: no FIFO, no device */
    if (fd < 0) {
        int e = -fd;
        ss_err_set(err, -e, "bundle %s: %s", open_path, strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    void *img = MAP_FAILED;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        ss_err_set(err, rc, "bundle %s: %s", open_path, strerror(errno));
    } else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        ss_err_set(err, rc = -ENOEXEC, "bundle %s: not an ELF file", open_path);
    } else if ((uint64_t)st.st_size > SNAP_MAX_PAYLOAD - 4096) {
        ss_err_set(err, rc = -EFBIG, "bundle %s: %lld bytes, over the %u-byte record limit",
                   open_path, (long long)st.st_size, SNAP_MAX_PAYLOAD - 4096);
    } else if ((img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) ==
               MAP_FAILED) {
        rc = -errno;
        ss_err_set(err, rc, "bundle %s: mmap: %s", open_path, strerror(errno));
    }
    close(fd);
    if (rc) return rc;

    size_t size = (size_t)st.st_size;
    uint8_t id[SS_SNAP_BUILD_ID_MAX];
    uint8_t idlen = 0;
    int found = snap_elf_build_id(img, size, id, &idlen);
    if (found < 0) {
        ss_err_set(err, rc = -ENOEXEC, "bundle %s: not an ELF file", open_path);
    } else if (!found) {
        ss_err_set(err, rc = -ENODATA, "bundle %s: no GNU build-id note", open_path);
    } else if (expect_id && (expect_len != idlen || memcmp(expect_id, id, idlen) != 0)) {
        ss_err_set(err, rc = -ESTALE, "bundle %s: build-id differs from the mapped file's",
                   open_path);
    } else if (ss_snap_has_bundle(w, id, idlen, kind)) {
        rc = 0; /* already in the capture */
    } else {
        w->pay.len = 0;
        snap_put_u32(&w->pay, (uint32_t)kind);
        snap_put_u8(&w->pay, idlen);
        snap_put(&w->pay, id, idlen);
        snap_put_str(&w->pay, name);
        snap_put_u64(&w->pay, size);
        uint8_t *stripped = strip_debug(img, size);
        struct snap_part parts[2] = {{w->pay.p, w->pay.len}, {stripped ? stripped : img, size}};
        if (w->pay.oom) {
            w->pay.oom = false;
            ss_err_set(err, rc = -ENOMEM, "bundle %s: out of memory", open_path);
        } else {
            rc = snap_emit(w, SS_SNAP_BUNDLE, SNAP_Z_BEST, parts, 2, err);
        }
        free(stripped);
        if (!rc) rc = add_key(w, id, idlen, (uint32_t)kind);
        if (!rc) rc = 1;
    }
    munmap(img, size);
    return rc;
}
