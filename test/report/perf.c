/* test/report/perf: the perf-script text writer against the parsing rules
 * of the tools that import it, reimplemented here from their documented
 * behaviour: FlameGraph's stackcollapse-perf.pl (event line, frame line,
 * symbol offset strip, --kernel annotation, "[unknown]" -> [module], "->"
 * inline split, tidy: ';' -> ':', cut at the first '(', drop quotes; blank
 * line ends a sample), speedscope's and the Firefox Profiler's event-line
 * rules (comm, pid, tid, time, event). Lua frames must come out with their
 * name and line. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* ---- stackcollapse-perf.pl rules ---- */

static int is_sp(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_w(int c)
{
    return isalnum(c) || c == '_';
}

/* After the comm: \s+ (\d+) slashes (\d+)? \s+ ; greedy is exact here. */
static int pid_tid_at(const char *p, unsigned long *a, unsigned long *b, int *has_b)
{
    const char *q = p;
    if (!is_sp((unsigned char)*q)) return 0;
    while (is_sp((unsigned char)*q))
        q++;
    if (!isdigit((unsigned char)*q)) return 0;
    *a = strtoul(q, NULL, 10);
    while (isdigit((unsigned char)*q))
        q++;
    const char *s = q;
    while (*q == '/')
        q++;
    *has_b = isdigit((unsigned char)*q) && q > s;
    if (isdigit((unsigned char)*q)) *b = strtoul(q, NULL, 10);
    while (isdigit((unsigned char)*q))
        q++;
    return is_sp((unsigned char)*q);
}

/* ^(\S.+?)\s+(\d+) slashes (\d+)? \s+ : the shortest comm (>= 2 chars) that fits. */
static char *sc_event(const char *l)
{
    if (!*l || is_sp((unsigned char)*l)) return NULL;
    unsigned long a, b;
    int hb;
    for (size_t end = 2; end <= strlen(l); end++)
        if (pid_tid_at(l + end, &a, &b, &hb)) return strndup(l, end);
    return NULL;
}

/* ^\s*(\w+)\s*(.+) \((\S*)\) with greedy .+ : the last " (" whose non-space
 * run holds a ')'; the module ends at the last ')' of that run. */
static int sc_frame(const char *l, char **func, char **mod)
{
    const char *p = l;
    while (is_sp((unsigned char)*p))
        p++;
    if (!is_w((unsigned char)*p)) return 0;
    while (is_w((unsigned char)*p))
        p++;
    while (is_sp((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    for (size_t k = n; k-- > 1;) { /* .+ needs one char */
        if (p[k] != ' ' || p[k + 1] != '(') continue;
        const char *r = p + k + 2, *close = NULL;
        for (const char *q = r; *q && !is_sp((unsigned char)*q); q++)
            if (*q == ')') close = q;
        if (!close) continue;
        *func = strndup(p, k);
        *mod = strndup(r, (size_t)(close - r));
        return 1;
    }
    return 0;
}

/* tidy_generic on one inline piece */
static char *sc_tidy(const char *in)
{
    char *f = strdup(in);
    for (char *c = f; *c; c++)
        if (*c == ';') *c = ':';
    /* Go method names like "pkg.(*T).M" keep their parens */
    char *dot = strstr(f, ".(");
    int go = dot && strstr(dot + 2, ").");
    if (!go) {
        for (char *c = f; (c = strchr(c, '(')); c++)
            if (strncmp(c + 1, "anonymous namespace)", 20)) {
                *c = '\0';
                break;
            }
    }
    char *d = f;
    for (char *c = f; *c; c++)
        if (*c != '"' && *c != '\'') *d++ = *c;
    *d = '\0';
    return f;
}

struct sc {
    struct fx_lines out; /* "stack count" lines */
    size_t unrecognized;
};

static void sc_push(char ***st, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *st = realloc(*st, *cap * sizeof(**st));
    }
    (*st)[(*n)++] = s;
}

static struct sc stackcollapse(const char *text, int annotate_kernel)
{
    struct sc r = {0};
    struct fx_lines ls = fx_split(text), raw = {0};
    raw.l = calloc(ls.n + 1, sizeof(char *));
    char **st = NULL; /* leaf first, as read */
    size_t n = 0, cap = 0;
    char *pname = NULL;
    for (size_t i = 0; i < ls.n; i++) {
        char *l = ls.l[i];
        if (l[0] == '#') continue;
        if (!*l) { /* end of a sample: comm first, then root ... leaf */
            char *buf;
            size_t len;
            FILE *f = open_memstream(&buf, &len);
            fputs(pname ? pname : "", f);
            for (size_t k = n; k-- > 0;)
                fprintf(f, ";%s", st[k]);
            fputs(" 1", f);
            fclose(f);
            raw.l[raw.n++] = buf;
            for (size_t k = 0; k < n; k++)
                free(st[k]);
            n = 0;
            free(pname);
            pname = NULL;
            continue;
        }
        char *ev = sc_event(l), *func, *mod;
        if (ev) {
            for (char *c = ev; *c; c++)
                if (*c == ' ') *c = '_';
            free(pname);
            pname = ev;
        } else if (sc_frame(l, &func, &mod)) {
            /* strip a trailing +0x[\da-f]+ */
            char *plus = strrchr(func, '+');
            if (plus && plus[1] == '0' && plus[2] == 'x' && plus[3] &&
                strspn(plus + 3, "0123456789abcdef") == strlen(plus + 3))
                *plus = '\0';
            size_t ml = strlen(mod);
            if (annotate_kernel &&
                (strstr(mod, "kernel.") || (ml >= 7 && !strcmp(mod + ml - 7, "vmlinux")))) {
                char *k;
                if (asprintf(&k, "%s_[k]", func) > 0) {
                    free(func);
                    func = k;
                }
            }
            if (func[0] != '(') { /* "(process name)" frames are skipped */
                /* split on "->"; trailing empty pieces vanish (Perl split) */
                char *pieces[64];
                size_t np = 0;
                for (char *s = func;;) {
                    char *a = strstr(s, "->");
                    if (a) *a = '\0';
                    if (np < 64) pieces[np++] = s;
                    if (!a) break;
                    s = a + 2;
                }
                while (np && !*pieces[np - 1])
                    np--;
                char **inl = calloc(np + 1, sizeof(char *));
                for (size_t k = 0; k < np; k++) {
                    char *p = pieces[k];
                    char *named = NULL;
                    if (!strcmp(p, "[unknown]") && strcmp(mod, "[unknown]")) {
                        const char *b = strrchr(mod, '/');
                        if (asprintf(&named, "[%s]", b ? b + 1 : mod) < 0) named = NULL;
                        p = named;
                    }
                    char *t = sc_tidy(p);
                    free(named);
                    if (k) {
                        char *x;
                        if (asprintf(&x, "%s_[i]", t) > 0) {
                            free(t);
                            t = x;
                        }
                    }
                    inl[k] = t;
                }
                /* unshift @stack, @inline: pieces keep their order at the front;
                 * st is leaf first, so push them reversed */
                for (size_t k = np; k-- > 0;)
                    sc_push(&st, &n, &cap, inl[k]);
                free(inl);
            }
            free(func);
            free(mod);
        } else {
            r.unrecognized++;
            cr_log_error("Unrecognized line: %s", l);
        }
    }
    for (size_t k = 0; k < n; k++)
        free(st[k]);
    free(st);
    free(pname);
    r.out = fx_folded_canon(&raw);
    fx_lines_free(&raw);
    fx_lines_free(&ls);
    return r;
}

/* ---- speedscope and Firefox Profiler event-line rules ---- */

struct event {
    char *comm;
    unsigned long pid, tid;
    double time;
    char *name;
};

/* speedscope: ^(\S.+?)\s+(\d+)(?:\/?(\d+))?\s+ ; time \s+(\d+\.\d+):\s+ ;
 * event (\S+):\s*$ */
static int ss_event(const char *l, struct event *e)
{
    memset(e, 0, sizeof(*e));
    if (!*l || is_sp((unsigned char)*l)) return 0;
    for (size_t end = 2; end <= strlen(l) && !e->comm; end++) {
        const char *q = l + end;
        if (!is_sp((unsigned char)*q)) continue;
        while (is_sp((unsigned char)*q))
            q++;
        if (!isdigit((unsigned char)*q)) continue;
        unsigned long a = strtoul(q, NULL, 10), b = 0;
        while (isdigit((unsigned char)*q))
            q++;
        int hb = 0;
        const char *r = q + (*q == '/');
        if (isdigit((unsigned char)*r)) {
            b = strtoul(r, NULL, 10);
            while (isdigit((unsigned char)*r))
                r++;
            if (is_sp((unsigned char)*r)) {
                hb = 1;
                q = r;
            }
        }
        if (!is_sp((unsigned char)*q)) continue;
        e->comm = strndup(l, end);
        e->pid = hb ? a : 0;
        e->tid = hb ? b : a;
    }
    if (!e->comm) return 0;
    for (const char *p = l; *p; p++) { /* first \s+(\d+\.\d+):\s+ */
        if (!is_sp((unsigned char)*p) || !isdigit((unsigned char)p[1])) continue;
        char *end;
        double t = strtod(p + 1, &end);
        const char *dot = strchr(p + 1, '.');
        if (dot && dot < end && *end == ':' && is_sp((unsigned char)end[1])) {
            e->time = t;
            break;
        }
    }
    /* (\S+):\s*$ */
    size_t n = strlen(l);
    while (n && is_sp((unsigned char)l[n - 1]))
        n--;
    if (!n || l[n - 1] != ':') return 0;
    size_t s = n - 1;
    while (s && !is_sp((unsigned char)l[s - 1]))
        s--;
    e->name = strndup(l + s, n - 1 - s);
    return 1;
}

/* Firefox: ^(.*)\s+([\d.]+): (greedy), then ^(.*)\s+(?:(\d+)\/)?(\d+)\b on
 * what precedes the time; the thread name is trimmed. */
static int ff_event(const char *l, struct event *e)
{
    memset(e, 0, sizeof(*e));
    size_t n = strlen(l), ts = 0;
    int found = 0;
    for (size_t s = n; s-- > 0 && !found;) {
        if (!is_sp((unsigned char)l[s])) continue;
        size_t k = s + 1;
        while (k < n && (isdigit((unsigned char)l[k]) || l[k] == '.'))
            k++;
        if (k > s + 1 && k < n && l[k] == ':') {
            found = 1;
            ts = s;
            e->time = strtod(l + s + 1, NULL);
        }
    }
    if (!found) return 0;
    /* before = l[0..ts) ; rightmost whitespace followed by [digits/]digits\b */
    for (size_t s = ts; s-- > 0;) {
        if (!is_sp((unsigned char)l[s])) continue;
        const char *q = l + s + 1, *d = q;
        while (d < l + ts && isdigit((unsigned char)*d))
            d++;
        if (d == q) continue;
        unsigned long a = strtoul(q, NULL, 10), b = 0;
        int hb = 0;
        if (*d == '/' && isdigit((unsigned char)d[1])) {
            b = strtoul(d + 1, NULL, 10);
            d++;
            while (d < l + ts && isdigit((unsigned char)*d))
                d++;
            hb = 1;
        }
        if (d < l + ts && is_w((unsigned char)*d)) continue; /* no word boundary */
        size_t a0 = 0, a1 = s;
        while (a0 < a1 && is_sp((unsigned char)l[a0]))
            a0++;
        while (a1 > a0 && is_sp((unsigned char)l[a1 - 1]))
            a1--;
        e->comm = strndup(l + a0, a1 - a0);
        e->pid = hb ? a : 0;
        e->tid = hb ? b : a;
        return 1;
    }
    return 0;
}

/* ---- what our documented format says, computed from the fixture ---- */

static size_t utf8_ok(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || (n == 1 && (c < 0x20 || c == 0x7f))) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && c < 0xc2) return 0;
    return n;
}

enum esc { DISPLAY, SYM, COMM };

static void esc(FILE *f, const char *s, enum esc mode)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i];) {
        size_t k = utf8_ok(p + i);
        unsigned char c = p[i];
        int hex = !k;
        if (k == 1 && mode == SYM && c == '\\') {
            fputs("\\\\", f);
            i++;
            continue;
        }
        if (k == 1 && mode == SYM && (strchr("();\"'", c) || (c == '>' && i && p[i - 1] == '-')))
            hex = 1;
        if (k == 1 && mode == COMM && (c == ';' || (c == ' ' && (!i || isdigit(p[i + 1])))))
            hex = 1;
        if (hex) {
            fprintf(f, "\\x%02x", c);
            i++;
        } else {
            fwrite(p + i, 1, k, f);
            i += k;
        }
    }
}

static char *esc_str(const char *s, enum esc mode)
{
    char *b;
    size_t n;
    FILE *f = open_memstream(&b, &n);
    esc(f, s, mode);
    fclose(f);
    return b;
}

/* The SYM our format promises for a frame. */
static char *expected_sym(const struct ss_frame *fr)
{
    char *b;
    size_t n;
    FILE *f = open_memstream(&b, &n);
    switch (fr->kind) {
    case SS_FRAME_LUA:
        esc(f, fr->name ? fr->name : "anonymous", SYM);
        if (fr->module) {
            fputs(" [", f);
            esc(f, fr->module, SYM);
            fprintf(f, ":%u]", fr->line);
        }
        break;
    case SS_FRAME_PSEUDO:
        esc(f, fr->name ? fr->name : "[unknown]", SYM);
        break;
    default:
        esc(f, fr->name ? fr->name : "[unknown]", DISPLAY);
        break;
    }
    fclose(f);
    return b;
}

/* What stackcollapse-perf.pl --kernel should make of that frame. */
static char *expected_collapsed(const struct ss_frame *fr)
{
    char *sym = expected_sym(fr), *t;
    if (fr->kind == SS_FRAME_NATIVE && !fr->name && fr->module) {
        const char *b = strrchr(fr->module, '/');
        if (asprintf(&t, "[%s]", b ? b + 1 : fr->module) < 0) t = NULL;
        free(sym);
        return t;
    }
    if (fr->kind == SS_FRAME_KERNEL) {
        char *k;
        if (asprintf(&k, "%s_[k]", sym) > 0) {
            free(sym);
            sym = k;
        }
    }
    t = sc_tidy(sym);
    if (fr->kind == SS_FRAME_LUA)
        cr_expect_str_eq(t, sym, "stackcollapse's tidy changes Lua frame %s", sym);
    free(sym);
    return t;
}

static char *expected_comm(const char *comm)
{
    char *c = esc_str(comm, COMM);
    for (char *p = c; *p; p++)
        if (*p == ' ') *p = '_';
    return c;
}

struct env {
    struct fx fx;
    char *text;
    size_t len;
};

static void write_corpus(struct env *e)
{
    fx_build(&e->fx);
    FILE *f = open_memstream(&e->text, &e->len);
    struct ss_err err = {0};
    struct ss_perf_writer *w = ss_perf_writer_new(f, 99, &err);
    cr_assert(w);
    for (size_t i = 0; i < e->fx.n; i++)
        for (uint64_t k = 0; k < e->fx.s[i].count; k++)
            cr_assert_eq(ss_perf_writer_add(w, &e->fx.s[i].st, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_perf_writer_finish(w, &err), 0, "%s", err.msg);
    fclose(f);
}

static void free_env(struct env *e)
{
    free(e->text);
    fx_free(&e->fx);
}

Test(report_perf, stackcollapse_rules)
{
    struct env e;
    write_corpus(&e);
    struct sc got = stackcollapse(e.text, 1);
    cr_expect_eq(got.unrecognized, 0);
    /* expected lines from the fixture */
    struct fx_lines raw = {0};
    raw.l = calloc(e.fx.n + 1, sizeof(char *));
    for (size_t i = 0; i < e.fx.n; i++) {
        const struct ss_stack *st = &e.fx.s[i].st;
        char *buf;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        char *c = expected_comm(st->comm);
        fputs(c, f);
        free(c);
        for (uint32_t k = st->nframes; k-- > 0;) {
            char *x = expected_collapsed(&st->frames[k]);
            fprintf(f, ";%s", x);
            free(x);
        }
        if (!st->nframes) fputs(";" SS_REPORT_NO_FRAMES, f);
        fprintf(f, " %llu", (unsigned long long)e.fx.s[i].count);
        fclose(f);
        raw.l[raw.n++] = buf;
    }
    struct fx_lines want = fx_folded_canon(&raw);
    cr_assert_gt(want.n, 10);
    size_t n = got.out.n < want.n ? got.out.n : want.n;
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(got.out.l[i], want.l[i], "collapsed stack %zu", i);
    cr_expect_eq(got.out.n, want.n);
    unsigned long long sum = 0;
    for (size_t i = 0; i < got.out.n; i++)
        sum += strtoull(strrchr(got.out.l[i], ' ') + 1, NULL, 10);
    cr_expect_eq(sum, e.fx.total);
    fx_lines_free(&raw);
    fx_lines_free(&want);
    fx_lines_free(&got.out);
    free_env(&e);
}

static int has_frame(const struct fx_lines *ls, const char *frame)
{
    char *a, *b;
    if (asprintf(&a, ";%s;", frame) < 0 || asprintf(&b, ";%s ", frame) < 0) return 0;
    int found = 0;
    for (size_t i = 0; i < ls->n && !found; i++)
        found = strstr(ls->l[i], a) || strstr(ls->l[i], b);
    free(a);
    free(b);
    return found;
}

Test(report_perf, lua_frames_keep_name_and_line)
{
    struct env e;
    write_corpus(&e);
    struct sc got = stackcollapse(e.text, 0);
    const char *want[] = {
        "leaf [test.lua:12]",
        "leaf [test.lua:13]",
        "M.run [test.lua:30]",
        "main [test.lua:40]",
        "string.rep",
        "obj:method [my dir/a\\x3bb.lua:3]",
        "a-\\x3eb [x.lua:2]",
        "anonymous [[string \\x22x\\x281\\x29\\x22]:1]",
        "f [bad\\xff\\xfe.lua:7]",
        "g [C:\\\\dir\\\\x.lua:9]",
        "rec [deep.lua:5]",
        "[GC]",
        "weird:name with spaces",
        "[libfoo.so]",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_expect(has_frame(&got.out, want[i]), "no frame '%s' after stackcollapse", want[i]);
    /* the deep stack keeps all its frames */
    int deep = 0;
    for (size_t i = 0; i < got.out.n; i++) {
        size_t semis = 0;
        for (const char *p = got.out.l[i]; *p; p++)
            semis += *p == ';';
        deep |= semis == FX_DEEP;
    }
    cr_expect(deep, "1000-deep stack lost frames");
    fx_lines_free(&got.out);
    free_env(&e);
}

Test(report_perf, event_lines_for_speedscope_and_firefox)
{
    struct env e;
    write_corpus(&e);
    struct fx_lines ls = fx_split(e.text);
    size_t li = 0, samples = 0;
    for (size_t i = 0; i < e.fx.n; i++) {
        const struct ss_stack *st = &e.fx.s[i].st;
        for (uint64_t k = 0; k < e.fx.s[i].count; k++, samples++) {
            cr_assert_lt(li, ls.n);
            const char *l = ls.l[li];
            struct event a, b;
            cr_assert(ss_event(l, &a), "speedscope cannot parse: %s", l);
            cr_assert(ff_event(l, &b), "Firefox cannot parse: %s", l);
            char *c = esc_str(st->comm, COMM);
            cr_expect_str_eq(a.comm, c, "speedscope comm");
            cr_expect_str_eq(b.comm, c, "Firefox comm");
            cr_expect_eq(a.pid, st->pid);
            cr_expect_eq(a.tid, st->tid);
            cr_expect_eq(b.pid, st->pid);
            cr_expect_eq(b.tid, st->tid);
            double t = (double)(st->time_ns / 1000) / 1e6;
            cr_expect(a.time > t - 1e-7 && a.time < t + 1e-7, "time %f vs %f", a.time, t);
            cr_expect(b.time > t - 1e-7 && b.time < t + 1e-7, "time %f vs %f", b.time, t);
            cr_expect_str_eq(a.name, "cpu-clock");
            cr_expect(strstr(l, " 10101010 cpu-clock:"), "period: %s", l);
            free(c);
            free(a.comm);
            free(a.name);
            free(b.comm);
            /* frame lines: the frame rule gives back SYM and DSO; Firefox keeps SYM */
            uint32_t nf = st->nframes ? st->nframes : 1;
            for (uint32_t j = 0; j < nf; j++) {
                const char *fl = ls.l[li + 1 + j];
                char *func, *mod;
                cr_assert(fl[0] == '\t' && sc_frame(fl, &func, &mod), "frame line: %s", fl);
                if (st->nframes) {
                    char *sym = expected_sym(&st->frames[j]);
                    cr_expect_str_eq(func, sym);
                    free(sym);
                } else {
                    cr_expect_str_eq(func, SS_REPORT_NO_FRAMES);
                }
                cr_expect_neq(func[0], '(');
                free(func);
                free(mod);
            }
            cr_assert_str_empty(ls.l[li + 1 + nf], "no blank line after sample %zu", samples);
            li += nf + 2;
        }
    }
    cr_expect_eq(li, ls.n, "trailing lines");
    fx_lines_free(&ls);
    free_env(&e);
}

Test(report_perf, streams_and_reports_write_errors)
{
    struct fx fx;
    fx_build(&fx);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct ss_err err = {0};
    struct ss_perf_writer *w = ss_perf_writer_new(f, 1000, &err);
    long last = 0;
    for (size_t i = 0; i < fx.n; i++) {
        cr_assert_eq(ss_perf_writer_add(w, &fx.s[i].st, &err), 0);
        long pos = ftell(f); /* written as it arrives, not at the end */
        cr_expect_gt(pos, last);
        last = pos;
    }
    cr_assert_eq(ss_perf_writer_finish(w, &err), 0);
    cr_expect(strstr(buf, "    1000000 cpu-clock:\n"), "period for 1000 Hz");
    fclose(f);
    free(buf);

    FILE *full = fopen("/dev/full", "w");
    cr_assert(full);
    w = ss_perf_writer_new(full, 99, &err);
    int rc = 0;
    for (int k = 0; k < 1000 && !rc; k++)
        rc = ss_perf_writer_add(w, &fx.s[k % fx.n].st, &err);
    int rc2 = ss_perf_writer_finish(w, &err);
    cr_expect(rc == -EIO || rc2 == -EIO, "no error writing to /dev/full");
    cr_expect(strstr(err.msg, "write error"), "%s", err.msg);
    fclose(full);
    fx_free(&fx);
}
