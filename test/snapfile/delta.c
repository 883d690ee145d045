/* test/snapfile/delta.c: delta-coded samples (format 3) and memreads records
 * (format 4) give back exactly the bytes written. Three threads, 300 samples,
 * a generated target whose stacks move (SP up and down, the top fixed, then a
 * new top), change in a few places or in many, and whose windows appear,
 * move, grow, fail and vanish: every sample read back has the stack, windows
 * and registers that were written, and most samples are stored as deltas (the
 * file is under half the bytes). A damaged key sample costs the deltas that
 * refer to it (reported as corrupt records) and no other sample; the next key
 * decodes. The same for the memory reads: ~48 per sample at fixed addresses,
 * their bytes changing now and then, extra, failed and re-walk reads; a
 * damaged key memreads record costs only the reads of its thread's deltas. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "stacksnap/snapfile.h"

#define NT 3
#define NS 300
#define TOP 0x7ffd00100000ull

struct gen {
    uint64_t seed;
    uint8_t mem[NT][65536]; /* each thread's stack memory below TOP */
    uint8_t heap[NT][4096]; /* window memory */
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static void gen_init(struct gen *g, uint64_t seed)
{
    memset(g, 0, sizeof(*g));
    g->seed = seed;
    for (size_t k = 0; k < sizeof(g->mem); k++)
        ((uint8_t *)g->mem)[k] = (uint8_t)rnd(&g->seed);
    for (size_t k = 0; k < sizeof(g->heap); k++)
        ((uint8_t *)g->heap)[k] = (uint8_t)rnd(&g->seed);
}

/* Sample i of thread t (deterministic); the bytes point into g. */
static void make(struct gen *g, int i, int t, struct ss_sample *s)
{
    memset(s, 0, sizeof(*s));
    s->pid = 4242;
    s->tid = 4242 + (uint32_t)t;
    s->time_ns = (uint64_t)i * 1000;
    for (int r = 0; r < SS_NREGS; r++)
        s->regs[r] = rnd(&g->seed);
    uint64_t top = TOP - (i > 200 && t == 1 ? 0x2000 : 0); /* thread 1 moves its top */
    /* threads 0 and 1 call and return near a leaf (a few depths), thread 2
     * anywhere (every sample another depth) */
    uint32_t len = t == 2 ? 2048 + (uint32_t)(rnd(&g->seed) % 12000)
                          : 6000 + (uint32_t)(rnd(&g->seed) % 4) * 136;
    s->regs[SS_REG_SP] = top - len;
    s->stack_len = s->stack_req = len;
    uint8_t *m = g->mem[t] + sizeof(g->mem[t]) - (TOP - top) - len;
    /* a few changes near SP (the leaf's frame), now and then some anywhere
     * (a caller's loop counter) */
    int n = rnd(&g->seed) % 20 == 0 ? 8 : 3;
    for (int k = 0; k < n; k++)
        m[rnd(&g->seed) % (k < 3 ? 256 : len)] = (uint8_t)rnd(&g->seed);
    s->stack = m;
    s->nwin = (uint32_t)(i % 7 == 6 ? 0 : 1 + rnd(&g->seed) % 3);
    for (uint32_t w = 0; w < s->nwin; w++) {
        /* windows move now and then (BASE of a Lua stack) */
        uint32_t off = (uint32_t)(i / 50) * 8, wl = 1024 + (uint32_t)((i / 40) % 3) * 64;
        s->win[w].addr = 0x55550000ull + w * 8192 + off;
        if (i % 11 == 5 && w == 1) { /* a failed window */
            s->win[w].err = -14;
            continue;
        }
        uint8_t *h = g->heap[t] + off + w * 1024 / 4;
        h[rnd(&g->seed) % 64] ^= 0x5a; /* the window's hot end */
        s->win[w].len = wl;
        s->win[w].data = h;
    }
}

/* Returns the stack and window bytes written. */
static size_t write_file(const char *path, uint64_t seed)
{
    size_t raw = 0;
    static struct gen g;
    gen_init(&g, seed);
    struct ss_snap_writer *w;
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    for (int i = 0; i < NS; i++) {
        struct ss_sample s;
        make(&g, i, i % NT, &s);
        raw += s.stack_len;
        for (uint32_t k = 0; k < s.nwin; k++)
            raw += s.win[k].len;
        cr_assert(ss_snap_write_sample(w, &s, NULL, &err) == 0, "%s", err.msg);
    }
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);
    return raw;
}

/* Read path back, comparing with a regenerated sequence. skip: seqs to
 * expect as corrupt. Returns the samples matched. */
static int check(const char *path, uint64_t seed, const bool *lost)
{
    static struct gen g;
    gen_init(&g, seed);
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
    struct ss_snap_record rec;
    int i = 0, ok = 0, corrupt = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        if (rec.type == SS_SNAP_CORRUPT) corrupt++;
        if (rec.type != SS_SNAP_SAMPLE && rec.type != SS_SNAP_CORRUPT) continue;
        struct ss_sample want;
        make(&g, i, i % NT, &want);
        if (lost && lost[i]) {
            cr_expect_eq(rec.type, SS_SNAP_CORRUPT, "sample %d should be lost", i);
            i++;
            continue;
        }
        cr_assert_eq(rec.type, SS_SNAP_SAMPLE, "sample %d: %s", i,
                     rec.type == SS_SNAP_CORRUPT ? rec.corrupt.reason : "");
        const struct ss_sample *s = &rec.sample.s;
        cr_assert_eq(rec.sample.seq, (uint64_t)i);
        cr_assert_eq(s->tid, want.tid);
        cr_assert(!memcmp(s->regs, want.regs, sizeof(want.regs)), "sample %d: registers", i);
        cr_assert_eq(s->stack_len, want.stack_len, "sample %d", i);
        cr_assert(!memcmp(s->stack, want.stack, want.stack_len), "sample %d: stack bytes", i);
        cr_assert_eq(s->nwin, want.nwin, "sample %d", i);
        for (uint32_t w = 0; w < want.nwin; w++) {
            cr_assert_eq(s->win[w].addr, want.win[w].addr);
            cr_assert_eq(s->win[w].len, want.win[w].len, "sample %d window %u", i, w);
            cr_assert_eq(s->win[w].err, want.win[w].err);
            if (want.win[w].len)
                cr_assert(!memcmp(s->win[w].data, want.win[w].data, want.win[w].len),
                          "sample %d window %u bytes", i, w);
        }
        ok++;
        i++;
    }
    cr_assert_eq(i, NS, "samples read: %d", i);
    ss_snap_close_reader(r);
    return ok + 0 * corrupt;
}

Test(snapfile_delta, bytes_come_back_exactly)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "d.snap");
    size_t raw = write_file(path, 12345);
    cr_assert_eq(check(path, 12345, NULL), NS);
    struct stat st;
    cr_assert(stat(path, &st) == 0);
    /* deltas are smaller than the bytes (random bytes: no compression helps;
     * thread 2's stack below a key's SP and windows a key did not have are
     * new, so each is stored; threads 0 and 1 store ~10% of their bytes) */
    cr_expect_lt((size_t)st.st_size * 2, raw, "%lld bytes on disk for %zu bytes",
                 (long long)st.st_size, raw);

    /* damage the second key sample of thread 0 (its sample 64 = seq 192):
     * its deltas up to the next key (seq 195, 198, ... 381 > NS) are lost */
    size_t len;
    uint8_t *b = th_load(path, &len);
    struct th_frame fr[1024];
    size_t n = th_frames(b, len, fr, 1024), k = 0, seen = 0;
    for (; k < n; k++)
        if (fr[k].type == SS_SNAP_SAMPLE && seen++ == 192) break;
    cr_assert(k < n);
    b[fr[k].off + 20 + 30] ^= 0xff;
    char *bad = th_path(dir, "bad.snap");
    th_store(bad, b, len);
    bool lost[NS] = {0};
    for (int i = 192; i < NS; i += NT)
        lost[i] = true;
    cr_assert_eq(check(bad, 12345, lost), NS - (NS - 192 + NT - 1) / NT);
    free(b);
    free(bad);
    free(path);
    th_rmtree(dir);
    free(dir);
}

/* ---- delta-coded memreads records (format 4) ---- */

#define NR 48 /* reads per sample, about what the LuaJIT walker makes */

struct rd {
    uint64_t addr;
    uint32_t len;
    int32_t err;
    const uint8_t *data;
};

/* The reads of sample i of thread t: the same addresses every sample (a
 * thread's Lua stack, prototypes and names), their bytes changing now and
 * then, sometimes one more read, a failed one, or a re-walk marker. */
static uint32_t make_reads(struct gen *g, int i, int t, struct rd *r)
{
    uint32_t n = 0;
    uint8_t *h = g->heap[t];
    if (rnd(&g->seed) % 20 == 0) h[rnd(&g->seed) % 4096] ^= 0x33; /* a slot changes */
    if (i % 17 == 3) r[n++] = (struct rd){0, 0, -85, NULL};       /* re-walk marker first */
    for (uint32_t k = 0; k < NR; k++) {
        uint32_t len = 16 + (k % 5) * 40;
        r[n++] = (struct rd){0x7f0000100000ull + t * 65536 + k * 256, len, 0, h + (k * 83) % 3800};
        if (k == 20 && i % 9 == 4) r[n - 1].err = -14, r[n - 1].data = NULL; /* fails now */
        if (k == 30 && i % 13 == 7) /* one more read, new address */
            r[n++] = (struct rd){0x600000 + (uint64_t)i * 64, 64, 0, h + i % 64};
    }
    return n;
}

static void write_reads_file(const char *path, uint64_t seed, size_t *raw)
{
    static struct gen g;
    gen_init(&g, seed);
    struct ss_snap_writer *w;
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    *raw = 0;
    for (int i = 0; i < NS; i++) {
        struct ss_sample s;
        struct rd r[NR + 4];
        make(&g, i, i % NT, &s);
        uint32_t n = make_reads(&g, i, i % NT, r);
        for (uint32_t k = 0; k < n; k++) {
            ss_snap_record_read(w, r[k].addr, r[k].data, r[k].len, r[k].err);
            *raw += 16 + (r[k].err ? 0 : r[k].len);
        }
        cr_assert(ss_snap_write_sample(w, &s, NULL, &err) == 0, "%s", err.msg);
    }
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);
}

/* Every sample's reads as written, except lost[i]: delivered without reads. */
static void check_reads(const char *path, uint64_t seed, const bool *lost)
{
    static struct gen g;
    gen_init(&g, seed);
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
    struct ss_snap_record rec;
    int i = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        if (rec.type != SS_SNAP_SAMPLE) continue;
        struct ss_sample s;
        struct rd want[NR + 4];
        make(&g, i, i % NT, &s);
        uint32_t n = make_reads(&g, i, i % NT, want);
        cr_assert_eq(rec.sample.seq, (uint64_t)i);
        if (lost && lost[i]) {
            cr_expect(!rec.sample.has_reads, "sample %d: its reads should be lost", i);
            i++;
            continue;
        }
        cr_assert(rec.sample.has_reads, "sample %d: no reads", i);
        cr_assert_eq(rec.sample.nreads, n, "sample %d", i);
        for (uint32_t k = 0; k < n; k++) {
            const struct ss_snap_read *x = &rec.sample.reads[k];
            cr_assert_eq(x->addr, want[k].addr, "sample %d read %u", i, k);
            cr_assert_eq(x->len, want[k].len, "sample %d read %u", i, k);
            cr_assert_eq(x->err, want[k].err, "sample %d read %u", i, k);
            if (!want[k].err)
                cr_assert(!memcmp(x->data, want[k].data, want[k].len), "sample %d read %u bytes", i,
                          k);
        }
        i++;
    }
    cr_assert_eq(i, NS, "samples read: %d", i);
    ss_snap_close_reader(r);
}

Test(snapfile_delta, memory_reads_come_back_exactly)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "r.snap");
    size_t raw;
    write_reads_file(path, 777, &raw);
    check_reads(path, 777, NULL);

    /* on disk, the memreads records are a small part of the reads' bytes
     * (random bytes: zstd alone would not shrink them) */
    size_t len;
    uint8_t *b = th_load(path, &len);
    struct th_frame fr[2048];
    size_t n = th_frames(b, len, fr, 2048), mr = 0, k = 0, seen = 0;
    for (size_t j = 0; j < n; j++)
        if (fr[j].type == SS_SNAP_MEMREADS) mr += fr[j].end - fr[j].off;
    cr_expect_lt(mr * 4, raw, "%zu bytes of memreads records for %zu bytes of reads", mr, raw);

    /* damage the second key memreads record of thread 0 (its sample 64 =
     * seq 192): its samples up to the next key (beyond NS) lose their reads,
     * no other sample does */
    for (; k < n; k++)
        if (fr[k].type == SS_SNAP_MEMREADS && seen++ == 192) break;
    cr_assert(k < n);
    b[fr[k].off + 20 + 40] ^= 0xff;
    char *bad = th_path(dir, "bad.snap");
    th_store(bad, b, len);
    bool lost[NS] = {0};
    for (int i = 192; i < NS; i += NT)
        lost[i] = true;
    check_reads(bad, 777, lost);
    free(b);
    free(bad);
    free(path);
    th_rmtree(dir);
    free(dir);
}
