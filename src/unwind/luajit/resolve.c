/* unwind/luajit/resolve.c: what the frames of a walk run: their function
 * headers, and in the same batch the prototype header each function had
 * last time (fn -> pt cache, checked against fn->pc read in that batch);
 * prototype headers not guessed right take a second batch.
 *
 * With the GC state where the walk's view of the thread starts (gc.c: the
 * sample's, or for a walk of the live thread a live read made before the
 * thread's): headers proved in the generation it still shows come from the
 * cache without a read, and the reads made end with the live GC state; if
 * that moved since the start, the objects may have been freed and reused:
 * -ECANCELED (the walk is made again from the live stack). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"

/* fn's slot of the function-header cache (direct-mapped). */
static struct lj_fnpt *fnpt_slot(struct ss_lj_runtime *rt, uint64_t fn)
{
    return &rt->fnpt[(fn >> 4) % LJ_FNPT_SLOTS];
}

int ss_lj_resolve(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_walk *w, const uint8_t *sep,
                  size_t elen)
{
    const struct lj_layout *lay = rt->lay;
    struct ss_iov iov[3 * LJ_MAX_FRAMES];
    size_t nf = w->n ? w->n : 1;
    uint8_t *buf = ss_lj_scratch(&rt->hbuf, &rt->hbuf_cap, (112 * 2 + LJ_CNS) * nf);
    if (!buf) return -ENOMEM;
    uint8_t(*hb)[112] = (uint8_t(*)[112])buf;
    uint8_t(*pb)[112] = hb + w->n;
    uint8_t(*cb)[LJ_CNS] = (uint8_t(*)[LJ_CNS])(buf + 112 * 2 * nf);
    int guess[LJ_MAX_FRAMES], at[LJ_MAX_FRAMES], cn[LJ_MAX_FRAMES];
    uint8_t lep[88];
    bool trust = ss_lj_gc_current(rt, sep, elen);
    unsigned nv = 0, nread = 0;
    bool known = true; /* every object read is as an earlier proof saw it */
    w->by_content = false;
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
        guess[i] = cn[i] = -1;
        if (at[i] >= 0 && c->fn == w->f[i].fn && c->pt) {
            guess[i] = (int)nv;
            iov[nv++] = (struct ss_iov){.addr = c->pt, .dst = pb[i], .len = lay->pt_size};
            struct ss_iov ci = ss_lj_proto_cn_iov(rt, c->pt, cb[i]);
            if (ci.len) cn[i] = (int)nv, iov[nv++] = ci;
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
        bool seen = c->fn == wf->fn && c->gen && c->ffid == wf->ffid && c->fnpc == wf->fnpc &&
                    (wf->ffid == 0 || c->cf == wf->cf);
        /* (a header the sample carries is the sampled object's: plan.c) */
        if (wf->ffid != 0 && !seen && !ss_mem_peek_sample(m, wf->fn, lay->fn_size)) known = false;
        if (elen && !seen) /* the header, for the cache once the GC state proves it */
            *c = (struct lj_fnpt){.fn = wf->fn,
                                  .pt = c->fn == wf->fn ? c->pt : 0,
                                  .fnpc = wf->fnpc,
                                  .cf = wf->cf,
                                  .ffid = wf->ffid};
        if (wf->ffid != 0 || wf->fnpc < lay->pt_size + 4096) continue;
        wf->pt = wf->fnpc - lay->pt_size;
        if (guess[i] >= 0 && c->pt == wf->pt && !iov[guess[i]].err) {
            wf->proto = ss_lj_proto_cs(rt, m, wf->pt, pb[i], cn[i] >= 0 ? &iov[cn[i]] : NULL);
            continue;
        }
        if (c->fn != wf->fn) *c = (struct lj_fnpt){.fn = wf->fn, .fnpc = wf->fnpc};
        c->pt = wf->pt;
        idx[np++] = i;
    }
    /* prototype headers not guessed (reuse the rows of pb, cb and guess),
     * each with the cached entry's chunk name if there is one */
    unsigned nb = 0;
    for (unsigned j = 0; j < np; j++) {
        unsigned i = idx[j];
        guess[i] = (int)nb;
        iov[nb++] = (struct ss_iov){.addr = w->f[i].pt, .dst = pb[i], .len = lay->pt_size};
        iov[nb] = ss_lj_proto_cn_iov(rt, w->f[i].pt, cb[i]);
        cn[i] = iov[nb].len ? (int)nb++ : -1;
    }
    if (nb) {
        rt->st.rounds++;
        rc = ss_mem_readv(m, iov, (int)nb);
        if (rc) goto out;
        nread += nb;
    }
    for (unsigned j = 0; j < np; j++) {
        unsigned i = idx[j];
        if (iov[guess[i]].err) continue;
        w->f[i].proto = ss_lj_proto_cs(rt, m, w->f[i].pt, pb[i], cn[i] >= 0 ? &iov[cn[i]] : NULL);
    }
    for (unsigned i = 0; i < w->n; i++)
        if (at[i] >= 0 && w->f[i].ffid == 0 && (!w->f[i].proto || !w->f[i].proto->gcgen))
            known = false;
    /* the proof: the live GC state after every object read */
    if (elen && nread) {
        struct ss_iov g = ss_lj_gc_iov(rt, w->G, lep);
        rt->st.rounds++;
        if ((rc = ss_mem_readv(m, &g, 1))) goto out;
        bool proved = !g.err && ss_lj_gc_prove(rt, sep, lep, elen);
        if (!proved && !g.err && known) {
            /* an atomic phase ran, but each object read has the content
             * an earlier proof saw at its address (prototypes: header and
             * chunk name; C functions: the whole header): if one was freed
             * and its memory reused by the same content, it names the
             * frame as the sampled one did */
            rt->st.gc_content++;
            w->by_content = true;
            goto out;
        }
        if (!proved) {
            /* what this walk read may come from freed memory: its entries
             * must be read again (not dropped: frames of this splice may
             * hold them) */
            for (unsigned i = 0; i < w->n; i++) {
                if (at[i] < 0) continue;
                fnpt_slot(rt, w->f[i].fn)->fn = 0;
                if (w->f[i].proto) w->f[i].proto->cnslen = 0;
            }
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
