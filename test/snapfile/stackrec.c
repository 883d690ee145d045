/* test/snapfile/stackrec.c: captures of unwound stacks (`record
 * --no-stack-bytes`, format version 5: frames and stack records). 400
 * stacks of three threads drawn from a pool of native (named, unnamed,
 * demangled), Lua, kernel and pseudo frames read back field for field, NULL
 * names staying NULL; each distinct frame is written once; the capture is
 * version 5 and takes no samples (a capture of samples takes no stacks). Cut
 * anywhere (every offset of its first 4 KB, every 7th after, and around
 * every stack record's end) it gives the stacks whose records are complete, nothing
 * else; a damaged frames record costs the stacks that use its frames (each
 * reported as corrupt) and no other. Crafted records with valid CRCs (ids
 * past what the bytes before could define, counts past the payload, unknown
 * bits, undefined ids) are one corrupt event each, and reading goes on. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "stacksnap/snapfile.h"
#include "snapfile/stackrec.h" /* SNAP_FRAME_MIN */

#define NPOOL 40
#define NSTACKS 400
#define MAXF 24

struct gen {
    struct ss_frame pool[NPOOL];
    char names[NPOOL][3][48];
    struct ss_stack st[NSTACKS];
    struct ss_frame fr[NSTACKS][MAXF];
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static void gen_init(struct gen *g)
{
    memset(g, 0, sizeof(*g));
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < NPOOL; i++) {
        struct ss_frame *f = &g->pool[i];
        f->kind = (uint8_t)(i % 4); /* native, lua, kernel, pseudo */
        f->addr = 0x400000 + rnd(&s) % 0x100000;
        snprintf(g->names[i][0], 48, "%s_%d", i % 7 ? "fn" : "ns::fn<int>", i);
        snprintf(g->names[i][1], 48, i % 4 == 1 ? "chunk%d.lua" : "/usr/lib/mod%d.so", i % 5);
        snprintf(g->names[i][2], 48, "_ZN2ns2fnIiEEv%d", i);
        if (i % 5) f->name = g->names[i][0]; /* every 5th unnamed: MODULE+0xOFFSET */
        if (i % 9) f->module = g->names[i][1];
        if (i % 7 == 0) f->system_name = g->names[i][2];
        if (f->kind == 0) {
            f->offset = f->addr - 0x3ff000;
            f->build_id_len = 20;
            for (int k = 0; k < 20; k++)
                f->build_id[k] = (uint8_t)(i * 31 + k);
            f->sym_offset = rnd(&s) % 200;
        }
        if (f->kind == 1) f->line = (uint32_t)(rnd(&s) % 300), f->first_line = 7;
    }
    for (int j = 0; j < NSTACKS; j++) {
        struct ss_stack *st = &g->st[j];
        st->pid = 4242;
        st->tid = 4242 + (uint32_t)(j % 3);
        st->cpu = (uint32_t)(j % 2);
        st->time_ns = 1000000ull * (uint64_t)j;
        snprintf(st->comm, sizeof(st->comm), "worker-%d", j % 3);
        st->trunc = (uint8_t)(j % 11 == 0 ? SS_TRUNC_SNAPSHOT : SS_TRUNC_NONE);
        st->weight = j % 13 == 0 ? 12345 : 0;
        /* the first half uses the first half of the pool: later frames
         * records define the rest */
        int span = j < NSTACKS / 2 ? NPOOL / 2 : NPOOL;
        st->nframes = (uint32_t)(j % 17 == 0 ? 0 : 1 + rnd(&s) % MAXF);
        for (uint32_t k = 0; k < st->nframes; k++)
            g->fr[j][k] = g->pool[rnd(&s) % (uint64_t)span];
        st->frames = g->fr[j];
    }
}

static bool str_same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void same_stack(const struct ss_stack *a, const struct ss_stack *b, int j)
{
    cr_assert(a->pid == b->pid && a->tid == b->tid && a->cpu == b->cpu &&
                  a->time_ns == b->time_ns && !strcmp(a->comm, b->comm) && a->trunc == b->trunc &&
                  a->weight == b->weight && a->nframes == b->nframes,
              "stack %d: fixed fields differ", j);
    for (uint32_t k = 0; k < a->nframes; k++) {
        const struct ss_frame *x = &a->frames[k], *y = &b->frames[k];
        cr_assert(x->kind == y->kind && x->addr == y->addr && x->offset == y->offset &&
                      x->line == y->line && x->first_line == y->first_line &&
                      x->sym_offset == y->sym_offset && x->build_id_len == y->build_id_len &&
                      !memcmp(x->build_id, y->build_id, x->build_id_len) &&
                      str_same(x->name, y->name) && str_same(x->module, y->module) &&
                      str_same(x->system_name, y->system_name),
                  "stack %d frame %u differs", j, k);
    }
}

static size_t write_capture(const struct gen *g, const char *path)
{
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    h.flags = SS_SNAP_HDR_NOSTACK;
    struct ss_snap_writer *w;
    struct ss_err err = {0};
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    struct ss_sample s = {.pid = 1, .tid = 1};
    cr_assert(ss_snap_write_sample(w, &s, NULL, &err) == -EINVAL, "a sample was taken");
    for (int j = 0; j < NSTACKS; j++)
        cr_assert(ss_snap_write_stack(w, &g->st[j], 0, &err) == 0, "%s", err.msg);
    struct ss_snap_stats st;
    ss_snap_writer_stats(w, &st);
    cr_assert(st.records[SS_SNAP_STACK] == NSTACKS);
    cr_assert(st.records[SS_SNAP_FRAMES] >= 2 && st.records[SS_SNAP_FRAMES] < 40,
              "%llu frames records", (unsigned long long)st.records[SS_SNAP_FRAMES]);
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);
    return (size_t)st.file_bytes;
}

/* Read fd to its end: stacks into got[] (copied), their record ends into
 * end[]; counts corrupt events (their reasons joined into why). */
struct got {
    int n, corrupt, truncated;
    uint64_t seq[NSTACKS], end[NSTACKS];
    uint32_t frames_defined;
    char why[512];
};

static void read_all(int fd, const struct gen *g, struct got *o)
{
    memset(o, 0, sizeof(*o));
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert(ss_snap_open_fd(&r, fd, "mem", &err) == 0, "%s", err.msg);
    const struct ss_snap_header *h = ss_snap_get_header(r);
    cr_assert(!h || (h->version == 5 && (h->flags & SS_SNAP_HDR_NOSTACK)));
    struct ss_snap_record rec;
    int rc;
    while ((rc = ss_snap_next(r, &rec, &err)) == 1) {
        if (rec.type == SS_SNAP_STACK) {
            cr_assert(o->n < NSTACKS && rec.stack.seq < NSTACKS);
            cr_assert(o->n == 0 || rec.stack.seq > o->seq[o->n - 1], "stacks out of order");
            same_stack(&rec.stack.st, &g->st[rec.stack.seq], (int)rec.stack.seq);
            o->seq[o->n] = rec.stack.seq;
            o->end[o->n++] = rec.offset + rec.size;
        } else if (rec.type == SS_SNAP_FRAMES) {
            o->frames_defined += rec.frames.n;
        } else if (rec.type == SS_SNAP_CORRUPT) {
            o->corrupt++;
            if (strlen(o->why) < 300)
                snprintf(o->why + strlen(o->why), sizeof(o->why) - strlen(o->why), "%s; ",
                         rec.corrupt.reason);
        } else if (rec.type == SS_SNAP_TRUNCATED) {
            o->truncated++;
        } else {
            cr_assert(rec.type == SS_SNAP_HEADER || rec.type == SS_SNAP_TRAILER, "unexpected %s",
                      ss_snap_type_str(rec.type));
        }
    }
    cr_assert(rc == 0, "%s", err.msg);
    ss_snap_close_reader(r);
}

Test(snapfile_stackrec, roundtrip_cut_damage)
{
    static struct gen g;
    gen_init(&g);
    char *dir = th_tmpdir(), *path = th_path(dir, "s.snap");
    size_t size = write_capture(&g, path);
    size_t len;
    uint8_t *b = th_load(path, &len);
    cr_assert(len > size, "%zu bytes, %zu before the trailer", len, size);
    cr_assert(b[8] == 5 && b[9] == 0, "not format version 5");

    static struct got all;
    read_all(th_memfd(b, len), &g, &all);
    cr_assert(all.n == NSTACKS && all.corrupt == 0 && all.truncated == 0,
              "%d stacks, %d corrupt (%s), %d truncated", all.n, all.corrupt, all.why,
              all.truncated);
    cr_assert(all.frames_defined == NPOOL, "%u frames defined for a pool of %d", all.frames_defined,
              NPOOL);
    /* far smaller than the frames it stands for */
    cr_assert(len < NSTACKS * 120, "%zu bytes", len);

    /* cut at every offset: exactly the stacks whose records are complete */
    static struct got cut;
    int next_end = 0; /* every offset of the first 4 KB, then every 7th and
                         those around each stack record's end (ASan: ~10 s) */
    for (size_t l = 16; l < len; l++) {
        while (next_end < all.n && all.end[next_end] + 1 < l)
            next_end++;
        bool near = next_end < all.n && all.end[next_end] <= l + 1;
        if (l >= 4096 && l % 7 && !near) continue;
        read_all(th_memfd(b, l), &g, &cut);
        int want = 0;
        while (want < all.n && all.end[want] <= l)
            want++;
        cr_assert(cut.n == want && cut.corrupt == 0, "cut at %zu: %d stacks (want %d), %d corrupt",
                  l, cut.n, want, cut.corrupt);
        for (int i = 0; i < cut.n; i++)
            cr_assert(cut.seq[i] == all.seq[i]);
    }

    /* a damaged frames record (the second: the frames of the second half's
     * first stack) costs the stacks using its frames, reported, and no other */
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    cr_assert(ss_snap_open_fd(&r, th_memfd(b, len), "mem", &err) == 0);
    struct ss_snap_record rec;
    uint64_t off = 0;
    uint32_t first = 0;
    while (ss_snap_next(r, &rec, &err) == 1)
        if (rec.type == SS_SNAP_FRAMES && rec.frames.first >= NPOOL / 2 && !off) {
            off = rec.offset, first = rec.frames.first;
        }
    ss_snap_close_reader(r);
    cr_assert(off && first >= NPOOL / 2);
    b[off + 20 + 9] ^= 0x55; /* in the payload: its CRC fails */
    static struct got dmg;
    read_all(th_memfd(b, len), &g, &dmg);
    cr_assert(dmg.corrupt >= 2 && strstr(dmg.why, "payload checksum mismatch") &&
                  strstr(dmg.why, "frame not read"),
              "%d corrupt: %s", dmg.corrupt, dmg.why);
    cr_assert(dmg.n + dmg.corrupt - 1 == NSTACKS, "%d stacks, %d corrupt", dmg.n, dmg.corrupt);
    cr_assert(dmg.n >= NSTACKS / 2, "the first half lost too: %d", dmg.n);
    free(b);
    th_rmtree(dir);
    free(path);
    free(dir);
}

Test(snapfile_stackrec, samples_capture_takes_no_stacks)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "n.snap");
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_snap_writer *w;
    struct ss_err err = {0};
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0);
    struct ss_stack st = {.pid = 1};
    cr_assert(ss_snap_write_stack(w, &st, 0, &err) == -EINVAL);
    cr_assert(ss_snap_close(w, &err) == 0);
    size_t len;
    uint8_t *b = th_load(path, &len);
    cr_assert(b[8] == SS_SNAP_VERSION_SAMPLES, "a capture of samples is version %u", b[8]);
    free(b);
    th_rmtree(dir);
    free(path);
    free(dir);
}

static size_t put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return 4;
}

/* One frame entry: native, no build-id, no strings but has bits. */
static size_t put_frame(uint8_t *p, uint8_t has)
{
    memset(p, 0, SNAP_FRAME_MIN);
    p[1] = has;
    return SNAP_FRAME_MIN;
}

/* A stack record payload: seq, pid, tid, cpu, flags, time, weight, trunc
 * (zeros), an empty comm (u16 0 and its NUL: bytes 41-43), then the frame
 * count claimed and the ids given (each < 128: one byte). */
static size_t put_stack(uint8_t *p, uint32_t nframes_claimed, const uint8_t *ids, int nids)
{
    memset(p, 0, 44);
    size_t n = 44;
    uint32_t v = nframes_claimed;
    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) p[n] |= 0x80;
        n++;
    } while (v);
    for (int i = 0; i < nids; i++)
        p[n++] = ids[i];
    return n;
}

/* Crafted records (valid CRCs, hostile contents) after a real header: each
 * is one corrupt event, no allocation follows the claims, and the valid
 * frames and stack after them still come through. */
Test(snapfile_stackrec, hostile_records)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "h.snap");
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    h.flags = SS_SNAP_HDR_NOSTACK;
    struct ss_snap_writer *w;
    struct ss_err err = {0};
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0);
    ss_snap_abandon(w); /* preamble + header */
    size_t len;
    uint8_t *hdr = th_load(path, &len);
    static uint8_t file[1 << 16], pay[4096];
    memcpy(file, hdr, len);
    size_t n = len, p;
    free(hdr);
    /* 1: first id far past what the bytes before could define */
    p = put32(pay, 0xffffff00u);
    p += put32(pay + p, 1);
    p += put_frame(pay + p, 0);
    n += th_frame_record(file + n, SS_SNAP_FRAMES, 0, pay, (uint32_t)p);
    /* 2: more frames than the payload holds */
    p = put32(pay, 0);
    p += put32(pay + p, 100000);
    p += put_frame(pay + p, 0);
    n += th_frame_record(file + n, SS_SNAP_FRAMES, 0, pay, (uint32_t)p);
    /* 3: an unknown "has" bit */
    p = put32(pay, 0);
    p += put32(pay + p, 1);
    p += put_frame(pay + p, 0x80);
    n += th_frame_record(file + n, SS_SNAP_FRAMES, 0, pay, (uint32_t)p);
    /* 4: a stack of 2^31 frames in a few bytes */
    uint8_t ids[2] = {0, 0};
    p = put_stack(pay, 1u << 31, ids, 2);
    n += th_frame_record(file + n, SS_SNAP_STACK, 0, pay, (uint32_t)p);
    /* 5: a stack using a frame nobody defined */
    p = put_stack(pay, 1, ids, 1);
    n += th_frame_record(file + n, SS_SNAP_STACK, 0, pay, (uint32_t)p);
    /* then valid: frame 0 (named "ok"), and a stack of it twice */
    p = put32(pay, 0);
    p += put32(pay + p, 1);
    p += put_frame(pay + p, 1);
    pay[p++] = 2, pay[p++] = 0, pay[p++] = 'o', pay[p++] = 'k', pay[p++] = 0;
    n += th_frame_record(file + n, SS_SNAP_FRAMES, 0, pay, (uint32_t)p);
    p = put_stack(pay, 2, ids, 2);
    n += th_frame_record(file + n, SS_SNAP_STACK, 0, pay, (uint32_t)p);

    struct ss_snap_reader *r;
    cr_assert(ss_snap_open_fd(&r, th_memfd(file, n), "hostile", &err) == 0, "%s", err.msg);
    struct ss_snap_record rec;
    int corrupt = 0, stacks = 0, rc;
    while ((rc = ss_snap_next(r, &rec, &err)) == 1) {
        if (rec.type == SS_SNAP_CORRUPT) corrupt++;
        if (rec.type == SS_SNAP_STACK) {
            stacks++;
            cr_assert(rec.stack.st.nframes == 2 && rec.stack.st.frames[1].name &&
                      !strcmp(rec.stack.st.frames[1].name, "ok"));
        }
    }
    cr_assert(rc == 0, "%s", err.msg);
    cr_assert(corrupt == 5 && stacks == 1, "%d corrupt, %d stacks", corrupt, stacks);
    ss_snap_close_reader(r);
    th_rmtree(dir);
    free(path);
    free(dir);
}
