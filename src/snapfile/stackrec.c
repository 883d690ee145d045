/* snapfile/stackrec.c: captures of unwound stacks (`record --no-stack-bytes`,
 * format version 5). Such a capture keeps what the live walk gave, not what
 * it read: each sample is a stack record (ids, times, the frames by id) and
 * each distinct frame (kind, build-id, address, offset, names, lines) is
 * written once, in a frames record before the first stack that uses it. The
 * writer's dictionary finds a frame's id by content; the reader's table turns
 * ids back into frames. No registers, stack bytes, windows or target reads. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapfile/stackrec.h"

/* unsigned LEB128 (frame ids, counts) */
static uint32_t get_uvar(struct snap_cur *c)
{
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        uint8_t x = snap_get_u8(c);
        if (c->bad) return 0;
        if (i == 4 && x > 0x0f) break; /* more than 32 bits */
        v |= (uint32_t)(x & 0x7f) << (7 * i);
        if (!(x & 0x80)) return v;
    }
    c->bad = true;
    return 0;
}

/* ---- reader: table ---- */
struct snap_ftable {
    struct ss_frame *f;
    char **blk;   /* per id: its strings (one block), NULL */
    uint8_t *def; /* per id: defined */
    uint32_t n, cap;
};

struct snap_ftable *snap_ftable_new(void)
{
    return calloc(1, sizeof(struct snap_ftable));
}

void snap_ftable_reset(struct snap_ftable *t)
{
    if (!t) return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->blk[i]);
    t->n = 0;
}

void snap_ftable_free(struct snap_ftable *t)
{
    if (!t) return;
    snap_ftable_reset(t);
    free(t->f);
    free(t->blk);
    free(t->def);
    free(t);
}

static int table_room(struct snap_ftable *t, uint32_t n)
{
    if (n <= t->cap) return 0;
    uint32_t cap = t->cap ? t->cap : 256;
    while (cap < n)
        cap = cap > UINT32_MAX / 2 ? n : cap * 2;
    struct ss_frame *f = realloc(t->f, (size_t)cap * sizeof(*f));
    if (!f) return -ENOMEM;
    t->f = f;
    char **b = realloc(t->blk, (size_t)cap * sizeof(*b));
    if (!b) return -ENOMEM;
    t->blk = b;
    uint8_t *d = realloc(t->def, cap);
    if (!d) return -ENOMEM;
    t->def = d;
    t->cap = cap;
    return 0;
}

/* The strings of a frame, copied into one block (the payload is reused). */
static int keep_strings(struct ss_frame *f, char **blk)
{
    const char *s[3] = {f->name, f->module, f->system_name};
    size_t len[3], total = 0;
    for (int i = 0; i < 3; i++)
        total += (len[i] = s[i] ? strlen(s[i]) + 1 : 0);
    *blk = NULL;
    if (!total) return 0;
    char *b = malloc(total), *p = b;
    if (!b) return -ENOMEM;
    const char **dst[3] = {&f->name, &f->module, &f->system_name};
    for (int i = 0; i < 3; i++)
        if (s[i]) {
            memcpy(p, s[i], len[i]);
            *dst[i] = p;
            p += len[i];
        }
    *blk = b;
    return 0;
}

/* Forget the ids from have on (a frames record that did not decode). */
static void snap_ftable_reset_from(struct snap_ftable *t, uint32_t have)
{
    for (uint32_t i = have; i < t->n; i++)
        free(t->blk[i]);
    t->n = have;
}

int snap_dec_frames(struct snap_cur *c, struct snap_ftable *t, uint64_t off,
                    struct ss_snap_frames *fr, const char **why)
{
    fr->first = snap_get_u32(c);
    fr->n = snap_get_u32(c);
    *why = "frames record too short";
    if (c->bad) return -EBADMSG;
    if (fr->n > snap_left(c) / SNAP_FRAME_MIN) return -EBADMSG;
    /* every id before first was defined in the bytes before this record
     * (ids skipped: a damaged frames record), so there are at most
     * off / SNAP_FRAME_MIN of them: the table stays within a few times the
     * file's size, whatever the ids claim */
    *why = "frames record with ids out of sequence";
    if (fr->first < t->n || fr->first > off / SNAP_FRAME_MIN || fr->n > UINT32_MAX - 1 - fr->first)
        return -EBADMSG;
    uint32_t end = fr->first + fr->n;
    if (table_room(t, end) < 0) return -ENOMEM;
    for (uint32_t i = t->n; i < fr->first; i++) {
        t->def[i] = 0;
        t->blk[i] = NULL;
    }
    uint32_t have = t->n;
    t->n = fr->first;
    *why = "malformed frames record";
    for (uint32_t i = fr->first; i < end; i++) {
        struct ss_frame f = {0};
        f.kind = snap_get_u8(c);
        uint8_t has = snap_get_u8(c);
        f.flags = snap_get_u8(c);
        f.unproven = snap_get_u8(c);
        f.build_id_len = snap_get_u8(c);
        if (f.build_id_len > sizeof(f.build_id)) c->bad = true;
        const uint8_t *id = snap_get(c, c->bad ? 0 : f.build_id_len);
        if (id && f.build_id_len) memcpy(f.build_id, id, f.build_id_len);
        f.addr = snap_get_u64(c);
        f.offset = snap_get_u64(c);
        f.sym_offset = snap_get_u64(c);
        f.line = snap_get_u32(c);
        f.first_line = snap_get_u32(c);
        if (has & SNAP_HAS_NAME) f.name = snap_get_str(c);
        if (has & SNAP_HAS_MODULE) f.module = snap_get_str(c);
        if (has & SNAP_HAS_SYSNAME) f.system_name = snap_get_str(c);
        if (c->bad || (has & ~(SNAP_HAS_NAME | SNAP_HAS_MODULE | SNAP_HAS_SYSNAME))) {
            snap_ftable_reset_from(t, have);
            return -EBADMSG;
        }
        if (keep_strings(&f, &t->blk[i]) < 0) {
            snap_ftable_reset_from(t, have);
            return -ENOMEM;
        }
        t->f[i] = f;
        t->def[i] = 1;
        t->n = i + 1;
    }
    return 0;
}

int snap_dec_stack(struct snap_cur *c, const struct snap_ftable *t, struct snap_arrays *a,
                   struct ss_snap_stack *s, const char **why)
{
    memset(s, 0, sizeof(*s));
    s->seq = snap_get_u64(c);
    s->st.pid = snap_get_u32(c);
    s->st.tid = snap_get_u32(c);
    s->st.cpu = snap_get_u32(c);
    s->flags = snap_get_u32(c);
    s->st.time_ns = snap_get_u64(c);
    s->st.weight = snap_get_u64(c);
    s->st.trunc = snap_get_u8(c);
    snap_get_str_into(c, s->st.comm, sizeof(s->st.comm));
    uint32_t n = get_uvar(c);
    *why = "stack record too short";
    if (c->bad || n > snap_left(c)) return -EBADMSG;
    if (snap_grow((void **)&a->frames, &a->frames_cap, n ? n : 1, sizeof(*a->frames)) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = get_uvar(c);
        if (c->bad) return -EBADMSG;
        if (id >= t->n || !t->def[id]) {
            *why = "stack record refers to a frame not read (its frames record was damaged or "
                   "cut out)";
            return -EBADMSG;
        }
        a->frames[i] = t->f[id];
    }
    s->st.nframes = n;
    s->st.frames = a->frames;
    return 0;
}
