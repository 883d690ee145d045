/* snapfile/reader.c: reading a capture as a stream. A forward-only read
 * window over the file descriptor (works on pipes), record framing checks
 * (sync marker, header CRC, payload CRC), resynchronisation after damage by
 * scanning for the next sync marker whose header CRC holds, the payload
 * handed to payload.c (decompression, typed decoding) into one of two
 * slots, and the one-record lookahead that attaches a sample's memory reads
 * to the sample. Damage never fails the read: it becomes a
 * SS_SNAP_CORRUPT event; a cut-short tail becomes one SS_SNAP_TRUNCATED. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapfile/format.h"
#include "snapfile/stackrec.h"
#include "snapfile/payload.h"
#include "snapfile/rdelta.h"

#define WIN_INIT (64u << 10) /* grows to the largest record */
#define SCAN_CHUNK (64u << 10)

struct ss_snap_reader {
    int fd;
    char *name;
    /* read window: buf[0] is file offset base, len bytes valid */
    uint8_t *buf;
    size_t cap, len;
    uint64_t base;
    bool eof;
    bool mapped;  /* buf is the file mapped whole as it was at open (base 0), not read */
    uint64_t pos; /* offset of the next record */
    bool done;    /* end reached (clean, truncated or corrupt to the end) */
    int late_err; /* I/O error met while looking ahead */
    char late_msg[sizeof(((struct ss_err *)0)->msg)];
    struct snap_slot slots[2];
    int pend; /* slot holding an undelivered lookahead record, or -1 */
    int last; /* slot of the record delivered last, or -1 */
    struct ss_snap_header header;
    bool have_header;
    char *header_cmd;
    struct ss_snap_stats st;
    struct snap_decoder dec; /* decompression, typed decoding (payload.c) */
    uint32_t version;
    struct snap_dstate *delta;  /* version 3: the threads' bytes so far */
    struct snap_rstate *rdelta; /* version 4: the threads' key memory reads */
    struct snap_ftable *ftab;   /* version 5: the frames stack records refer to */
};

/* ---- window ---- */

/* A regular file is mapped whole at open: no read(2) copies. Should the
 * reader need bytes past what the file held then (a capture still being
 * written), it goes on with read(2) from there, as it would have. */
static void map_file(struct ss_snap_reader *r)
{
    struct stat st;
    if (fstat(r->fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < SNAP_PREAMBLE_LEN ||
        (uint64_t)st.st_size > SIZE_MAX / 2)
        return;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, r->fd, 0);
    if (m == MAP_FAILED) return;
    free(r->buf);
    r->buf = m;
    r->cap = r->len = (size_t)st.st_size;
    r->base = 0;
    r->eof = true;
    r->mapped = true;
}

/* From the mapping to a read window at off: the mapped bytes from off on
 * (none when off is past them) are kept, the file is read on after them. */
static int unmap_to_window(struct ss_snap_reader *r, uint64_t off)
{
    size_t size = r->len, from = off < size ? (size_t)off : size, keep = size - from;
    size_t cap = keep > WIN_INIT ? keep : WIN_INIT;
    uint8_t *b = malloc(cap);
    if (!b) return -ENOMEM;
    if (lseek(r->fd, (off_t)size, SEEK_SET) < 0) {
        int e = -errno;
        free(b);
        return e;
    }
    memcpy(b, r->buf + from, keep);
    munmap(r->buf, size);
    r->buf = b;
    r->cap = cap;
    r->len = keep;
    r->base = from;
    r->eof = false;
    r->mapped = false;
    return 0;
}

/* Make [off, off+n) available (short only at end of file). off never goes
 * backwards. The buffer grows only as data actually arrives, so a corrupt
 * length cannot make us allocate more than the file holds. */
static int win_get(struct ss_snap_reader *r, uint64_t off, size_t n, const uint8_t **p,
                   size_t *avail)
{
    if (r->mapped) {
        if (off <= r->len && r->len - off >= n) {
            *p = r->buf + off;
            *avail = n;
            return 0;
        }
        int rc = unmap_to_window(r, off);
        if (rc) return rc;
    }
    if (off < r->base) return -EINVAL;
    if (off > r->base + r->len) { /* skip forward (not used by the parser) */
        r->base += r->len;
        r->len = 0;
        while (r->base < off && !r->eof) {
            size_t want = off - r->base < r->cap ? (size_t)(off - r->base) : r->cap;
            ssize_t k = read(r->fd, r->buf, want);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) return -errno;
            if (k == 0) r->eof = true;
            r->base += (uint64_t)k;
        }
        if (r->base < off) {
            *p = r->buf;
            *avail = 0;
            return 0;
        }
    }
    size_t drop = (size_t)(off - r->base);
    if (r->len - drop < n && !r->eof) {
        memmove(r->buf, r->buf + drop, r->len - drop);
        r->len -= drop;
        r->base = off;
        drop = 0;
        while (r->len < n && !r->eof) {
            if (r->len == r->cap) {
                size_t cap = r->cap * 2 < n ? n : r->cap * 2;
                uint8_t *b = realloc(r->buf, cap);
                if (!b) return -ENOMEM;
                r->buf = b;
                r->cap = cap;
            }
            ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) return -errno;
            if (k == 0) r->eof = true;
            r->len += (size_t)k;
        }
    }
    *p = r->buf + drop;
    *avail = r->len - drop < n ? r->len - drop : n;
    return 0;
}

/* A fuzzing build (snapfile_fuzz_nocrc) accepts any CRC so that mutated
 * inputs reach the decoders; never defined in a normal build. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_OK(stored, computed) ((void)(stored), (void)(computed), true)
#else
#define CRC_OK(stored, computed) ((stored) == (computed))
#endif

static bool hdr_valid(const uint8_t *h)
{
    return memcmp(h, SNAP_SYNC, 4) == 0 && CRC_OK(snap_le32(h + 16), snap_crc32(0, h, 16)) &&
           snap_le32(h + 8) <= SNAP_MAX_PAYLOAD;
}

/* Find the next valid record header at or after from. 1 found (*at), 0 none
 * before the end of the file, negative errno. Always makes progress. */
static int scan(struct ss_snap_reader *r, uint64_t from, uint64_t *at)
{
    uint64_t pos = from;
    for (;;) {
        const uint8_t *p;
        size_t avail;
        int rc = win_get(r, pos, SCAN_CHUNK + SNAP_REC_HDR, &p, &avail);
        if (rc) return rc;
        if (avail < SNAP_REC_HDR) return 0;
        size_t last = avail - SNAP_REC_HDR; /* candidates 0..last */
        for (size_t i = 0; i <= last;) {
            const uint8_t *q = memchr(p + i, SNAP_SYNC[0], last - i + 1);
            if (!q) break;
            if (hdr_valid(q)) {
                *at = pos + (uint64_t)(q - p);
                return 1;
            }
            i = (size_t)(q - p) + 1;
        }
        pos += last + 1;
    }
}

static uint64_t file_end(const struct ss_snap_reader *r)
{
    return r->base + r->len; /* valid once eof is set */
}

static int keep_header(struct ss_snap_reader *r, const struct ss_snap_header *h)
{
    if (r->have_header) return 0;
    char *cmd = strdup(h->command ? h->command : "");
    if (!cmd) return -ENOMEM;
    r->header = *h;
    r->header.version = r->version;
    r->header.command = r->header_cmd = cmd;
    r->have_header = true;
    return 0;
}

static int corrupt(struct ss_snap_reader *r, struct snap_slot *s, uint64_t off, uint64_t skipped,
                   const char *why)
{
    memset(&s->rec, 0, sizeof(s->rec));
    if (why != s->msg) snprintf(s->msg, sizeof(s->msg), "%s", why);
    s->rec.type = SS_SNAP_CORRUPT;
    s->rec.offset = off;
    s->rec.corrupt = (struct ss_snap_corrupt){.offset = off, .skipped = skipped, .reason = s->msg};
    r->st.corrupt++;
    r->st.corrupt_bytes += skipped;
    r->st.file_bytes = r->pos;
    return 1;
}

static int truncated(struct ss_snap_reader *r, struct snap_slot *s, uint64_t off, uint64_t ignored)
{
    memset(&s->rec, 0, sizeof(s->rec));
    s->rec.type = SS_SNAP_TRUNCATED;
    s->rec.offset = off;
    s->rec.truncated = (struct ss_snap_truncated){.offset = off, .ignored = ignored};
    r->st.trailing_bytes = ignored;
    r->st.file_bytes = off + ignored;
    r->done = true;
    return 1;
}

/* Read the next deliverable record or event into s. 1, 0 at the end, or
 * negative errno (I/O, memory). */
static int read_record(struct ss_snap_reader *r, struct snap_slot *s)
{
    for (;;) {
        if (r->done) return 0;
        uint64_t x = r->pos;
        const uint8_t *p;
        size_t avail;
        int rc = win_get(r, x, SNAP_REC_HDR, &p, &avail);
        if (rc) return rc;
        if (avail == 0) {
            r->done = true;
            r->st.file_bytes = x;
            return 0;
        }
        if (avail < SNAP_REC_HDR) return truncated(r, s, x, avail);
        uint64_t y;
        if (!hdr_valid(p)) {
            rc = scan(r, x + 1, &y);
            if (rc < 0) return rc;
            if (rc == 0) {
                r->done = true;
                r->pos = file_end(r);
                return corrupt(r, s, x, r->pos - x, "bad record header");
            }
            r->pos = y;
            return corrupt(r, s, x, y - x, "bad record header");
        }
        uint16_t type = snap_le16(p + 4), flags = snap_le16(p + 6);
        uint32_t len = snap_le32(p + 8), pcrc = snap_le32(p + 12);
        size_t size = (size_t)SNAP_REC_HDR + len;
        rc = win_get(r, x, size, &p, &avail);
        if (rc) return rc;
        if (avail < size) {
            /* Cut short, unless a complete record follows (then the length
             * was wrong: corruption). */
            rc = scan(r, x + 1, &y);
            if (rc < 0) return rc;
            if (rc == 1) {
                r->pos = y;
                return corrupt(r, s, x, y - x, "record length runs past the end of the file");
            }
            return truncated(r, s, x, avail);
        }
        r->pos = x + size;
        if (!CRC_OK(pcrc, snap_crc32(0, p + SNAP_REC_HDR, len)))
            return corrupt(r, s, x, size, "payload checksum mismatch");
        /* frames and stacks before version 5 are unknown types, as they were */
        if (type == 0 || type >= SS_SNAP_NTYPES || (flags & ~SNAP_RF_KNOWN) ||
            ((type == SS_SNAP_FRAMES || type == SS_SNAP_STACK) && r->version < 5)) {
            r->st.unknown++;
            r->st.file_bytes = r->pos;
            continue;
        }
        const char *why = "malformed record";
        /* a sample's decoder clears its own part (not its 1 KB of kernel
         * addresses: those it fills are the ones s.kernel points to) */
        memset(&s->rec, 0,
               type == SS_SNAP_SAMPLE ? offsetof(struct ss_snap_record, sample) : sizeof(s->rec));
        r->dec.version = r->version;
        r->dec.rdelta = r->rdelta;
        r->dec.ftab = r->ftab;
        r->dec.off = x;
        rc = snap_decode_payload(&r->dec, s, type, flags, p + SNAP_REC_HDR, len, &why);
        if (!rc && type == SS_SNAP_HEADER) rc = keep_header(r, &s->rec.header);
        if (rc == -ENOMEM) return rc;
        if (rc) return corrupt(r, s, x, size, why);
        s->rec.type = type;
        s->rec.offset = x;
        s->rec.size = (uint32_t)size;
        s->rec.compressed = (flags & (SNAP_RF_DEFLATE | SNAP_RF_ZSTD)) != 0;
        r->st.records[type]++;
        r->st.bytes[type] += size;
        r->st.file_bytes = r->pos;
        return 1;
    }
}

/* ---- public ---- */
static void set_io_err(struct ss_snap_reader *r, int rc, struct ss_err *err)
{
    if (rc == -ENOMEM)
        ss_err_set(err, rc, "%s: out of memory", r->name);
    else
        ss_err_set(err, rc, "read %s: %s", r->name, strerror(-rc));
}

int ss_snap_open_fd(struct ss_snap_reader **out, int fd, const char *name, struct ss_err *err)
{
    *out = NULL;
    struct ss_snap_reader *r = calloc(1, sizeof(*r));
    if (r) r->name = strdup(name);
    if (r) r->buf = malloc(WIN_INIT);
    if (!r || !r->name || !r->buf) {
        if (r) free(r->name), free(r->buf);
        free(r);
        close(fd);
        ss_err_set(err, -ENOMEM, "%s: out of memory", name);
        return -ENOMEM;
    }
    r->fd = fd;
    r->cap = WIN_INIT;
    r->pend = r->last = -1;
    map_file(r);
    const uint8_t *p;
    size_t avail;
    int rc = win_get(r, 0, SNAP_PREAMBLE_LEN, &p, &avail);
    if (rc) {
        set_io_err(r, rc, err);
    } else if (avail < SNAP_MAGIC_LEN || memcmp(p, SNAP_MAGIC, SNAP_MAGIC_LEN) != 0) {
        ss_err_set(err, rc = -EINVAL, "not a stacksnap capture: %s", name);
    } else if (avail < SNAP_PREAMBLE_LEN) {
        ss_err_set(err, rc = -EINVAL, "not a stacksnap capture: %s (cut short after %zu bytes)",
                   name, avail);
    } else if ((r->version = snap_le32(p + 8)) == 0) {
        ss_err_set(err, rc = -EINVAL, "not a stacksnap capture: %s (format version 0)", name);
    } else if (r->version > SS_SNAP_VERSION) {
        ss_err_set(err, rc = -EPROTONOSUPPORT,
                   "%s: capture format version %" PRIu32
                   " is newer than this stacksnap supports (version %u)",
                   name, r->version, SS_SNAP_VERSION);
    }
    if (!rc && r->version >= 4 && !(r->rdelta = snap_rstate_new(SNAP_RDELTA_READER_SLOTS)))
        ss_err_set(err, rc = -ENOMEM, "%s: out of memory", name);
    if (!rc && r->version >= 5 && !(r->ftab = snap_ftable_new()))
        ss_err_set(err, rc = -ENOMEM, "%s: out of memory", name);
    if (!rc && r->version >= 3 && !(r->delta = snap_dstate_new()))
        ss_err_set(err, rc = -ENOMEM, "%s: out of memory", name);
    if (!rc) {
        r->pos = SNAP_PREAMBLE_LEN;
        r->st.file_bytes = SNAP_PREAMBLE_LEN;
        /* Look at the first record now so the header is known. */
        rc = read_record(r, &r->slots[0]);
        if (rc == 1) r->pend = 0;
        if (rc < 0) set_io_err(r, rc, err);
        rc = rc < 0 ? rc : 0;
    }
    if (rc) {
        ss_snap_close_reader(r);
        return rc;
    }
    *out = r;
    return 0;
}

int ss_snap_open(struct ss_snap_reader **out, const char *path, struct ss_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        ss_err_set(err, -e, "open capture %s: %s", path, strerror(e));
        return -e;
    }
    return ss_snap_open_fd(out, fd, path, err);
}

const struct ss_snap_header *ss_snap_get_header(const struct ss_snap_reader *r)
{
    return r->have_header ? &r->header : NULL;
}

int ss_snap_next(struct ss_snap_reader *r, struct ss_snap_record *rec, struct ss_err *err)
{
    if (r->late_err) {
        int rc = r->late_err;
        r->late_err = 0;
        ss_err_set(err, rc, "%s", r->late_msg);
        return rc;
    }
    int cur = r->pend;
    r->pend = r->last = -1;
    if (cur < 0) {
        cur = 0;
        int rc = read_record(r, &r->slots[cur]);
        if (rc <= 0) {
            if (rc < 0) set_io_err(r, rc, err);
            return rc;
        }
    }
    struct snap_slot *s = &r->slots[cur];
    if (s->rec.type == SS_SNAP_SAMPLE) {
        struct snap_slot *o = &r->slots[1 - cur];
        int rc = read_record(r, o);
        if (rc == 1 && o->rec.type == SS_SNAP_MEMREADS &&
            o->rec.memreads.sample_seq == s->rec.sample.seq) {
            s->rec.sample.has_reads = true;
            s->rec.sample.nreads = o->rec.memreads.nreads;
            s->rec.sample.reads = o->rec.memreads.reads;
        } else if (rc == 1) {
            r->pend = 1 - cur;
        } else if (rc < 0) {
            struct ss_err e = {0};
            set_io_err(r, rc, &e);
            r->late_err = rc;
            snprintf(r->late_msg, sizeof(r->late_msg), "%s", e.msg);
        }
    }
    if (s->rec.type == SS_SNAP_SAMPLE && r->version >= 3) {
        const char *why = "malformed record";
        int rc = r->delta ? snap_delta_apply(r->delta, &s->rec.sample, &s->dl, &why) : -ENOMEM;
        if (rc == -ENOMEM) {
            set_io_err(r, rc, err);
            return rc;
        }
        if (rc) { /* its bytes cannot be built: the sample is lost, not the file */
            uint64_t off = s->rec.offset, size = s->rec.size;
            if (s->rec.sample.has_reads) r->pend = 1 - cur; /* its reads come next, alone */
            r->st.records[SS_SNAP_SAMPLE]--;
            r->st.bytes[SS_SNAP_SAMPLE] -= size;
            uint64_t pos = r->st.file_bytes;
            corrupt(r, s, off, size, why);
            r->st.file_bytes = pos;
        }
    }
    r->last = cur;
    /* a sample without its kernel addresses' copy: s.kernel points to the
     * slot's (1 KB less to copy per sample) */
    memcpy(rec, &s->rec,
           s->rec.type == SS_SNAP_SAMPLE
               ? offsetof(struct ss_snap_record, sample) + offsetof(struct ss_snap_sample, kips)
               : sizeof(*rec));
    return 1;
}

int ss_snap_foreach(struct ss_snap_reader *r, ss_snap_record_fn fn, void *ctx, struct ss_err *err)
{
    struct ss_snap_record rec;
    int rc;
    while ((rc = ss_snap_next(r, &rec, err)) == 1) {
        int v = fn(ctx, &rec);
        if (v) return v;
    }
    return rc;
}

uint8_t *ss_snap_take_bundle(struct ss_snap_reader *r, size_t *len)
{
    if (r->last < 0) return NULL;
    struct snap_slot *s = &r->slots[r->last];
    if (s->rec.type != SS_SNAP_BUNDLE || !s->raw || !s->rec.bundle.data) return NULL;
    size_t n = (size_t)s->rec.bundle.size;
    uint8_t *b = s->raw;
    memmove(b, s->rec.bundle.data, n);
    s->raw = NULL;
    s->raw_cap = 0;
    s->rec.bundle.data = NULL;
    *len = n;
    return b;
}

int ss_snap_rewind(struct ss_snap_reader *r, struct ss_err *err)
{
    if (!r->mapped && lseek(r->fd, SNAP_PREAMBLE_LEN, SEEK_SET) < 0) {
        int e = errno;
        ss_err_set(err, -e, "rewind %s: %s", r->name, strerror(e));
        return -e;
    }
    if (!r->mapped) { /* the mapping stays as it is: the file from offset 0 */
        r->base = SNAP_PREAMBLE_LEN;
        r->len = 0;
        r->eof = false;
    }
    r->pos = SNAP_PREAMBLE_LEN;
    r->done = false;
    r->late_err = 0;
    r->pend = r->last = -1;
    if (r->delta) snap_dstate_reset(r->delta);
    snap_rstate_reset(r->rdelta);
    snap_ftable_reset(r->ftab);
    memset(&r->st, 0, sizeof(r->st));
    r->st.file_bytes = SNAP_PREAMBLE_LEN;
    return 0;
}

void ss_snap_reader_stats(const struct ss_snap_reader *r, struct ss_snap_stats *st)
{
    *st = r->st;
}

void ss_snap_close_reader(struct ss_snap_reader *r)
{
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    for (int i = 0; i < 2; i++) {
        free(r->slots[i].raw);
        snap_arrays_free(&r->slots[i].arr);
    }
    snap_decoder_free(&r->dec);
    snap_dstate_free(r->delta);
    snap_rstate_free(r->rdelta);
    snap_ftable_free(r->ftab);
    free(r->header_cmd);
    if (r->mapped)
        munmap(r->buf, r->len);
    else
        free(r->buf);
    free(r->name);
    free(r);
}

const char *ss_snap_event_str(const struct ss_snap_reader *r, const struct ss_snap_record *rec,
                              char *buf, size_t len)
{
    if (rec->type == SS_SNAP_CORRUPT)
        snprintf(buf, len,
                 "%s: corrupted record at offset %" PRIu64 " skipped (%s, %" PRIu64 " bytes)",
                 r->name, rec->corrupt.offset, rec->corrupt.reason, rec->corrupt.skipped);
    else if (rec->type == SS_SNAP_TRUNCATED)
        snprintf(buf, len,
                 "%s: truncated at offset %" PRIu64 ", ignored %" PRIu64 " trailing bytes", r->name,
                 rec->truncated.offset, rec->truncated.ignored);
    else
        snprintf(buf, len, "%s: %s record at offset %" PRIu64, r->name, ss_snap_type_str(rec->type),
                 rec->offset);
    return buf;
}

const char *ss_snap_type_str(uint32_t type)
{
    switch (type) {
    case SS_SNAP_HEADER:
        return "header";
    case SS_SNAP_PROCESS:
        return "process";
    case SS_SNAP_SAMPLE:
        return "sample";
    case SS_SNAP_MEMREADS:
        return "memreads";
    case SS_SNAP_COUNTERS:
        return "counters";
    case SS_SNAP_BUNDLE:
        return "bundle";
    case SS_SNAP_TRAILER:
        return "trailer";
    case SS_SNAP_PERFMAP:
        return "perfmap";
    case SS_SNAP_KSYMS:
        return "kernel symbols";
    case SS_SNAP_DEBUGFILE:
        return "debugfile";
    case SS_SNAP_PROCEVENT:
        return "procevent";
    case SS_SNAP_LJDET:
        return "luajit detection";
    case SS_SNAP_FRAMES:
        return "frames";
    case SS_SNAP_STACK:
        return "stack";
    case SS_SNAP_LJRT:
        return "luajit runtime";
    case SS_SNAP_CORRUPT:
        return "corrupt";
    case SS_SNAP_TRUNCATED:
        return "truncated";
    }
    return "unknown";
}
