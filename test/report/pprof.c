/* test/report/pprof: the .pb.gz writer read back by the real `go tool pprof`
 * (Debian golang-go, offline, -symbolize=none). -raw and -traces must show
 * the same stacks and totals as the folded output of the same report; -raw
 * also shows the sample/period types, Lua functions (name, chunk, start
 * line, line), native mappings with build-ids and addresses, and labels. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* ---- test-side text helpers (independent of src/report) ---- */

static size_t utf8_ok(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || (n == 1 && (c < 0x20 || c == 0x7f))) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && c < 0xc2) return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0;
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || c > 0xf4 || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return n;
}

/* raw bytes -> display form (invalid/control bytes as \xHH) */
static void display(char **out, size_t *len, const char *raw)
{
    FILE *f = open_memstream(out, len);
    for (const unsigned char *p = (const unsigned char *)raw; *p;) {
        size_t n = utf8_ok(p);
        if (!n) {
            fprintf(f, "\\x%02x", *p++);
        } else {
            fwrite(p, 1, n, f);
            p += n;
        }
    }
    fclose(f);
}

/* one folded frame/comm (escaped) -> display form */
static char *folded_to_display(const char *s, size_t n)
{
    char *raw = malloc(n + 1), *d = raw;
    for (size_t i = 0; i < n;) {
        if (s[i] == '\\' && s[i + 1] == '\\') {
            *d++ = '\\';
            i += 2;
        } else if (s[i] == '\\' && s[i + 1] == 'x') {
            char h[3] = {s[i + 2], s[i + 3], 0};
            *d++ = (char)strtoul(h, NULL, 16);
            i += 4;
        } else {
            *d++ = s[i++];
        }
    }
    *d = '\0';
    char *out;
    size_t len;
    display(&out, &len, raw);
    free(raw);
    return out;
}

/* Folded lines -> canonical "comm\1frame\1...\1frame COUNT" in display form. */
static struct fx_lines canon_folded(const char *folded)
{
    struct fx_lines in = fx_split(folded), tmp = {0};
    tmp.l = calloc(in.n + 1, sizeof(char *));
    for (size_t i = 0; i < in.n; i++) {
        char *line = in.l[i], *sp = strrchr(line, ' ');
        char *buf;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        for (char *p = line; p < sp;) {
            char *e = memchr(p, ';', (size_t)(sp - p));
            if (!e) e = sp;
            char *d = folded_to_display(p, (size_t)(e - p));
            fprintf(f, "%s%s", p == line ? "" : "\001", d);
            free(d);
            p = e + (e < sp);
        }
        fprintf(f, "%s", sp);
        fclose(f);
        tmp.l[tmp.n++] = buf;
    }
    struct fx_lines out = fx_folded_canon(&tmp);
    fx_lines_free(&tmp);
    fx_lines_free(&in);
    return out;
}

/* pprof text of a frame -> our frame text: "NAME FILE:LINE" -> "NAME (FILE:LINE)" */
static char *lua_form(const char *name_file_line)
{
    const char *colon = strrchr(name_file_line, ':'), *sp = strchr(name_file_line, ' ');
    if (!colon || !sp || sp > colon || !colon[1] ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return strdup(name_file_line);
    char *o;
    if (asprintf(&o, "%.*s (%s)", (int)(sp - name_file_line), name_file_line, sp + 1) < 0)
        return NULL;
    return o;
}

/* ---- running pprof ---- */

struct env {
    char *dir, *pb, *folded;
    struct fx fx;
    struct ss_report *r;
};

static void setup_env(struct env *e)
{
    cr_assert(fx_have("go"), "go not installed (Debian golang-go; scripts/dev installs it)");
    fx_build(&e->fx);
    e->r = fx_report(&e->fx, 99);
    cr_assert(e->r);
    e->dir = fx_tmpdir();
    cr_assert(e->dir);
    e->pb = fx_write(e->r, e->dir, "out.pb.gz");
    char *fp = fx_write(e->r, e->dir, "out.folded");
    cr_assert(e->pb && fp);
    e->folded = fx_read(fp, NULL);
    free(fp);
}

static void teardown_env(struct env *e)
{
    free(e->pb);
    free(e->folded);
    ss_report_free(e->r);
    fx_free(&e->fx);
    fx_rmdir(e->dir);
}

static char *pprof(const struct env *e, const char *args)
{
    char *cmd, *out = NULL;
    cr_assert(asprintf(&cmd,
                       "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME='%s' GOCACHE='%s/gocache' "
                       "GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off GOTELEMETRY=off "
                       "PPROF_TMPDIR='%s/pprof' PPROF_BINARY_PATH='%s/nobin' "
                       "go tool pprof -symbolize=none %s '%s' 2>&1",
                       e->dir, e->dir, e->dir, e->dir, args, e->pb) > 0);
    int st = fx_run(cmd, &out);
    cr_assert_eq(st, 0, "%s failed (%d):\n%s", cmd, st, out);
    free(cmd);
    return out;
}

/* ---- -raw parsing ---- */

struct loc {
    unsigned long id, mapping;
    unsigned long long addr;
    char *text; /* "NAME FILE:LINE" (or "NAME :0") */
    long start;
};

struct raw {
    struct loc *locs;
    size_t nlocs;
    struct fx_lines stacks; /* canonical, from samples */
    unsigned long long count, cpu;
};

static struct loc *loc_by_id(struct raw *r, unsigned long id)
{
    for (size_t i = 0; i < r->nlocs; i++)
        if (r->locs[i].id == id) return &r->locs[i];
    return NULL;
}

static char *loc_frame(const struct loc *l)
{
    /* "NAME :N" (no file) -> NAME; "NAME FILE:N" -> "NAME (FILE:N)" */
    const char *colon = strrchr(l->text, ':');
    if (colon && colon > l->text && colon[-1] == ' ')
        return strndup(l->text, (size_t)(colon - 1 - l->text));
    return lua_form(l->text);
}

static void parse_raw(const char *text, struct raw *r)
{
    struct fx_lines ls = fx_split(text);
    enum { HEAD, SAMPLES, LOCS, MAPS } sec = HEAD;
    /* samples are resolved after the locations are known */
    struct fx_lines samples = {0};
    samples.l = calloc(ls.n + 1, sizeof(char *));
    r->locs = calloc(ls.n + 1, sizeof(*r->locs));
    for (size_t i = 0; i < ls.n; i++) {
        char *l = ls.l[i];
        if (!strcmp(l, "Samples:")) {
            sec = SAMPLES;
            continue;
        }
        if (!strcmp(l, "Locations")) {
            sec = LOCS;
            continue;
        }
        if (!strcmp(l, "Mappings")) {
            sec = MAPS;
            continue;
        }
        if (sec == SAMPLES) samples.l[samples.n++] = l;
        if (sec == LOCS) {
            struct loc *lc = &r->locs[r->nlocs];
            int off = 0;
            if (sscanf(l, " %lu: 0x%llx %n", &lc->id, &lc->addr, &off) < 2 || !off) continue;
            char *rest = l + off;
            if (!strncmp(rest, "M=", 2)) {
                lc->mapping = strtoul(rest + 2, &rest, 10);
                rest++;
            }
            char *s = strstr(rest, " s=");
            cr_assert(s, "location line: %s", l);
            lc->start = strtol(s + 3, NULL, 10);
            lc->text = strndup(rest, (size_t)(s - rest));
            r->nlocs++;
        }
    }
    /* samples: "  COUNT  CPU: id id ...", then label lines */
    struct fx_lines tmp = {0};
    tmp.l = calloc(samples.n + 1, sizeof(char *));
    for (size_t i = 1; i < samples.n; i++) { /* [0] is the sample type header */
        char *l = samples.l[i];
        unsigned long long c, cpu;
        int off = 0;
        if (sscanf(l, " %llu %llu: %n", &c, &cpu, &off) < 2 || !off) continue;
        r->count += c;
        r->cpu += cpu;
        char *comm = NULL;
        for (size_t j = i + 1; j < samples.n && !strncmp(samples.l[j], "                ", 16);
             j++) {
            char *p = strstr(samples.l[j], "comm:[");
            if (p) comm = strndup(p + 6, (size_t)(strrchr(p, ']') - p - 6));
        }
        cr_assert(comm, "no comm label for %s", l);
        unsigned long ids[FX_DEEP + 8];
        size_t n = 0;
        for (char *p = l + off; *p && n < FX_DEEP + 8;) {
            char *e;
            unsigned long id = strtoul(p, &e, 10);
            if (e == p) break;
            ids[n++] = id;
            p = e;
        }
        char *buf;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        fputs(comm, f);
        for (size_t k = n; k-- > 0;) {
            struct loc *lc = loc_by_id(r, ids[k]);
            cr_assert(lc, "sample refers to unknown location %lu", ids[k]);
            char *fr = loc_frame(lc);
            fprintf(f, "\001%s", fr);
            free(fr);
        }
        fprintf(f, " %llu", c);
        fclose(f);
        tmp.l[tmp.n++] = buf;
        free(comm);
    }
    r->stacks = fx_folded_canon(&tmp);
    fx_lines_free(&tmp);
    free(samples.l);
    fx_lines_free(&ls);
}

static void free_raw(struct raw *r)
{
    for (size_t i = 0; i < r->nlocs; i++)
        free(r->locs[i].text);
    free(r->locs);
    fx_lines_free(&r->stacks);
}

static void same_lines(const struct fx_lines *a, const struct fx_lines *b, const char *what)
{
    cr_assert_gt(b->n, 10, "%s: folded output has only %zu stacks", what, b->n);
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(a->l[i], b->l[i], "%s: stack %zu differs", what, i);
    cr_assert_eq(a->n, b->n, "%s: %zu stacks, folded has %zu", what, a->n, b->n);
}

Test(report_pprof, raw_matches_folded)
{
    struct env e;
    setup_env(&e);
    size_t len;
    char *pb = fx_read(e.pb, &len);
    cr_assert(len > 2 && (unsigned char)pb[0] == 0x1f && (unsigned char)pb[1] == 0x8b, "not gzip");
    free(pb);

    char *out = pprof(&e, "-raw");
    struct raw r = {0};
    parse_raw(out, &r);
    struct fx_lines want = canon_folded(e.folded);
    same_lines(&r.stacks, &want, "pprof -raw");
    cr_expect_eq(r.count, e.fx.total, "samples/count total %llu", r.count);
    cr_expect_eq(r.cpu, e.fx.total * (1000000000ull / 99), "cpu/nanoseconds total %llu", r.cpu);

    /* header: types and period */
    cr_expect(strstr(out, "PeriodType: cpu nanoseconds\n"));
    cr_expect(strstr(out, "Period: 10101010\n"));
    cr_expect(strstr(out, "samples/count cpu/nanoseconds"));
    /* Lua: name, chunk, line, start line; no mapping, no address */
    int lua_seen = 0, native_seen = 0;
    for (size_t i = 0; i < r.nlocs; i++) {
        struct loc *l = &r.locs[i];
        if (!strcmp(l->text, "leaf test.lua:12")) {
            lua_seen++;
            cr_expect_eq(l->start, 10);
            cr_expect_eq(l->mapping, 0);
            cr_expect_eq(l->addr, 0);
        }
        if (!strcmp(l->text, "lua_pcall :0")) {
            native_seen++;
            cr_expect_eq(l->addr, 0x7f0000001000ull);
            cr_expect_neq(l->mapping, 0);
        }
        if (!strcmp(l->text, "f bad\\xff\\xfe.lua:7")) cr_expect_eq(l->start, 5);
    }
    cr_expect_eq(lua_seen, 1);
    cr_expect_eq(native_seen, 1);
    /* mappings with build-ids; [FN] only where every frame has a symbol */
    cr_expect(strstr(out, "0x7f0000001000/0x7f0000001901/0x1000 "
                          "/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2.1.0 "
                          "1112131415161718191a1b1c1d1e1f2021222324 [FN]"),
              "%s", strstr(out, "Mappings"));
    cr_expect(strstr(out, "0x7f2000001234/0x7f2000001235/0x1234 /usr/lib/libfoo.so "
                          "4445464748494a4b4c4d4e4f5051525354555657 \n"));
    /* labels */
    cr_expect(strstr(out, "pid:[200] tid:[201]"));
    cr_expect(strstr(out, "pid:[200] tid:[202]"));
    cr_expect(strstr(out, "comm:[a;b c]"));
    free_raw(&r);
    fx_lines_free(&want);
    free(out);
    teardown_env(&e);
}

Test(report_pprof, traces_match_folded)
{
    struct env e;
    setup_env(&e);
    char *out = pprof(&e, "-traces -lines -sample_index=samples");
    struct fx_lines ls = fx_split(out), tmp = {0};
    tmp.l = calloc(ls.n + 1, sizeof(char *));
    const char *sep = "-----------+";
    size_t i = 0;
    while (i < ls.n && strncmp(ls.l[i], sep, strlen(sep)))
        i++;
    while (i < ls.n) {
        i++; /* separator */
        char *comm = NULL;
        unsigned long long v = 0;
        char **frames = calloc(ls.n, sizeof(char *));
        size_t nf = 0;
        for (; i < ls.n && strncmp(ls.l[i], sep, strlen(sep)); i++) {
            char *l = ls.l[i];
            if (strlen(l) > 12 && l[10] == ':') { /* "%10s:  %s" label */
                if (!strncmp(l, "      comm:  ", 13)) comm = strdup(l + 13);
                continue;
            }
            cr_assert(strlen(l) > 13, "trace line: %s", l);
            if (!nf) v = strtoull(l, NULL, 10);
            frames[nf++] = lua_form(l + 13);
        }
        if (!nf) {
            free(frames);
            continue;
        }
        cr_assert(comm && v);
        char *buf;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        fputs(comm, f);
        for (size_t k = nf; k-- > 0;) {
            fprintf(f, "\001%s", frames[k]);
            free(frames[k]);
        }
        fprintf(f, " %llu", v);
        fclose(f);
        tmp.l[tmp.n++] = buf;
        free(frames);
        free(comm);
    }
    struct fx_lines got = fx_folded_canon(&tmp), want = canon_folded(e.folded);
    same_lines(&got, &want, "pprof -traces");
    unsigned long long sum = 0;
    for (size_t k = 0; k < got.n; k++)
        sum += strtoull(strrchr(got.l[k], ' ') + 1, NULL, 10);
    cr_expect_eq(sum, e.fx.total);
    fx_lines_free(&got);
    fx_lines_free(&want);
    fx_lines_free(&tmp);
    fx_lines_free(&ls);
    free(out);
    teardown_env(&e);
}

Test(report_pprof, empty_report_is_readable)
{
    cr_assert(fx_have("go"), "go not installed (Debian golang-go; scripts/dev installs it)");
    struct env e = {0};
    struct ss_err err = {0};
    e.r = ss_report_new(NULL, &err);
    e.dir = fx_tmpdir();
    e.pb = fx_write(e.r, e.dir, "empty.pb.gz");
    cr_assert(e.pb);
    char *out = pprof(&e, "-raw");
    cr_expect(strstr(out, "PeriodType: cpu nanoseconds"), "%s", out);
    free(out);
    free(e.pb);
    ss_report_free(e.r);
    fx_rmdir(e.dir);
}
