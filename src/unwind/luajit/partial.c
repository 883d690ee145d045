/* unwind/luajit/partial.c: the Lua frames a sample still proves when the
 * Lua stack moved on before the walk.
 *
 * The walk reads the Lua stack milliseconds after the sample; when the
 * sampled function has returned meanwhile (a short call in a loop, a trace
 * that exited), its frame and often its callers are gone and frames.c
 * rejects the walk. What the sample itself holds is still exact: the PC
 * register (interpreter: the running prototype and line; KBASE = pt->k
 * confirms it) or the trace snapshot (every inlined frame and the frame at
 * jit_base, with lines). Those frames are emitted under one pseudo frame
 * "[Lua callers unknown]" instead of dropping the sample: per-function
 * shares stay unbiased against short-lived functions, and no frame is
 * invented (the callers are not guessed).
 *
 * A prototype is found by its bytecode range among the prototypes the
 * runtime has cached (any function sampled before) and re-validated by a
 * header read (ss_lj_proto); one found by pc that no earlier GC proof saw
 * needs a proof from the sample (or the start) to after its read (gc.c).
 * The name of the outermost frame, which has no
 * caller to derive it from, is the last name a full walk gave that
 * prototype (splice.c records it), else "anonymous". */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "unwind/luajit/lj_internal.h"

/* Cached prototype whose bytecode holds pc (next-instruction convention,
 * or exactly the first instruction), validated now; NULL if none. */
static struct lj_proto *proto_at(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pc,
                                 uint64_t kbase)
{
    const struct lj_layout *lay = rt->lay;
    for (unsigned w = 0; w < LJ_PROTO_SLOTS / 64; w++) /* the slots ever filled, in order */
        for (uint64_t b = rt->pused[w]; b; b &= b - 1) {
            const struct lj_proto *p = &rt->protos[w * 64 + (unsigned)__builtin_ctzll(b)];
            uint64_t bc = p->addr + lay->pt_size;
            if (!p->addr || pc < bc || pc > bc + (uint64_t)p->sizebc * 4) continue;
            if (kbase && lj_ref(lay, p->blob + lay->pt_k) != kbase) continue;
            return ss_lj_proto(rt, m, p->addr, NULL);
        }
    return NULL;
}

static void add(struct lj_walk *w, struct lj_proto *p, uint64_t pc, uint64_t link,
                const struct lj_layout *lay)
{
    struct lj_wframe *wf = &w->f[w->n++];
    memset(wf, 0, sizeof(*wf));
    wf->pt = p->addr;
    wf->proto = p;
    wf->fnpc = p->addr + lay->pt_size;
    wf->pc = pc == wf->fnpc ? pc + 4 : pc; /* entering: at FUNCF */
    wf->ftsz = (int64_t)link;
}

int ss_lj_partial(struct ss_lj_runtime *rt, struct ss_mem *m, const struct ss_lj_tsample *ts,
                  uint64_t pc, uint64_t kbase, uint64_t cframe, struct lj_walk *w)
{
    const struct lj_layout *lay = rt->lay;
    memset(w, 0, offsetof(struct lj_walk, f));
    if (!lay || rt->disabled) return -ENOENT;
    uint8_t ep[88];
    size_t elen = !ts && rt->ngs ? ss_lj_gc_start(rt, m, rt->gs[0], ep) : 0;
    if (ts) { /* trace: the snapshot's frames, innermost first */
        for (uint32_t k = ts->nframes; k-- > 0 && w->n < LJ_MAX_FRAMES;) {
            struct lj_proto *p = ss_lj_proto(rt, m, ts->pt[k], NULL);
            if (!p) return -ESTALE;
            add(w, p, ts->pc[k], k ? ts->link[k] : 0, lay);
        }
    } else {
        struct lj_proto *p = pc ? proto_at(rt, m, pc, kbase) : NULL;
        if (!p) return -ENOENT;
        add(w, p, pc, 0, lay);
    }
    /* The prototype found by pc may have been freed before its read (gc.c)
     * unless an earlier proof saw it (its header and chunk name were just
     * matched). A trace's are its constants: the trace, validated live,
     * keeps them alive. */
    if (!ts && !w->f[0].proto->gcgen && !ss_lj_gc_end(rt, m, rt->gs[0], ep, elen)) {
        w->f[0].proto->cnslen = 0;
        w->n = 0;
        return -ESTALE;
    }
    w->nsegs = 1;
    w->seg_cframe[0] = cframe;
    return 0;
}
