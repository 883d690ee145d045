/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bpf/bench_maps.h: what the bench's in-kernel comparators share with each
 * other (BPF side only): the ring buffer, the selected tgids and the
 * counters, sized and woken like snapshot.bpf.c's so costs compare like for
 * like. Include after vmlinux.h, bpf_helpers.h and bench_events.h. */
#ifndef STACKSNAP_BENCH_MAPS_H
#define STACKSNAP_BENCH_MAPS_H

const volatile __u32 wake_bytes = 1 << 20;

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, __u32);
    __type(value, __u8);
} pids SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct bench_counters);
} counters SEC(".maps");

#endif
