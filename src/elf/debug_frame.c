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

/* The record (CIE or FDE) at off, entirely inside the section: header
 * size, id size, total end and id. The section is untrusted: every length
 * is checked before use. */
static bool record_at(const uint8_t *sec, size_t size, uint64_t off, size_t *hdr, size_t *idsz,
                      size_t *end, uint64_t *id)
{
    if (off > size || size - off < 4) return false;
    uint32_t len32;
    memcpy(&len32, sec + off, 4);
    uint64_t len = len32;
    *hdr = 4;
    *idsz = 4;
    if (len32 == 0xffffffffu) {
        if (size - off < 12) return false;
        memcpy(&len, sec + off + 4, 8);
        *hdr = 12;
        *idsz = 8;
    }
    if (len < *idsz || len > size - off - *hdr) return false;
    *end = off + *hdr + len;
    *id = 0;
    memcpy(id, sec + off + *hdr, *idsz);
    return true;
}

static bool is_cie_id(uint64_t id, size_t idsz)
{
    return idsz == 4 ? id == 0xffffffffu : id == UINT64_MAX;
}

/* Address size of the CIE at cie_off (version 4 records it, default 8), 0
 * when there is no well-formed CIE there. */
static unsigned cie_addr_size(const uint8_t *sec, size_t size, uint64_t cie_off)
{
    size_t hdr, idsz, end;
    uint64_t id;
    if (!record_at(sec, size, cie_off, &hdr, &idsz, &end, &id) || !is_cie_id(id, idsz)) return 0;
    const uint8_t *q = sec + cie_off + hdr + idsz, *e = sec + end;
    if (q >= e) return 0;
    uint8_t version = *q++;
    while (q < e && *q) /* augmentation string */
        q++;
    if (q >= e) return 0;
    q++;
    if (version >= 4) return q < e ? *q : 0;
    return 8;
}

static struct ss_dframe *build(const uint8_t *orig, size_t size)
{
    struct ss_dframe *d = calloc(1, sizeof(*d));
    if (!d) return NULL;
    /* libunwind reads the section word by word (aligned) and scans strings
     * and LEB128s: keep zero padding after it in our own copy */
    d->owned = calloc(1, size + 16);
    if (!d->owned) {
        free(d);
        return NULL;
    }
    memcpy(d->owned, orig, size);
    const uint8_t *sec = d->owned;
    d->sec = sec;
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
        size_t hdr, idsz, end;
        uint64_t id;
        if (!record_at(sec, size, off, &hdr, &idsz, &end, &id)) break;
        if (!is_cie_id(id, idsz)) {
            /* an FDE: its CIE pointer must lead to a well-formed CIE, since
             * libunwind follows it without bounds checks */
            unsigned asz = cie_addr_size(sec, size, id);
            const uint8_t *p = sec + off + hdr + idsz;
            uint64_t start = 0, range = 0;
            if ((asz == 8 || asz == 4) && (size_t)(sec + end - p) >= 2u * asz) {
                memcpy(&start, p, asz);
                memcpy(&range, p + asz, asz);
            }
            if (start && range && start <= INT32_MAX && range <= INT32_MAX - start &&
                off <= INT32_MAX) {
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
