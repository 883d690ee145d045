/* elf/fde.c: the code range of the .eh_frame FDE that covers an address,
 * through the .eh_frame_hdr search table: where a function without a symbol
 * starts and ends (symbolize/, and the sizes of synthetic symbols). Reads
 * only the FDE's header and its CIE's augmentation, bounded by the file. */
#include <string.h>

#include "elf/elf.h"

uint64_t ss_elf_uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    unsigned sh = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (sh < 64) v |= (uint64_t)(b & 0x7f) << sh;
        sh += 7;
        if (!(b & 0x80)) return v;
    }
    return v;
}

unsigned ss_elf_enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c:
        return 8;
    case 0x02:
    case 0x0a:
        return 2;
    case 0x03:
    case 0x0b:
        return 4;
    default:
        return 0;
    }
}

/* The pointer encoding ('R') of the CIE at vaddr cie; 0xff when unknown. */
static uint8_t cie_encoding(const struct ss_elf *e, uint64_t cie)
{
    const uint8_t *h = ss_elf_vaddr_ptr(e, cie, 9);
    uint32_t len;
    if (!h) return 0xff;
    memcpy(&len, h, 4);
    if (len < 5 || len == 0xffffffffu) return 0xff;
    const uint8_t *p = ss_elf_vaddr_ptr(e, cie, 4 + (size_t)len);
    if (!p) return 0xff;
    const uint8_t *end = p + 4 + len;
    p += 8; /* length, CIE id */
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    const uint8_t *z = memchr(p, 0, end - p);
    if (!z || aug[0] != 'z') return aug[0] ? 0xff : 0x00;
    p = z + 1;
    ss_elf_uleb(&p, end); /* code alignment */
    ss_elf_uleb(&p, end); /* data alignment (sleb; only skipped) */
    if (version == 1)
        p++;
    else
        ss_elf_uleb(&p, end);
    ss_elf_uleb(&p, end); /* augmentation length */
    for (const char *a = aug + 1; *a && p < end; a++) {
        if (*a == 'R') return *p;
        if (*a == 'L') {
            p++;
        } else if (*a == 'P') {
            unsigned n = ss_elf_enc_size(*p);
            if (!n) return 0xff;
            p += 1 + n;
        } else if (*a != 'S') {
            return 0xff;
        }
    }
    return 0x00;
}

bool ss_elf_fde_range(const struct ss_elf *e, uint64_t vaddr, uint64_t *lo, uint64_t *hi)
{
    if (!e->eh_hdr_ok) return false;
    const uint8_t *t = ss_elf_vaddr_ptr(e, e->eh_hdr_vaddr + 12, e->fde_count * 8);
    if (!t) return false;
    size_t a = 0, b = e->fde_count; /* first entry with start > vaddr */
    while (a < b) {
        size_t m = (a + b) / 2;
        int32_t s;
        memcpy(&s, t + 8 * m, 4);
        if (e->eh_hdr_vaddr + (int64_t)s <= vaddr)
            a = m + 1;
        else
            b = m;
    }
    if (!a) return false;
    int32_t s, f;
    memcpy(&s, t + 8 * (a - 1), 4);
    memcpy(&f, t + 8 * (a - 1) + 4, 4);
    uint64_t start = e->eh_hdr_vaddr + (int64_t)s, fde = e->eh_hdr_vaddr + (int64_t)f;
    const uint8_t *h = ss_elf_vaddr_ptr(e, fde, 8);
    if (!h) return false;
    uint32_t len, cid;
    memcpy(&len, h, 4);
    memcpy(&cid, h + 4, 4);
    if (len == 0xffffffffu || len < 8 || !cid) return false;
    uint8_t enc = cie_encoding(e, fde + 4 - cid);
    unsigned n = enc == 0xff ? 0 : ss_elf_enc_size(enc);
    if (!n || 8 + 2 * (uint64_t)n > 4 + (uint64_t)len) return false;
    const uint8_t *r = ss_elf_vaddr_ptr(e, fde + 8 + n, n);
    if (!r) return false;
    uint64_t range = 0;
    memcpy(&range, r, n); /* little-endian, unsigned */
    if (vaddr >= start + range) return false;
    *lo = start;
    *hi = start + range;
    return true;
}
