/* bpf/pages.h: BPF side only: after the full stack copy failed, copy the
 * stack page by page instead, past pages that cannot be read. Shared by both
 * program variants; the includer defines SS_PROBE_READ (bpf_probe_read_user,
 * or bpf_probe_read in the compat variant).
 *
 * A read in a perf_event program does not fault pages in, so a stack page
 * never touched (PCRE2's JIT runs below 32 KiB of locals in
 * jit_machine_stack_exec, mostly untouched) ends a single copy, although its
 * callers' frames lie above it. Readability changes only at page
 * boundaries: the rest of the page holding sp, then every whole page up to
 * the snapshot size, each copied on its own; a page that fails is left
 * zero-filled (the helpers clear the destination on failure) and marked in
 * the record's holes (bit i: the i-th page counted from sp's page), and the
 * copy ends after the last page that was readable. User space treats the
 * holes as unreadable (never as bytes). The tail of the snapshot short of a
 * whole page is not copied here (as before: less than one page lost).
 *
 * Bounds: off is checked against the includer's constant SS_COPY_MAX (the
 * most dst holds) as well as against size: "off <= size - page" compares two
 * variables when size comes from a map (compat), and verifiers before 6.12
 * learn no bound from that; barrier_var keeps clang from folding the two.
 * A bounded loop (5.3+) in a subprogram: its instructions are counted once,
 * and the verifier walks its at most 16 rounds. */
#ifndef STACKSNAP_BPF_PAGES_H
#define STACKSNAP_BPF_PAGES_H

#define SS_PAGE 4096ul
#define SS_PAGES_MAX (SS_COPY_MAX / SS_PAGE + 1) /* rounds: sp's page, then whole pages */

/* Copies e's stack from its sp (e->regs): e->stack_len (0 before the call)
 * gets the bytes copied up to the end of the last readable page, less than
 * size, and e->holes (0 before the call) the unreadable pages; bits at or
 * above that end mean nothing (user space drops them). The page of sp may
 * be a hole too (sp just moved into a page not touched yet). A snapshot
 * smaller than a page gets nothing here. Four live values across the calls
 * (e, lim, off, bit): no stack spills; the loop counter is the hole bit
 * itself. off <= lim and n <= SS_PAGE bound the copy for the verifier too
 * (from constants: size is one in the main variant). */
static __noinline void copy_pages(struct ss_event *e, __u64 size)
{
    __u64 off = 0, n, src, lim = size - SS_PAGE;
    __u8 *dst;

    if (size < SS_PAGE) return;
#pragma clang loop unroll(disable)
    for (__u64 bit = 1; bit < 1ul << SS_PAGES_MAX; bit <<= 1) {
        if (off > lim) break;
        barrier_var(off);
        if (off > SS_COPY_MAX - SS_PAGE) break;
        src = e->regs[SS_PT_SP] + off;
        n = SS_PAGE - (src & (SS_PAGE - 1)); /* SS_PAGE but for sp's page */
        dst = e->stack + off;
        off += n; /* n is not live across the call */
        if (SS_PROBE_READ(dst, n, (void *)src))
            e->holes |= bit;
        else
            e->stack_len = off;
    }
}

#endif
