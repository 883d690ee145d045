/* unwind/luajit/trace_check.c: is a known trace the one a sample ran in?
 * The per-sample re-validation of trace.c's lookup: the snapshot that
 * covers the sampled mcode offset, the J->trace slot (from the sample's
 * J->trace window when the plan has it), the trace header, that snapshot
 * and its map slice byte-identical to what was decoded (live reads), or
 * trusted without reads in the GC generation they were proven in (gc.c),
 * and the prototype headers of the snapshot's inlined frames; which of
 * those frames are proven at the sampled offset (issue 32: proven). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/ljregs.h"
#include "unwind/luajit/trace_int.h"

/* Header bytes that never change during a trace's life: type byte, nsnap,
 * nins; ir .. mcloop; spadjust, traceno; root (not the GC link, nchild,
 * link/nextroot/nextside or the GC mark). */
bool ss_lj_trace_same_hdr(const struct lj_layout *lay, const uint8_t *a, const uint8_t *b)
{
    return !memcmp(a + lay->gct, b + lay->gct, lay->T_nins + 4 - lay->gct) &&
           !memcmp(a + lay->T_ir, b + lay->T_ir, lay->T_mcode + 12 - lay->T_ir) &&
           !memcmp(a + lay->T_spadjust, b + lay->T_spadjust, 4) &&
           !memcmp(a + lay->T_root, b + lay->T_root, 2);
}

/* Do two snapshots show the same frames (prototypes and pcs)? */
static bool same_frames(const struct trace *t, const struct tsnap *a, const struct tsnap *b)
{
    if (a->n != b->n) return false;
    for (uint32_t q = 0; q < a->n; q++)
        if (t->fr[a->first + q].pc != t->fr[b->first + q].pc ||
            t->fr[a->first + q].pt != t->fr[b->first + q].pt)
            return false;
    return true;
}

/* Snapshot index for mcode offset ofs: largest mcofs <= ofs. */
static int snap_at(const struct trace *t, uint64_t ofs)
{
    uint32_t lo = 0, hi = t->nsnap;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->snaps[mid].mcofs <= ofs)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int)lo - 1;
}

/* Index of the loop copy's call whose return offset is ret, else ncalls. */
static uint32_t loop_call(const struct trace *t, uint64_t ret)
{
    uint32_t lo = 0, hi = t->ncalls;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->calls[mid].end < ret)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->ncalls && t->calls[lo].end == ret ? lo : t->ncalls;
}

/* How many of snapshot si's frames, outermost first, are proven to be on
 * the stack for code at mcode offset ofs (issue 32). Snapshot si is the
 * state at its own guard; between it and the next snapshot in mcode order
 * (the state the code at ofs runs into) inlined frames may return and
 * others start, with no guard and so no snapshot in between (a cache
 * lookup returns, then an FFI call is made). A frame is proven when both
 * snapshots show it: the same prototype linked to the same call site of
 * the same caller (so at the same base), for it and every frame below.
 * After the last snapshot the code loops back or links to another trace:
 * only the frame at the trace's base is proven (the live walk checks it).
 *
 * A trace recorded under LuaJIT's own profiler (profiler checks in its
 * code, trace_load.c prof_checks) has a check wherever the recorded code
 * changes function (lj_record.c rec_profile_ins: the prototype differs from
 * the last one recorded; rec_profile_ret: every return in 'f' mode), before
 * any code of the new function: up to the first check after the snapshot,
 * every frame it shows is still there. Not where its innermost frame and
 * its caller run one prototype (a recursive call inlined: no check). */
static uint32_t proven(const struct trace *t, int si, uint64_t ofs)
{
    const struct tsnap *b = &t->snaps[si];
    if (b->n <= 1) return b->n;
    const struct tframe *f = &t->fr[b->first];
    if (t->profiled && (!b->prof || ofs < b->prof) && f[b->n - 1].pt != f[b->n - 2].pt) return b->n;
    if ((uint32_t)si + 1 >= t->nsnap) return 1;
    const struct tsnap *a = &t->snaps[si + 1];
    const struct tframe *fb = &t->fr[b->first], *fa = &t->fr[a->first];
    /* the next snapshot's frame returning at its pc still runs the code
     * before it (a profiler check at the return, trace_load.c) */
    uint32_t na = a->ncut ? a->n : a->n + a->nret, k = 1;
    while (k < b->n && k < na && fb[k].pt && fb[k].pt == fa[k].pt && fb[k].link == fa[k].link)
        k++;
    return k;
}

/* The sampled trace's J->trace slot as of the sample (the J->trace window,
 * plan.c): 1 and *T set, 0 not in the sample. */
static int sample_slot(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t jt,
                       uint32_t traceno, uint64_t *arr, uint64_t *T)
{
    const struct lj_layout *lay = rt->lay;
    unsigned rs = lay->gc64 ? 8 : 4;
    const uint8_t *ap = ss_mem_peek_sample(m, jt, 8), *sp;
    if (!ap || !(*arr = lj_u64(ap))) return 0;
    if (!(sp = ss_mem_peek_sample(m, *arr + (uint64_t)traceno * rs, rs))) return 0;
    *T = lay->gc64 ? lj_u64(sp) : lj_u32(sp);
    return 1;
}

/* Re-validate entry i for this sample and read the per-sample state (one
 * batched read): J->trace array pointer and slot, the trace header,
 * the snapshot and its map slice, G->jit_base and G->vmstate, and the
 * headers of the snapshot's prototypes.
 *
 * With the sample's GC state (gc.c): a trace whose header, snapshots and
 * map were proven in the generation the sample still shows is taken
 * without reading them again (they never change while it is alive, and it
 * cannot have been freed and replaced without an allocation), its slot
 * from the sample's J->trace window, its prototypes' headers as
 * resolve.c trusts them; what is read live ends with the live GC state,
 * whose proof makes the trace (and the prototype headers that matched)
 * trusted in that generation. */
int ss_lj_trace_validate(struct ss_lj_runtime *rt, struct ss_mem *m, int idx, uint64_t look,
                         struct ss_lj_tsample *cur)
{
    const struct lj_layout *lay = rt->lay;
    struct lj_tcache *tc = rt->tc;
    struct trace *t = &tc->t[idx];
    if (!t->loaded) ss_lj_trace_load(rt, m, t);
    if (!t->loaded) return -EIO;
    if (t->bad) return -ENOENT; /* kept: known, but no frames from it */
    /* in a function called from the loop's copy: as if called from the
     * pre-roll call it copies (trace_calls.c) */
    uint32_t ci = loop_call(t, look - t->mcode + 1);
    if (ci < t->ncalls) look = t->mcode + t->calls[ci].alias - 1;
    int si = snap_at(t, look - t->mcode);
    if (rt->check_guards && t->by_guards && si >= 0) {
        /* what the guards alone would have said (guards.c) */
        uint32_t o = (uint32_t)(look - t->mcode), g = 0;
        for (uint32_t k = 1; k < t->nsnap; k++)
            if (t->snaps[k].gofs <= o) g = k;
        rt->st.guard_checked++;
        rt->st.guard_same += same_frames(t, &t->snaps[si], &t->snaps[g]);
    }
    /* at a side-effecting call whose next snapshot's frames are the ones
     * on the stack (trace_load.c post_call): look is its return address
     * - 1 (a sample in the callee), or trace code after it up to that
     * snapshot's code */
    uint64_t ofs = look - t->mcode;
    /* a helper call whose frames the forward replay proves (trace_fwd.c) */
    const struct tfwd *fw = NULL;
    for (uint32_t k = 0; si >= 0 && k < t->nfwd && !fw; k++)
        if (t->fwd[k].si == (uint32_t)si && t->fwd[k].end == ofs + 1) fw = &t->fwd[k];
    bool xcall = !fw && si >= 0 && (uint32_t)si + 1 < t->nsnap && t->snaps[si].xret &&
                 ofs + 1 >= t->snaps[si].xret && ofs < t->snaps[si + 1].mcofs;
    if (xcall) si++;
    if (!xcall && !fw && si >= 0 && t->snaps[si].prof && look - t->mcode >= t->snaps[si].prof &&
        (uint32_t)si + 1 < t->nsnap)
        si++; /* past a profiler check: see prof_checks */
    if (si < 0 || !t->snaps[si].n) return -ENOENT;
    const struct tsnap *ts = &t->snaps[si];
    /* frames [0, keep) of ts */
    const uint32_t keep = fw ? fw->n : xcall ? ts->n + ts->nret : proven(t, si, look - t->mcode);
    const struct tframe *tf = fw ? t->fwdfr + fw->first : t->fr + ts->first;
    uint64_t G = t->G, jt = G + (uint64_t)(int64_t)lay->g2j + lay->J_trace;
    unsigned rs = lay->gc64 ? 8 : 4;
    if (tc->arr_G != G) tc->arr_G = G, tc->arr = 0;
    uint8_t hdr[TC_HDR], sn[16], slot[8] = {0}, arrp[8];
    uint8_t sep[88], lep[88];
    size_t elen = ss_lj_gc_sample(rt, m, G, sep);
    bool gen_now = ss_lj_gc_current(rt, sep, elen); /* (a look: may end the generation) */
    bool trust = gen_now && t->gen && t->gen == rt->gcp.gen;
    uint64_t sarr = 0, sT = 0;
    bool sslot = sample_slot(rt, m, jt, t->traceno, &sarr, &sT);
    uint64_t jit_base = 0;
    int32_t vmstate = 0;
    /* the map slice is read only when not trusted; small ones on the stack */
    uint32_t map_s[64], *map = map_s;
    if (!trust && ts->maplen > 64 && !(map = malloc((size_t)ts->maplen * 4))) return -ENOMEM;
    struct ss_iov iov[8 + 2 * TC_MAXFR];
    int nv = 0, nlive = 0, gi = -1;
    if (!trust) {
        iov[nv++] = (struct ss_iov){.addr = t->T, .dst = hdr, .len = lay->T_size};
        iov[nv++] =
            (struct ss_iov){.addr = lj_u64(t->hdr + lay->T_snap) + (uint64_t)si * lay->snap_size,
                            .dst = sn,
                            .len = lay->snap_size};
        iov[nv++] =
            (struct ss_iov){.addr = lj_u64(t->hdr + lay->T_snapmap) + (uint64_t)ts->mapofs * 4,
                            .dst = map,
                            .len = (size_t)ts->maplen * 4};
        nlive = nv;
    }
    iov[nv++] = (struct ss_iov){.addr = jt, .dst = arrp, .len = 8};
    iov[nv++] = (struct ss_iov){.addr = G + lay->G_jit_base, .dst = &jit_base, .len = rs};
    iov[nv++] = (struct ss_iov){.addr = G + lay->G_vmstate, .dst = &vmstate, .len = 4};
    if (tc->arr && !sslot)
        iov[nv++] =
            (struct ss_iov){.addr = tc->arr + (uint64_t)t->traceno * rs, .dst = slot, .len = rs};
    uint8_t ph_s[4][112 + LJ_CNS], (*ph)[112 + LJ_CNS] = ph_s;
    if (keep > 4 && !(ph = malloc(sizeof(*ph) * keep))) {
        if (map != map_s) free(map);
        return -ENOMEM;
    }
    /* the fields, and the frames' slots this snapshot fills (no reader
     * looks past nframes) */
    memset(cur, 0, offsetof(struct ss_lj_tsample, pc));
    memset(cur->proto, 0, keep * sizeof(cur->proto[0]));
    int cn[TC_MAXFR];
    for (uint32_t i = 1; i < keep; i++) { /* inlined frames' prototypes, names */
        uint64_t pt = tf[i].pt;
        cn[i] = -1;
        if (trust && (cur->proto[i] = ss_lj_proto_trusted(rt, pt))) continue;
        iov[nv++] = (struct ss_iov){.addr = pt, .dst = ph[i], .len = lay->pt_size};
        iov[nv] = ss_lj_proto_cn_iov(rt, pt, ph[i] + 112);
        cn[i] = iov[nv].len ? nv++ : -1;
        nlive++;
    }
    if (elen && nlive) { /* the proof: the live GC state after the object reads */
        gi = nv;
        iov[nv++] = ss_lj_gc_iov(rt, G, lep);
    }
    int rc = 0;
    if (nv) {
        rt->st.rounds++;
        rc = ss_mem_readv(m, iov, nv);
    }
    for (int i = 0; i < nv && !rc; i++)
        if (iov[i].err && i != gi) rc = -EIO;
    if (rc) goto out;
    rc = -ESTALE; /* from here on: read fine, but not the trace we decoded */
    uint64_t arr = lj_u64(arrp);
    if (sslot && sarr == arr) {
        tc->arr = arr;
        memcpy(slot, &sT, rs);
    } else if (arr != tc->arr) { /* first use or the array moved: read the slot */
        tc->arr = arr;
        rt->st.rounds++;
        if (ss_mem_read(m, arr + (uint64_t)t->traceno * rs, slot, rs)) {
            tc->arr = 0;
            rc = -EIO;
            goto out;
        }
    }
    if ((lay->gc64 ? lj_u64(slot) : lj_u32(slot)) != t->T) goto out;
    if (!trust &&
        (!ss_lj_trace_same_hdr(lay, hdr, t->hdr) || lj_u32(sn) != ts->mapofs ||
         (lay->snap_mcofs && u16at(sn + lay->snap_mcofs) * rt->arch->mcode_unit != ts->mcofs) ||
         memcmp(map, t->map + ts->mapofs, (size_t)ts->maplen * 4)))
        goto out;
    cur->G = G;
    cur->jit_base = lay->gc64 ? jit_base : (uint32_t)jit_base;
    cur->jit_base_sampled = ss_mem_peek_sample(m, G + lay->G_jit_base, rs) != NULL;
    cur->vmstate = vmstate;
    cur->spadjust = t->spadjust;
    cur->mcode = t->mcode;
    cur->base_reg = t->base_reg;
    cur->base_spill = t->base_spill;
    cur->traceno = t->traceno;
    cur->nframes = keep;
    cur->unproven = xcall || fw ? 0 : ts->n - keep + ts->ncut;
    rt->st.trace_xcall_samples += xcall;
    rt->st.trace_fwd_samples += fw != NULL;
    bool hit[TC_MAXFR] = {false};
    for (uint32_t i = 0; i < keep; i++) {
        const struct tframe *f = &tf[i];
        /* at a proven call the frame making it stands at that CALL (the
         * snapshot's pc is the bytecode after it, or after the comparison
         * that follows it: xpc): the interpreter's pc */
        cur->pc[i] = fw || !xcall || i + 1 < keep ? f->pc
                     : t->snaps[si - 1].xpc       ? t->snaps[si - 1].xpc
                                                  : f->pc - 4;
        cur->link[i] = f->link;
        cur->pt[i] = f->pt;
        if (!i || cur->proto[i]) continue;
        uint64_t calls = m->n_target_calls;
        cur->proto[i] = ss_lj_proto_cs(rt, m, f->pt, ph[i], cn[i] >= 0 ? &iov[cn[i]] : NULL);
        hit[i] = m->n_target_calls == calls; /* no read after the batch's proof */
        if (!cur->proto[i]) {
            rc = -EIO;
            goto out;
        }
    }
    if (gi >= 0 && !iov[gi].err && ss_lj_gc_prove(rt, sep, lep, elen)) {
        t->gen = rt->gcp.gen;
        for (uint32_t i = 1; i < keep; i++)
            if (hit[i]) cur->proto[i]->gcgen = rt->gcp.gen;
    }
    ss_lj_need_trace(rt, t->traceno);
    rc = 0;
out:
    if (ph != ph_s) free(ph);
    if (map != map_s) free(map);
    return rc;
}
