/* unwind/luajit/memosig.c: the part of a runtime's state that a walk's
 * result may depend on beyond its inputs (ss_lj_runtime_state), for replay's
 * memo of whole walks (unwind/memo.c), written out word by word (compared
 * exactly, not hashed): the layout and the global states
 * verified, the counters that turn walking off, the known traces and the
 * bases and stacks remembered from earlier walks, the GC generation that
 * lets cached function headers be trusted. The caches proper (prototypes,
 * instructions, strings, function to prototype) are left out: what they
 * hold is checked against the sample (or proven unchanged) on every use. */
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/trace_int.h"

size_t ss_lj_runtime_state(const struct ss_lj_runtime *rt, uint64_t *w)
{
    size_t n = 0;
    w[n++] = (uint64_t)(uintptr_t)rt->lay;
    w[n++] = (uint64_t)rt->lay_derived | (uint64_t)rt->disabled << 1 | (uint64_t)rt->ngs << 8;
    w[n++] = (uint64_t)rt->verify_fail | (uint64_t)rt->bad_states << 32;
    for (unsigned i = 0; i < LJ_MAX_GS; i++)
        w[n++] = i < rt->ngs ? rt->gs[i] : 0;
    const struct lj_tcache *tc = rt->tc;
    w[n++] = (uint64_t)(uintptr_t)tc;
    w[n++] = tc ? tc->n | (uint64_t)tc->token << 32 : 0;
    w[n++] = tc ? (uint64_t)(uintptr_t)tc->t : 0;
    w[n++] = tc ? tc->refresh_ns : 0;
    w[n++] = tc ? tc->arr_G : 0;
    w[n++] = tc ? tc->arr : 0;
    for (unsigned i = 0; i < LJ_TBASE_SLOTS; i++) {
        w[n++] = rt->tbase[i].L;
        w[n++] = rt->tbase[i].base;
    }
    for (unsigned i = 0; i < LJ_LSTACK_SLOTS; i++) {
        w[n++] = rt->lstack[i].L;
        w[n++] = rt->lstack[i].stack;
    }
    w[n++] = rt->gcp.gen;
    return n;
}

_Static_assert(3 + LJ_MAX_GS + 6 + 2 * LJ_TBASE_SLOTS + 2 * LJ_LSTACK_SLOTS + 1 <=
                   SS_LJ_STATE_WORDS,
               "ss_lj_runtime_state writes at most SS_LJ_STATE_WORDS words");
