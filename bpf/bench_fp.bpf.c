// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bpf/bench_fp.bpf.c: the bench's in-kernel frame-pointer comparator.
 *
 * The common in-kernel baseline: per sample of a selected process, the
 * kernel's own frame-pointer walk of the user stack (bpf_get_stack with
 * BPF_F_USER_STACK, up to 127 return addresses) into a ring buffer record.
 * Same selection (tgid hash), buffer and wake-up policy as
 * snapshot.bpf.c, so the two costs compare like for like. Bench only. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "bench_events.h"

#include "bench_maps.h"

SEC("perf_event")
int bench_fp(struct bpf_perf_event_data *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = id >> 32, zero = 0;
    struct bench_counters *c;
    struct bench_fp_event *e;

    if (!bpf_map_lookup_elem(&pids, &tgid)) return 0;
    c = bpf_map_lookup_elem(&counters, &zero);
    if (!c) return 0;
    c->seen++;
    e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        c->dropped++;
        return 0;
    }
    *(__u64 *)e = id;
    e->nbytes = bpf_get_stack(ctx, e->ips, sizeof(e->ips), BPF_F_USER_STACK);
    bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
                              ? BPF_RB_FORCE_WAKEUP
                              : BPF_RB_NO_WAKEUP);
    c->emitted++;
    return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
