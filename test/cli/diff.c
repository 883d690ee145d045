/* test/cli/diff.c: `stacksnap diff` against a known change (issue 18). The
 * same Lua script is recorded twice, with heavy() doing the same work as
 * steady() and then three times as much (shares 50/50 -> 75/25): the table
 * must put heavy (grew ~25 points) and steady (shrank ~25) first; .folded
 * lines are STACK BEFORE AFTER summing to each side's samples and are the
 * same from captures as from the live .folded/.pb.gz of the recordings; the
 * SVG is valid XML and, in headless Chromium, has AFTER's shape with heavy
 * red and steady blue, hover titles with both sides, and search reporting
 * the matched share. Bad inputs exit 2 naming the file. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void ss(struct cli_res *r, double timeout, ...)
{
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    va_list ap;
    va_start(ap, timeout);
    for (char *a; n < 39 && (a = va_arg(ap, char *));)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cr_assert(cli_run(r, timeout, argv) == 0);
    cr_assert(r->status >= 0, "stacksnap %s hung", argv[1]);
}

struct side {
    char *snap, *folded, *pb;
};

/* Record heavier.lua with heavy() K times as heavy as steady(). */
static void record(const char *dir, const char *k, struct side *s)
{
    char name[32];
    snprintf(name, sizeof(name), "k%s.snap", k);
    s->snap = cli_path(dir, name);
    snprintf(name, sizeof(name), "k%s.folded", k);
    s->folded = cli_path(dir, name);
    snprintf(name, sizeof(name), "k%s.pb.gz", k);
    s->pb = cli_path(dir, name);
    char *lua = cli_src("test/cli/heavier.lua");
    struct cli_res r;
    ss(&r, 60, "record", "-F", "499", "-o", s->snap, "-o", s->folded, "-o", s->pb, "--", "luajit",
       "-joff", lua, "2", k, NULL);
    cr_assert_eq(r.status, 0, "record K=%s: %s", k, r.err);
    cli_res_free(&r);
    free(lua);
}

static void side_free(struct side *s)
{
    free(s->snap), free(s->folded), free(s->pb);
}

/* The table row of a function whose name starts with prefix: its position
 * and self% before/after. */
static int row(const char *table, const char *prefix, double *sb, double *sa)
{
    const char *p = table;
    int i = -2; /* two header lines */
    while (p && *p) {
        const char *e = strchr(p, '\n');
        double b, a, d, tb, ta, td;
        int off = 0;
        if (i >= 0 &&
            sscanf(p, "%lf%% %lf%% %lf %lf%% %lf%% %lf %n", &b, &a, &d, &tb, &ta, &td, &off) == 6 &&
            off && !strncmp(p + off, prefix, strlen(prefix))) {
            *sb = b, *sa = a;
            cr_expect(d > a - b - 0.011 && d < a - b + 0.011, "delta %.2f of %.2f -> %.2f", d, b,
                      a);
            return i;
        }
        i++;
        p = e ? e + 1 : NULL;
    }
    return -1;
}

/* The AFTER samples of STACK BEFORE AFTER lines with a "heavy (" frame. */
static long long heavy_after(const char *text)
{
    long long n = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        const char *s2 = e ? e : p + strlen(p), *s1;
        for (s1 = s2; s1 > p && s1[-1] != ' '; s1--) {
        }
        const char *h = strstr(p, ";heavy (");
        if (h && h < s1) n += atoll(s1);
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* The widest frame whose title starts with "<title>PREFIX": its title. */
static const char *widest(const char *dom, const char *prefix, double *w)
{
    const char *best = NULL;
    *w = -1;
    for (const char *p = dom; (p = strstr(p, prefix)); p++) {
        const char *wp = strstr(p, "width=\"");
        double v = wp ? strtod(wp + 7, NULL) : -1;
        if (v > *w) *w = v, best = p;
    }
    return best;
}

/* Sum of a column (1 = BEFORE, 2 = AFTER) of STACK BEFORE AFTER lines. */
static long long column(const char *text, int col)
{
    long long sum = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        const char *s2 = e ? e : p + strlen(p), *s1;
        for (s1 = s2; s1 > p && s1[-1] != ' '; s1--) {
        }
        const char *s0;
        for (s0 = s1 - 1; s0 > p && s0[-1] != ' '; s0--) {
        }
        cr_assert(s0 > p, "not STACK BEFORE AFTER: %.*s", (int)(s2 - p), p);
        sum += atoll(col == 1 ? s0 : s1);
        p = e ? e + 1 : NULL;
    }
    return sum;
}

Test(cli_diff, known_change)
{
    char *dir = cli_tmpdir("diff");
    struct side a, b;
    record(dir, "1", &a);
    record(dir, "3", &b);
    char *txt = cli_path(dir, "d.txt"), *fold = cli_path(dir, "d.folded"),
         *fold2 = cli_path(dir, "d2.folded"), *svg = cli_path(dir, "d.svg");
    struct cli_res r;
    ss(&r, 120, "diff", a.snap, b.snap, "-o", txt, "-o", fold, "-o", svg, "-o", "-", NULL);
    cr_assert_eq(r.status, 0, "diff: %s", r.err);
    char *table = cli_load(txt, NULL);
    cr_assert(table);
    cr_expect_str_eq(r.out, table, "-o - writes the table");
    double hb, ha, sb, sa;
    int hi = row(table, "heavy (", &hb, &ha), si = row(table, "steady (", &sb, &sa);
    cr_assert(hi >= 0 && si >= 0, "heavy/steady rows missing:\n%s", table);
    cr_expect(hi <= 1 && si <= 1, "biggest changes first (heavy row %d, steady %d):\n%s", hi, si,
              table);
    /* 50/50 -> 75/25, allowing the sampling's noise and the loop overhead */
    cr_expect(hb > 40 && hb < 60 && ha > 65 && ha < 85, "heavy %.2f%% -> %.2f%%", hb, ha);
    cr_expect(sb > 40 && sb < 60 && sa > 15 && sa < 35, "steady %.2f%% -> %.2f%%", sb, sa);
    cli_res_free(&r);

    /* difffolded: columns sum to each side; same from the live outputs */
    char *df = cli_load(fold, NULL), *fa = cli_load(a.folded, NULL), *fb = cli_load(b.folded, NULL);
    cr_assert(df && fa && fb);
    char why[128];
    long long na = cli_folded_check(fa, why, sizeof(why)),
              nb = cli_folded_check(fb, why, sizeof(why));
    cr_assert(na > 500 && nb > 500, "samples %lld, %lld", na, nb);
    cr_expect_eq(column(df, 1), na);
    cr_expect_eq(column(df, 2), nb);
    ss(&r, 60, "diff", a.folded, b.pb, "-o", fold2, NULL);
    cr_assert_eq(r.status, 0, "diff .folded .pb.gz: %s", r.err);
    char *d = cli_diff(fold, fold2);
    cr_expect(!d, "diff of captures and of .folded/.pb.gz differ: %s", d ? d : "");
    free(d);
    cli_res_free(&r);

    /* the SVG: valid XML; in Chromium AFTER's shape, red grew, blue shrank */
    char *xl = cli_which("xmllint"), *cr = cli_which("chromium");
    cr_assert(xl && cr, "xmllint/chromium missing (Debian libxml2-utils, chromium; scripts/dev)");
    char *xargv[] = {xl, "--noout", svg, NULL};
    cr_assert(cli_run(&r, 60, xargv) == 0);
    cr_expect_eq(r.status, 0, "xmllint: %s", r.err);
    cli_res_free(&r);
    char *prof, *url, *pdir = cli_path(dir, "chromium");
    cr_assert(asprintf(&prof, "--user-data-dir=%s", pdir) > 0);
    cr_assert(asprintf(&url, "file://%s?s=%%5Eheavy%%20", svg) > 0);
    char *cargv[] = {cr,
                     "--headless",
                     "--no-sandbox",
                     "--disable-gpu",
                     "--no-first-run",
                     "--disable-background-networking",
                     "--disable-component-update",
                     "--window-size=1200,900",
                     prof,
                     "--dump-dom",
                     url,
                     NULL};
    cr_assert(cli_run(&r, 120, cargv) == 0);
    cr_assert_eq(r.status, 0, "chromium: %s", r.err);
    cr_assert(strstr(r.out, "data-ready=\"1\""), "script did not run:\n%.300s", r.out);
    double hw, sw;
    const char *h = widest(r.out, "<title>heavy (", &hw),
               *s = widest(r.out, "<title>steady (", &sw);
    cr_assert(h && s, "no heavy/steady frames");
    int rr, gg, bb;
    const char *hf = strstr(h, "fill=\""), *sf = strstr(s, "fill=\"");
    cr_assert(hf && sf);
    cr_expect(hw > 0.6 * 1180 && hw < 0.9 * 1180, "heavy width %.1f: AFTER's ~75%%", hw);
    cr_assert(strstr(h, "; after ") && strstr(h, " points)</title>"), "hover shows both sides");
    cr_expect(strncmp(hf + 6, "rgb(230,0,230)", 14) == 0, "heavy matched the search: %.20s", hf);
    cr_assert_eq(sscanf(sf + 6, "rgb(%d,%d,%d)", &rr, &gg, &bb), 3);
    cr_expect(bb > rr + 100 && bb > gg + 100, "steady shrank: rgb(%d,%d,%d), want blue", rr, gg,
              bb);
    /* the share of AFTER's samples with a heavy frame, each counted once:
     * exactly the count the .folded diff gives (~75%) */
    long long nh = heavy_after(df);
    char want[96];
    snprintf(want, sizeof(want), "Matched: %.1f%% (%lld of %lld)", 100.0 * (double)nh / (double)nb,
             nh, nb);
    cr_expect(nh * 100 > nb * 65 && nh * 100 < nb * 85, "heavy in %lld of %lld samples", nh, nb);
    cr_expect(strstr(r.out, want), "search share: want '%s': %.200s", want,
              strstr(r.out, "id=\"matched\""));
    cli_res_free(&r);
    /* a match right after another counted one is not inside it: x and width
     * are written rounded, and the end of a small heavy frame under main
     * (x 12.36 + width 3.54) lies past the x of run's big heavy frame
     * (15.89) here; the script counted only the small one (0.3%, in CI: a
     * run whose walk gave one sample main > heavy without run) */
    char *ca = cli_path(dir, "ca.folded"), *cb = cli_path(dir, "cb.folded"),
         *csvg = cli_path(dir, "c.svg");
    const char *fa_txt = "p;aaa 500\np;main;run;heavy 501\n",
               *fb_txt = "p;aaa 2\np;main;heavy 3\np;main;run;heavy 996\n";
    cr_assert(cli_store(ca, fa_txt, strlen(fa_txt)) == 0 &&
              cli_store(cb, fb_txt, strlen(fb_txt)) == 0);
    ss(&r, 20, "diff", ca, cb, "-o", csvg, NULL);
    cr_assert_eq(r.status, 0, "diff: %s", r.err);
    cli_res_free(&r);
    free(url);
    cr_assert(asprintf(&url, "file://%s?s=%%5Eheavy%%24", csvg) > 0);
    cargv[10] = url;
    cr_assert(cli_run(&r, 120, cargv) == 0);
    cr_expect(strstr(r.out, "Matched: 99.8% (999 of 1001)"), "adjacent matches: %.200s",
              strstr(r.out, "id=\"matched\""));
    cli_res_free(&r);
    free(ca), free(cb), free(csvg);
    /* unsearched: heavy is red */
    free(url);
    cr_assert(asprintf(&url, "file://%s", svg) > 0);
    cargv[10] = url;
    cr_assert(cli_run(&r, 120, cargv) == 0);
    h = widest(r.out, "<title>heavy (", &hw);
    cr_assert(h && (hf = strstr(h, "fill=\"")));
    cr_assert_eq(sscanf(hf + 6, "rgb(%d,%d,%d)", &rr, &gg, &bb), 3);
    cr_expect(rr > gg + 100 && rr > bb + 100, "heavy grew: rgb(%d,%d,%d), want red", rr, gg, bb);
    cli_res_free(&r);

    free(prof), free(url), free(pdir), free(xl), free(cr);
    free(table), free(df), free(fa), free(fb);
    free(txt), free(fold), free(fold2), free(svg);
    side_free(&a);
    side_free(&b);
    cli_rmtree(dir);
    free(dir);
}

Test(cli_diff, bad_input)
{
    char *dir = cli_tmpdir("diff-bad"), *bad = cli_path(dir, "bad.folded"),
         *good = cli_path(dir, "good.folded"), *pb = cli_path(dir, "bad.pb.gz"),
         *other = cli_path(dir, "x.csv"), *missing = cli_path(dir, "missing.folded");
    cr_assert(cli_store(bad, "a;b 3\nno count here\n", 20) == 0);
    cr_assert(cli_store(good, "a;b 3\na;c 1\n", 12) == 0);
    cr_assert(cli_store(pb, "\x1f\x8b not really gzip", 19) == 0);
    cr_assert(cli_store(other, "a;b 3\n", 6) == 0);
    struct {
        char *before, *after, *out, *needle;
    } cases[] = {
        {good, bad, "-", "bad.folded:2"},   {pb, good, "-", "bad.pb.gz"},
        {other, good, "-", "x.csv"},        {missing, good, "-", "missing.folded"},
        {good, good, "x.pb.gz", "x.pb.gz"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cli_res r;
        ss(&r, 20, "diff", cases[i].before, cases[i].after, "-o", cases[i].out, NULL);
        cr_expect_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status, r.err);
        cr_expect(strstr(r.err, cases[i].needle), "case %zu: message must name %s: %s", i,
                  cases[i].needle, r.err);
        cli_res_free(&r);
    }
    struct cli_res r;
    ss(&r, 20, "diff", good, NULL);
    cr_expect_eq(r.status, 2);
    cli_res_free(&r);
    /* a valid pair of folded files: exact shares */
    char *other2 = cli_path(dir, "after.folded");
    cr_assert(cli_store(other2, "a;b 1\na;c 3\n", 12) == 0);
    ss(&r, 20, "diff", good, other2, "-o", "-", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "  75.00%   25.00%   -50.00") &&
                  strstr(r.out, "  25.00%   75.00%   +50.00"),
              "%s", r.out);
    cli_res_free(&r);
    free(other2);
    free(bad), free(good), free(pb), free(other), free(missing);
    cli_rmtree(dir);
    free(dir);
}
