/* report/diff: the two-sided stack table (ss_diff), its folded inputs
 * (folded text, aggregated reports), difffolded output and saving by
 * extension. The table and the flame graph are diff_table.c and
 * diff_svg.c, pprof input diff_pprof.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/diff_int.h"
#include "util/outfile.h"

struct ss_diff *ss_diff_new(struct ss_err *err)
{
    struct ss_diff *d = calloc(1, sizeof(*d));
    if (!d || rp_strtab_init(&d->stk)) {
        free(d);
        ss_err_set(err, -ENOMEM, "diff: out of memory");
        return NULL;
    }
    return d;
}

void ss_diff_free(struct ss_diff *d)
{
    if (!d) return;
    rp_strtab_free(&d->stk);
    free(d->cnt);
    free(d->name[0]);
    free(d->name[1]);
    free(d);
}

int ss_diff_set_name(struct ss_diff *d, enum ss_diff_side side, const char *name)
{
    char *c = strdup(name);
    if (!c) return -ENOMEM;
    free(d->name[side]);
    d->name[side] = c;
    return 0;
}

uint64_t ss_diff_samples(const struct ss_diff *d, enum ss_diff_side side)
{
    return d->total[side];
}

int rp_diff_add(struct ss_diff *d, enum ss_diff_side side, const char *stack, size_t n,
                uint64_t count)
{
    int64_t id = rp_str_intern(&d->stk, stack, n);
    if (id < 0) return -ENOMEM;
    size_t old = d->capcnt;
    if (rp_grow(&d->cnt, &d->capcnt, (size_t)id + 1, sizeof(*d->cnt))) return -ENOMEM;
    if (d->capcnt > old) memset(d->cnt + old, 0, (d->capcnt - old) * sizeof(*d->cnt));
    d->cnt[id][side] += count;
    d->total[side] += count;
    return 0;
}

int ss_diff_add_folded(struct ss_diff *d, enum ss_diff_side side, FILE *f, const char *name,
                       struct ss_err *err)
{
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len) continue;
        char *sp = strrchr(line, ' '), *end;
        errno = 0;
        unsigned long long v = sp ? strtoull(sp + 1, &end, 10) : 0;
        if (!sp || sp == line || !sp[1] || *end || errno || sp[1] == '-' ||
            memchr(line, '\0', (size_t)len)) {
            ss_err_set(err, -EINVAL, "%s:%zu: not a folded line (STACK COUNT)", name, lineno);
            rc = -EINVAL;
            break;
        }
        if ((rc = rp_diff_add(d, side, line, (size_t)(sp - line), v))) {
            ss_err_set(err, rc, "%s: out of memory", name);
            break;
        }
    }
    if (!rc && ferror(f)) {
        ss_err_set(err, -EIO, "%s: read error: %s", name, strerror(errno ? errno : EIO));
        rc = -EIO;
    }
    free(line);
    return rc;
}

int ss_diff_add_report(struct ss_diff *d, enum ss_diff_side side, const struct ss_report *r,
                       struct ss_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        ss_err_set(err, -ENOMEM, "diff: out of memory");
        return -ENOMEM;
    }
    int rc = ss_report_write_folded(r, m, err);
    if (fclose(m) && !rc) rc = -ENOMEM;
    if (!rc) {
        FILE *in = fmemopen(buf, len ? len : 1, "r");
        if (!in)
            rc = -ENOMEM;
        else if (len)
            rc = ss_diff_add_folded(d, side, in, "report", err);
        if (in) fclose(in);
    }
    if (rc == -ENOMEM) ss_err_set(err, rc, "diff: out of memory");
    free(buf);
    return rc;
}

struct fline {
    uint32_t id;
    const char *s;
};

static int fline_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fline *)a)->s, ((const struct fline *)b)->s);
}

int ss_diff_write_folded(const struct ss_diff *d, FILE *f, struct ss_err *err)
{
    size_t n = d->stk.n ? d->stk.n - 1 : 0; /* id 0 is "" */
    struct fline *ls = calloc(n ? n : 1, sizeof(*ls));
    struct rp_buf b = {0};
    int rc = 0;
    if (!ls) goto oom;
    for (size_t i = 0; i < n; i++)
        ls[i] = (struct fline){(uint32_t)(i + 1), rp_str(&d->stk, (uint32_t)(i + 1))};
    qsort(ls, n, sizeof(*ls), fline_cmp);
    for (size_t i = 0; i < n; i++) {
        const uint64_t *c = d->cnt[ls[i].id];
        rp_buf_printf(&b, "%s %" PRIu64 " %" PRIu64 "\n", ls[i].s, c[0], c[1]);
        if (b.len >= 1 << 16 || i + 1 == n) {
            if (b.oom) goto oom;
            if ((rc = rp_fwrite(f, b.p, b.len, "diff folded output", err))) goto out;
            rp_buf_reset(&b);
        }
    }
    rc = rp_fflush(f, "diff folded output", err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "diff folded output: out of memory");
    rc = -ENOMEM;
out:
    free(ls);
    rp_buf_free(&b);
    return rc;
}

void rp_unfold(struct rp_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\\') {
            rp_buf_putc(b, '\\');
            i++;
        } else if (s[i] == '\\' && i + 3 < n && !strncmp(s + i + 1, "x3b", 3)) {
            rp_buf_putc(b, ';');
            i += 3;
        } else {
            rp_buf_putc(b, s[i]);
        }
    }
}

uint8_t rp_kind_of_text(const char *s, size_t n)
{
    if (n > 4 && !memcmp(s + n - 4, "_[k]", 4)) return SS_FRAME_KERNEL;
    if (n > 2 && s[0] == '[' && s[n - 1] == ']') return SS_FRAME_PSEUDO;
    /* NAME (CHUNK:LINE) */
    if (n > 4 && s[n - 1] == ')') {
        size_t i = n - 1;
        while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
            i--;
        if (i < n - 1 && i > 0 && s[i - 1] == ':' && memmem(s, n, " (", 2)) return SS_FRAME_LUA;
    }
    return SS_FRAME_NATIVE;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

int ss_diff_save(const struct ss_diff *d, const char *path, struct ss_err *err)
{
    int fmt = !strcmp(path, "-") || ends_with(path, ".txt") ? 1
              : ends_with(path, ".svg")                     ? 2
              : ends_with(path, ".folded")                  ? 3
                                                            : 0;
    if (!fmt) {
        ss_err_set(err, -EINVAL, "%s: a diff is written as .svg, .txt or .folded", path);
        return -EINVAL;
    }
    FILE *f = stdout;
    if (strcmp(path, "-")) {
        /* 0600, never through a symlink (util/outfile.h); /dev/null is fine */
        int fd = ss_open_output(path, "output", true, err);
        if (fd < 0) return fd;
        if (!(f = fdopen(fd, "w"))) {
            int e = errno;
            close(fd);
            ss_err_set(err, -e, "%s: cannot open for writing: %s", path, strerror(e));
            return -e;
        }
    }
    struct ss_err inner = {0};
    int rc = fmt == 1   ? ss_diff_write_table(d, f, 0, &inner)
             : fmt == 2 ? ss_diff_write_svg(d, f, &inner)
                        : ss_diff_write_folded(d, f, &inner);
    if (rc) ss_err_set(err, rc, "%s: %s", path, inner.msg);
    if ((f == stdout ? fflush(f) : fclose(f)) && !rc) {
        rc = -EIO;
        ss_err_set(err, rc, "%s: write error: %s", path, strerror(errno));
    }
    return rc;
}
