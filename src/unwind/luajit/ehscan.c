/* unwind/luajit/ehscan.c: a minimal walk over an ELF .eh_frame section for
 * detection (detect.c, stfn.c): every FDE with its code range, its CFA
 * instructions and its CIE's augmentation. Not an unwinder: libunwind does
 * the real work (unwind/native*.c); this only reads what detection needs,
 * bounded by the section and tolerant of anything it does not know. */
#include <string.h>

#include "elf/elf.h"
#include "unwind/luajit/ehscan.h"

static int64_t read_enc(const uint8_t *p, uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x02: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 0x0a: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 0x03: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case 0x0b: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

#define MAX_CIES 64

struct cie {
    size_t off;
    uint8_t enc; /* FDE pointer encoding ('R'; absptr without it) */
    bool zaug;   /* FDEs carry an augmentation data length */
    char aug[8];
};

/* Parse the CIE at buf[start..end) (after the id); false if not usable. */
static bool parse_cie(const uint8_t *p, const uint8_t *e, struct cie *c)
{
    if (p >= e) return false;
    uint8_t ver = *p++;
    const char *aug = (const char *)p;
    size_t al = strnlen(aug, (size_t)(e - p));
    if (al >= sizeof(c->aug) || p + al >= e) return false;
    memcpy(c->aug, aug, al);
    c->aug[al] = 0;
    p += al + 1;
    ss_elf_uleb(&p, e); /* code alignment */
    ss_elf_uleb(&p, e); /* data alignment (sleb: skipped the same way) */
    if (ver == 1)
        p++;
    else
        ss_elf_uleb(&p, e); /* return address register */
    c->enc = 0;
    c->zaug = al && aug[0] == 'z';
    if (!c->zaug) return al == 0;
    ss_elf_uleb(&p, e); /* augmentation data length */
    for (size_t i = 1; i < al && p < e; i++) {
        switch (aug[i]) {
        case 'R':
            c->enc = *p++;
            break;
        case 'L':
            p++;
            break;
        case 'P': {
            unsigned ps = ss_elf_enc_size(*p);
            if (!ps) return false;
            p += 1 + ps;
            break;
        }
        case 'S':
        case 'B':
            break;
        default:
            return false;
        }
    }
    return ss_elf_enc_size(c->enc) != 0;
}

int ss_eh_each_fde(const uint8_t *buf, size_t len, uint64_t sh_addr, ss_eh_fde_fn fn, void *ctx)
{
    struct cie cies[MAX_CIES];
    unsigned ncie = 0;
    size_t off = 0;
    while (off + 8 <= len) {
        uint32_t l32;
        memcpy(&l32, buf + off, 4);
        if (l32 == 0) break;               /* terminator */
        if (l32 == 0xffffffffu) return -1; /* 64-bit DWARF: never emitted for x86-64 */
        size_t start = off + 4, end = start + l32;
        if (end > len || l32 < 4) return -1;
        uint32_t id;
        memcpy(&id, buf + start, 4);
        const uint8_t *p = buf + start + 4, *e = buf + end;
        if (id == 0) {
            struct cie c = {.off = off};
            if (parse_cie(p, e, &c) && ncie < MAX_CIES) cies[ncie++] = c;
        } else if (id <= start) {
            size_t cie_at = start - id;
            for (unsigned i = 0; i < ncie; i++) {
                const struct cie *c = &cies[i];
                if (c->off != cie_at) continue;
                unsigned es = ss_elf_enc_size(c->enc);
                if (p + 2 * es > e) break;
                int64_t begin = read_enc(p, c->enc);
                if ((c->enc & 0x70) == 0x10) /* pcrel */
                    begin += (int64_t)(sh_addr + (uint64_t)(p - buf));
                int64_t range = read_enc(p + es, c->enc & 0x0f);
                p += 2 * es;
                if (c->zaug) {
                    uint64_t n = ss_elf_uleb(&p, e);
                    if (n > (uint64_t)(e - p)) break;
                    p += n;
                }
                if (range > 0 && fn(ctx, (uint64_t)begin, (uint64_t)range, c->aug, p, e)) return 0;
                break;
            }
        }
        off = end;
    }
    return 0;
}
