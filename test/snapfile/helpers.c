/* test/snapfile/helpers.c: see helpers.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "helpers.h"

char *th_tmpdir(void)
{
    char *d = strdup("/tmp/ss-snapfile-XXXXXX");
    cr_assert(d && mkdtemp(d), "mkdtemp: %s", strerror(errno));
    return d;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

void th_rmtree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *th_path(const char *dir, const char *name)
{
    char *p;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

uint8_t *th_load(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    cr_assert(fstat(fd, &st) == 0);
    uint8_t *b = malloc((size_t)st.st_size + 1);
    cr_assert(b);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t k = read(fd, b + got, (size_t)st.st_size - got);
        cr_assert(k > 0, "read %s", path);
        got += (size_t)k;
    }
    close(fd);
    *len = got;
    return b;
}

void th_store(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
    cr_assert(write(fd, buf, len) == (ssize_t)len);
    close(fd);
}

int th_memfd(const void *buf, size_t len)
{
    int fd = memfd_create("snap", MFD_CLOEXEC);
    cr_assert(fd >= 0);
    cr_assert(len == 0 || write(fd, buf, len) == (ssize_t)len);
    cr_assert(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}

/* ---- real inputs ---- */
void th_self_maps(struct th_maps *out)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f);
    out->n = 0;
    out->m = NULL;
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi, off, ino;
        unsigned maj, mnr;
        char perm[8];
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perm, &off, &maj, &mnr, &ino,
                   &pos) < 7)
            continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 32;
            out->m = realloc(out->m, cap * sizeof(*out->m));
            cr_assert(out->m);
        }
        struct ss_snap_mapping *m = &out->m[out->n++];
        memset(m, 0, sizeof(*m));
        m->start = lo, m->end = hi, m->offset = off, m->inode = ino;
        m->dev_major = maj, m->dev_minor = mnr;
        m->prot =
            (perm[0] == 'r' ? SS_SNAP_PROT_READ : 0) | (perm[1] == 'w' ? SS_SNAP_PROT_WRITE : 0) |
            (perm[2] == 'x' ? SS_SNAP_PROT_EXEC : 0) | (perm[3] == 's' ? SS_SNAP_MAP_SHARED : 0);
        char *path = line + pos;
        path[strcspn(path, "\n")] = 0;
        m->path = strdup(path);
        if (ino) { /* a fake but deterministic build-id: bytes of the inode */
            m->build_id_len = 20;
            for (int i = 0; i < 20; i++)
                m->build_id[i] = (uint8_t)(ino >> (8 * (i % 8))) ^ (uint8_t)i;
        }
    }
    fclose(f);
    cr_assert(out->n > 3);
}

void th_free_maps(struct th_maps *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        free((char *)m->m[i].path);
    free(m->m);
}

void th_self_sample(struct ss_sample *s, uint32_t stack_req)
{
    memset(s, 0, sizeof(*s));
    volatile uint64_t here = 0;
    uint64_t sp = (uint64_t)(uintptr_t)&here & ~7ull;
    s->pid = (uint32_t)getpid();
    s->tid = (uint32_t)gettid();
    s->cpu = (uint32_t)sched_getcpu();
    s->time_ns = 1000000000ull + sp % 1000;
    for (int i = 0; i < SS_NREGS; i++)
        s->regs[i] = 0x1111111111111111ull * (uint64_t)(i + 1);
    s->regs[SS_REG_SP] = sp;
    s->regs[SS_REG_BP] = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    s->regs[SS_REG_IP] = (uint64_t)(uintptr_t)&th_self_sample;
    s->stack_req = stack_req;
    uint8_t *buf = malloc(stack_req ? stack_req : 1);
    cr_assert(buf);
    struct iovec l = {buf, stack_req}, r = {(void *)(uintptr_t)sp, stack_req};
    ssize_t k = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
    cr_assert(k > 0 || stack_req == 0, "process_vm_readv self: %s", strerror(errno));
    s->stack_len = k > 0 ? (uint32_t)k : 0;
    if (s->stack_len < stack_req) s->flags |= SS_SAMPLE_PARTIAL;
    /* Our own stack can hold record headers the writer just built (sync
     * marker + valid header CRC): after damage the reader would rightly
     * resync on such an embedded header (docs/capture-format.md), which the
     * framing oracle of the damage tests does not model. Break every marker. */
    for (uint8_t *p = buf;
         s->stack_len >= 4 && (p = memmem(p, s->stack_len - (size_t)(p - buf), "\x9eSR\n", 4));)
        *p++ = 0;
    s->stack = buf;
}

const char th_text[36] = "stacksnap test: a string in .rodata";

int th_record_self_reads(struct ss_snap_writer *w)
{
    const char *text = th_text;
    uint64_t addrs[3] = {(uint64_t)(uintptr_t)text, (uint64_t)(uintptr_t)&th_record_self_reads,
                         (uint64_t)(uintptr_t)w};
    size_t lens[3] = {sizeof(th_text), 64, 48};
    for (int i = 0; i < 3; i++) {
        uint8_t buf[64];
        struct iovec l = {buf, lens[i]}, r = {(void *)(uintptr_t)addrs[i], lens[i]};
        ssize_t k = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        cr_assert(k == (ssize_t)lens[i]);
        ss_snap_record_read(w, addrs[i], buf, lens[i], 0);
    }
    uint8_t buf[16];
    struct iovec l = {buf, 16}, r = {(void *)8, 16};
    ssize_t k = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
    cr_assert(k < 0);
    ss_snap_record_read(w, 8, NULL, 16, -errno);
    return 4;
}

size_t th_write_small(const char *path, int nsamples, uint32_t stack_req)
{
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    strcpy(h.tool_version, "test");
    h.command = "snapfile-test --small";
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    struct th_maps maps;
    th_self_maps(&maps);
    struct ss_snap_process p = {.pid = (uint32_t)getpid(),
                                .ppid = (uint32_t)getppid(),
                                .comm = "snapfile_test",
                                .exe = "/proc/self/exe",
                                .nmaps = maps.n > 6 ? 6 : maps.n, /* keep the file small */
                                .maps = maps.m};
    cr_assert(ss_snap_write_process(w, &p, &err) == 0, "%s", err.msg);
    for (int i = 0; i < nsamples; i++) {
        struct ss_sample s;
        th_self_sample(&s, stack_req);
        s.time_ns += (uint64_t)i;
        if (i % 2 == 0) th_record_self_reads(w);
        cr_assert(ss_snap_write_sample(w, &s, NULL, &err) == 0, "%s", err.msg);
        free((void *)s.stack);
    }
    struct ss_capture_stats cs = {.seen = 10, .emitted = 9, .dropped = 1, .copy_partial = 2};
    struct ss_snap_counter c[8];
    uint32_t n = ss_snap_capture_counters(&cs, c);
    c[n++] = (struct ss_snap_counter){"unwind.no unwind info", 3};
    cr_assert(ss_snap_write_counters(w, 12345, c, n, &err) == 0, "%s", err.msg);
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);
    th_free_maps(&maps);
    struct stat st;
    cr_assert(stat(path, &st) == 0);
    return (size_t)st.st_size;
}

/* ---- digests ---- */
#define H(x) (d = (uint32_t)crc32(d, (const Bytef *)&(x), sizeof(x)))
#define HS(s) (d = (uint32_t)crc32(d, (const Bytef *)(s), (uInt)strlen(s) + 1))
#define HB(p, n) (d = (uint32_t)crc32(d, (const Bytef *)(p), (uInt)(n)))

uint32_t th_digest_reads(uint64_t seq, uint32_t n, const struct ss_snap_read *r)
{
    uint32_t d = 0;
    H(seq);
    H(n);
    for (uint32_t i = 0; i < n; i++) {
        H(r[i].addr);
        H(r[i].len);
        H(r[i].err);
        if (!r[i].err) HB(r[i].data, r[i].len);
    }
    return d;
}

uint32_t th_digest(const struct ss_snap_record *rec)
{
    uint32_t d = 0;
    H(rec->type);
    switch (rec->type) {
    case SS_SNAP_HEADER: {
        const struct ss_snap_header *h = &rec->header;
        H(h->version), H(h->flags), HS(h->arch), H(h->nregs), H(h->stack_size), H(h->freq_hz);
        H(h->start_real_ns), H(h->start_mono_ns), HS(h->hostname), HS(h->kernel_release);
        HS(h->tool_version), HS(h->command);
        break;
    }
    case SS_SNAP_PROCESS: {
        const struct ss_snap_process *p = &rec->process;
        H(p->pid), H(p->ppid), H(p->reason), H(p->time_ns), HS(p->comm), HS(p->exe), H(p->nmaps);
        for (uint32_t i = 0; i < p->nmaps; i++) {
            const struct ss_snap_mapping *m = &p->maps[i];
            H(m->start), H(m->end), H(m->offset), H(m->prot), H(m->dev_major), H(m->dev_minor);
            H(m->inode), H(m->build_id_len), HB(m->build_id, m->build_id_len), HS(m->path);
        }
        break;
    }
    case SS_SNAP_SAMPLE: {
        const struct ss_snap_sample *x = &rec->sample;
        H(x->seq), H(x->s.pid), H(x->s.tid), H(x->s.cpu), H(x->s.flags), H(x->s.time_ns);
        H(x->s.regs), H(x->s.stack_req), H(x->s.stack_len), HB(x->s.stack, x->s.stack_len);
        break;
    }
    case SS_SNAP_MEMREADS:
        return th_digest_reads(rec->memreads.sample_seq, rec->memreads.nreads, rec->memreads.reads);
    case SS_SNAP_COUNTERS:
        H(rec->counters.time_ns), H(rec->counters.n);
        for (uint32_t i = 0; i < rec->counters.n; i++)
            HS(rec->counters.items[i].name), H(rec->counters.items[i].value);
        break;
    case SS_SNAP_BUNDLE:
        H(rec->bundle.kind), H(rec->bundle.build_id_len);
        HB(rec->bundle.build_id, rec->bundle.build_id_len), HS(rec->bundle.path);
        H(rec->bundle.size), HB(rec->bundle.data, rec->bundle.size);
        break;
    case SS_SNAP_TRAILER:
        HB(&rec->trailer, sizeof(rec->trailer));
        break;
    }
    return d;
}

/* ---- reading everything ---- */
static void push(struct th_list *l, struct th_item it)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        cr_assert(l->v);
    }
    l->v[l->n++] = it;
}

int th_read_fd(int fd, struct th_list *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof(*out));
    struct ss_err err = {0};
    struct ss_snap_reader *r;
    int rc = ss_snap_open_fd(&r, fd, "cap.snap", &err);
    if (msg) snprintf(msg, msglen, "%s", err.msg);
    if (rc) return rc;
    struct ss_snap_record rec;
    uint64_t last_off = 0;
    size_t steps = 0;
    bool truncated = false;
    while ((rc = ss_snap_next(r, &rec, &err)) == 1) {
        cr_assert(!truncated, "a record after the TRUNCATED event");
        cr_assert(++steps < 10000000, "reader does not terminate");
        struct th_item it = {.type = rec.type, .offset = rec.offset};
        if (rec.type == SS_SNAP_CORRUPT) {
            it.a = rec.corrupt.offset, it.b = rec.corrupt.skipped;
            cr_assert(rec.corrupt.skipped > 0);
            cr_assert(rec.corrupt.reason && rec.corrupt.reason[0]);
            char line[512];
            cr_assert(strstr(ss_snap_event_str(r, &rec, line, sizeof(line)), "offset "));
        } else if (rec.type == SS_SNAP_TRUNCATED) {
            it.a = rec.truncated.offset, it.b = rec.truncated.ignored;
            truncated = true;
        } else {
            it.digest = th_digest(&rec);
            cr_assert(rec.size >= 20);
        }
        cr_assert(rec.offset >= last_off, "offsets go backwards: %llu after %llu",
                  (unsigned long long)rec.offset, (unsigned long long)last_off);
        cr_assert(rec.offset >= 16);
        last_off = rec.offset;
        push(out, it);
        if (rec.type == SS_SNAP_SAMPLE && rec.sample.has_reads)
            push(out, (struct th_item){.type = SS_SNAP_MEMREADS,
                                       .digest = th_digest_reads(rec.sample.seq, rec.sample.nreads,
                                                                 rec.sample.reads)});
    }
    cr_assert(rc == 0, "read error: %s", err.msg);
    cr_assert(ss_snap_next(r, &rec, &err) == 0, "end is sticky");
    ss_snap_reader_stats(r, &out->st);
    out->header = ss_snap_get_header(r) != NULL;
    ss_snap_close_reader(r);
    return 0;
}

int th_read_path(const char *path, struct th_list *out, char *msg, size_t msglen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        /* let the library report it */
        struct ss_err err = {0};
        struct ss_snap_reader *r;
        int rc = ss_snap_open(&r, path, &err);
        if (msg) snprintf(msg, msglen, "%s", err.msg);
        return rc;
    }
    return th_read_fd(fd, out, msg, msglen);
}

void th_list_free(struct th_list *l)
{
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* ---- framing oracle ---- */
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t th_frames(const uint8_t *buf, size_t len, struct th_frame *out, size_t max)
{
    size_t n = 0;
    uint64_t off = 16;
    while (off + 20 <= len && n < max) {
        uint32_t plen = le32(buf + off + 8);
        uint64_t end = off + 20 + plen;
        if (end > len) break;
        out[n++] = (struct th_frame){off, end, (uint16_t)(buf[off + 4] | buf[off + 5] << 8)};
        off = end;
    }
    return n;
}

size_t th_frame_record(uint8_t *b, uint16_t type, uint16_t flags, const void *payload, uint32_t len)
{
    memcpy(b, "\x9eSR\n", 4);
    b[4] = (uint8_t)type, b[5] = (uint8_t)(type >> 8);
    b[6] = (uint8_t)flags, b[7] = (uint8_t)(flags >> 8);
    uint32_t pcrc = (uint32_t)crc32(0, payload, len);
    for (int i = 0; i < 4; i++) {
        b[8 + i] = (uint8_t)(len >> (8 * i));
        b[12 + i] = (uint8_t)(pcrc >> (8 * i));
    }
    uint32_t hcrc = (uint32_t)crc32(0, b, 16);
    for (int i = 0; i < 4; i++)
        b[16 + i] = (uint8_t)(hcrc >> (8 * i));
    if (len) memcpy(b + 20, payload, len);
    return 20 + (size_t)len;
}
