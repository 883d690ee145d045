/* unwind/luajit/gc.c: GC generations, the proof that the objects a sample
 * names are still the ones its walk reads.
 *
 * A sample's Lua stack comes from its windows (sample time); the function
 * and prototype headers its frames point to are read from the live process
 * afterwards. Those objects do not change while they are alive, but the
 * collector may free one after the sample and reuse its memory before the
 * walk reads it: a frame named from the wrong object.
 *
 * The proof: the collector's bytes (gc.total .. gc.estimate) in the sample's
 * copy of global_State and in a live read after all of a walk's object
 * reads are identical: nothing was allocated or collected in between, so
 * nothing the sample names was freed. (A sweep frees only what an atomic
 * phase left white, and each atomic phase flips currentwhite and sets
 * estimate afresh; but a rule built on that, no atomic phase between,
 * still let rl_torn's JIT case name 1 frame in ~4000 from another
 * generation's prototype: LuaJIT keeps no count of GC cycles, and whole
 * cycles can leave the same white, state and estimate behind.) When the
 * bytes differ the walk is made from the live stack (frames.c).
 *
 * Generations: headers proved while the collector's bytes stay exactly the
 * same (no allocation since) are trusted without a read for later samples
 * that show the same bytes (the caches of frames.c and runtime.c); any
 * change starts a new generation (ss_lj_gc_current).
 * gc.total's offset is derived from the VM's code (derive.c) and in the
 * tables (layout.c); GCState's field order is the same in every 2.1 tree
 * (Debian 12, Debian 13/OpenResty, Tarantool 2.6): estimate ends 88 (GC64)
 * / 48 bytes after total. Without it there is no proof and nothing is
 * trusted. */
#include <string.h>

#include "unwind/luajit/lj_internal.h"

/* Bytes from gc.total through gc.estimate. */
static size_t ep_len(const struct lj_layout *lay)
{
    return lay && lay->G_gc_total ? (lay->gc64 ? 88u : 48u) : 0;
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
 * are read and proved again. */
bool ss_lj_gc_current(const struct ss_lj_runtime *rt, const uint8_t *ep, size_t n)
{
    return n && rt->gcp.gen && !memcmp(rt->gcp.ep, ep, n);
}

bool ss_lj_gc_prove(struct ss_lj_runtime *rt, const uint8_t *sample, const uint8_t *live, size_t n)
{
    if (memcmp(sample, live, n)) {
        rt->st.gc_moved++;
        rt->gcp.gen = 0;
        return false;
    }
    rt->st.gc_proved++;
    if (!rt->gcp.gen || memcmp(rt->gcp.ep, live, n)) rt->gcp.gen = ++rt->gcp.last;
    memcpy(rt->gcp.ep, live, n);
    return true;
}
