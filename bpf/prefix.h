/* bpf/prefix.h: BPF side only: after the full stack copy failed, copy the
 * largest readable prefix instead. Shared by both program variants; the
 * includer defines SS_PROBE_READ (bpf_probe_read_user, or bpf_probe_read in
 * the compat variant).
 *
 * Readability changes only at page boundaries, so the prefix ends at one:
 * first the rest of the page holding sp, then a binary search over whole
 * pages (8, 4, 2, 1: enough for SS_EV_STACK_MAX) where each step copies the
 * next chunk in place and keeps it when the copy succeeded. Copying the
 * chunk (not probing one byte of it) keeps this right when an unreadable
 * page sits between readable ones (a guard page, then the next mapping).
 *
 * Bounds: each step also checks len against the includer's constant
 * SS_PREFIX_MAX (the most dst holds). "len < size - chunk" alone compares two
 * variables when size comes from a map (compat), and verifiers before 6.12
 * learn no bound from that (5.10 and 6.1 rejected the copy); barrier_var
 * keeps clang from folding the constant check into the other one. */
#ifndef STACKSNAP_BPF_PREFIX_H
#define STACKSNAP_BPF_PREFIX_H

#define SS_PAGE 4096ul

/* One step: the next chunk after len, kept when readable. A subprogram:
 * its call sites cost less than copies of the bounds checks. */
static __noinline __u64 prefix_step(__u8 *dst, __u64 sp, __u64 size, __u64 len, __u64 chunk)
{
    barrier_var(len);
    if (len <= SS_PREFIX_MAX - chunk && chunk <= SS_PREFIX_MAX && len < size - chunk &&
        !SS_PROBE_READ(dst + len, chunk, (void *)(sp + len)))
        len += chunk;
    return len;
}

/* Returns the bytes copied to dst from sp, less than size; 0 if none.
 * (64-bit arithmetic throughout: no zero-extension instructions.) */
static __always_inline __u64 copy_prefix(__u8 *dst, __u64 sp, __u64 size)
{
    __u64 len = SS_PAGE - (sp & (SS_PAGE - 1));

    if (len >= size || SS_PROBE_READ(dst, len, (void *)sp)) return 0;
#pragma unroll
    for (__u64 chunk = 8 * SS_PAGE; chunk >= SS_PAGE; chunk /= 2)
        if (size > chunk) /* a known size (main variant): the verifier drops the call */
            len = prefix_step(dst, sp, size, len, chunk);
    return len;
}

#endif
