/* elf/elf_facts.c: the per-file facts the unwinder needs of an ELF image
 * (ss_elf_parse, elf.h): ELF header, PT_LOAD segments, RELRO, build-id and
 * the .eh_frame_hdr search table (its encoded pointers). */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "elf/elf.h"

/* ---- encoded pointers of .eh_frame_hdr ---- */
static int read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t field_vaddr,
                        uint64_t data_vaddr, uint64_t *out)
{
    const uint8_t *q = *p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        if (end - q < 8) return -1;
        memcpy(&v, q, 8);
        q += 8;
        break;
    case 0x03: { /* udata4 */
        uint32_t u;
        if (end - q < 4) return -1;
        memcpy(&u, q, 4);
        v = u;
        q += 4;
        break;
    }
    case 0x0b: { /* sdata4 */
        int32_t s;
        if (end - q < 4) return -1;
        memcpy(&s, q, 4);
        v = (uint64_t)(int64_t)s;
        q += 4;
        break;
    }
    default:
        return -1;
    }
    switch (enc & 0x70) {
    case 0x00:
        break;
    case 0x10:
        v += field_vaddr;
        break;
    case 0x30:
        v += data_vaddr;
        break;
    default:
        return -1;
    }
    *p = q;
    *out = v;
    return 0;
}

static void parse_eh_frame_hdr(struct ss_elf *e, const GElf_Phdr *ph)
{
    if (ph->p_offset > e->size || ph->p_filesz > e->size - ph->p_offset || ph->p_filesz < 4) return;
    const uint8_t *h = e->image + ph->p_offset, *end = h + ph->p_filesz;
    if (h[0] != 1) return;
    uint8_t ptr_enc = h[1], cnt_enc = h[2], tab_enc = h[3];
    const uint8_t *p = h + 4;
    uint64_t eh_frame, count;
    if (ptr_enc == 0xff || read_encoded(&p, end, ptr_enc, ph->p_vaddr + 4, ph->p_vaddr, &eh_frame))
        return;
    if (cnt_enc == 0xff ||
        read_encoded(&p, end, cnt_enc, ph->p_vaddr + (p - h), ph->p_vaddr, &count))
        return;
    e->eh_hdr_vaddr = ph->p_vaddr;
    e->eh_hdr_size = ph->p_filesz;
    e->eh_frame_vaddr = eh_frame;
    e->fde_count = count;
    /* the search table must be datarel|sdata4 and fit in the segment */
    e->eh_hdr_ok =
        tab_enc == 0x3b && (uint64_t)(p - h) == 12 && count > 0 && count <= (ph->p_filesz - 12) / 8;
}

static void note_build_id(struct ss_elf *e, const uint8_t *p, size_t len)
{
    size_t off = 0;
    while (off + 12 <= len) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, p + off, 4);
        memcpy(&descsz, p + off + 4, 4);
        memcpy(&type, p + off + 8, 4);
        /* sizes are 32-bit and untrusted: align in 64 bits, bound each step */
        size_t name_off = off + 12;
        uint64_t name_al = ((uint64_t)namesz + 3) & ~3ull, desc_al = ((uint64_t)descsz + 3) & ~3ull;
        if (name_al > len - name_off || desc_al > len - name_off - name_al) return;
        size_t desc_off = name_off + name_al;
        size_t next = desc_off + desc_al;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(p + name_off, "GNU", 4) &&
            descsz > 0) {
            e->build_id_len = descsz > 20 ? 20 : (uint8_t)descsz;
            memcpy(e->build_id, p + desc_off, e->build_id_len);
            return;
        }
        off = next;
    }
}

int ss_elf_parse(struct ss_elf *e, struct ss_err *err)
{
    Elf *elf = elf_memory((char *)e->image, e->size);
    if (!elf) {
        ss_err_set(err, -EINVAL, "%s: not an ELF file (%s)", e->path, elf_errmsg(-1));
        return -EINVAL;
    }
    e->elf = elf;
    GElf_Ehdr eh;
    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || gelf_getclass(elf) != ELFCLASS64) {
        ss_err_set(err, -EINVAL, "%s: not a 64-bit ELF file", e->path);
        return -EINVAL;
    }
    e->e_type = eh.e_type;
    e->e_machine = eh.e_machine;
    e->e_entry = eh.e_entry;
    size_t nph = 0;
    if (elf_getphdrnum(elf, &nph) != 0) nph = 0;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph)) continue;
        if (ph.p_type == PT_LOAD && e->nload < SS_ELF_MAX_LOAD) {
            struct ss_elf_seg *s = &e->load[e->nload++];
            s->vaddr = ph.p_vaddr;
            s->memsz = ph.p_memsz;
            s->offset = ph.p_offset;
            s->filesz = ph.p_filesz;
            s->flags = ph.p_flags;
        } else if (ph.p_type == PT_GNU_RELRO) {
            e->relro_vaddr = ph.p_vaddr;
            e->relro_memsz = ph.p_memsz;
        } else if (ph.p_type == PT_GNU_EH_FRAME) {
            parse_eh_frame_hdr(e, &ph);
        }
    }
    /* build-id: note sections first (debug files keep them), then PT_NOTE */
    Elf_Scn *scn = NULL;
    while (!e->build_id_len && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
        if (sh.sh_offset <= e->size && sh.sh_size <= e->size - sh.sh_offset)
            note_build_id(e, e->image + sh.sh_offset, sh.sh_size);
    }
    for (size_t i = 0; !e->build_id_len && i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE && ph.p_offset <= e->size &&
            ph.p_filesz <= e->size - ph.p_offset)
            note_build_id(e, e->image + ph.p_offset, ph.p_filesz);
    }
    return 0;
}
