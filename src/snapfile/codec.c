/* snapfile/codec.c: payload layout of every record type (encode + decode)
 * and the primitive buffer helpers of format.h. All integers little-endian;
 * a string is u16 length, the bytes, then one NUL. Decoders check every
 * length against the bytes present before allocating or copying, and ignore
 * payload bytes after the fields they know (fields are only ever appended). */
#include <errno.h>
#include <stdlib.h>

#include "snapfile/delta.h"
#include "snapfile/format.h"

bool snap_buf_reserve(struct snap_buf *b, size_t extra)
{
    if (b->oom) return false;
    if (extra <= b->cap - b->len) return true;
    size_t need = b->len + extra;
    if (need < b->len) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap * 2 > cap ? cap * 2 : need;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void snap_buf_free(struct snap_buf *b)
{
    free(b->p);
    *b = (struct snap_buf){0};
}

void snap_put_str(struct snap_buf *b, const char *s)
{
    snap_put_strn(b, s, 0xffff);
}

void snap_put_strn(struct snap_buf *b, const char *s, size_t max)
{
    size_t n = s ? strnlen(s, max < 0xffff ? max : 0xffff) : 0;
    snap_put_u16(b, (uint16_t)n);
    snap_put(b, s, n);
    snap_put_u8(b, 0);
}

const char *snap_get_str(struct snap_cur *c)
{
    uint16_t n = snap_get_u16(c);
    const uint8_t *p = snap_get(c, (size_t)n + 1);
    if (!p || p[n] != 0) {
        c->bad = true;
        return "";
    }
    return (const char *)p;
}

void snap_get_str_into(struct snap_cur *c, char *dst, size_t cap)
{
    const char *s = snap_get_str(c);
    size_t n = strnlen(s, cap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
}

void snap_arrays_free(struct snap_arrays *a)
{
    free(a->maps);
    free(a->reads);
    free(a->ctrs);
    free(a->ksyms);
    free(a->frames);
    *a = (struct snap_arrays){0};
}

/* Grow *arr to hold n elements of size sz. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *p = realloc(*arr, c * sz);
    if (!p) return -ENOMEM;
    *arr = p;
    *cap = c;
    return 0;
}

static void put_build_id(struct snap_buf *b, const uint8_t *id, uint8_t len)
{
    if (len > SS_SNAP_BUILD_ID_MAX) len = SS_SNAP_BUILD_ID_MAX;
    snap_put_u8(b, len);
    snap_put(b, id, len);
}

static bool get_build_id(struct snap_cur *c, uint8_t *id, uint8_t *len)
{
    uint8_t n = snap_get_u8(c);
    const uint8_t *p = snap_get(c, n);
    if (!p || n > SS_SNAP_BUILD_ID_MAX) {
        c->bad = true;
        *len = 0;
        return false;
    }
    memcpy(id, p, n);
    *len = n;
    return true;
}

/* ---- header ---- */
void snap_enc_header(struct snap_buf *b, const struct ss_snap_header *h)
{
    snap_put_u32(b, h->flags);
    snap_put_strn(b, h->arch, sizeof(h->arch) - 1);
    snap_put_u32(b, h->nregs);
    snap_put_u32(b, h->stack_size);
    snap_put_u32(b, h->freq_hz);
    snap_put_u64(b, h->start_real_ns);
    snap_put_u64(b, h->start_mono_ns);
    snap_put_strn(b, h->hostname, sizeof(h->hostname) - 1);
    snap_put_strn(b, h->kernel_release, sizeof(h->kernel_release) - 1);
    snap_put_strn(b, h->tool_version, sizeof(h->tool_version) - 1);
    snap_put_str(b, h->command);
    snap_put_u64(b, h->pac_mask); /* appended: absent in older captures */
}

int snap_dec_header(struct snap_cur *c, struct ss_snap_header *h, const char **why)
{
    h->flags = snap_get_u32(c);
    snap_get_str_into(c, h->arch, sizeof(h->arch));
    h->nregs = snap_get_u32(c);
    h->stack_size = snap_get_u32(c);
    h->freq_hz = snap_get_u32(c);
    h->start_real_ns = snap_get_u64(c);
    h->start_mono_ns = snap_get_u64(c);
    snap_get_str_into(c, h->hostname, sizeof(h->hostname));
    snap_get_str_into(c, h->kernel_release, sizeof(h->kernel_release));
    snap_get_str_into(c, h->tool_version, sizeof(h->tool_version));
    h->command = snap_get_str(c);
    h->pac_mask = !c->bad && snap_left(c) >= 8 ? snap_get_u64(c) : 0;
    if (c->bad) {
        *why = "header record too short";
        return -EBADMSG;
    }
    return 0;
}

const char *ss_snap_arch(const struct ss_snap_header *h)
{
    return h && h->arch[0] ? h->arch : "x86_64";
}

/* ---- process ---- */
#define MAP_MIN_BYTES (8 * 3 + 4 * 3 + 8 + 1 + 3) /* one mapping, empty id and path */

void snap_enc_process(struct snap_buf *b, const struct ss_snap_process *p)
{
    snap_put_u32(b, p->pid);
    snap_put_u32(b, p->ppid);
    snap_put_u32(b, p->reason);
    snap_put_u64(b, p->time_ns);
    snap_put_str(b, p->comm);
    snap_put_str(b, p->exe);
    snap_put_u32(b, p->nmaps);
    for (uint32_t i = 0; i < p->nmaps; i++) {
        const struct ss_snap_mapping *m = &p->maps[i];
        snap_put_u64(b, m->start);
        snap_put_u64(b, m->end);
        snap_put_u64(b, m->offset);
        snap_put_u32(b, m->prot);
        snap_put_u32(b, m->dev_major);
        snap_put_u32(b, m->dev_minor);
        snap_put_u64(b, m->inode);
        put_build_id(b, m->build_id, m->build_id_len);
        snap_put_str(b, m->path);
    }
    snap_put_str(b, p->cgroup ? p->cgroup : ""); /* appended: older readers stop before */
}

int snap_dec_process(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_process *p,
                     const char **why)
{
    p->pid = snap_get_u32(c);
    p->ppid = snap_get_u32(c);
    p->reason = snap_get_u32(c);
    p->time_ns = snap_get_u64(c);
    p->comm = snap_get_str(c);
    p->exe = snap_get_str(c);
    p->nmaps = snap_get_u32(c);
    p->maps = NULL;
    if (c->bad || p->nmaps > snap_left(c) / MAP_MIN_BYTES) {
        *why = "process record too short";
        return -EBADMSG;
    }
    if (grow((void **)&a->maps, &a->maps_cap, p->nmaps, sizeof(*a->maps))) return -ENOMEM;
    for (uint32_t i = 0; i < p->nmaps; i++) {
        struct ss_snap_mapping *m = &a->maps[i];
        m->start = snap_get_u64(c);
        m->end = snap_get_u64(c);
        m->offset = snap_get_u64(c);
        m->prot = snap_get_u32(c);
        m->dev_major = snap_get_u32(c);
        m->dev_minor = snap_get_u32(c);
        m->inode = snap_get_u64(c);
        get_build_id(c, m->build_id, &m->build_id_len);
        m->path = snap_get_str(c);
    }
    if (c->bad) {
        *why = "process record: bad mapping list";
        return -EBADMSG;
    }
    p->cgroup = snap_left(c) ? snap_get_str(c) : ""; /* absent in older captures */
    if (c->bad) {
        *why = "process record: bad cgroup";
        return -EBADMSG;
    }
    p->maps = a->maps;
    return 0;
}

/* ---- sample ---- */
void snap_enc_sample(struct snap_buf *b, const struct ss_sample *s, uint64_t seq)
{
    snap_put_u64(b, seq);
    snap_put_u32(b, s->pid);
    snap_put_u32(b, s->tid);
    snap_put_u32(b, s->cpu);
    snap_put_u32(b, s->flags);
    snap_put_u64(b, s->time_ns);
    snap_put_u32(b, SS_NREGS);
    for (int i = 0; i < SS_NREGS; i++)
        snap_put_u64(b, s->regs[i]);
    snap_put_u32(b, s->stack_req);
    snap_put_u32(b, s->stack_len);
    /* then (version 3) base, stack and windows: snap_delta_encode */
}

/* Index of the stack pointer in a sample of nregs registers: the register
 * sets the format knows, x86-64's 24 in perf's order and arm64's 34 in
 * user_pt_regs order (a capture of the other architecture is still read). */
_Static_assert((SS_NREGS == 24 && SS_REG_SP == 7) || (SS_NREGS == 34 && SS_REG_SP == 31),
               "the build's register set is one the format knows");
static int sp_index(uint32_t nregs)
{
    return nregs == 24 ? 7 : nregs == 34 ? 31 : -1;
}

int snap_dec_sample(struct snap_cur *c, uint32_t version, struct ss_snap_sample *x,
                    struct snap_delta *dl, const char **why)
{
    struct ss_sample *s = &x->s;
    memset(x, 0, offsetof(struct ss_snap_sample, kips)); /* kips: filled as far as used */
    /* the usual case, every register and the whole fixed part there: one
     * bounds check (the fields as below) */
    enum { HEAD = 8 + 4 * 4 + 8 + 4, FIXED = HEAD + SS_NREGS * 8 + 4 + 4 };
    if (!c->bad && c->len - c->off >= FIXED && snap_le32(c->p + c->off + HEAD - 4) == SS_NREGS) {
        const uint8_t *p = c->p + c->off;
        x->seq = snap_le64(p);
        s->pid = snap_le32(p + 8);
        s->tid = snap_le32(p + 12);
        s->cpu = snap_le32(p + 16);
        s->flags = snap_le32(p + 20);
        s->time_ns = snap_le64(p + 24);
        for (uint32_t i = 0; i < SS_NREGS; i++)
            s->regs[i] = snap_le64(p + HEAD + 8 * i);
        s->stack_req = snap_le32(p + HEAD + SS_NREGS * 8);
        s->stack_len = snap_le32(p + HEAD + SS_NREGS * 8 + 4);
        x->sp = s->regs[SS_REG_SP];
        x->nregs = SS_NREGS;
        c->off += FIXED;
    } else {
        x->seq = snap_get_u64(c);
        s->pid = snap_get_u32(c);
        s->tid = snap_get_u32(c);
        s->cpu = snap_get_u32(c);
        s->flags = snap_get_u32(c);
        s->time_ns = snap_get_u64(c);
        uint32_t nregs = snap_get_u32(c);
        if (c->bad || nregs > snap_left(c) / 8) {
            *why = "sample record: bad register count";
            return -EBADMSG;
        }
        int spi = sp_index(nregs);
        x->nregs = nregs;
        for (uint32_t i = 0; i < nregs; i++) {
            uint64_t v = snap_get_u64(c);
            if (i < SS_NREGS) s->regs[i] = v;
            if (nregs != SS_NREGS && i < SS_SNAP_MAX_REGS) x->fregs[i] = v;
            if ((int)i == spi) x->sp = v;
        }
        s->stack_req = snap_get_u32(c);
        s->stack_len = snap_get_u32(c);
    }
    if (version >= 3) return snap_delta_parse(c, x, dl, why);
    s->stack = snap_get(c, s->stack_len);
    if (c->bad) {
        *why = "sample record: stack bytes missing";
        return -EBADMSG;
    }
    if (version < 2) return 0; /* no windows before version 2 */
    return snap_delta_parse_windows(c, x, dl, 1, why);
}

/* ---- memory reads: u64 seq, u32 n, n x (u64 addr, u32 len, i32 err,
 * data[len] if err == 0) ---- */
void snap_enc_read(struct snap_buf *b, uint64_t addr, const void *data, size_t len, int err)
{
    if (len > SNAP_MAX_PAYLOAD) len = SNAP_MAX_PAYLOAD, err = -EFBIG;
    if (!err && !data) err = -EFAULT;
    snap_put_u64(b, addr);
    snap_put_u32(b, (uint32_t)len);
    snap_put_u32(b, (uint32_t)(int32_t)err);
    if (!err) snap_put(b, data, len);
}

int snap_dec_memreads(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_memreads *m,
                      const char **why)
{
    m->sample_seq = snap_get_u64(c);
    m->nreads = snap_get_u32(c);
    m->reads = NULL;
    if (c->bad || m->nreads > snap_left(c) / 16) {
        *why = "memory-read record: bad count";
        return -EBADMSG;
    }
    if (grow((void **)&a->reads, &a->reads_cap, m->nreads, sizeof(*a->reads))) return -ENOMEM;
    if (snap_dec_reads(c, a->reads, m->nreads) < 0) {
        *why = "memory-read record: bad read list";
        return -EBADMSG;
    }
    m->reads = a->reads;
    return 0;
}

int snap_dec_reads(struct snap_cur *c, struct ss_snap_read *out, uint32_t n)
{
    for (uint32_t i = 0; i < n && !c->bad; i++) {
        struct ss_snap_read *r = &out[i];
        r->addr = snap_get_u64(c);
        r->len = snap_get_u32(c);
        r->err = (int32_t)snap_get_u32(c);
        r->data = r->err ? NULL : snap_get(c, r->len);
        if (r->err > 0) c->bad = true;
    }
    return c->bad ? -EBADMSG : 0;
}

int snap_grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    return grow(arr, cap, n, sz);
}

/* ---- counters ---- */
void snap_enc_counters(struct snap_buf *b, uint64_t time_ns, const struct ss_snap_counter *k,
                       uint32_t n)
{
    snap_put_u64(b, time_ns);
    snap_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        snap_put_str(b, k[i].name);
        snap_put_u64(b, k[i].value);
    }
}

int snap_dec_counters(struct snap_cur *c, struct snap_arrays *a, struct ss_snap_counters *k,
                      const char **why)
{
    k->time_ns = snap_get_u64(c);
    k->n = snap_get_u32(c);
    k->items = NULL;
    if (c->bad || k->n > snap_left(c) / 11) {
        *why = "counters record: bad count";
        return -EBADMSG;
    }
    if (grow((void **)&a->ctrs, &a->ctrs_cap, k->n, sizeof(*a->ctrs))) return -ENOMEM;
    for (uint32_t i = 0; i < k->n; i++) {
        a->ctrs[i].name = snap_get_str(c);
        a->ctrs[i].value = snap_get_u64(c);
    }
    if (c->bad) {
        *why = "counters record: bad counter list";
        return -EBADMSG;
    }
    k->items = a->ctrs;
    return 0;
}

/* ---- bundle: u32 kind, build-id, str path, u64 size, data[size] ----
 * (encoded by the writer around the mapped file, see bundle.c) */
int snap_dec_bundle(struct snap_cur *c, struct ss_snap_bundle *b, const char **why)
{
    b->kind = snap_get_u32(c);
    get_build_id(c, b->build_id, &b->build_id_len);
    b->path = snap_get_str(c);
    b->size = snap_get_u64(c);
    b->data = c->bad || b->size > snap_left(c) ? NULL : snap_get(c, (size_t)b->size);
    if (!b->data) {
        *why = "bundle record: file bytes missing";
        return -EBADMSG;
    }
    return 0;
}

/* ---- perf map: u32 pid, u64 time, u64 len, len bytes ---- */
void snap_enc_perfmap(struct snap_buf *b, const struct ss_snap_perfmap *m)
{
    snap_put_u32(b, m->pid);
    snap_put_u64(b, m->time_ns);
    snap_put_u64(b, m->len);
    snap_put(b, m->text, (size_t)m->len);
}

int snap_dec_perfmap(struct snap_cur *c, struct ss_snap_perfmap *m, const char **why)
{
    m->pid = snap_get_u32(c);
    m->time_ns = snap_get_u64(c);
    m->len = snap_get_u64(c);
    m->text = c->bad || m->len > snap_left(c) ? NULL : (const char *)snap_get(c, (size_t)m->len);
    if (!m->text) {
        *why = "perfmap record: text missing";
        return -EBADMSG;
    }
    return 0;
}

/* ---- debug file: u64 time, bid build_id, str path ---- */
void snap_enc_debugfile(struct snap_buf *b, const struct ss_snap_debugfile *d)
{
    snap_put_u64(b, d->time_ns);
    snap_put_u8(b, d->build_id_len);
    snap_put(b, d->build_id, d->build_id_len);
    snap_put_str(b, d->path);
}

int snap_dec_debugfile(struct snap_cur *c, struct ss_snap_debugfile *d, const char **why)
{
    d->time_ns = snap_get_u64(c);
    d->build_id_len = snap_get_u8(c);
    const uint8_t *id = d->build_id_len && d->build_id_len <= SS_SNAP_BUILD_ID_MAX
                            ? snap_get(c, d->build_id_len)
                            : NULL;
    if (id) memcpy(d->build_id, id, d->build_id_len);
    d->path = snap_get_str(c);
    if (!id || c->bad || !d->path[0]) {
        *why = "debugfile record: build-id or path missing";
        return -EBADMSG;
    }
    return 0;
}

/* ---- process marker: u32 kind, pid, tid, ppid, cpu, u64 time ---- */
void snap_enc_procevent(struct snap_buf *b, const struct ss_proc_event *ev)
{
    snap_put_u32(b, ev->kind);
    snap_put_u32(b, ev->pid);
    snap_put_u32(b, ev->tid);
    snap_put_u32(b, ev->ppid);
    snap_put_u32(b, ev->cpu);
    snap_put_u64(b, ev->time_ns);
}

int snap_dec_procevent(struct snap_cur *c, struct ss_proc_event *ev, const char **why)
{
    ev->kind = snap_get_u32(c);
    ev->pid = snap_get_u32(c);
    ev->tid = snap_get_u32(c);
    ev->ppid = snap_get_u32(c);
    ev->cpu = snap_get_u32(c);
    ev->time_ns = snap_get_u64(c);
    if (c->bad || ev->kind < SS_PROC_FORK || ev->kind > SS_PROC_EXIT) {
        *why = "procevent record: too short or unknown kind";
        return -EBADMSG;
    }
    return 0;
}

/* ---- trailer ---- */
void snap_enc_trailer(struct snap_buf *b, const struct ss_snap_trailer *t)
{
    snap_put_u64(b, t->end_real_ns);
    snap_put_u64(b, t->end_mono_ns);
    snap_put_u64(b, t->records);
    snap_put_u64(b, t->samples);
    snap_put_u64(b, t->processes);
    snap_put_u64(b, t->bundles);
    snap_put_u64(b, t->offset);
}

int snap_dec_trailer(struct snap_cur *c, struct ss_snap_trailer *t, const char **why)
{
    t->end_real_ns = snap_get_u64(c);
    t->end_mono_ns = snap_get_u64(c);
    t->records = snap_get_u64(c);
    t->samples = snap_get_u64(c);
    t->processes = snap_get_u64(c);
    t->bundles = snap_get_u64(c);
    t->offset = snap_get_u64(c);
    if (c->bad) {
        *why = "trailer record too short";
        return -EBADMSG;
    }
    return 0;
}
