/* symbolize/filememo.c: the names of one ELF file's addresses, kept with the
 * file (its sym_priv slot, freed with it) for every process that maps it.
 * The per-process cache (symbolize.c) starts empty for each new process, so
 * on a host where compilers, shells and test binaries start again and again
 * every first sample of a process searched the file's symbols, demangled and
 * interned the names (or looked up the FDE) anew. Direct-mapped by file
 * address, from 64 entries growing fourfold up to 1024 as its misses pass
 * its size (a file a few addresses of are seen stays small). The memo
 * answers for one string pool and one names generation of the file cache (a
 * debug file that arrives renames): another one empties it. A pool is
 * known by its address and its id (a replay's runs share the files, and a
 * run's new pool may sit where the last run's freed one did). */
#include <stdlib.h>

#include "elf/elf.h"
#include "symbolize/filememo.h"
#include "symbolize/symbolize.h"
#include "util/dmtable.h"

#define FM_BITS_MIN 6
#define FM_BITS_MAX 10

struct filememo {
    struct ss_fm_ent *e;
    unsigned bits, misses;
    uint64_t gen;
    const struct ss_strpool *pool;
    uint64_t pool_id; /* the pool's identity: its address may be a new pool's */
};

static void fm_free(void *p)
{
    struct filememo *m = p;
    if (m) free(m->e);
    free(m);
}

static struct filememo *fm_get(struct ss_elf *e)
{
    if (e->sym_priv) return e->sym_priv;
    struct filememo *m = calloc(1, sizeof(*m));
    if (m) m->e = calloc(1u << FM_BITS_MIN, sizeof(*m->e));
    if (!m || !m->e) {
        fm_free(m);
        return NULL;
    }
    m->bits = FM_BITS_MIN;
    e->sym_priv = m;
    e->sym_priv_free = fm_free;
    return m;
}

struct ss_fm_ent *ss_filememo_slot(struct ss_elf *e, uint64_t look, uint64_t gen,
                                   const struct ss_strpool *pool, bool *hit)
{
    *hit = false;
    struct filememo *m = fm_get(e);
    if (!m) return NULL;
    if (m->gen != gen || m->pool != pool || m->pool_id != ss_strpool_id(pool)) {
        for (size_t i = 0; i < (size_t)1 << m->bits; i++)
            m->e[i].key = 0;
        m->gen = gen;
        m->pool = pool;
        m->pool_id = ss_strpool_id(pool);
    }
    uint64_t key = look + 1; /* never 0 (an empty entry) */
    struct ss_fm_ent *x = &m->e[ss_dm_slot(key, m->bits)];
    if (x->key == key) {
        *hit = true;
        return x;
    }
    if (++m->misses > (1u << m->bits) && m->bits < FM_BITS_MAX) {
        void *t = m->e;
        ss_dm_grow(&t, &m->bits, &m->misses, FM_BITS_MAX, sizeof(*m->e));
        m->e = t;
        x = &m->e[ss_dm_slot(key, m->bits)];
    }
    *x = (struct ss_fm_ent){.key = key};
    return x;
}
