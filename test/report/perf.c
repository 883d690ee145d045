/* test/report/perf: the perf-script text writer against the parsing rules
 * of the tools that import it (FlameGraph's stackcollapse-perf.pl,
 * speedscope, the Firefox Profiler; reimplemented in perf_rules.c). The
 * expected result is computed from the fixture and the format documented in
 * report.h, then put through stackcollapse's rules; Lua frames must come out
 * with their name and line, event lines must give comm, pid, tid, time and
 * event to every tool. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <criterion/logging.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "perf_rules.h"

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
/* with_off: perf's "+0xOFF" after native/kernel symbols, as written */
static char *expected_sym_off(const struct ss_frame *fr, int with_off)
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
        if (fr->name && with_off) /* perf's sym+0xoff */
            fprintf(f, "+0x%" PRIx64, fr->sym_offset);
        break;
    }
    fclose(f);
    return b;
}

static char *expected_sym(const struct ss_frame *fr)
{
    return expected_sym_off(fr, 1);
}

/* What stackcollapse-perf.pl --kernel should make of that frame (it drops
 * the +0xOFF). */
static char *expected_collapsed(const struct ss_frame *fr)
{
    char *sym = expected_sym_off(fr, 0), *t;
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
    int pieces = 0;
    for (size_t k = 0; k < 4 * fx.n; k++) {
        cr_assert_eq(ss_perf_writer_add(w, &fx.s[k % fx.n].st, &err), 0);
        long pos = ftell(f); /* written in 64 KiB pieces as it arrives, not at the end */
        cr_expect_geq(pos, last);
        if (pos > last) pieces++;
        last = pos;
    }
    cr_expect_geq(pieces, 2, "%d pieces written before finish", pieces);
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
