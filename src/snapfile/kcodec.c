/* snapfile/kcodec.c: payloads of what --kernel and --off-cpu add to a
 * capture (docs/capture-format.md): the kernel symbols record (type 11) and
 * the fields appended to a sample after its windows (kernel stack, off-CPU
 * weight, the stack copy's holes). */
#include <errno.h>

#include "snapfile/format.h"

/* ksyms: u32 n, n x (u64 start, u64 end, str name, str module) */
void snap_enc_ksyms(struct snap_buf *b, const struct ss_snap_ksyms *k)
{
    snap_put_u32(b, k->n);
    for (uint32_t i = 0; i < k->n; i++) {
        const struct ss_ksym *s = &k->syms[i];
        snap_put_u64(b, s->start);
        snap_put_u64(b, s->end);
        snap_put_str(b, s->name ? s->name : "");
        snap_put_str(b, s->module ? s->module : "");
    }
}

int snap_dec_ksyms(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_ksyms *k,
                   const char **why)
{
    k->n = snap_get_u32(c);
    /* each takes 22 bytes at least: the count is bounded by the payload */
    if (c->bad || k->n > snap_left(c) / 22) {
        *why = "kernel symbols record: bad count";
        return -EBADMSG;
    }
    if (snap_grow((void **)&a->ksyms, &a->ksyms_cap, k->n, sizeof(*a->ksyms)) < 0) return -ENOMEM;
    for (uint32_t i = 0; i < k->n; i++) {
        struct ss_ksym *s = &a->ksyms[i];
        s->start = snap_get_u64(c);
        s->end = snap_get_u64(c);
        s->name = snap_get_str(c);
        s->module = snap_get_str(c);
        if (!*s->module) s->module = NULL;
        if (!c->bad && s->end <= s->start) c->bad = true;
    }
    if (c->bad) {
        *why = "kernel symbols record: bad symbol";
        return -EBADMSG;
    }
    k->syms = a->ksyms;
    return 0;
}

/* tail: u32 nkernel (<= SS_KSTACK_MAX), nkernel x u64, u64 weight, then
 * (appended later: absent in older captures, 0) u32 holes; written only when
 * one of them is not 0, the holes only when they are not */
void snap_enc_sample_tail(struct snap_buf *b, const struct ss_sample *s)
{
    uint32_t n = s->kernel && s->nkernel < SS_KSTACK_MAX ? s->nkernel : 0;
    if (s->kernel && s->nkernel >= SS_KSTACK_MAX) n = SS_KSTACK_MAX;
    if (!n && !s->weight && !s->holes) return;
    snap_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        snap_put_u64(b, s->kernel[i]);
    snap_put_u64(b, s->weight);
    if (s->holes) snap_put_u32(b, s->holes);
}

int snap_dec_sample_tail(struct snap_cur *c, struct ss_snap_sample *x, const char **why)
{
    x->s.kernel = x->kips;
    x->s.nkernel = 0;
    x->s.weight = 0;
    x->s.holes = 0;
    if (!snap_left(c)) return 0;
    uint32_t n = snap_get_u32(c);
    if (c->bad || n > SS_KSTACK_MAX || n > snap_left(c) / 8) {
        *why = "sample record: bad kernel stack";
        return -EBADMSG;
    }
    for (uint32_t i = 0; i < n; i++)
        x->kips[i] = snap_get_u64(c);
    x->s.nkernel = n;
    x->s.weight = snap_get_u64(c);
    if (c->bad) {
        *why = "sample record: weight missing";
        return -EBADMSG;
    }
    if (snap_left(c) >= 4) x->s.holes = snap_get_u32(c);
    return 0;
}
