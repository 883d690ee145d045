/* test/report/top: the top table on the hand-made corpus: self and total
 * samples per function (Lua functions by their line of definition, so all
 * lines of one function add up; recursion counted once per stack), order,
 * percentages, the row limit, and escaped names. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

struct row {
    unsigned long long self, total;
    double selfp, totalp;
    char kind[8];
    char *name;
};

static size_t parse(const char *text, struct row **out, char **head)
{
    struct fx_lines ls = fx_split(text);
    cr_assert_geq(ls.n, 2, "%s", text);
    *head = strdup(ls.l[0]);
    cr_expect(strstr(ls.l[1], "SELF") && strstr(ls.l[1], "TOTAL%") && strstr(ls.l[1], "FUNCTION"));
    struct row *rows = calloc(ls.n, sizeof(*rows));
    size_t n = 0;
    for (size_t i = 2; i < ls.n; i++) {
        struct row *r = &rows[n++];
        int off = 0;
        cr_assert_eq(sscanf(ls.l[i], "%llu %lf%% %llu %lf%% %7s %n", &r->self, &r->selfp, &r->total,
                            &r->totalp, r->kind, &off),
                     5, "row: %s", ls.l[i]);
        cr_assert_eq(off, 47, "name column: %s", ls.l[i]);
        r->name = strdup(ls.l[i] + off);
    }
    fx_lines_free(&ls);
    *out = rows;
    return n;
}

static struct row *get(struct row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    cr_assert_fail("no row for '%s'", name);
    return NULL;
}

static char *top(const struct ss_report *r, unsigned n)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    struct ss_err err = {0};
    cr_assert_eq(ss_report_write_top(r, f, n, &err), 0, "%s", err.msg);
    fclose(f);
    return buf;
}

Test(report_top, self_and_total)
{
    struct fx fx;
    fx_build(&fx);
    struct ss_report *r = fx_report(&fx, 99);
    char *out = top(r, 0), *head;
    struct row *rows;
    size_t n = parse(out, &rows, &head);
    cr_expect(strstr(head, "21 samples at 99 Hz"), "%s", head);
    const struct {
        const char *name, *kind;
        unsigned long long self, total;
    } want[] = {
        {"leaf (test.lua:10)", "lua", 5, 10},  /* lines 12 and 13 of one function */
        {"M.run (test.lua:25)", "lua", 0, 11}, /* lines 30 and 31 */
        {"string.rep", "lua", 4, 4},           /* builtin: no chunk */
        {"rec (deep.lua:4)", "lua", 1, 1},     /* 998 recursive frames, one sample */
        {"main", "native", 0, 18},             /* two modules' main, once per stack */
        {"[no frames]", "pseudo", 2, 2},       /* empty stacks */
        {"[GC]", "pseudo", 2, 2},
        {"do_syscall_64_[k]", "kernel", 0, 1},
        {"libfoo.so+0x1234", "native", 0, 1},
        {"f (bad\\xff\\xfe.lua:5)", "lua", 1, 1}, /* escaped, valid UTF-8 */
        {"weird;name with spaces", "native", 1, 1},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct row *w = get(rows, n, want[i].name);
        cr_expect_eq(w->self, want[i].self, "%s self %llu", want[i].name, w->self);
        cr_expect_eq(w->total, want[i].total, "%s total %llu", want[i].name, w->total);
        cr_expect_str_eq(w->kind, want[i].kind, "%s kind", want[i].name);
        cr_expect(w->totalp > 100.0 * (double)want[i].total / 21 - 0.01 &&
                      w->totalp < 100.0 * (double)want[i].total / 21 + 0.01,
                  "%s total%% %.2f", want[i].name, w->totalp);
    }
    unsigned long long self = 0;
    for (size_t i = 0; i < n; i++) {
        self += rows[i].self;
        cr_expect_leq(rows[i].self, rows[i].total);
        if (i)
            cr_expect(rows[i - 1].self > rows[i].self ||
                          (rows[i - 1].self == rows[i].self && rows[i - 1].total >= rows[i].total),
                      "order at row %zu", i);
        for (const unsigned char *p = (const unsigned char *)rows[i].name; *p; p++)
            cr_expect(*p >= 0x20 && *p != 0x7f);
    }
    cr_expect_eq(self, fx.total, "every sample has one leaf");
    for (size_t i = 0; i < n; i++)
        free(rows[i].name);
    free(rows);
    free(head);
    free(out);

    out = top(r, 3);
    n = parse(out, &rows, &head);
    cr_expect_eq(n, 3);
    cr_expect_str_eq(rows[0].name, "leaf (test.lua:10)");
    for (size_t i = 0; i < n; i++)
        free(rows[i].name);
    free(rows);
    free(head);
    free(out);
    ss_report_free(r);
    fx_free(&fx);
}

Test(report_top, empty_report)
{
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    char *out = top(r, 10), *head;
    struct row *rows;
    size_t n = parse(out, &rows, &head);
    cr_expect_eq(n, 0);
    cr_expect(strstr(head, "0 samples"), "%s", head);
    free(rows);
    free(head);
    free(out);
    ss_report_free(r);
}
