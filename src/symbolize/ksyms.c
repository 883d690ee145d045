/* symbolize/ksyms.c: the kernel symbol table (ksyms.h): /proc/kallsyms
 * parsed into a sorted array (names point into the file's text, read once),
 * or for replay the recorded symbols (names interned). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/ksyms.h"
#include "symbolize/symbolize.h"

struct ent {
    struct ss_ksym s;
    uint32_t order; /* line number: the first of aliases wins */
    uint8_t used;
};

struct ss_ksyms {
    struct ent *v;
    size_t n, cap;
    bool sorted;
    char *text;              /* live: the file, names point into it */
    struct ss_strpool *pool; /* replay: recorded names */
    uint32_t *fresh;         /* used since the last take */
    size_t nfresh, fresh_cap;
};

#define KSYMS_LAST_SPAN 4096u /* the last symbol's end: start + this */

int ss_ksyms_new(struct ss_ksyms **out)
{
    struct ss_ksyms *k = calloc(1, sizeof(*k));
    if (!k) return -ENOMEM;
    k->sorted = true;
    *out = k;
    return 0;
}

void ss_ksyms_free(struct ss_ksyms *k)
{
    if (!k) return;
    free(k->v);
    free(k->text);
    free(k->fresh);
    ss_strpool_free(k->pool);
    free(k);
}

size_t ss_ksyms_count(const struct ss_ksyms *k)
{
    return k ? k->n : 0;
}

static int push(struct ss_ksyms *k, const struct ss_ksym *s, uint32_t order)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 1024;
        struct ent *nv = realloc(k->v, cap * sizeof(*nv));
        if (!nv) return -ENOMEM;
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = (struct ent){.s = *s, .order = order};
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->s.start != y->s.start) return x->s.start < y->s.start ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static char *read_all(const char *path, size_t *len, int *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t cap = 1 << 20, n = 0;
    char *b = NULL;
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    for (;;) {
        if (!b || cap - n < 65536) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                *err = -ENOMEM;
                goto fail;
            }
            b = nb;
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *err = -errno;
            goto fail;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *len = n;
    return b;
fail:
    close(fd);
    free(b);
    return NULL;
}

/* One line "ADDR TYPE NAME[\t[MODULE]]", cut in place. Text symbols only. */
static int parse_line(char *line, struct ss_ksym *s)
{
    char *end;
    s->start = strtoull(line, &end, 16);
    if (end == line || *end != ' ') return 0;
    char type = end[1];
    if (!type || end[2] != ' ') return 0;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') return 0;
    s->name = end + 3;
    s->module = NULL;
    char *tab = strchr(end + 3, '\t');
    if (tab) {
        *tab = 0;
        char *m = tab + 1;
        if (*m == '[') {
            m++;
            char *close = strchr(m, ']');
            if (close) *close = 0;
            s->module = m;
        }
    }
    return *s->name != 0;
}

/* Sort, drop aliases (same address: the first listed stays), set ends. */
static void finish(struct ss_ksyms *k)
{
    qsort(k->v, k->n, sizeof(*k->v), by_start);
    size_t o = 0;
    for (size_t i = 0; i < k->n; i++)
        if (!o || k->v[o - 1].s.start != k->v[i].s.start) k->v[o++] = k->v[i];
    k->n = o;
    for (size_t i = 0; i < k->n; i++)
        k->v[i].s.end = i + 1 < k->n ? k->v[i + 1].s.start : k->v[i].s.start + KSYMS_LAST_SPAN;
    k->sorted = true;
}

int ss_ksyms_load(struct ss_ksyms **out, const char *path, struct ss_err *err)
{
    struct ss_ksyms *k;
    size_t len, lines = 0;
    int r = 0;

    if (!path) path = "/proc/kallsyms";
    *out = NULL;
    if (ss_ksyms_new(&k) < 0) {
        ss_err_set(err, -ENOMEM, "kernel symbols: out of memory");
        return -ENOMEM;
    }
    k->text = read_all(path, &len, &r);
    if (!k->text) {
        ss_err_set(err, r, "kernel symbols: %s: %s", path, strerror(-r));
        ss_ksyms_free(k);
        return r;
    }
    for (char *p = k->text, *nl; p < k->text + len; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = k->text + len;
        *nl = 0;
        struct ss_ksym s;
        if (!parse_line(p, &s)) continue;
        lines++;
        if (!s.start) continue; /* hidden */
        if ((r = push(k, &s, (uint32_t)lines)) < 0) {
            ss_err_set(err, r, "kernel symbols: out of memory");
            ss_ksyms_free(k);
            return r;
        }
    }
    if (!k->n) {
        ss_err_set(err, -EACCES,
                   "kernel symbols: %s shows %s (kernel.kptr_restrict hides them without "
                   "CAP_SYSLOG; as root: sysctl kernel.kptr_restrict=0 or 1): kernel frames "
                   "are not named",
                   path, lines ? "every address as 0" : "no text symbols");
        ss_ksyms_free(k);
        return -EACCES;
    }
    finish(k);
    *out = k;
    return 0;
}

int ss_ksyms_add(struct ss_ksyms *k, const struct ss_ksym *s)
{
    if (!k->pool && ss_strpool_new(&k->pool) < 0) return -ENOMEM;
    struct ss_ksym c = *s;
    c.name = ss_strpool_intern(k->pool, s->name ? s->name : "");
    c.module = s->module && *s->module ? ss_strpool_intern(k->pool, s->module) : NULL;
    if (!c.name || (s->module && *s->module && !c.module)) return -ENOMEM;
    if (c.end <= c.start) c.end = c.start + 1;
    k->sorted = k->sorted && (!k->n || k->v[k->n - 1].s.start < c.start);
    return push(k, &c, (uint32_t)k->n);
}

const struct ss_ksym *ss_ksyms_find(struct ss_ksyms *k, uint64_t addr)
{
    if (!k || !k->n) return NULL;
    if (!k->sorted) { /* replay's adds: fresh indices are stale, nobody takes them there */
        qsort(k->v, k->n, sizeof(*k->v), by_start);
        k->sorted = true;
        k->nfresh = 0;
    }
    size_t lo = 0, hi = k->n; /* first entry with start > addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->v[mid].s.start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return NULL;
    struct ent *e = &k->v[lo - 1];
    if (addr >= e->s.end) return NULL;
    if (!e->used) {
        e->used = 1;
        if (k->nfresh == k->fresh_cap) {
            size_t cap = k->fresh_cap ? k->fresh_cap * 2 : 64;
            uint32_t *nf = realloc(k->fresh, cap * sizeof(*nf));
            if (!nf) return &e->s; /* named, not recorded: replay names it hex */
            k->fresh = nf;
            k->fresh_cap = cap;
        }
        k->fresh[k->nfresh++] = (uint32_t)(lo - 1);
    }
    return &e->s;
}

void ss_ksyms_take_new(struct ss_ksyms *k, void (*fn)(void *ctx, const struct ss_ksym *s),
                       void *ctx)
{
    if (!k) return;
    for (size_t i = 0; i < k->nfresh; i++)
        fn(ctx, &k->v[k->fresh[i]].s);
    k->nfresh = 0;
}
