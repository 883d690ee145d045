/* symbolize/symbolize.c: native frame names through the process view and
 * the files' symbol tables, a per-process address cache and, behind it, the
 * per-file one (filememo.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/elf.h"
#include "process/perfmap.h"
#include "process/process.h"
#include "symbolize/filememo.h"
#include "symbolize/symbolize.h"
#include "util/dmtable.h"

#define SC_BITS 11
#define SC_BITS_MIN 5

struct sc_ent {
    uint64_t key; /* ip | exact bit in bit 63 (user addresses never use it) */
    uint64_t gen;
    struct ss_frame f;
};

struct ss_symcache {
    struct sc_ent *e; /* direct-mapped, 1 << bits entries growing to SC_BITS */
    unsigned bits, misses;
    struct ss_perfmap *pm;            /* the process's perf map, or NULL */
    pid_t live_pid;                   /* live: re-read the map on a miss (0: never) */
    const struct ss_elf_cache *files; /* its names generation is part of the key */
};

void ss_symcache_set_files(struct ss_symcache *c, const struct ss_elf_cache *files)
{
    c->files = files;
}

void ss_symcache_set_perfmap(struct ss_symcache *c, struct ss_perfmap *pm, pid_t live_pid)
{
    c->pm = pm;
    c->live_pid = live_pid;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The perf map's name for look, re-reading a live process's map once on a
 * miss (rate limited: SS_PERFMAP_GAP_NS). */
static const char *jit_name(struct ss_symcache *c, uint64_t look, uint64_t *start)
{
    const char *n = ss_perfmap_find(c->pm, look, start);
    if (!n && c->live_pid && ss_perfmap_sync(c->pm, c->live_pid, mono_ns(), SS_PERFMAP_GAP_NS))
        n = ss_perfmap_find(c->pm, look, start);
    return n;
}

/* Anonymous executable memory (JIT code), which perf maps name. */
static bool jit_area(const struct ss_mapping *mp)
{
    const char *p = mp->d.path;
    return !mp->elf && (mp->d.prot & SS_MAP_X) &&
           (!p[0] || !strncmp(p, "[anon", 5) || !strncmp(p, "/memfd:", 7));
}

int ss_symcache_new(struct ss_symcache **out)
{
    struct ss_symcache *c = calloc(1, sizeof(*c));
    if (c) c->e = calloc(1u << SC_BITS_MIN, sizeof(*c->e));
    if (!c || !c->e) {
        free(c);
        *out = NULL;
        return -ENOMEM;
    }
    c->bits = SC_BITS_MIN;
    *out = c;
    return 0;
}

void ss_symcache_free(struct ss_symcache *c)
{
    if (c) free(c->e);
    free(c);
}

/* What file address look of elf is called, whatever process maps it: its
 * symbol (names interned in pool), a nameless symbol, the FDE it is in, or
 * nothing (filememo.c keeps the answer). */
static void file_name(struct ss_strpool *pool, struct ss_elf *elf, uint64_t look,
                      struct ss_fm_ent *m)
{
    const struct ss_sym *s = ss_elf_symbol(elf, look);
    uint64_t lo, hi;
    if (s && !s->name[0]) {
        m->kind = SS_FM_BLANK;
    } else if (s) {
        const char *d = ss_demangle(pool, s->name);
        m->kind = SS_FM_SYM;
        m->name = d ? d : ss_strpool_intern(pool, s->name);
        m->sysname = d ? ss_strpool_intern(pool, s->name) : NULL;
        m->start = s->addr;
    } else if (ss_elf_fde_range(elf, look, &lo, &hi)) {
        m->kind = SS_FM_FDE;
        m->start = lo;
    }
}

static void resolve(struct ss_symcache *c, struct ss_strpool *pool, struct ss_proc *proc,
                    uint64_t ip, bool exact, struct ss_frame *out)
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
    uint64_t jstart = 0;
    const char *pn = c && c->pm && jit_area(mp) ? jit_name(c, look, &jstart) : NULL;
    if (pn && jstart <= ip) { /* JIT code named by the perf map */
        out->name = ss_strpool_intern(pool, pn);
        out->sym_offset = ip - jstart;
        return;
    }
    if (!mp->elf) return;
    bool hit = false;
    struct ss_fm_ent none = {0},
                     *m = ss_filememo_slot(mp->elf, look - mp->bias,
                                           ss_elf_cache_names_gen(mp->elf->cache), pool, &hit);
    if (!m) m = &none;
    if (!hit) file_name(pool, mp->elf, look - mp->bias, m);
    if (m->kind == SS_FM_SYM) {
        out->name = m->name;
        out->system_name = m->sysname;
        out->sym_offset = ip - (m->start + (uint64_t)mp->bias);
        return;
    }
    if (m->kind != SS_FM_FDE || !out->module) return;
    /* no symbol: one name per function, MODULE+0xSTART (file offset of the
     * start of its FDE), so that the samples of one function aggregate */
    uint64_t start = m->start + (uint64_t)mp->bias;
    if (start > ip || ip - start > out->offset) return;
    uint64_t fileoff = out->offset - (ip - start);
    if (m->name && m->module == out->module && m->fileoff == fileoff) {
        out->name = m->name;
    } else {
        const char *base = strrchr(out->module, '/');
        base = base && base[1] ? base + 1 : out->module;
        char buf[320];
        snprintf(buf, sizeof(buf), "%.280s+0x%llx", base, (unsigned long long)fileoff);
        out->name = ss_strpool_intern(pool, buf);
        m->name = out->name;
        m->module = out->module;
        m->fileoff = fileoff;
    }
    out->sym_offset = ip - start;
}

void ss_symbolize_native(struct ss_symcache *c, struct ss_strpool *pool, struct ss_proc *proc,
                         uint64_t ip, bool exact, struct ss_frame *out)
{
    if (!c) {
        resolve(NULL, pool, proc, ip, exact, out);
        return;
    }
    uint64_t key = ip | (exact ? 1ull << 63 : 0);
    struct sc_ent *e = &c->e[ss_dm_slot(key, c->bits)];
    uint64_t gen = ss_proc_generation(proc) ^ ((uint64_t)ss_perfmap_version(c->pm) << 40) ^
                   (ss_elf_cache_names_gen(c->files) << 24);
    if (e->key != key || e->gen != gen) {
        if (++c->misses > (1u << c->bits) && c->bits < SC_BITS) {
            void *t = c->e; /* as many misses as entries: grow */
            ss_dm_grow(&t, &c->bits, &c->misses, SC_BITS, sizeof(*c->e));
            c->e = t;
            e = &c->e[ss_dm_slot(key, c->bits)];
        }
        resolve(c, pool, proc, ip, exact, &e->f);
        e->key = key;
        e->gen = gen;
    }
    *out = e->f;
}

bool ss_symbolize_rename(struct ss_strpool *pool, struct ss_elf *elf, const struct ss_frame *in,
                         struct ss_frame *out)
{
    if (in->kind != SS_FRAME_NATIVE || !elf) return false;
    uint64_t off = in->name && in->sym_offset ? in->offset - 1 : in->offset;
    const struct ss_elf_seg *seg = ss_elf_seg_for_offset(elf, off, 1);
    if (!seg || off < seg->offset) return false;
    uint64_t look = seg->vaddr + (off - seg->offset), ip = look + (off != in->offset);
    const struct ss_sym *s = ss_elf_symbol(elf, look);
    if (!s || !s->name[0]) return false;
    *out = *in;
    const char *d = ss_demangle(pool, s->name);
    out->name = d ? d : ss_strpool_intern(pool, s->name);
    out->system_name = d ? ss_strpool_intern(pool, s->name) : NULL;
    out->sym_offset = ip - s->addr;
    return out->name != NULL;
}
