/* bpf/kstack.h: BPF side only: the kernel stack of a record (--kernel),
 * taken by the kernel's own unwinder (bpf_get_stack, flags 0: ORC or frame
 * pointers, from the context's registers) into the record's struct
 * ss_ev_kstack (snapshot.h), after the first off bytes. Shared by the
 * program variants; the includer gates the call on its --kernel setting so
 * that without it the verifier drops the code. */
#ifndef STACKSNAP_BPF_KSTACK_H
#define STACKSNAP_BPF_KSTACK_H

static __always_inline void copy_kstack(void *ctx, struct ss_ev_kstack *k)
{
    k->len = bpf_get_stack(ctx, k->ip, sizeof(k->ip), 0);
}

/* From a tracing program: without the program's own frame (user space
 * drops the tracepoint's frames below it, whose number varies by kernel). */
static __always_inline void copy_kstack_traced(void *ctx, struct ss_ev_kstack *k)
{
    k->len = bpf_get_stack(ctx, k->ip, sizeof(k->ip), 1 & BPF_F_SKIP_FIELD_MASK);
}

/* Ring buffer variant: reserve off bytes and the kernel stack area, fill
 * the area; NULL when the buffer is full. Inline, not a subprogram: one
 * that returns the record it tested makes the caller test a pointer the
 * verifier knows is not NULL, and 6.1 still walks the NULL branch then,
 * with the reference held ("Unreleased reference": it rejected the program
 * and record --kernel fell back to compat). */
static __always_inline void *reserve_kstack(void *rb, void *ctx, __u64 off)
{
    __u8 *e = bpf_ringbuf_reserve(rb, off + SS_EV_KSTACK_BYTES, 0);

    if (e) copy_kstack(ctx, (struct ss_ev_kstack *)(e + off));
    return e;
}

#endif
