/* elf/debuginfo.c: where the symbols and .debug_frame of a stripped file
 * live: a separate debug file found by build-id
 * (ROOT/usr/lib/debug/.build-id/xx/rest.debug) or by .gnu_debuglink (next to
 * the file, in .debug/, or under ROOT/usr/lib/debug/, CRC32 checked), and the
 * xz-compressed MiniDebugInfo ELF in .gnu_debugdata. */
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "elf/elf.h"
#include "util/safeopen.h"

struct ss_elf *ss_elf_open_debug_file(const char *path)
{
    int fd = ss_open_regular(path); /* debug links are the target's: no FIFO, no device */
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 64) {
        close(fd);
        return NULL;
    }
    void *img = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED) return NULL;
    struct ss_elf *d = ss_elf_open_image(img, st.st_size, 2, path);
    if (!d) munmap(img, st.st_size);
    return d;
}

static struct ss_elf *by_build_id(struct ss_elf *e, const char *root)
{
    if (!e->build_id_len) return NULL;
    char hex[41], path[4096];
    ss_elf_build_id_hex(e, hex);
    snprintf(path, sizeof(path), "%s/usr/lib/debug/.build-id/%.2s/%s.debug", root, hex, hex + 2);
    struct ss_elf *d = ss_elf_open_debug_file(path);
    if (d &&
        (d->build_id_len != e->build_id_len || memcmp(d->build_id, e->build_id, e->build_id_len))) {
        ss_elf_close_image(d);
        return NULL;
    }
    return d;
}

static struct ss_elf *by_debuglink(struct ss_elf *e, const char *root)
{
    size_t size = 0;
    const char *link = ss_elf_section(e, ".gnu_debuglink", &size, NULL);
    if (!link || size < 8) return NULL;
    size_t nlen = strnlen(link, size);
    if (nlen == 0 || nlen >= size || strchr(link, '/')) return NULL;
    size_t crc_off = (nlen + 4) & ~(size_t)3;
    if (crc_off + 4 > size) return NULL;
    uint32_t want;
    memcpy(&want, link + crc_off, 4);

    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", e->path);
    char *slash = strrchr(dir, '/');
    if (!slash) return NULL;
    *slash = 0;
    char cand[3][4096 + 300];
    snprintf(cand[0], sizeof(cand[0]), "%s/%s", dir, link);
    snprintf(cand[1], sizeof(cand[1]), "%s/.debug/%s", dir, link);
    snprintf(cand[2], sizeof(cand[2]), "%s/usr/lib/debug%s/%s", root, dir, link);
    for (int i = 0; i < 3; i++) {
        if (!strcmp(cand[i], e->path)) /* never the file itself */
            continue;
        struct ss_elf *d = ss_elf_open_debug_file(cand[i]);
        if (!d) continue;
        uint32_t crc = crc32(0, Z_NULL, 0);
        size_t off = 0;
        while (off < d->size) { /* zlib takes uInt lengths */
            size_t chunk = d->size - off > (1u << 30) ? (1u << 30) : d->size - off;
            crc = crc32(crc, d->image + off, (uInt)chunk);
            off += chunk;
        }
        if (crc == want) return d;
        ss_elf_close_image(d);
    }
    return NULL;
}

struct ss_elf *ss_elf_debug(struct ss_elf *e)
{
    if (e->debug_state == 0) {
        const char *root = ss_elf_cache_debug_root(e->cache);
        e->debug = by_build_id(e, root);
        if (!e->debug) e->debug = by_debuglink(e, root);
        e->debug_state = e->debug ? 1 : -1;
    }
    return e->debug;
}

void *ss_elf_minidebuginfo(struct ss_elf *e, size_t *out_size)
{
    size_t in_size = 0;
    const uint8_t *in = ss_elf_section(e, ".gnu_debugdata", &in_size, NULL);
    if (!in || !in_size) return NULL;
    lzma_stream s = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) return NULL;
    size_t cap = in_size * 4 + 4096, max = 512u << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        lzma_end(&s);
        return NULL;
    }
    s.next_in = in;
    s.avail_in = in_size;
    s.next_out = buf;
    s.avail_out = cap;
    for (;;) {
        lzma_ret r = lzma_code(&s, LZMA_FINISH);
        if (r == LZMA_STREAM_END) break;
        if (r != LZMA_OK || (s.avail_out == 0 && cap >= max)) {
            free(buf);
            lzma_end(&s);
            return NULL;
        }
        if (s.avail_out == 0) {
            size_t used = cap;
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                lzma_end(&s);
                return NULL;
            }
            buf = nb;
            s.next_out = buf + used;
            s.avail_out = cap - used;
        }
    }
    *out_size = cap - s.avail_out;
    lzma_end(&s);
    return buf;
}
