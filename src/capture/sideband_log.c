/* capture/sideband_log.c: perf's side band of mappings, for the processes that
 * exec and exit before user space reads their /proc maps (a shell loop's
 * `true`: gone a millisecond after its exec, its samples read a few
 * milliseconds later). As perf record does, a dummy software event per
 * online CPU, system-wide, asks the kernel for a record of every
 * mapping (PERF_RECORD_MMAP2: address, length, offset, device, inode,
 * protection, path) and of every exec (PERF_RECORD_COMM with COMM_EXEC), each
 * stamped with CLOCK_MONOTONIC (the clock of bpf_ktime_get_ns, so of the
 * samples). The kernel writes them when the mapping is made, in the
 * process's own context, so a sample's mappings are in these buffers before
 * the sample is read from the BPF buffer: deliver() drains them first and
 * hands each record to opts.map_event. The events count nothing and never
 * fire; no BPF involved. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "capture/capture_int.h"

/* Data bytes a CPU: the side band must hold what the machine maps while
 * the recorder is behind (a walk of a cold file, a busy machine): a churn
 * of ~400 execs a second writes ~0.5 MiB a second per CPU of two, so 2 MiB
 * a CPU hold ~4 s of it (128 KiB lost most of a 300 ms stall's records).
 * SB_TOTAL_MAX bounds many-CPU machines; a ring the kernel refuses (locked
 * memory) is halved down to SB_RING_MIN. */
#define SB_RING_MAX (2u << 20)
#define SB_RING_MIN (128u << 10)
#define SB_TOTAL_MAX (64u << 20)
#define SB_REC_MAX 4096 /* a record longer than this (a path near PATH_MAX) is skipped */

struct sb_ring {
    int fd;
    uint8_t *base; /* control page, then the data */
    size_t data_size;
};

struct ss_sideband {
    int n;
    size_t page;
    struct sb_ring r[];
};

static int open_cpu(int cpu)
{
    struct perf_event_attr a = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof(a),
        .config = PERF_COUNT_SW_DUMMY,
        .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
        .mmap = 1,
        .mmap_data = 1, /* the read-only segments too: .eh_frame_hdr is in one */
        .mmap2 = 1,
        .comm = 1,
        .comm_exec = 1,
        .sample_id_all = 1,
        .use_clockid = 1,
        .clockid = CLOCK_MONOTONIC,
        .watermark = 1,
        .wakeup_watermark = 1u << 30, /* never: deliver() drains it */
    };
    return (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int ss_capture_sb_open(struct ss_capture *c, struct ss_err *err)
{
    int max = libbpf_num_possible_cpus();
    bool *on = max > 0 ? calloc(max, sizeof(*on)) : NULL;
    struct ss_sideband *sb = on ? calloc(1, sizeof(*sb) + max * sizeof(sb->r[0])) : NULL;
    int r = sb ? ss_capture_online_cpus(on, max, err) : -ENOMEM;
    if (!sb) ss_err_set(err, -ENOMEM, "side band: out of memory");
    if (sb) {
        sb->page = (size_t)sysconf(_SC_PAGESIZE);
        c->sb = sb;
    }
    int ncpu = 0;
    for (int cpu = 0; r >= 0 && cpu < max; cpu++)
        ncpu += on[cpu];
    size_t ring = SB_RING_MAX;
    while (ring > SB_RING_MIN && ncpu && ring * (size_t)ncpu > SB_TOTAL_MAX)
        ring /= 2;
    for (int cpu = 0; r >= 0 && cpu < max; cpu++) {
        if (!on[cpu]) continue;
        struct sb_ring *g = &sb->r[sb->n];
        g->fd = open_cpu(cpu);
        if (g->fd < 0) {
            r = -errno;
            ss_err_set(err, r, "perf_event_open (mappings side band) cpu %d: %s", cpu,
                       strerror(-r));
            break;
        }
        /* a power of two of pages, as perf wants */
        void *m = MAP_FAILED;
        for (g->data_size = ring > sb->page ? ring : sb->page;; g->data_size /= 2) {
            m = mmap(NULL, sb->page + g->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
            if (m != MAP_FAILED || g->data_size <= SB_RING_MIN || g->data_size <= sb->page ||
                (errno != EPERM && errno != ENOMEM))
                break;
            ring = g->data_size / 2; /* the next CPUs: no bigger */
        }
        if (m == MAP_FAILED) {
            r = -errno;
            close(g->fd);
            ss_err_set(err, r, "mmap (mappings side band) cpu %d: %s", cpu, strerror(-r));
            break;
        }
        g->base = m;
        sb->n++;
    }
    free(on);
    return r < 0 ? r : 0;
}

void ss_capture_sb_close(struct ss_capture *c)
{
    struct ss_sideband *sb = c->sb;
    if (!sb) return;
    for (int i = 0; i < sb->n; i++) {
        munmap(sb->r[i].base, sb->page + sb->r[i].data_size);
        close(sb->r[i].fd);
    }
    free(sb);
    c->sb = NULL;
}

/* Copy len bytes at ring offset off (wrapping) to dst. */
static void ring_copy(const struct sb_ring *g, size_t page, uint64_t off, void *dst, size_t len)
{
    const uint8_t *data = g->base + page;
    size_t at = (size_t)(off % g->data_size), first = g->data_size - at;
    if (first > len) first = len;
    memcpy(dst, data + at, first);
    memcpy((uint8_t *)dst + first, data, len - first);
}

/* One record (rec, h.size bytes, sample_id_all: pid, tid, time last). */
static void handle(struct ss_capture *c, const struct perf_event_header *h, const uint8_t *rec)
{
    size_t sz = h->size;
    struct ss_map_event ev = {0};
    if (h->type == PERF_RECORD_LOST && sz >= 24) {
        uint64_t lost;
        memcpy(&lost, rec + 16, 8);
        c->map_lost += lost;
        return;
    }
    if (sz < 8 + 8 + 16) return;
    memcpy(&ev.pid, rec + 8, 4);
    memcpy(&ev.time_ns, rec + sz - 8, 8);
    if (h->type == PERF_RECORD_MMAP2 && sz >= 8 + 64 + 16 + 1 &&
        !(h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
        ev.kind = SS_MAP_EV_MMAP;
        memcpy(&ev.start, rec + 16, 8);
        memcpy(&ev.len, rec + 24, 8);
        memcpy(&ev.pgoff, rec + 32, 8);
        memcpy(&ev.dev_major, rec + 40, 4);
        memcpy(&ev.dev_minor, rec + 44, 4);
        memcpy(&ev.inode, rec + 48, 8);
        memcpy(&ev.prot, rec + 64, 4);
        const char *path = (const char *)rec + 72;
        if (!memchr(path, 0, sz - 16 - 72)) return; /* no NUL before the sample id */
        ev.path = path;
    } else if (h->type == PERF_RECORD_COMM && (h->misc & PERF_RECORD_MISC_COMM_EXEC)) {
        ev.kind = SS_MAP_EV_EXEC;
        size_t room = sz - 16 - 16; /* header, pid/tid; the sample id after */
        memcpy(ev.comm, rec + 16, room < sizeof(ev.comm) - 1 ? room : sizeof(ev.comm) - 1);
    } else {
        return;
    }
    c->map_events++;
    c->o.map_event(c->o.map_event_arg, &ev);
}

void ss_capture_sb_drain(struct ss_capture *c)
{
    struct ss_sideband *sb = c->sb;
    uint8_t rec[SB_REC_MAX];
    for (int i = 0; i < sb->n; i++) {
        struct sb_ring *g = &sb->r[i];
        struct perf_event_mmap_page *mp = (void *)g->base;
        uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = mp->data_tail;
        while (head - tail >= sizeof(struct perf_event_header)) {
            struct perf_event_header h;
            ring_copy(g, sb->page, tail, &h, sizeof(h));
            if (h.size < sizeof(h) || h.size > head - tail) { /* torn: start over at head */
                tail = head;
                break;
            }
            if (h.size <= sizeof(rec)) {
                ring_copy(g, sb->page, tail, rec, h.size);
                handle(c, &h, rec);
            }
            tail += h.size;
        }
        __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    }
}
