/* unwind/luajit/resolve.c: what the frames of a walk run: their function
 * headers, and in the same batch the prototype header each function had
 * last time (fn -> pt cache, checked against fn->pc read in that batch);
 * prototype headers not guessed right take a second batch.
 *
 * With the sample's GC state (gc.c): headers proved in the generation the
 * sample still shows come from the cache without a read, and the reads made
 * end with the live GC state; if that moved since the sample, the objects
 * may have been freed and reused: -ECANCELED (the walk is made again from
 * the live stack). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/lj_internal.h"

void *ss_lj_scratch(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return *buf;
    uint8_t *b = realloc(*buf, n);
    if (!b) return NULL;
    *buf = b;
    *cap = n;
    return b;
}

/* fn's slot of the function-header cache (direct-mapped). */
static struct lj_fnpt *fnpt_slot(struct ss_lj_runtime *rt, uint64_t fn)
{
    return &rt->fnpt[(fn >> 4) % LJ_FNPT_SLOTS];
}

int ss_lj_resolve(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_walk *w, bool live)
{
    const struct lj_layout *lay = rt->lay;
    struct ss_iov iov[2 * LJ_MAX_FRAMES];
    uint8_t *buf = ss_lj_scratch(&rt->hbuf, &rt->hbuf_cap, 112 * 2 * (w->n ? w->n : 1));
    if (!buf) return -ENOMEM;
    uint8_t(*hb)[112] = (uint8_t(*)[112])buf;
    uint8_t(*pb)[112] = hb + w->n;
    int guess[LJ_MAX_FRAMES], at[LJ_MAX_FRAMES];
    uint8_t sep[88], lep[88];
    size_t elen = live ? 0 : ss_lj_gc_sample(rt, m, w->G, sep);
    bool trust = ss_lj_gc_current(rt, sep, elen);
    unsigned nv = 0, nread = 0;
    for (unsigned i = 0; i < w->n; i++) {
        struct lj_wframe *wf = &w->f[i];
        const struct lj_fnpt *c = fnpt_slot(rt, wf->fn);
        at[i] = -1;
        if (trust && c->fn == wf->fn && c->gen == rt->gcp.gen) {
            wf->ffid = c->ffid;
            wf->fnpc = c->fnpc;
            wf->cf = c->cf;
            if (wf->ffid == 0 && wf->fnpc >= lay->pt_size + 4096) {
                wf->pt = wf->fnpc - lay->pt_size;
                wf->proto = ss_lj_proto_trusted(rt, wf->pt);
            }
            if (wf->ffid != 0 || wf->proto) {
                rt->st.hdr_trusted++;
                continue;
            }
        }
        at[i] = (int)nv;
        iov[nv++] = (struct ss_iov){.addr = wf->fn, .dst = hb[i], .len = lay->fn_size};
    }
    for (unsigned i = 0; i < w->n; i++) {
        const struct lj_fnpt *c = fnpt_slot(rt, w->f[i].fn);
        guess[i] = -1;
        if (at[i] >= 0 && c->fn == w->f[i].fn && c->pt) {
            guess[i] = (int)nv;
            iov[nv++] = (struct ss_iov){.addr = c->pt, .dst = pb[i], .len = lay->pt_size};
        }
    }
    int rc = 0;
    if (nv) {
        rt->st.rounds++;
        rc = ss_mem_readv(m, iov, (int)nv);
        if (rc) goto out;
    }
    nread = nv;
    unsigned np = 0;
    uint32_t idx[LJ_MAX_FRAMES];
    for (unsigned i = 0; i < w->n; i++) {
        struct lj_wframe *wf = &w->f[i];
        if (at[i] < 0) continue;
        if (iov[at[i]].err || hb[i][lay->gct] != LJ_GCT_FUNC) {
            rc = -EINVAL;
            goto out;
        }
        wf->ffid = hb[i][lay->fn_ffid];
        wf->fnpc = lj_ref(lay, hb[i] + lay->fn_pc);
        if (wf->ffid != 0) wf->cf = lj_u64(hb[i] + lay->fn_cf);
        struct lj_fnpt *c = fnpt_slot(rt, wf->fn);
        if (elen) /* the header, for the cache once the GC state proves it */
            *c = (struct lj_fnpt){.fn = wf->fn,
                                  .pt = c->fn == wf->fn ? c->pt : 0,
                                  .fnpc = wf->fnpc,
                                  .cf = wf->cf,
                                  .ffid = wf->ffid};
        if (wf->ffid != 0 || wf->fnpc < lay->pt_size + 4096) continue;
        wf->pt = wf->fnpc - lay->pt_size;
        if (guess[i] >= 0 && c->pt == wf->pt && !iov[guess[i]].err) {
            wf->proto = ss_lj_proto(rt, m, wf->pt, pb[i]);
            continue;
        }
        if (c->fn != wf->fn) *c = (struct lj_fnpt){.fn = wf->fn, .fnpc = wf->fnpc};
        c->pt = wf->pt;
        idx[np++] = i;
    }
    /* prototype headers not guessed (reuse pb rows) */
    for (unsigned j = 0; j < np; j++)
        iov[j] = (struct ss_iov){.addr = w->f[idx[j]].pt, .dst = pb[idx[j]], .len = lay->pt_size};
    if (np) {
        rt->st.rounds++;
        rc = ss_mem_readv(m, iov, (int)np);
        if (rc) goto out;
        nread += np;
    }
    for (unsigned j = 0; j < np; j++) {
        struct lj_wframe *wf = &w->f[idx[j]];
        if (iov[j].err) continue;
        wf->proto = ss_lj_proto(rt, m, wf->pt, pb[idx[j]]);
    }
    /* the proof: the live GC state after every object read */
    if (elen && nread) {
        struct ss_iov g = ss_lj_gc_iov(rt, w->G, lep);
        rt->st.rounds++;
        if ((rc = ss_mem_readv(m, &g, 1))) goto out;
        if (g.err || !ss_lj_gc_prove(rt, sep, lep, elen)) {
            rc = -ECANCELED;
            goto out;
        }
        for (unsigned i = 0; i < w->n; i++) {
            if (at[i] < 0) continue;
            fnpt_slot(rt, w->f[i].fn)->gen = rt->gcp.gen;
            if (w->f[i].proto) w->f[i].proto->gcgen = rt->gcp.gen;
        }
    }
out:
    return rc;
}
