/* test/snapfile/compat.c: record compression. The writer stores compressed
 * payloads as zstd (flag bit 1) and never as deflate; the same capture
 * re-framed with deflate records (flag bit 0, what writers before zstd
 * produced) reads back field for field, and so does a capture of the old
 * deflate writer against its records stored uncompressed; the fixtures (whatever
 * writer made them) read without damage, every compressed record decoded; a
 * record claiming both compressions, a zstd frame of the wrong size and a
 * raw length the frame cannot produce are corrupt records, not crashes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "helpers.h"

#define F_DEFLATE 0x1
#define F_ZSTD 0x2

static uint16_t rec_flags(const uint8_t *b, const struct th_frame *f)
{
    return (uint16_t)(b[f->off + 6] | b[f->off + 7] << 8);
}

/* Count the records of a file by compression flag. */
static void count_flags(const uint8_t *b, size_t n, size_t *plain, size_t *defl, size_t *zst,
                        size_t *nrec)
{
    static struct th_frame fr[4096];
    size_t k = th_frames(b, n, fr, 4096);
    *plain = *defl = *zst = 0;
    for (size_t i = 0; i < k; i++) {
        uint16_t f = rec_flags(b, &fr[i]);
        cr_assert(f == 0 || f == F_DEFLATE || f == F_ZSTD, "record %zu: flags %#x", i, f);
        *plain += f == 0, *defl += f == F_DEFLATE, *zst += f == F_ZSTD;
    }
    *nrec = k;
}

/* Copy of capture b[0..n) with every record flagged `from` (zstd or deflate)
 * decompressed independently of the reader and re-framed as `to` (deflate
 * level 6, or 0: stored). Other records are copied byte for byte. */
static uint8_t *reframe(const uint8_t *b, size_t n, uint16_t from, uint16_t to, size_t *out_len,
                        size_t *converted)
{
    static struct th_frame fr[4096];
    size_t k = th_frames(b, n, fr, 4096);
    size_t cap = 16 + 2 * n + 65536;
    uint8_t *out = malloc(cap);
    memcpy(out, b, 16);
    size_t o = 16;
    *converted = 0;
    for (size_t i = 0; i < k; i++) {
        const uint8_t *p = b + fr[i].off + 20;
        uint32_t len = (uint32_t)(fr[i].end - fr[i].off - 20);
        if (rec_flags(b, &fr[i]) != from) {
            memcpy(out + o, b + fr[i].off, fr[i].end - fr[i].off);
            o += fr[i].end - fr[i].off;
            continue;
        }
        uint32_t rl;
        memcpy(&rl, p, 4);
        uint8_t *raw = malloc(rl + 1);
        if (from == F_ZSTD) {
            cr_assert_eq(ZSTD_getFrameContentSize(p + 4, len - 4), rl, "frame records its size");
            size_t got = ZSTD_decompress(raw, rl, p + 4, len - 4);
            cr_assert(!ZSTD_isError(got) && got == rl, "record %zu: %s", i, ZSTD_getErrorName(got));
        } else {
            uLongf got = rl;
            cr_assert(uncompress(raw, &got, p + 4, len - 4) == Z_OK && got == rl, "record %zu", i);
        }
        uLongf zl = compressBound(rl) + 4;
        if (o + zl + 64 > cap) out = realloc(out, cap = 2 * cap + zl + 64);
        if (to == F_DEFLATE) {
            uint8_t *z = malloc(zl + 4);
            cr_assert(compress2(z + 4, &zl, raw, rl, 6) == Z_OK);
            memcpy(z, &rl, 4);
            o += th_frame_record(out + o, fr[i].type, F_DEFLATE, z, (uint32_t)zl + 4);
            free(z);
        } else {
            o += th_frame_record(out + o, fr[i].type, 0, raw, rl);
        }
        free(raw);
        ++*converted;
    }
    *out_len = o;
    return out;
}

/* Read two captures that differ only in how records are compressed: the
 * same items, field for field (the trailer holds its own offset: skipped). */
static void same_items(const char *p1, const char *p2)
{
    char msg[300];
    struct th_list l1, l2;
    cr_assert_eq(th_read_path(p1, &l1, msg, sizeof(msg)), 0, "%s", msg);
    cr_assert_eq(th_read_path(p2, &l2, msg, sizeof(msg)), 0, "%s", msg);
    cr_assert_eq(l1.st.corrupt + l1.st.unknown + l1.st.trailing_bytes, 0, "%s", p1);
    cr_assert_eq(l2.st.corrupt + l2.st.unknown + l2.st.trailing_bytes, 0, "%s", p2);
    cr_assert_eq(l1.n, l2.n);
    cr_assert_gt(l1.st.records[SS_SNAP_SAMPLE], 0);
    for (size_t i = 0; i < l1.n; i++) {
        cr_assert_eq(l1.v[i].type, l2.v[i].type, "item %zu", i);
        if (l1.v[i].type != SS_SNAP_TRAILER)
            cr_assert_eq(l1.v[i].digest, l2.v[i].digest, "item %zu (type %u) differs", i,
                         l1.v[i].type);
    }
    th_list_free(&l1), th_list_free(&l2);
}

/* A capture written by the deflate writer this format started with (the
 * native fixture of commit 6437cc2, kept verbatim): deflate samples, process
 * and bundles decode exactly like the same records stored uncompressed. */
Test(snapfile_compat, deflate_capture_of_the_old_writer_reads)
{
    const char *old = SS_SOURCE_DIR "/test/snapfile/data/deflate-v1.snap";
    size_t n, plain, defl, zst, nrec;
    uint8_t *b = th_load(old, &n);
    count_flags(b, n, &plain, &defl, &zst, &nrec);
    cr_assert_eq(zst, 0);
    cr_assert_geq(defl, 50, "deflate records of the old writer");
    char *dir = th_tmpdir(), *path = th_path(dir, "plain.snap");
    size_t on, conv;
    uint8_t *out = reframe(b, n, F_DEFLATE, 0, &on, &conv);
    cr_assert_eq(conv, defl);
    th_store(path, out, on);
    same_items(old, path);
    free(out), free(b);
    th_rmtree(dir);
    free(path), free(dir);
}

Test(snapfile_compat, zstd_written_and_deflate_records_read_back_identically)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "z.snap"), *dpath = th_path(dir, "d.snap");
    th_write_small(path, 12, 16384);
    size_t n;
    uint8_t *b = th_load(path, &n);
    size_t plain, defl, zst, nrec;
    count_flags(b, n, &plain, &defl, &zst, &nrec);
    cr_assert_eq(defl, 0, "the writer must not write deflate any more");
    /* samples and memory reads are stored as is (key samples too, since
     * format 4's second writer): the maps list is a zstd record; zstd
     * samples of older writers: fixtures_read_without_damage */
    cr_assert_geq(zst, 1, "the maps list must be a zstd record");

    /* Re-frame every zstd payload as deflate: u32 raw length + zlib stream,
     * exactly the layout of captures written before zstd. */
    size_t on, converted;
    uint8_t *out = reframe(b, n, F_ZSTD, F_DEFLATE, &on, &converted);
    cr_assert_eq(converted, zst);
    th_store(dpath, out, on);
    same_items(path, dpath);

    /* the reader says which records were compressed, whichever codec */
    struct ss_err err = {0};
    const char *paths[2] = {path, dpath};
    for (int f = 0; f < 2; f++) {
        struct ss_snap_reader *r;
        cr_assert_eq(ss_snap_open(&r, paths[f], &err), 0, "%s", err.msg);
        struct ss_snap_record rec;
        size_t ncomp = 0;
        while (ss_snap_next(r, &rec, &err) == 1)
            ncomp += rec.compressed;
        cr_assert_gt(ncomp, 0, "%s", paths[f]);
        ss_snap_close_reader(r);
    }
    free(out), free(b);
    th_rmtree(dir);
    free(path), free(dpath), free(dir);
}

Test(snapfile_compat, fixtures_read_without_damage)
{
    const char *names[] = {"luajit", "native"};
    for (int f = 0; f < 2; f++) {
        char path[4096], msg[300];
        snprintf(path, sizeof(path), "%s/test/fixtures/%s.snap", SS_SOURCE_DIR, names[f]);
        size_t n;
        uint8_t *b = th_load(path, &n);
        size_t plain, defl, zst, nrec;
        count_flags(b, n, &plain, &defl, &zst, &nrec);
        cr_log_info("%s: %zu records: %zu stored, %zu deflate, %zu zstd", names[f], nrec, plain,
                    defl, zst);
        cr_assert_gt(defl + zst, 0, "%s: no compressed record", path);
        struct th_list l;
        cr_assert_eq(th_read_path(path, &l, msg, sizeof(msg)), 0, "%s", msg);
        cr_assert_eq(l.st.corrupt + l.st.unknown + l.st.trailing_bytes, 0, "%s", path);
        /* every record delivered: samples + their memreads split, see helpers */
        size_t recs = 0;
        for (int t = 0; t < SS_SNAP_NTYPES; t++)
            recs += l.st.records[t];
        cr_assert_eq(recs, nrec, "%s: %zu records delivered, %zu framed", path, recs, nrec);
        cr_assert_geq(l.st.records[SS_SNAP_SAMPLE], 10, "%s", path);
        th_list_free(&l);
        free(b);
        /* written before the header's appended pac_mask: read as none */
        struct ss_snap_reader *r;
        struct ss_err err = {0};
        cr_assert_eq(ss_snap_open(&r, path, &err), 0, "%s", err.msg);
        cr_assert_eq(ss_snap_get_header(r)->pac_mask, 0, "%s", path);
        ss_snap_close_reader(r);
    }
}

/* One crafted record after a valid capture's header: what the reader makes
 * of it. Returns the number of corrupt events; *delivered = records of
 * `type` delivered. */
static size_t read_crafted(uint16_t type, uint16_t flags, const void *pay, uint32_t len,
                           size_t *delivered)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "c.snap"), msg[300];
    th_write_small(path, 1, 0);
    size_t n;
    uint8_t *b = th_load(path, &n);
    struct th_frame fr[16];
    size_t k = th_frames(b, n, fr, 16);
    cr_assert_geq(k, 2);
    uint8_t *out = malloc(n + len + 64);
    size_t o = fr[0].end;
    memcpy(out, b, o);
    o += th_frame_record(out + o, type, flags, pay, len);
    memcpy(out + o, b + fr[0].end, n - fr[0].end);
    o += n - fr[0].end;
    th_store(path, out, o);
    struct th_list l;
    cr_assert_eq(th_read_path(path, &l, msg, sizeof(msg)), 0, "%s", msg);
    size_t corrupt = l.st.corrupt;
    cr_assert_eq(l.st.unknown + l.st.trailing_bytes, 0);
    *delivered = l.st.records[type];
    th_list_free(&l);
    free(out), free(b);
    th_rmtree(dir);
    free(path), free(dir);
    return corrupt;
}

Test(snapfile_compat, bad_compressed_records_are_corrupt)
{
    /* a real counters payload (as the writer encodes it: u64 time, u32 n,
     * str name, u64 value), compressed both ways */
    uint8_t raw[512] = {0};
    size_t rl = 0;
    uint64_t t = 77, v = 5;
    uint32_t one = 1;
    memcpy(raw, &t, 8), rl = 8;
    memcpy(raw + rl, &one, 4), rl += 4;
    raw[rl] = 200, rl += 2; /* u16 name length 200 */
    memset(raw + rl, 'x', 200), rl += 200;
    raw[rl++] = 0;
    memcpy(raw + rl, &v, 8), rl += 8;

    uint8_t zs[1024], df[1024];
    uint32_t r32 = (uint32_t)rl;
    size_t zl = ZSTD_compress(zs + 4, sizeof(zs) - 4, raw, rl, 3);
    cr_assert(!ZSTD_isError(zl));
    memcpy(zs, &r32, 4);
    uLongf dl = sizeof(df) - 4;
    cr_assert(compress2(df + 4, &dl, raw, rl, 6) == Z_OK);
    memcpy(df, &r32, 4);

    size_t got;
    /* control: both codecs deliver the record */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, zs, (uint32_t)zl + 4, &got), 0);
    cr_assert_eq(got, 2); /* plus th_write_small's own counters record */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_DEFLATE, df, (uint32_t)dl + 4, &got), 0);
    cr_assert_eq(got, 2);
    /* both flags: corrupt */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD | F_DEFLATE, zs, (uint32_t)zl + 4, &got), 1);
    cr_assert_eq(got, 1);
    /* the wrong codec for the bytes */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_DEFLATE, zs, (uint32_t)zl + 4, &got), 1);
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, df, (uint32_t)dl + 4, &got), 1);
    /* raw length claims: one short, one long, beyond any zstd ratio, 0 */
    uint32_t claims[] = {r32 - 1, r32 + 1, 0x3fffffff, 0};
    for (int i = 0; i < 4; i++) {
        memcpy(zs, &claims[i], 4);
        cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, zs, (uint32_t)zl + 4, &got), 1,
                     "claim %u", claims[i]);
        cr_assert_eq(got, 1);
    }
    memcpy(zs, &r32, 4);
    /* a frame cut short, and one with trailing bytes */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, zs, (uint32_t)zl + 4 - 3, &got), 1);
    zs[zl + 4] = 0x55;
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, zs, (uint32_t)zl + 5, &got), 1);
    /* under 4 bytes: no room for the raw length */
    cr_assert_eq(read_crafted(SS_SNAP_COUNTERS, F_ZSTD, zs, 3, &got), 1);
}

/* A version-3 capture (snapfile_mkseed's small.snap as the version-3 writer
 * wrote it, kept verbatim): its memreads records, not delta-coded, still
 * read, attached to their samples with the bytes mkseed recorded. */
Test(snapfile_compat, version_3_memreads_still_read)
{
    const char *old = SS_SOURCE_DIR "/test/snapfile/data/v3-mkseed-small.snap";
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert(ss_snap_open(&r, old, &err) == 0, "%s", err.msg);
    cr_assert_eq(ss_snap_get_header(r)->version, 3);
    struct ss_snap_record rec;
    int i = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        cr_assert_neq(rec.type, SS_SNAP_CORRUPT, "%s", rec.corrupt.reason);
        if (rec.type != SS_SNAP_SAMPLE) continue;
        const struct ss_snap_sample *s = &rec.sample;
        cr_assert_eq(s->s.stack_len, 64);
        for (unsigned k = 0; k < 64; k++)
            cr_assert_eq(s->s.stack[k], k % 8 ? 0 : (uint8_t)(i + k / 8), "sample %d byte %u", i,
                         k);
        cr_assert_eq(s->has_reads, i % 2 == 0, "sample %d", i);
        if (i % 2 == 0) {
            cr_assert_eq(s->nreads, 2);
            cr_assert_eq(s->reads[0].addr, 0x7f0000000100ull);
            cr_assert_eq(s->reads[0].len, 24);
            cr_assert_eq(s->reads[0].err, 0);
            cr_assert(!memcmp(s->reads[0].data, s->s.stack, 24));
            cr_assert_eq(s->reads[1].addr, 0x10);
            cr_assert_eq(s->reads[1].err, -14);
        }
        i++;
    }
    cr_assert_eq(i, 3);
    ss_snap_close_reader(r);
}
