/* test/snapfile/damage.c: damaged captures. A small real capture cut at
 * every byte offset delivers exactly its complete records and reports the
 * ignored tail; every single-byte corruption skips exactly the damaged record
 * and reports its offset (format 3: a damaged key sample also costs the
 * delta-coded samples of its thread that refer to it, reported the same); random mutations and
 * crafted garbage records never crash, hang, or produce a record that was not written; a writer
 * killed with SIGKILL leaves a readable file; pipes read like files. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "helpers.h"

#define MAXF 256

struct fixture {
    char *dir, *path;
    uint8_t *buf;
    size_t size;
    struct th_frame fr[MAXF];
    size_t nfr;
    struct th_list full;
};

static void fixture_init(struct fixture *f, int nsamples, uint32_t stack)
{
    f->dir = th_tmpdir();
    f->path = th_path(f->dir, "small.snap");
    f->size = th_write_small(f->path, nsamples, stack);
    f->buf = th_load(f->path, &f->size);
    f->nfr = th_frames(f->buf, f->size, f->fr, MAXF);
    cr_assert(f->nfr > 4 && f->fr[f->nfr - 1].end == f->size, "framing oracle disagrees");
    cr_assert_eq(th_read_fd(th_memfd(f->buf, f->size), &f->full, NULL, 0), 0);
    cr_assert_eq(f->full.n, f->nfr, "one item per record expected");
    for (size_t i = 0; i < f->nfr; i++)
        cr_assert_eq(f->full.v[i].type, f->fr[i].type);
}

static void fixture_fini(struct fixture *f)
{
    th_list_free(&f->full);
    free(f->buf);
    th_rmtree(f->dir);
    free(f->path);
    free(f->dir);
}

static void same_item(const struct th_item *a, const struct th_item *b, const char *ctx, size_t at)
{
    cr_assert_eq(a->type, b->type, "%s %zu: type %u != %u", ctx, at, a->type, b->type);
    cr_assert_eq(a->digest, b->digest, "%s %zu: record content differs", ctx, at);
    cr_assert_eq(a->a, b->a, "%s %zu: event offset", ctx, at);
    cr_assert_eq(a->b, b->b, "%s %zu: event size", ctx, at);
}

static uint64_t accounted(const struct th_list *l)
{
    uint64_t n = 16 + l->st.corrupt_bytes + l->st.trailing_bytes;
    for (int t = 0; t < SS_SNAP_NTYPES; t++)
        n += l->st.bytes[t];
    return n;
}

Test(snapfile_damage, truncation_at_every_offset)
{
    struct fixture f;
    fixture_init(&f, 4, 600);
    for (size_t cut = 0; cut <= f.size; cut++) {
        struct th_list l;
        char msg[300];
        int rc = th_read_fd(th_memfd(f.buf, cut), &l, msg, sizeof(msg));
        if (cut < 16) {
            cr_assert_eq(rc, -EINVAL, "cut %zu", cut);
            cr_assert(strncmp(msg, "not a stacksnap capture: cap.snap", 33) == 0, "%s", msg);
            if (cut < 8) cr_assert_str_eq(msg, "not a stacksnap capture: cap.snap");
            continue;
        }
        cr_assert_eq(rc, 0, "cut %zu: %s", cut, msg);
        size_t k = 0;
        while (k < f.nfr && f.fr[k].end <= cut)
            k++;
        uint64_t done = k ? f.fr[k - 1].end : 16;
        size_t want = k + (cut > done);
        cr_assert_eq(l.n, want, "cut %zu: %zu items, want %zu", cut, l.n, want);
        for (size_t i = 0; i < k; i++)
            same_item(&l.v[i], &f.full.v[i], "cut", cut);
        if (cut > done) {
            struct th_item t = {.type = SS_SNAP_TRUNCATED, .a = done, .b = cut - done};
            same_item(&l.v[k], &t, "cut", cut);
        }
        cr_assert_eq(l.st.corrupt, 0);
        cr_assert_eq(l.st.trailing_bytes, cut - done);
        cr_assert_eq(accounted(&l), cut);
        cr_assert_eq(l.header, k > 0);
        th_list_free(&l);
    }
    fixture_fini(&f);
}

Test(snapfile_damage, every_single_byte_corruption_is_isolated)
{
    struct fixture f;
    fixture_init(&f, 4, 600);
    uint8_t *b = malloc(f.size);
    for (size_t o = 0; o < f.size; o++) {
        memcpy(b, f.buf, f.size);
        b[o] ^= (uint8_t)(1 + (o * 37) % 255);
        struct th_list l;
        char msg[300];
        int rc = th_read_fd(th_memfd(b, f.size), &l, msg, sizeof(msg));
        if (o < 8) {
            cr_assert_eq(rc, -EINVAL, "flip %zu", o);
            cr_assert_str_eq(msg, "not a stacksnap capture: cap.snap");
            continue;
        }
        if (o < 12) { /* version: newer, or 0 */
            cr_assert(rc == -EPROTONOSUPPORT || rc == -EINVAL, "flip %zu: %d %s", o, rc, msg);
            continue;
        }
        cr_assert_eq(rc, 0, "flip %zu: %s", o, msg);
        size_t bad = f.nfr; /* record holding the flipped byte */
        for (size_t i = 0; i < f.nfr; i++)
            if (o >= f.fr[i].off && o < f.fr[i].end) bad = i;
        cr_assert_eq(l.n, f.nfr, "flip %zu: %zu items", o, l.n);
        /* one thread: its first sample is the key the others refer to, and
         * its first memreads record the key of the later ones (format 4) */
        size_t key = 0, rkey = 0, lost = 0;
        while (key < f.nfr && f.fr[key].type != SS_SNAP_SAMPLE)
            key++;
        while (rkey < f.nfr && f.fr[rkey].type != SS_SNAP_MEMREADS)
            rkey++;
        for (size_t i = 0; i < f.nfr; i++) {
            int based = (bad == key && i > bad && f.fr[i].type == SS_SNAP_SAMPLE) ||
                        (bad == rkey && i > bad && f.fr[i].type == SS_SNAP_MEMREADS);
            lost += based;
            if (i != bad && !based) {
                same_item(&l.v[i], &f.full.v[i], "flip", o);
                continue;
            }
            struct th_item c = {
                .type = SS_SNAP_CORRUPT, .a = f.fr[i].off, .b = f.fr[i].end - f.fr[i].off};
            same_item(&l.v[i], &c, "flip", o);
        }
        cr_assert_eq(l.st.corrupt, (bad < f.nfr) + lost);
        cr_assert_eq(accounted(&l), f.size);
        cr_assert_eq(l.header, bad != 0);
        th_list_free(&l);
    }
    free(b);
    fixture_fini(&f);
}

/* xorshift64*: reproducible randomness from a printed seed */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static bool known_digest(const struct th_list *full, const struct th_item *it)
{
    for (size_t i = 0; i < full->n; i++)
        if (full->v[i].type == it->type && full->v[i].digest == it->digest) return true;
    return false;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(snapfile_damage, random_mutations_never_crash_hang_or_invent_records)
{
    struct fixture f;
    fixture_init(&f, 6, 900);
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u | 1;
    cr_log_info("seed %llu", (unsigned long long)seed);
    size_t cap = f.size * 3 + 4096;
    uint8_t *b = malloc(cap);
    double t0 = now_s();
    int iters = 0;
    uint64_t ncorrupt = 0, ntrunc = 0, nrecs = 0;
    for (; iters < 20000 && now_s() - t0 < 6; iters++) {
        size_t n = f.size;
        memcpy(b, f.buf, n);
        int muts = 1 + (int)(rnd(&seed) % 6);
        for (int m = 0; m < muts && n > 16; m++) {
            size_t pos = 16 + rnd(&seed) % (n - 16);
            size_t len = 1 + rnd(&seed) % 300;
            if (len > n - pos) len = n - pos;
            switch (rnd(&seed) % 7) {
            case 0:
                b[pos] ^= (uint8_t)(1 + rnd(&seed) % 255);
                break;
            case 1:
                n = pos;
                break; /* cut */
            case 2:    /* zero a range */
                memset(b + pos, 0, len);
                break;
            case 3: /* insert garbage */
                if (n + len <= cap) {
                    memmove(b + pos + len, b + pos, n - pos);
                    for (size_t i = 0; i < len; i++)
                        b[pos + i] = (uint8_t)rnd(&seed);
                    n += len;
                }
                break;
            case 4: /* delete a range */
                memmove(b + pos, b + pos + len, n - pos - len);
                n -= len;
                break;
            case 5: { /* duplicate a whole record somewhere (a valid splice) */
                const struct th_frame *fr = &f.fr[rnd(&seed) % f.nfr];
                size_t fl = fr->end - fr->off;
                if (n + fl <= cap) {
                    memmove(b + pos + fl, b + pos, n - pos);
                    memcpy(b + pos, f.buf + fr->off, fl);
                    n += fl;
                }
                break;
            }
            case 6: /* a valid header claiming a wild length, payload crc wrong */
                if (n + 20 <= cap) {
                    uint8_t h[20 + 4];
                    uint32_t junk = (uint32_t)rnd(&seed);
                    th_frame_record(h, (uint16_t)(1 + rnd(&seed) % 7), 0, &junk, 4);
                    uint32_t wild = (uint32_t)(rnd(&seed) % (1u << 30));
                    memcpy(h + 8, &wild, 4);
                    uint32_t hc = (uint32_t)crc32(0, h, 16);
                    memcpy(h + 16, &hc, 4);
                    memmove(b + pos + 20, b + pos, n - pos);
                    memcpy(b + pos, h, 20);
                    n += 20;
                }
                break;
            }
        }
        struct th_list l;
        char msg[300];
        int rc = th_read_fd(th_memfd(b, n), &l, msg, sizeof(msg));
        cr_assert_eq(rc, 0, "iteration %d: %s", iters, msg);
        for (size_t i = 0; i < l.n; i++)
            if (l.v[i].type < SS_SNAP_NTYPES)
                cr_assert(known_digest(&f.full, &l.v[i]),
                          "iteration %d: a record that was never written (type %u)", iters,
                          l.v[i].type);
        if (!l.st.unknown) cr_assert_eq(accounted(&l), n, "iteration %d: bytes unaccounted", iters);
        ncorrupt += l.st.corrupt;
        ntrunc += l.st.trailing_bytes > 0;
        nrecs += l.n - l.st.corrupt - (l.st.trailing_bytes > 0);
        th_list_free(&l);
    }
    cr_log_info("%d mutated files of ~%zu bytes read: %llu records, %llu corrupt regions, "
                "%llu truncated files",
                iters, f.size, (unsigned long long)nrecs, (unsigned long long)ncorrupt,
                (unsigned long long)ntrunc);
    cr_assert(ncorrupt > (uint64_t)iters / 2 && ntrunc > 0 && nrecs > (uint64_t)iters);
    cr_assert(iters >= 200);
    free(b);
    fixture_fini(&f);
}

/* Records with valid framing and CRCs but garbage payloads reach the
 * decoders: each must come out as a record or a CORRUPT event. */
Test(snapfile_damage, garbage_payloads_with_valid_framing)
{
    uint64_t seed = (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
    cr_log_info("seed %llu", (unsigned long long)seed);
    uint8_t *file = malloc(1 << 20);
    uint8_t payload[4096], z[8192];
    for (int it = 0; it < 300; it++) {
        size_t n = 0;
        memcpy(file, "\x89SSNAP\r\n\x01\0\0\0\0\0\0\0", 16);
        n = 16;
        int nrec = 1 + (int)(rnd(&seed) % 20);
        for (int k = 0; k < nrec; k++) {
            uint32_t len = (uint32_t)(rnd(&seed) % 600);
            for (uint32_t i = 0; i < len; i++) /* small numbers make plausible lengths */
                payload[i] = rnd(&seed) % 4 ? (uint8_t)(rnd(&seed) % 3) : (uint8_t)rnd(&seed);
            uint16_t type = (uint16_t)(1 + rnd(&seed) % 8);
            uint64_t how = rnd(&seed) % 6;
            if (how < 2) { /* deflated, with a random raw-length claim */
                uLongf zl = sizeof(z) - 4;
                cr_assert(compress2(z + 4, &zl, payload, len, 1) == Z_OK);
                uint32_t raw = rnd(&seed) % 2 ? len : (uint32_t)rnd(&seed);
                memcpy(z, &raw, 4);
                n += th_frame_record(file + n, type, 1, z, (uint32_t)zl + 4);
            } else if (how < 4) { /* zstd, same */
                size_t zl = ZSTD_compress(z + 4, sizeof(z) - 4, payload, len, -1);
                cr_assert(!ZSTD_isError(zl));
                uint32_t raw = rnd(&seed) % 2 ? len : (uint32_t)rnd(&seed);
                memcpy(z, &raw, 4);
                n += th_frame_record(file + n, type, 2, z, (uint32_t)zl + 4);
            } else {
                n += th_frame_record(file + n, type, 0, payload, len);
            }
        }
        struct th_list l;
        char msg[300];
        cr_assert_eq(th_read_fd(th_memfd(file, n), &l, msg, sizeof(msg)), 0, "%s", msg);
        cr_assert_eq(l.st.trailing_bytes, 0);
        /* each record: delivered, reported corrupt (malformed), or skipped (type 8) */
        cr_assert_eq(l.n + l.st.unknown, (size_t)nrec, "iteration %d", it);
        size_t ncorrupt = 0;
        for (size_t i = 0; i < l.n; i++)
            ncorrupt += l.v[i].type == SS_SNAP_CORRUPT;
        cr_assert_eq(ncorrupt, l.st.corrupt);
        th_list_free(&l);
    }
    free(file);
}

/* ---- a writer killed with SIGKILL ---- */
static void det_sample(uint64_t seq, struct ss_sample *s, uint8_t *stack)
{
    memset(s, 0, sizeof(*s));
    uint64_t x = seq * 0x9e3779b97f4a7c15ull + 1;
    s->pid = 4242, s->tid = 4243 + (uint32_t)(seq % 3), s->cpu = (uint32_t)(seq % 2);
    s->time_ns = 1000 + seq * 10101;
    for (int i = 0; i < SS_NREGS; i++)
        s->regs[i] = rnd(&x);
    s->stack_req = s->stack_len = 4096;
    for (int i = 0; i < 4096; i++) /* half zeros, like a real stack */
        stack[i] = (i / 64) % 2 ? 0 : (uint8_t)rnd(&x);
    s->stack = stack;
}

static void writer_child(const char *path)
{
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    if (ss_snap_create(&w, path, &h, &err)) _exit(3);
    uint8_t stack[4096];
    for (uint64_t seq = 0;; seq++) {
        struct ss_sample s;
        det_sample(seq, &s, stack);
        ss_snap_record_read(w, seq, stack, 100, 0);
        if (ss_snap_write_sample(w, &s, NULL, &err)) _exit(4);
        if (seq % 7 == 0 && ss_snap_flush(w, &err)) _exit(5);
    }
}

Test(snapfile_damage, sigkill_mid_write_leaves_a_readable_file)
{
    char *dir = th_tmpdir();
    for (int round = 0; round < 3; round++) {
        char *path = th_path(dir, round == 0 ? "k0.snap" : round == 1 ? "k1.snap" : "k2.snap");
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) writer_child(path);
        usleep(80000 + 70000 * (useconds_t)round);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer exited early");

        struct ss_err err = {0};
        struct ss_snap_reader *r;
        cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
        struct ss_snap_record rec;
        uint64_t next = 0;
        uint8_t stack[4096];
        while (ss_snap_next(r, &rec, &err) == 1) {
            cr_assert(rec.type != SS_SNAP_CORRUPT, "corruption after SIGKILL at %llu",
                      (unsigned long long)rec.offset);
            if (rec.type != SS_SNAP_SAMPLE) continue;
            struct ss_sample want;
            det_sample(next, &want, stack);
            cr_assert_eq(rec.sample.seq, next);
            cr_assert_arr_eq(rec.sample.s.regs, want.regs, sizeof(want.regs));
            cr_assert_arr_eq(rec.sample.s.stack, stack, 4096);
            if (rec.sample.has_reads) {
                cr_assert_eq(rec.sample.nreads, 1);
                cr_assert_eq(rec.sample.reads[0].addr, next);
                cr_assert_arr_eq(rec.sample.reads[0].data, stack, 100);
            }
            next++;
        }
        struct ss_snap_stats st;
        ss_snap_reader_stats(r, &st);
        cr_log_info("round %d: %llu samples, %llu trailing bytes", round, (unsigned long long)next,
                    (unsigned long long)st.trailing_bytes);
        cr_assert(next > 10, "only %llu samples survived", (unsigned long long)next);
        cr_assert_eq(st.records[SS_SNAP_TRAILER], 0);
        ss_snap_close_reader(r);
        free(path);
    }
    th_rmtree(dir);
    free(dir);
}

/* A pipe delivers data in small pieces: same records as the file. */
Test(snapfile_damage, pipe_reads_like_a_file)
{
    struct fixture f;
    fixture_init(&f, 5, 3000);
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        for (size_t off = 0; off < f.size; off += 7) {
            size_t n = f.size - off < 7 ? f.size - off : 7;
            if (write(p[1], f.buf + off, n) != (ssize_t)n) _exit(1);
        }
        _exit(0);
    }
    close(p[1]);
    struct th_list l;
    cr_assert_eq(th_read_fd(p[0], &l, NULL, 0), 0);
    int status;
    waitpid(pid, &status, 0);
    cr_assert_eq(l.n, f.full.n);
    for (size_t i = 0; i < l.n; i++)
        same_item(&l.v[i], &f.full.v[i], "pipe", i);
    th_list_free(&l);
    /* rewinding a pipe is refused */
    struct ss_err err = {0};
    struct ss_snap_reader *r;
    cr_assert(pipe(p) == 0);
    cr_assert(write(p[1], f.buf, 16) == 16);
    close(p[1]);
    cr_assert_eq(ss_snap_open_fd(&r, p[0], "pipe", &err), 0, "%s", err.msg);
    cr_assert_eq(ss_snap_rewind(r, &err), -ESPIPE);
    ss_snap_close_reader(r);
    fixture_fini(&f);
}
