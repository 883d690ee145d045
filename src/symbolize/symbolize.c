/* symbolize/symbolize.c: native frame names through the process view and
 * the files' symbol tables and a per-process address cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "process/process.h"
#include "symbolize/symbolize.h"

#define SC_BITS 11

struct sc_ent {
    uint64_t key; /* ip | exact bit in bit 63 (user addresses never use it) */
    uint64_t gen;
    struct ss_frame f;
};

struct ss_symcache {
    struct sc_ent e[1u << SC_BITS];
};

int ss_symcache_new(struct ss_symcache **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void ss_symcache_free(struct ss_symcache *c)
{
    free(c);
}

static void resolve(struct ss_strpool *pool, struct ss_proc *proc, uint64_t ip, bool exact,
                    struct ss_frame *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = SS_FRAME_NATIVE;
    out->addr = ip;
    uint64_t look = exact ? ip : ip - 1;
    const struct ss_mapping *mp = ss_proc_find_cached(proc, look);
    if (!mp) return;
    out->offset = ip - mp->d.start + mp->d.offset;
    if (mp->d.path[0]) out->module = ss_strpool_intern(pool, mp->d.path);
    out->build_id_len = mp->d.build_id_len;
    memcpy(out->build_id, mp->d.build_id, mp->d.build_id_len);
    if (!mp->elf) return;
    const struct ss_sym *s = ss_elf_symbol(mp->elf, look - mp->bias);
    if (s && !s->name[0]) return; /* a range that must stay MODULE+0xOFFSET */
    if (s) {
        const char *d = ss_demangle(pool, s->name);
        out->name = d ? d : ss_strpool_intern(pool, s->name);
        if (d) out->system_name = ss_strpool_intern(pool, s->name);
        out->sym_offset = ip - (s->addr + (uint64_t)mp->bias);
        return;
    }
    /* no symbol: one name per function, MODULE+0xSTART (file offset of the
     * start of its FDE), so that the samples of one function aggregate */
    uint64_t lo, hi;
    if (!out->module || !ss_elf_fde_range(mp->elf, look - mp->bias, &lo, &hi)) return;
    uint64_t start = lo + (uint64_t)mp->bias;
    if (start > ip || ip - start > out->offset) return;
    const char *base = strrchr(out->module, '/');
    base = base && base[1] ? base + 1 : out->module;
    char buf[320];
    snprintf(buf, sizeof(buf), "%.280s+0x%llx", base,
             (unsigned long long)(out->offset - (ip - start)));
    out->name = ss_strpool_intern(pool, buf);
    out->sym_offset = ip - start;
}

void ss_symbolize_native(struct ss_symcache *c, struct ss_strpool *pool, struct ss_proc *proc,
                         uint64_t ip, bool exact, struct ss_frame *out)
{
    if (!c) {
        resolve(pool, proc, ip, exact, out);
        return;
    }
    uint64_t key = ip | (exact ? 1ull << 63 : 0);
    struct sc_ent *e = &c->e[(key * 0x9e3779b97f4a7c15ull) >> (64 - SC_BITS)];
    uint64_t gen = ss_proc_generation(proc);
    if (e->key != key || e->gen != gen) {
        resolve(pool, proc, ip, exact, &e->f);
        e->key = key;
        e->gen = gen;
    }
    *out = e->f;
}
