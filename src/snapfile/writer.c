/* snapfile/writer.c: creating a capture file safely (mode 0600, never
 * through a symlink), framing records (sync, type, flags, length, CRCs),
 * per-record zstd compression, buffered writes, and the header / process / sample +
 * memory-read / counters / trailer records. Bundles are in bundle.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "snapfile/writer.h"
#include "util/outfile.h"
#include "util/pac.h"

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

void ss_snap_header_init(struct ss_snap_header *h)
{
    memset(h, 0, sizeof(*h));
    struct utsname u;
    copy_str(h->arch, sizeof(h->arch), SS_ARCH); /* the registers' layout: the build's */
    if (uname(&u) == 0) {
        copy_str(h->hostname, sizeof(h->hostname), u.nodename);
        copy_str(h->kernel_release, sizeof(h->kernel_release), u.release);
    }
    h->version = SS_SNAP_VERSION_SAMPLES;
    h->nregs = SS_NREGS;
    h->stack_size = SS_STACK_DEFAULT;
    h->freq_hz = 99;
    h->start_real_ns = now_ns(CLOCK_REALTIME);
    h->start_mono_ns = now_ns(CLOCK_MONOTONIC);
    h->pac_mask = ss_pac_mask();
}

/* ---- output ---- */
static int fail(struct ss_snap_writer *w, int code, struct ss_err *err)
{
    if (!w->err) {
        w->err = code;
        snprintf(w->errmsg, sizeof(w->errmsg), "write capture %s: %s", w->path, strerror(-code));
    }
    ss_err_set(err, w->err, "%s", w->errmsg);
    return w->err;
}

static int write_all(struct ss_snap_writer *w, const void *p, size_t n, struct ss_err *err)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(w->fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fail(w, k < 0 ? -errno : -EIO, err);
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int ss_snap_flush(struct ss_snap_writer *w, struct ss_err *err)
{
    if (w->err) return fail(w, w->err, err);
    int rc = write_all(w, w->out, w->out_len, err);
    w->out_len = 0;
    return rc;
}

static int out_put(struct ss_snap_writer *w, const void *p, size_t n, struct ss_err *err)
{
    if (w->out_len + n > SNAP_OUT_BUF) {
        int rc = ss_snap_flush(w, err);
        if (rc) return rc;
        if (n > SNAP_OUT_BUF) return write_all(w, p, n, err);
    }
    memcpy(w->out + w->out_len, p, n);
    w->out_len += n;
    return 0;
}

/* Compress the parts into w->zbuf as u32 raw length + one zstd frame (the
 * frame also records the raw size). One context per level, reused: no
 * allocation per record once the buffers have grown. */
static int zstd_parts(struct ss_snap_writer *w, enum snap_level lv, const struct snap_part *parts,
                      int n, size_t raw)
{
    ZSTD_CCtx *z = w->zc[lv];
    if (!z) {
        z = w->zc[lv] = ZSTD_createCCtx();
        if (!z) return -ENOMEM;
        if (ZSTD_isError(ZSTD_CCtx_setParameter(
                z, ZSTD_c_compressionLevel, lv == SNAP_Z_FAST ? SNAP_ZSTD_FAST : SNAP_ZSTD_BEST)))
            return -EIO;
    }
    size_t bound = ZSTD_compressBound(raw) + 4;
    w->zbuf.len = 0;
    if (!snap_buf_reserve(&w->zbuf, bound)) return -ENOMEM;
    snap_put_u32(&w->zbuf, (uint32_t)raw);
    size_t zr;
    if (n == 1) {
        zr = ZSTD_compress2(z, w->zbuf.p + 4, bound - 4, parts[0].p, parts[0].len);
    } else {
        /* streamed part by part (no copy of large parts); the pledged size
         * makes it one frame with its content size, like ZSTD_compress2 */
        ZSTD_CCtx_reset(z, ZSTD_reset_session_only);
        if (ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(z, raw))) return -EIO;
        ZSTD_outBuffer out = {w->zbuf.p + 4, bound - 4, 0};
        zr = 0;
        for (int i = 0; i < n && !ZSTD_isError(zr); i++) {
            ZSTD_inBuffer in = {parts[i].p, parts[i].len, 0};
            ZSTD_EndDirective end = i == n - 1 ? ZSTD_e_end : ZSTD_e_continue;
            do
                zr = ZSTD_compressStream2(z, &out, &in, end);
            while (!ZSTD_isError(zr) && (end == ZSTD_e_end ? zr != 0 : in.pos < in.size) &&
                   out.pos < out.size);
            if (!ZSTD_isError(zr) && (in.pos < in.size || (end == ZSTD_e_end && zr != 0)))
                return -EIO; /* cannot happen: out holds the bound */
        }
        if (!ZSTD_isError(zr)) zr = out.pos;
    }
    if (ZSTD_isError(zr)) {
        ZSTD_CCtx_reset(z, ZSTD_reset_session_only);
        return -EIO;
    }
    w->zbuf.len = 4 + zr;
    return 0;
}

int snap_emit(struct ss_snap_writer *w, uint16_t type, enum snap_level level,
              const struct snap_part *parts, int nparts, struct ss_err *err)
{
    if (w->err) return fail(w, w->err, err);
    size_t raw = 0;
    for (int i = 0; i < nparts; i++)
        raw += parts[i].len;
    if (raw > SNAP_MAX_PAYLOAD) {
        ss_err_set(err, -EFBIG, "capture %s: %zu-byte record over the %u-byte limit", w->path, raw,
                   SNAP_MAX_PAYLOAD);
        return -EFBIG;
    }
    struct snap_part zpart;
    uint16_t flags = 0;
    if (level != SNAP_Z_NONE && raw >= SNAP_COMPRESS_MIN && nparts > 0) {
        int rc = zstd_parts(w, level, parts, nparts, raw);
        if (rc) {
            ss_err_set(err, rc, "capture %s: zstd compression failed", w->path);
            return rc;
        }
        if (w->zbuf.len < raw - raw / 8) { /* keep it only if it saves 1/8 */
            zpart = (struct snap_part){w->zbuf.p, w->zbuf.len};
            parts = &zpart;
            nparts = 1;
            raw = w->zbuf.len;
            flags |= SNAP_RF_ZSTD;
        }
    }
    uint32_t pcrc = 0;
    for (int i = 0; i < nparts; i++)
        if (parts[i].len) pcrc = snap_crc32(pcrc, parts[i].p, parts[i].len);
    uint8_t h[SNAP_REC_HDR];
    memcpy(h, SNAP_SYNC, 4);
    h[4] = (uint8_t)type, h[5] = (uint8_t)(type >> 8);
    h[6] = (uint8_t)flags, h[7] = (uint8_t)(flags >> 8);
    for (int i = 0; i < 4; i++) {
        h[8 + i] = (uint8_t)(raw >> (8 * i));
        h[12 + i] = (uint8_t)(pcrc >> (8 * i));
    }
    uint32_t hcrc = snap_crc32(0, h, 16);
    for (int i = 0; i < 4; i++)
        h[16 + i] = (uint8_t)(hcrc >> (8 * i));
    int rc = out_put(w, h, sizeof(h), err);
    for (int i = 0; i < nparts && !rc; i++)
        if (parts[i].len) rc = out_put(w, parts[i].p, parts[i].len, err);
    if (rc) return rc;
    w->nrecords++;
    if (type < SS_SNAP_NTYPES) {
        w->st.records[type]++;
        w->st.bytes[type] += SNAP_REC_HDR + raw;
    }
    w->st.file_bytes += SNAP_REC_HDR + raw;
    return 0;
}

/* Build w->pay with enc and emit it as one part. */
static int emit_pay(struct ss_snap_writer *w, uint16_t type, enum snap_level lv, struct ss_err *err)
{
    if (w->pay.oom) {
        w->pay.oom = false;
        ss_err_set(err, -ENOMEM, "capture %s: out of memory", w->path);
        return -ENOMEM;
    }
    struct snap_part part = {w->pay.p, w->pay.len};
    return snap_emit(w, type, lv, &part, 1, err);
}

/* ---- create ---- */
int ss_snap_create(struct ss_snap_writer **out, const char *path, const struct ss_snap_header *h,
                   struct ss_err *err)
{
    *out = NULL;
    struct ss_snap_writer *w = calloc(1, sizeof(*w));
    if (w) w->out = malloc(SNAP_OUT_BUF);
    if (w) w->path = strdup(path);
    if (!w || !w->out || !w->path) {
        if (w) free(w->out), free(w->path);
        free(w);
        ss_err_set(err, -ENOMEM, "capture %s: out of memory", path);
        return -ENOMEM;
    }
    w->fd = ss_open_output(path, "capture", false, err);
    if (w->fd < 0) {
        int rc = w->fd;
        w->fd = -1;
        ss_snap_abandon(w);
        return rc;
    }
    /* a capture of stacks is version 5: older readers would find no samples
     * in it and say nothing; they refuse it instead */
    w->nostack = (h->flags & SS_SNAP_HDR_NOSTACK) != 0;
    unsigned version = w->nostack ? SS_SNAP_VERSION : SS_SNAP_VERSION_SAMPLES;
    uint8_t pre[SNAP_PREAMBLE_LEN] = {0};
    memcpy(pre, SNAP_MAGIC, SNAP_MAGIC_LEN);
    pre[8] = version & 0xff;
    pre[9] = (version >> 8) & 0xff;
    int rc = out_put(w, pre, sizeof(pre), err);
    w->st.file_bytes = sizeof(pre);
    if (!rc) {
        w->pay.len = 0;
        snap_enc_header(&w->pay, h);
        rc = emit_pay(w, SS_SNAP_HEADER, SNAP_Z_NONE, err);
    }
    if (!rc) rc = ss_snap_flush(w, err);
    if (rc) {
        ss_snap_abandon(w);
        return rc;
    }
    *out = w;
    return 0;
}

int ss_snap_write_process(struct ss_snap_writer *w, const struct ss_snap_process *p,
                          struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_process(&w->pay, p);
    return emit_pay(w, SS_SNAP_PROCESS, SNAP_Z_FAST, err);
}

/* ---- samples and their memory reads ---- */
void ss_snap_record_read(void *ctx, uint64_t addr, const void *data, size_t len, int err)
{
    struct ss_snap_writer *w = ctx;
    if (w->reads.len + len > SNAP_READS_MAX) err = -E2BIG; /* keep the fact, not the bytes */
    snap_enc_read(&w->reads, addr, data, len, err);
    w->nreads++;
}

void ss_snap_discard_reads(struct ss_snap_writer *w)
{
    w->reads.len = 0;
    w->reads.oom = false;
    w->nreads = 0;
}

int ss_snap_write_sample(struct ss_snap_writer *w, const struct ss_sample *s, uint64_t *seq_out,
                         struct ss_err *err)
{
    uint64_t seq = w->next_seq;
    int rc = -ENOMEM;
    if (w->nostack) {
        ss_err_set(err, -EINVAL, "capture %s: a sample in a capture without stack bytes", w->path);
        return -EINVAL;
    }
    if (!s->stack && s->stack_len) {
        ss_err_set(err, -EINVAL, "capture %s: sample without stack bytes", w->path);
        return -EINVAL;
    }
    w->pay.len = 0;
    snap_enc_sample(&w->pay, s, seq);
    /* key or delta: both stored as is (below) */
    if (w->delta || (w->delta = snap_dstate_new())) snap_delta_encode(w->delta, &w->pay, s, seq);
    snap_enc_sample_tail(&w->pay, s); /* kernel stack, weight: none without */
    if (w->delta && !w->pay.oom) {
        struct snap_part part = {w->pay.p, w->pay.len};
        /* stored as is, keys too: a small zstd frame costs more to inflate
         * than its bytes cost to read, and a key's stack bytes (short
         * matches) inflate at ~7 instructions a byte, 3x what the rest of
         * its replay costs (docs/capture-format.md) */
        rc = snap_emit(w, SS_SNAP_SAMPLE, SNAP_Z_NONE, &part, 1, err);
    } else {
        w->pay.oom = false;
        ss_err_set(err, rc, "capture %s: out of memory", w->path);
    }
    if (!rc && w->nreads) {
        if (w->reads.oom) {
            ss_err_set(err, rc = -ENOMEM, "capture %s: out of memory for memory reads", w->path);
        } else {
            w->pay.len = 0;
            if (!w->rdelta && !(w->rdelta = snap_rstate_new(SNAP_RDELTA_WRITER_SLOTS)))
                rc = -ENOMEM;
            else
                rc = snap_rdelta_encode(w->rdelta, &w->pay, seq, s->tid, w->reads.p, w->reads.len,
                                        w->nreads);
            struct snap_part part = {w->pay.p, w->pay.len};
            if (!rc && w->pay.oom) rc = -ENOMEM;
            if (rc)
                ss_err_set(err, rc, "capture %s: out of memory for memory reads", w->path);
            else
                rc = snap_emit(w, SS_SNAP_MEMREADS, SNAP_Z_NONE, &part, 1, err); /* as samples */
            w->pay.oom = false;
        }
    }
    ss_snap_discard_reads(w);
    if (!rc) {
        w->next_seq++;
        if (seq_out) *seq_out = seq;
    }
    return rc;
}

/* ---- counters ---- */
int ss_snap_write_counters(struct ss_snap_writer *w, uint64_t time_ns,
                           const struct ss_snap_counter *c, uint32_t n, struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_counters(&w->pay, time_ns, c, n);
    return emit_pay(w, SS_SNAP_COUNTERS, SNAP_Z_NONE, err);
}

/* ---- perf maps ---- */
int ss_snap_write_perfmap(struct ss_snap_writer *w, const struct ss_snap_perfmap *m,
                          struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_perfmap(&w->pay, m);
    return emit_pay(w, SS_SNAP_PERFMAP, SNAP_Z_FAST, err);
}

int ss_snap_write_debugfile(struct ss_snap_writer *w, const struct ss_snap_debugfile *d,
                            struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_debugfile(&w->pay, d);
    return emit_pay(w, SS_SNAP_DEBUGFILE, SNAP_Z_NONE, err);
}

int ss_snap_write_ksyms(struct ss_snap_writer *w, const struct ss_snap_ksyms *k, struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_ksyms(&w->pay, k);
    return emit_pay(w, SS_SNAP_KSYMS, SNAP_Z_FAST, err);
}

int ss_snap_write_ljdet(struct ss_snap_writer *w, const struct ss_snap_ljdet *d, struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_ljdet(&w->pay, d);
    return emit_pay(w, SS_SNAP_LJDET, SNAP_Z_NONE, err);
}

int ss_snap_write_ljrt(struct ss_snap_writer *w, const struct ss_snap_ljrt *x, struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_ljrt(&w->pay, x);
    return emit_pay(w, SS_SNAP_LJRT, SNAP_Z_NONE, err);
}

int ss_snap_write_procevent(struct ss_snap_writer *w, const struct ss_proc_event *ev,
                            struct ss_err *err)
{
    w->pay.len = 0;
    snap_enc_procevent(&w->pay, ev);
    return emit_pay(w, SS_SNAP_PROCEVENT, SNAP_Z_NONE, err);
}

uint32_t ss_snap_capture_counters(const struct ss_capture_stats *st, struct ss_snap_counter *out)
{
    out[0] = (struct ss_snap_counter){"capture.seen", st->seen};
    out[1] = (struct ss_snap_counter){"capture.emitted", st->emitted};
    out[2] = (struct ss_snap_counter){"capture.dropped", st->dropped};
    out[3] = (struct ss_snap_counter){"capture.copy_failed", st->copy_failed};
    out[4] = (struct ss_snap_counter){"capture.copy_partial", st->copy_partial};
    out[5] = (struct ss_snap_counter){"capture.skipped", st->skipped};
    if (!st->off_blocks && !st->off_short && !st->off_unmatched) return 6; /* as before */
    out[6] = (struct ss_snap_counter){"capture.off_blocks", st->off_blocks};
    out[7] = (struct ss_snap_counter){"capture.off_short", st->off_short};
    out[8] = (struct ss_snap_counter){"capture.off_unmatched", st->off_unmatched};
    return SS_SNAP_CAPTURE_COUNTERS;
}

/* ---- end ---- */
void ss_snap_writer_stats(const struct ss_snap_writer *w, struct ss_snap_stats *st)
{
    *st = w->st;
}

void ss_snap_abandon(struct ss_snap_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < 2; i++)
        ZSTD_freeCCtx(w->zc[i]);
    snap_dstate_free(w->delta);
    snap_rstate_free(w->rdelta);
    snap_fdict_free(w->fdict);
    free(w->ids);
    snap_buf_free(&w->defs);
    snap_buf_free(&w->pay);
    snap_buf_free(&w->zbuf);
    snap_buf_free(&w->reads);
    free(w->bundles);
    free(w->out);
    free(w->path);
    free(w);
}

int ss_snap_close(struct ss_snap_writer *w, struct ss_err *err)
{
    if (!w) return 0;
    int rc = w->err;
    if (rc) {
        fail(w, rc, err);
    } else {
        struct ss_snap_trailer t = {
            .end_real_ns = now_ns(CLOCK_REALTIME),
            .end_mono_ns = now_ns(CLOCK_MONOTONIC),
            .records = w->nrecords,
            .samples = w->st.records[SS_SNAP_SAMPLE] + w->st.records[SS_SNAP_STACK],
            .processes = w->st.records[SS_SNAP_PROCESS],
            .bundles = w->st.records[SS_SNAP_BUNDLE],
            .offset = w->st.file_bytes,
        };
        w->pay.len = 0;
        snap_enc_trailer(&w->pay, &t);
        rc = emit_pay(w, SS_SNAP_TRAILER, SNAP_Z_NONE, err);
        if (!rc) rc = ss_snap_flush(w, err);
    }
    if (close(w->fd) < 0 && !rc) {
        rc = -errno;
        ss_err_set(err, rc, "close capture %s: %s", w->path, strerror(errno));
    }
    w->fd = -1;
    ss_snap_abandon(w);
    return rc;
}
