/* capture/buffer.c: reading samples: the BPF ring buffer (main variant) or
 * the per-CPU perf buffers (compat), decoding struct ss_event records into
 * struct ss_sample and handing them to the poll callback. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <linux/types.h>

#include "capture/capture_int.h"
#include "snapshot.h" /* bpf/: shared with the BPF side */

#ifndef SS_EV_ARM64
/* For each register in perf's order (enum ss_reg) its index in the
 * kernel's pt_regs order, -1 for ds, es, fs, gs (not saved on x86-64; perf
 * reports 0 too). */
static const signed char pt_of[SS_NREGS] = {
    [SS_REG_AX] = SS_PT_AX,   [SS_REG_BX] = SS_PT_BX,
    [SS_REG_CX] = SS_PT_CX,   [SS_REG_DX] = SS_PT_DX,
    [SS_REG_SI] = SS_PT_SI,   [SS_REG_DI] = SS_PT_DI,
    [SS_REG_BP] = SS_PT_BP,   [SS_REG_SP] = SS_PT_SP,
    [SS_REG_IP] = SS_PT_IP,   [SS_REG_FLAGS] = SS_PT_FLAGS,
    [SS_REG_CS] = SS_PT_CS,   [SS_REG_SS] = SS_PT_SS,
    [SS_REG_DS] = -1,         [SS_REG_ES] = -1,
    [SS_REG_FS] = -1,         [SS_REG_GS] = -1,
    [SS_REG_R8] = SS_PT_R8,   [SS_REG_R9] = SS_PT_R9,
    [SS_REG_R10] = SS_PT_R10, [SS_REG_R11] = SS_PT_R11,
    [SS_REG_R12] = SS_PT_R12, [SS_REG_R13] = SS_PT_R13,
    [SS_REG_R14] = SS_PT_R14, [SS_REG_R15] = SS_PT_R15,
};
#else
/* arm64: user_pt_regs order is perf's (and enum ss_reg) */
static const signed char pt_of[SS_NREGS] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
};
_Static_assert((int)SS_NREGS == (int)SS_PT_NREGS && (int)SS_REG_SP == (int)SS_PT_SP &&
                   (int)SS_REG_IP == (int)SS_PT_IP,
               "arm64 register orders");
#endif

int ss_capture_pt_reg(unsigned r)
{
    return r < SS_NREGS ? pt_of[r] : -1;
}

void ss_capture_win_ip(struct ss_win *o, const struct ss_win_spec *w)
{
    bool in = w->flags & SS_WIN_IF_IP;
    o->ip_lo = in ? w->ip_lo : 0;
    o->ip_span = !in ? ~0ull : w->ip_hi > w->ip_lo ? w->ip_hi - w->ip_lo : 0;
}

static void perf_regs(uint64_t out[SS_NREGS], const __u64 in[SS_PT_NREGS])
{
    for (int i = 0; i < SS_NREGS; i++)
        out[i] = pt_of[i] < 0 ? 0 : in[(int)pt_of[i]];
#ifndef SS_EV_ARM64
    out[SS_REG_CS] &= 0xffff; /* FRED keeps more state above the selector */
    out[SS_REG_SS] &= 0xffff;
#endif
}

/* Validate one record and deliver it. The header is copied out (perf
 * buffer records are only 4-byte aligned); the stack pointer stays valid
 * only during the callback (it points into the buffer). */
static void deliver(struct ss_capture *c, const void *data, size_t size)
{
    struct ss_event e;
    struct ss_sample s;

    if (c->sb) ss_capture_sb_drain(c); /* the mappings before this record */
    if (ss_capture_pev_deliver(c, data, size) || ss_capture_exs_take(c, data, size)) return;
    if (size < sizeof(e)) {
        c->bad++;
        return;
    }
    memcpy(&e, data, sizeof(e));
    if (e.stack_len > e.stack_room || e.stack_room > c->stack_size || e.nwin > SS_EV_WIN_MAX ||
        (uint64_t)e.stack_room + (e.nwin ? SS_EV_WIN_BYTES : 0) > size - sizeof(e)) {
        c->bad++;
        return;
    }
    s.nwin = 0;
    if (e.nwin) { /* a window outside the area is dropped */
        const uint8_t *area = (const uint8_t *)data + sizeof(e) + e.stack_room;
        for (unsigned i = 0; i < e.nwin; i++) {
            const struct ss_ev_win *w = &e.win[i];
            struct ss_window *o = &s.win[i];
            /* addr and dst are written only for a window that was copied */
            o->err = w->err == SS_WERR_FAULT ? SS_WERR_FAULT : w->err ? SS_WERR_SKIP : 0;
            o->len = o->err ? 0 : w->len;
            o->addr = o->err ? 0 : w->addr;
            o->data = NULL;
            if (!o->err && (o->len > SS_EV_WIN_LEN_MAX || w->dst > SS_EV_WIN_BYTES - o->len)) {
                o->len = 0;
                o->err = SS_WERR_FAULT;
            }
            if (o->len) o->data = area + w->dst;
            c->win_failed += o->err == SS_WERR_FAULT;
        }
        s.nwin = e.nwin;
    }
    s.pid = e.tgid;
    s.tid = e.tid;
    s.cpu = e.cpu;
    s.flags = e.flags & (SS_SAMPLE_KERNEL | SS_SAMPLE_OFFCPU);
    s.weight = 0;
    if (e.flags & SS_EV_OFFCPU) /* the record's last 8 bytes */
        memcpy(&s.weight, (const uint8_t *)data + size - 8, 8);
    if (e.stack_len < c->stack_size) s.flags |= SS_SAMPLE_PARTIAL;
    s.time_ns = e.time_ns;
    perf_regs(s.regs, e.regs);
    if (c->compat && (e.flags & SS_EV_KERNEL)) /* --kernel: the kernel's registers, not kept */
        memset(s.regs, 0, sizeof(s.regs));
    s.stack_len = e.stack_len;
    s.holes = ss_ev_holes(&e);
    c->copy_holes += s.holes != 0;
    s.stack_req = c->stack_size;
    s.stack = (const uint8_t *)data + sizeof(e);
    s.nkernel = 0;
    s.kernel = c->kips;
    /* the kernel stack follows the window area: after the whole stack area
     * in the ring buffer (its windows may start right after the copied
     * stack), after the copied stack in compat */
    size_t koff =
        sizeof(e) + (c->compat ? e.stack_room : c->stack_size) + (e.nwin ? SS_EV_WIN_BYTES : 0);
    if (c->o.kernel && size >= koff + SS_EV_KSTACK_BYTES) { /* compat: may not have fit */
        struct ss_ev_kstack k;
        memcpy(&k, (const uint8_t *)data + koff, sizeof(k));
        if (k.len > 0 && (uint64_t)k.len <= sizeof(k.ip)) {
            s.nkernel = (uint32_t)(k.len / 8);
            memcpy(c->kips, k.ip, s.nkernel * 8);
            while (s.nkernel && !c->kips[s.nkernel - 1]) /* off-CPU: the whole area */
                s.nkernel--;
        }
    }
    ss_capture_exs_apply(c, &s);
    c->delivered++;
    if (c->fn) c->fn(c->fn_ctx, &s);
}

/* Whether this poll's time is up (ss_capture_poll: the record just read
 * is the last one it hands out). */
static bool poll_spent(const struct ss_capture *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec >= c->poll_end_ns;
}

/* -ECANCELED ends libbpf's reading of the ring after this record (it is
 * consumed: libbpf moves the consumer position past it first). */
static int on_ring(void *ctx, void *data, size_t size)
{
    deliver(ctx, data, size);
    return poll_spent(ctx) ? -ECANCELED : 0;
}

/* A raw perf buffer record: a sample carries our event as raw data, a
 * lost record counts what the kernel could not write. */
static enum bpf_perf_event_ret on_perf(void *ctx, int cpu, struct perf_event_header *h)
{
    struct ss_capture *c = ctx;

    (void)cpu;
    if (h->type == PERF_RECORD_SAMPLE && h->size >= sizeof(*h) + 4) {
        const char *raw = (const char *)(h + 1);
        __u32 n;
        memcpy(&n, raw, sizeof(n));
        if (n > h->size - sizeof(*h) - 4)
            c->bad++;
        else if (!c->o.proc_event || ss_capture_batch_add(c, raw + 4, n) < 0)
            deliver(c, raw + 4, n); /* no markers: per-CPU order is enough */
    } else if (h->type == PERF_RECORD_LOST && h->size >= sizeof(*h) + 16) {
        __u64 lost[2];
        memcpy(lost, h + 1, sizeof(lost));
        c->lost += lost[1];
    }
    /* DONE: this CPU's buffer is read up to here (its tail moved past) */
    return poll_spent(c) ? LIBBPF_PERF_EVENT_DONE : LIBBPF_PERF_EVENT_CONT;
}

/* Perf buffer pages per CPU: the byte budget split over the CPUs, a power
 * of two, room for one record at least. */
static size_t perf_pages(const struct ss_capture *c)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), page = sysconf(_SC_PAGESIZE);
    size_t want = c->o.ringbuf_bytes / (size_t)(cpus > 0 ? cpus : 1) / (size_t)page, n = 1;
    size_t record =
        16 + sizeof(struct ss_event) + c->stack_size + SS_EV_WIN_BYTES + SS_EV_KSTACK_BYTES;

    while (n * 2 <= want || n * (size_t)page < record)
        n *= 2;
    return n;
}

/* Both buffers wake the reader only once a quarter of them is full (a
 * wakeup per record costs an irq_work, more than the copy itself);
 * ss_capture_poll reads whatever is there when its timeout ends. */
int ss_capture_buffer_open(struct ss_capture *c, struct ss_err *err)
{
    int r;

    if (!c->compat) {
        c->rb = ring_buffer__new(c->events_fd, on_ring, c, NULL);
    } else {
        size_t pages = perf_pages(c);
        struct perf_event_attr a = {
            .type = PERF_TYPE_SOFTWARE,
            .size = sizeof(a),
            .config = PERF_COUNT_SW_BPF_OUTPUT,
            .sample_type = PERF_SAMPLE_RAW,
            .sample_period = 1,
            .watermark = 1,
            .wakeup_watermark = (__u32)(pages * (size_t)sysconf(_SC_PAGESIZE) / 4),
        };
        c->pb = perf_buffer__new_raw(c->events_fd, pages, &a, on_perf, c, NULL);
    }
    if (!c->rb && !c->pb) {
        r = -errno;
        ss_err_set(err, r, "%s: %s", c->compat ? "perf buffer" : "ring buffer", strerror(-r));
        return r;
    }
    return 0;
}

void ss_capture_buffer_close(struct ss_capture *c)
{
    ring_buffer__free(c->rb);
    perf_buffer__free(c->pb);
    c->rb = NULL;
    c->pb = NULL;
}

int ss_capture_poll(struct ss_capture *c, int timeout_ms, ss_sample_fn fn, void *ctx)
{
    int r;

    struct timespec ts;
    c->fn = fn;
    c->fn_ctx = ctx;
    c->delivered = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->poll_end_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
                     (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u +
                     SS_CAPTURE_POLL_MS * 1000000u;
    r = c->rb ? ring_buffer__poll(c->rb, timeout_ms) : perf_buffer__poll(c->pb, timeout_ms);
    if ((r >= 0 || r == -EINTR) && !poll_spent(c)) /* below the wakeup mark: read it anyway */
        r = c->rb ? ring_buffer__consume(c->rb) : perf_buffer__consume(c->pb);
    if (r == -ECANCELED) r = 0; /* on_ring: the time was up */
    if (c->batch_n) ss_capture_batch_flush(c, deliver);
    c->fn = NULL;
    if (r < 0 && r != -EINTR) return r;
    return c->delivered;
}
