/* elf/debug_frame.c: a sorted FDE index over .debug_frame.
 *
 * Debian's libunwind 1.6.2 is built without its own .debug_frame finder on
 * x86-64, so for code that has CFI only in .debug_frame (built with
 * -fno-asynchronous-unwind-tables -g, some hand-written assembly) we build the
 * index here; unwind/native.c hands it to libunwind as an
 * UNW_INFO_FORMAT_TABLE. The section comes from the file itself or from its
 * separate debug file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"

void ss_dframe_free(struct ss_dframe *d)
{
    if (!d) return;
    free(d->index);
    free(d->owned);
    free(d);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct ss_dframe_entry *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->fde_off < y->fde_off ? -1 : x->fde_off > y->fde_off;
}

/* Address size of the CIE at cie_off (version 4 records it), default 8. */
static unsigned cie_addr_size(const uint8_t *sec, size_t size, uint64_t cie_off)
{
    if (cie_off + 16 > size) return 0;
    const uint8_t *p = sec + cie_off;
    uint32_t len32;
    memcpy(&len32, p, 4);
    size_t hdr = len32 == 0xffffffffu ? 12 : 4, idsz = len32 == 0xffffffffu ? 8 : 4;
    const uint8_t *q = p + hdr + idsz, *end = sec + size;
    if (q >= end) return 0;
    uint8_t version = *q++;
    const uint8_t *aug = q;
    while (q < end && *q)
        q++;
    if (q >= end) return 0;
    q++;
    if (version >= 4) {
        if (q >= end) return 0;
        return *q;
    }
    (void)aug;
    return 8;
}

static struct ss_dframe *build(const uint8_t *sec, size_t size)
{
    struct ss_dframe *d = calloc(1, sizeof(*d));
    if (!d) return NULL;
    /* libunwind reads the section word by word (aligned): keep 8 bytes of
     * padding after it in our own copy */
    d->owned = calloc(1, size + 16);
    if (!d->owned) {
        free(d);
        return NULL;
    }
    memcpy(d->owned, sec, size);
    d->sec = d->owned;
    d->size = size;
    size_t cap = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t off = 0;
    while (off + 4 <= size) {
        uint32_t len32;
        memcpy(&len32, sec + off, 4);
        if (len32 == 0) {
            off += 4;
            continue;
        }
        uint64_t len = len32;
        size_t hdr = 4, idsz = 4;
        if (len32 == 0xffffffffu) {
            if (off + 12 > size) break;
            memcpy(&len, sec + off + 4, 8);
            hdr = 12;
            idsz = 8;
        }
        if (len > size - off - hdr) break;
        size_t end = off + hdr + len;
        uint64_t id = 0;
        memcpy(&id, sec + off + hdr, idsz);
        bool is_cie = idsz == 4 ? id == 0xffffffffu : id == UINT64_MAX;
        if (!is_cie) {
            unsigned asz = cie_addr_size(sec, size, id);
            const uint8_t *p = sec + off + hdr + idsz;
            uint64_t start = 0, range = 0;
            if ((asz == 8 || asz == 4) && p + 2 * asz <= sec + end) {
                memcpy(&start, p, asz);
                memcpy(&range, p + asz, asz);
            }
            if (start && range && start + range <= INT32_MAX && off <= INT32_MAX) {
                if (d->n == cap) {
                    cap = cap ? 2 * cap : 256;
                    struct ss_dframe_entry *ni = realloc(d->index, cap * sizeof(*ni));
                    if (!ni) break;
                    d->index = ni;
                }
                d->index[d->n].start = (int32_t)start;
                d->index[d->n].fde_off = (int32_t)off;
                d->n++;
                if (start < lo) lo = start;
                if (start + range > hi) hi = start + range;
            }
        }
        off = end;
    }
    if (!d->n) {
        ss_dframe_free(d);
        return NULL;
    }
    qsort(d->index, d->n, sizeof(*d->index), entry_cmp);
    d->lo = lo;
    d->hi = hi;
    return d;
}

const struct ss_dframe *ss_elf_debug_frame(struct ss_elf *e)
{
    if (e->dframe_state) return e->dframe;
    e->dframe_state = -1;
    size_t size = 0;
    const uint8_t *sec = ss_elf_section(e, ".debug_frame", &size, NULL);
    if (!sec) {
        struct ss_elf *dbg = ss_elf_debug(e);
        if (dbg) sec = ss_elf_section(dbg, ".debug_frame", &size, NULL);
    }
    if (!sec || size < 16) return NULL;
    e->dframe = build(sec, size);
    if (e->dframe) e->dframe_state = 1;
    return e->dframe;
}
