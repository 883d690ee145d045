/* unwind/luajit/gc.c: GC generations, the proof that the objects a sample
 * names are still the ones its walk reads.
 *
 * A sample's Lua stack comes from its windows (sample time); the function
 * and prototype headers its frames point to are read from the live process
 * afterwards. Those objects do not change while they are alive, but the
 * collector may free one after the sample and reuse its memory before the
 * walk reads it: a frame named from the wrong object.
 *
 * When can an object that is reachable at the sample be freed? A sweep
 * frees only objects left white by an atomic phase (lj_gc.c atomic()), so
 * only after an atomic phase that comes after the sample. Each atomic phase
 * flips gc.currentwhite and sets gc.estimate afresh; between two of them the
 * state moves one way: sweepstring, sweep, finalize, pause, propagate,
 * atomic (lj_gc_fullgc from the middle jumps back to sweepstring: counted
 * as a move backwards), and estimate only shrinks (sweep, finalize). So the
 * collector's bytes in the sample's copy of global_State and in a live read
 * after all of a walk's object reads prove that no atomic phase ran between
 * when: the same white, the state not moved backwards, estimate not grown
 * (equal once both are past the sweep). The blind spot: two or more full
 * cycles in between that end with the same white, an equal or smaller
 * estimate and a later state.
 *
 * Generations: headers proved while the collector's bytes stay exactly the
 * same (no allocation since) are trusted without a read for later samples
 * that show the same bytes (the caches of frames.c and runtime.c); any
 * change starts a new generation (ss_lj_gc_current).
 * gc.total's offset is derived from the VM's code (derive.c) and in the
 * tables (layout.c); GCState's field order is the same in every 2.1 tree
 * (Debian 12, Debian 13/OpenResty, Tarantool 2.6): threshold, currentwhite,
 * state, ..., estimate at 80 (GC64) / 44 bytes after total. Without it there
 * is no proof and nothing is trusted. */
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"

/* Bytes from gc.total through gc.estimate. */
static size_t ep_len(const struct lj_layout *lay)
{
    return lay && lay->G_gc_total ? (lay->gc64 ? 88u : 48u) : 0;
}

static uint64_t est_of(const struct lj_layout *lay, const uint8_t *ep)
{
    return lay->gc64 ? lj_u64(ep + 80) : lj_u32(ep + 44);
}

/* The state's place between two atomic phases (GCSpause .. GCSfinalize are
 * 0..5): sweepstring, sweep, finalize, pause, propagate, atomic. */
static unsigned rank(uint8_t state)
{
    static const uint8_t r[6] = {3, 4, 5, 0, 1, 2};
    return state < 6 ? r[state] : 99;
}

/* No atomic phase between the bytes a (earlier) and b (later)? */
static bool no_atomic(const struct lj_layout *lay, const uint8_t *a, const uint8_t *b)
{
    unsigned w = lay->gc64 ? 16 : 8; /* currentwhite, then state */
    unsigned ra = rank(a[w + 1]), rb = rank(b[w + 1]);
    uint64_t ea = est_of(lay, a), eb = est_of(lay, b);
    if (a[w] != b[w] || ra > 5 || rb > 5 || rb < ra) return false;
    return ra >= 3 ? ea == eb : eb <= ea;
}

size_t ss_lj_gc_sample(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                       uint8_t *ep)
{
    size_t n = ep_len(rt->lay);
    const void *p = n && G ? ss_mem_peek_sample(m, G + rt->lay->G_gc_total, n) : NULL;
    if (!p) return 0;
    memcpy(ep, p, n);
    return n;
}

struct ss_iov ss_lj_gc_iov(const struct ss_lj_runtime *rt, uint64_t G, uint8_t *dst)
{
    return (struct ss_iov){
        .addr = G + rt->lay->G_gc_total, .dst = dst, .len = ep_len(rt->lay), .live = true};
}

/* A generation lasts only while the collector's bytes stay the same to the
 * byte (no allocation at all since its proof): LuaJIT keeps no count of GC
 * cycles, and two whole cycles between two looks can end with the same
 * white, state and estimate (a loop calling collectgarbage() at the same
 * point: rl_torn). Any allocation starts a new generation, whose headers
 * are read and proved again; and a generation ends at the first look (a
 * sample, or the start of a live walk) that shows other bytes: a program
 * whose heap after each full cycle is the same to the byte (rl_torn again:
 * the same allocations every round, at the same addresses) comes back to
 * the bytes of an old generation with other objects where its headers
 * were. Between two looks (a sample period) that cannot be told. */
bool ss_lj_gc_current(struct ss_lj_runtime *rt, const uint8_t *ep, size_t n)
{
    if (!n || !rt->gcp.gen) return false;
    if (!memcmp(rt->gcp.ep, ep, n)) return true;
    rt->gcp.gen = 0; /* bytes that left the generation's never prove it again */
    return false;
}

bool ss_lj_gc_prove(struct ss_lj_runtime *rt, const uint8_t *sample, const uint8_t *live, size_t n)
{
    if (!no_atomic(rt->lay, sample, live)) {
        rt->st.gc_moved++;
        rt->gcp.gen = 0; /* the last proof says nothing about what ran since */
        return false;
    }
    rt->st.gc_proved++;
    if (!rt->gcp.gen || memcmp(rt->gcp.ep, live, n)) rt->gcp.gen = ++rt->gcp.last;
    memcpy(rt->gcp.ep, live, n);
    return true;
}
