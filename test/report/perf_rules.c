/* test/report/perf_rules: the parsing rules of the tools that import
 * perf-script text, reimplemented from their documented behaviour (see
 * perf_rules.h). Not their code: our own C over the same rules. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "perf_rules.h"

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
int sc_frame(const char *l, char **func, char **mod)
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
char *sc_tidy(const char *in)
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

static void sc_push(char ***st, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *st = realloc(*st, *cap * sizeof(**st));
    }
    (*st)[(*n)++] = s;
}

struct sc stackcollapse(const char *text, int annotate_kernel)
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

/* speedscope: ^(\S.+?)\s+(\d+)(?:\/?(\d+))?\s+ ; time \s+(\d+\.\d+):\s+ ;
 * event (\S+):\s*$ */
int ss_event(const char *l, struct event *e)
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
int ff_event(const char *l, struct event *e)
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
