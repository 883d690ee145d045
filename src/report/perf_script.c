/* report/perf_script: perf-script text, streamed in pieces of 64 KiB (layout and
 * escapes in include/stacksnap/report.h), with two caches. Frame lines: a
 * line is a function of the frame's kind, address, symbol offset, Lua line
 * and the contents of its name and module, and the frames of a profile
 * repeat. An entry is found by those fields and the strings' addresses and
 * used only when both strings still have the contents it was made from.
 * Stacks: the lines of a whole stack, found by the same fields of every
 * frame and used when each distinct string still has its contents (a
 * replay's memo gives most samples the frames of an earlier one); and the
 * start of a sample's header line, the same for a thread's samples. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define LINE_BITS 10
#define STK_BITS 10
/* Text is written to the FILE in pieces of at least this many bytes: one
 * write(2) for ~30 samples, not one per stdio buffer (4 KiB, ~2 samples). */
#define PERF_WRITE_AT (64u << 10)

/* A stack's lines: a copy of its n frames (byte for byte: all a line
 * depends on, and more), the distinct strings' pointers sptr[nstr] with the
 * offsets of their copies in copy, and the text (one allocation). */
struct stk_ent {
    uint64_t h;
    uint32_t n, nstr; /* n 0: empty */
    struct ss_frame *keys;
    const char **sptr;
    uint32_t *soff;
    char *copy, *text;
    size_t tlen;
};

struct line_ent {
    uint64_t addr, sym_offset;
    uint32_t line;
    uint8_t kind;
    bool used;
    const char *name, *module; /* the frame's pointers: where to look */
    char *raw;                 /* name NUL module NUL text (one allocation) */
    size_t nlen, mlen, tlen;
    uint64_t stamp; /* when last used */
};

struct ss_perf_writer {
    FILE *f;
    uint64_t period_ns;
    struct rp_buf b, scratch;
    int rc;
    uint64_t stamp;
    struct line_ent lines[1u << LINE_BITS];
    struct stk_ent stacks[1u << STK_BITS];
    /* the header up to the time, for (pid, tid, cpu, comm) */
    uint32_t hpid, htid, hcpu;
    char hcomm[16];
    struct rp_buf head;
    char tail[32]; /* ": PERIOD cpu-clock:\n" */
    size_t taillen;
};

struct ss_perf_writer *ss_perf_writer_new(FILE *f, uint32_t freq_hz, struct ss_err *err)
{
    struct ss_perf_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        ss_err_set(err, -ENOMEM, "perf-script output: out of memory");
        return NULL;
    }
    w->f = f;
    w->period_ns = 1000000000ull / (freq_hz ? freq_hz : 99);
    struct rp_buf t = {0};
    rp_buf_puts(&t, ": ");
    rp_buf_udec_pad(&t, w->period_ns, 10, ' ', false);
    rp_buf_puts(&t, " cpu-clock:\n");
    if (!t.oom && t.len < sizeof(w->tail)) {
        memcpy(w->tail, t.p, t.len);
        w->taillen = t.len;
    }
    rp_buf_free(&t);
    return w;
}

static int set(const char *s)
{
    return s && *s;
}

static void frame_line(struct rp_buf *b, const struct ss_frame *fr)
{
    uint64_t addr = fr->addr;
    const char *dso = NULL;
    if (fr->kind == SS_FRAME_LUA || fr->kind == SS_FRAME_PSEUDO) addr = 0;
    rp_buf_putc(b, '\t'); /* "\t%16" PRIx64 " " */
    rp_buf_hex(b, addr, 16);
    rp_buf_putc(b, ' ');
    switch (fr->kind) {
    case SS_FRAME_LUA:
        rp_escape_str(b, set(fr->name) ? fr->name : "anonymous", RP_ESC_PERF_SYM);
        if (set(fr->module)) {
            rp_buf_puts(b, " [");
            rp_escape_str(b, fr->module, RP_ESC_PERF_SYM);
            rp_buf_putc(b, ':');
            rp_buf_udec(b, fr->line);
            rp_buf_putc(b, ']');
        }
        dso = "[lua]";
        break;
    case SS_FRAME_PSEUDO:
        rp_escape_str(b, set(fr->name) ? fr->name : "[unknown]", RP_ESC_PERF_SYM);
        dso = "[stacksnap]";
        break;
    case SS_FRAME_KERNEL:
    default:
        rp_escape_str(b, set(fr->name) ? fr->name : "[unknown]", RP_ESC_DISPLAY);
        if (set(fr->name)) { /* perf's "sym+0xoff" */
            rp_buf_puts(b, "+0x");
            rp_buf_hex(b, fr->sym_offset, 0);
        }
        dso = set(fr->module)               ? fr->module
              : fr->kind == SS_FRAME_KERNEL ? "[kernel.kallsyms]"
                                            : "[unknown]";
        break;
    }
    rp_buf_puts(b, " (");
    rp_escape_str(b, dso, RP_ESC_PERF_DSO);
    rp_buf_puts(b, ")\n");
}

static size_t len_of(const char *s)
{
    return s ? strlen(s) + 1 : 0; /* 0: NULL, 1: "" */
}

/* Same contents as the entry's copy (NULL only as NULL). */
static bool same_str(const char *s, const char *copy, size_t len)
{
    if (!s || !len) return !s && !len;
    return !strncmp(s, copy, len); /* the copy's NUL ends it */
}

/* Append fr's line, from the cache when its fields and strings match. */
/* *last: the entry the frame before in this sample used, its strings found
 * equal to the entry's copies (they cannot change while one sample is
 * written): a frame with the same pointers needs no second look. */
static void cached_line(struct ss_perf_writer *w, const struct ss_frame *fr, struct line_ent **last)
{
    uint64_t h = (fr->addr ^ (uintptr_t)fr->name * 0x9e3779b97f4a7c15ull ^
                  (uintptr_t)fr->module * 0xc2b2ae3d27d4eb4full ^ fr->line ^ fr->sym_offset) *
                 0x165667b19e3779f9ull;
    /* two ways: the line the other way holds stays when this one is made */
    struct line_ent *set = &w->lines[(h >> (64 - LINE_BITS)) & ~(size_t)1], *e = set;
    for (int way = 0; way < 2; way++, e++)
        if (e->used && e->addr == fr->addr && e->sym_offset == fr->sym_offset &&
            e->line == fr->line && e->kind == fr->kind && e->name == fr->name &&
            e->module == fr->module &&
            (e == *last || (same_str(fr->name, e->raw, e->nlen) &&
                            same_str(fr->module, e->raw + e->nlen, e->mlen)))) {
            e->stamp = ++w->stamp;
            *last = e;
            rp_buf_put(&w->b, e->raw + e->nlen + e->mlen, e->tlen);
            return;
        }
    e = set[0].stamp <= set[1].stamp ? &set[0] : &set[1]; /* the one used least lately */
    struct rp_buf *t = &w->scratch;
    rp_buf_reset(t);
    frame_line(t, fr);
    rp_buf_put(&w->b, t->p, t->len);
    *last = NULL;
    if (t->oom) return;
    size_t nl = len_of(fr->name), ml = len_of(fr->module);
    char *raw = malloc(nl + ml + t->len);
    if (!raw) return; /* a cache: the line is written all the same */
    if (nl) memcpy(raw, fr->name, nl);
    if (ml) memcpy(raw + nl, fr->module, ml);
    memcpy(raw + nl + ml, t->p, t->len);
    free(e->raw);
    *e = (struct line_ent){.addr = fr->addr,
                           .sym_offset = fr->sym_offset,
                           .line = fr->line,
                           .kind = fr->kind,
                           .used = true,
                           .name = fr->name,
                           .module = fr->module,
                           .raw = raw,
                           .nlen = nl,
                           .mlen = ml,
                           .tlen = t->len,
                           .stamp = ++w->stamp};
    *last = e; /* made from this frame's strings */
}

/* "%5lu.%06lu" of the seconds and microseconds in ns. */
static void put_time(struct rp_buf *b, uint64_t ns)
{
    char t[32], *p = t + sizeof(t);
    uint64_t sec = ns / 1000000000u, us = ns % 1000000000u / 1000u;
    for (int i = 0; i < 6; i++, us /= 10)
        *--p = (char)('0' + us % 10);
    *--p = '.';
    int d = 0;
    do {
        *--p = (char)('0' + sec % 10);
        sec /= 10;
        d++;
    } while (sec);
    for (; d < 5; d++)
        *--p = ' ';
    rp_buf_put(b, p, (size_t)(t + sizeof(t) - p));
}

/* The header up to the time: "COMM %7u/%-7u [%03u] ", kept for the thread. */
static void head(struct ss_perf_writer *w, const struct ss_stack *s)
{
    struct rp_buf *h = &w->head;
    if (!h->len || h->oom || w->hpid != s->pid || w->htid != s->tid || w->hcpu != s->cpu ||
        memcmp(w->hcomm, s->comm, sizeof(w->hcomm))) {
        rp_buf_reset(h);
        h->oom = false;
        size_t clen = strnlen(s->comm, sizeof(s->comm));
        if (clen)
            rp_escape(h, s->comm, clen, RP_ESC_PERF_COMM);
        else
            rp_buf_puts(h, "[unknown]");
        rp_buf_putc(h, ' ');
        rp_buf_udec_pad(h, s->pid, 7, ' ', false);
        rp_buf_putc(h, '/');
        rp_buf_udec_pad(h, s->tid, 7, ' ', true);
        rp_buf_puts(h, " [");
        rp_buf_udec_pad(h, s->cpu, 3, '0', false);
        rp_buf_puts(h, "] ");
        w->hpid = s->pid, w->htid = s->tid, w->hcpu = s->cpu;
        memcpy(w->hcomm, s->comm, sizeof(w->hcomm));
    }
    if (h->oom) {
        w->b.oom = true;
        return;
    }
    rp_buf_put(&w->b, h->p, h->len);
}

/* Does e hold the n frames f: the same bytes, every distinct string the
 * same contents as when e was made? */
static bool stack_same(const struct stk_ent *e, const struct ss_frame *f, uint32_t n, uint64_t h)
{
    if (e->n != n || e->h != h || memcmp(e->keys, f, n * sizeof(*f))) return false;
    for (uint32_t i = 0; i < e->nstr; i++)
        if (strcmp(e->sptr[i], e->copy + e->soff[i])) return false;
    return true;
}

static void add_str(const char **sp, uint32_t *ns, const char *p)
{
    if (!p) return;
    for (uint32_t i = 0; i < *ns; i++)
        if (sp[i] == p) return;
    sp[(*ns)++] = p;
}

/* Keep text (the lines of the n frames with keys k) in e. */
static void stack_keep(struct stk_ent *e, const struct ss_frame *k, uint32_t n, uint64_t h,
                       const char *text, size_t tlen)
{
    free(e->keys);
    *e = (struct stk_ent){0};
    const char **sp = malloc(2 * (size_t)n * sizeof(*sp));
    if (!sp) return;
    uint32_t ns = 0;
    size_t clen = 0;
    for (uint32_t i = 0; i < n; i++) {
        add_str(sp, &ns, k[i].name);
        add_str(sp, &ns, k[i].module);
    }
    for (uint32_t i = 0; i < ns; i++)
        clen += strlen(sp[i]) + 1;
    size_t kb = n * sizeof(*k), pb = ns * sizeof(*sp), ob = ns * sizeof(uint32_t);
    char *m = malloc(kb + pb + ob + clen + tlen);
    if (!m) {
        free(sp);
        return;
    }
    e->keys = (struct ss_frame *)(void *)m;
    memcpy(e->keys, k, kb);
    e->sptr = (const char **)(void *)(m + kb);
    memcpy(e->sptr, sp, pb);
    e->soff = (uint32_t *)(void *)(m + kb + pb);
    e->copy = m + kb + pb + ob;
    size_t off = 0;
    for (uint32_t i = 0; i < ns; i++) {
        size_t l = strlen(sp[i]) + 1;
        e->soff[i] = (uint32_t)off;
        memcpy(e->copy + off, sp[i], l);
        off += l;
    }
    e->text = e->copy + clen;
    memcpy(e->text, text, tlen);
    e->tlen = tlen;
    e->n = n;
    e->nstr = ns;
    e->h = h;
    free(sp);
}

/* The frames' lines, from the stack cache or line by line. */
static void stack_lines(struct ss_perf_writer *w, const struct ss_stack *s)
{
    struct rp_buf *b = &w->b;
    const struct ss_frame *f = s->frames;
    uint32_t n = s->nframes;
    uint64_t h = n;
    for (uint32_t i = 0; i < n; i++) {
        h = (h ^ f[i].addr ^ (uintptr_t)f[i].name ^ ((uint64_t)f[i].line << 40)) *
            0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    struct stk_ent *e = &w->stacks[(h * 0xbf58476d1ce4e5b9ull) >> (64 - STK_BITS)];
    if (stack_same(e, f, n, h)) {
        rp_buf_put(b, e->text, e->tlen);
        return;
    }
    size_t start = b->len;
    struct line_ent *last = NULL;
    for (uint32_t i = 0; i < n; i++)
        cached_line(w, &f[i], &last);
    if (!b->oom) stack_keep(e, f, n, h, b->p + start, b->len - start);
}

int ss_perf_writer_add(struct ss_perf_writer *w, const struct ss_stack *s, struct ss_err *err)
{
    if (w->rc) return w->rc;
    if (s->nframes && !s->frames) {
        ss_err_set(err, -EINVAL, "perf-script output: invalid stack");
        return -EINVAL;
    }
    struct rp_buf *b = &w->b; /* samples' text since the last write */
    head(w, s);
    /* " %5lu.%06lu: %10lu %s:\n", without printf */
    put_time(b, s->time_ns);
    if (!s->weight && w->taillen) {
        rp_buf_put(b, w->tail, w->taillen);
    } else {
        rp_buf_puts(b, ": ");
        rp_buf_udec_pad(b, s->weight ? s->weight : w->period_ns, 10, ' ', false);
        rp_buf_puts(b, s->weight ? " offcpu-time:\n" : " cpu-clock:\n");
    }
    if (s->nframes) {
        stack_lines(w, s);
    } else {
        struct ss_frame none = {.kind = SS_FRAME_PSEUDO, .name = SS_REPORT_NO_FRAMES};
        frame_line(b, &none);
    }
    rp_buf_putc(b, '\n');
    if (b->oom) {
        ss_err_set(err, -ENOMEM, "perf-script output: out of memory");
        return w->rc = -ENOMEM;
    }
    if (b->len < PERF_WRITE_AT) return 0;
    w->rc = rp_fwrite(w->f, b->p, b->len, "perf-script output", err);
    rp_buf_reset(b);
    return w->rc;
}

int ss_perf_writer_finish(struct ss_perf_writer *w, struct ss_err *err)
{
    if (!w) return 0;
    int rc = w->rc ? w->rc : rp_fwrite(w->f, w->b.p, w->b.len, "perf-script output", err);
    if (!rc) rc = rp_fflush(w->f, "perf-script output", err);
    rp_buf_free(&w->b);
    rp_buf_free(&w->scratch);
    for (size_t i = 0; i < sizeof(w->lines) / sizeof(w->lines[0]); i++)
        free(w->lines[i].raw);
    for (size_t i = 0; i < sizeof(w->stacks) / sizeof(w->stacks[0]); i++)
        free(w->stacks[i].keys);
    rp_buf_free(&w->head);
    free(w);
    return rc;
}
