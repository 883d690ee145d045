/* test/report/svg: the SVG flame graph. The XML must validate (xmllint);
 * headless Chromium (Debian chromium) must run its script (labels fitted,
 * ?s= search highlights and reports the matched share, ?zoom= zooms with
 * ancestors kept as full-width bars) and its screenshot must show the frames
 * in their colours where the SVG puts them, with label text drawn. */
#include <criterion/criterion.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

struct frame {
    char cls[16];
    char *title;
    double x, y, w;
    int r, g, b;
    char *label;
};

/* Frames as written by us (or as serialized by Chromium's --dump-dom). */
static size_t parse_frames(const char *svg, struct frame **out)
{
    size_t n = 0, cap = 0;
    struct frame *fs = NULL;
    const char *p = strstr(svg, "<g id=\"frames\">");
    cr_assert(p, "no frames group");
    while ((p = strstr(p, "<g class=\""))) {
        struct frame f = {0};
        p += 10;
        size_t cl = strcspn(p, "\"");
        snprintf(f.cls, sizeof(f.cls), "%.*s", (int)cl, p);
        const char *t = strstr(p, "<title>"), *te = strstr(p, "</title>");
        const char *r = strstr(p, "<rect ");
        cr_assert(t && te && r);
        f.title = strndup(t + 7, (size_t)(te - t - 7));
        const char *x = strstr(r, " x=\""), *y = strstr(r, " y=\""), *w = strstr(r, " width=\""),
                   *fill = strstr(r, " fill=\"rgb(");
        cr_assert(x && y && w && fill);
        f.x = strtod(x + 4, NULL);
        f.y = strtod(y + 4, NULL);
        f.w = strtod(w + 8, NULL);
        cr_assert_eq(sscanf(fill + 11, "%d,%d,%d", &f.r, &f.g, &f.b), 3);
        const char *tx = strstr(r, "<text "), *txe = strstr(r, "</text>");
        cr_assert(tx && txe);
        tx = strchr(tx, '>') + 1;
        f.label = strndup(tx, (size_t)(txe - tx));
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            fs = realloc(fs, cap * sizeof(*fs));
        }
        fs[n++] = f;
        p = txe;
    }
    *out = fs;
    return n;
}

static void free_frames(struct frame *fs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(fs[i].title);
        free(fs[i].label);
    }
    free(fs);
}

/* The frame whose title starts with "NAME (" and has the widest rect. */
static struct frame *find(struct frame *fs, size_t n, const char *name)
{
    struct frame *best = NULL;
    size_t l = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(fs[i].title, name, l) && !strncmp(fs[i].title + l, " (", 2) &&
            (!best || fs[i].w > best->w))
            best = &fs[i];
    return best;
}

struct env {
    char *dir, *svg;
    struct fx fx;
    size_t dropped;
    struct ss_report *r;
};

static void setup(struct env *e, int deep)
{
    fx_build(&e->fx);
    e->dropped = deep ? 0 : 1;
    e->fx.n -= e->dropped; /* the deep stack is the last sample */
    e->r = fx_report(&e->fx, 99);
    e->dir = fx_tmpdir();
    cr_assert(e->r && e->dir);
    e->svg = fx_write(e->r, e->dir, "flame.svg");
    cr_assert(e->svg);
}

static void teardown(struct env *e)
{
    e->fx.n += e->dropped;
    fx_free(&e->fx);
    ss_report_free(e->r);
    free(e->svg);
    fx_rmdir(e->dir);
}

static uint64_t total(const struct env *e)
{
    uint64_t t = 0;
    for (size_t i = 0; i < e->fx.n; i++)
        t += e->fx.s[i].count;
    return t;
}

/* Run headless Chromium on the SVG; mode is "--dump-dom" or "--screenshot=..";
 * a 1200 px wide window (the width the file is laid out for) unless mode
 * says --window-size. */
static char *chromium(const struct env *e, const char *mode, const char *query)
{
    char *m = NULL;
    if (!strstr(mode, "--window-size"))
        cr_assert(asprintf(&m, "--window-size=1200,1000 %s", mode) > 0);
    cr_assert(fx_have("chromium"),
              "chromium not installed (Debian chromium; scripts/dev installs it)");
    char *cmd, *out = NULL;
    cr_assert(asprintf(&cmd,
                       "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic "
                       "--no-first-run --disable-background-networking --disable-component-update "
                       "--disable-sync --hide-scrollbars --force-device-scale-factor=1 "
                       "--user-data-dir='%s/profile' %s 'file://%s%s' 2>/dev/null",
                       e->dir, m ? m : mode, e->svg, query ? query : "") > 0);
    free(m);
    int st = fx_run(cmd, &out);
    cr_assert_eq(st, 0, "%s: exit %d", cmd, st);
    free(cmd);
    return out;
}

Test(report_svg, xml_is_valid)
{
    cr_assert(fx_have("xmllint"), "xmllint not installed (Debian libxml2-utils)");
    struct env e;
    setup(&e, 1);
    char *cmd, *out;
    cr_assert(asprintf(&cmd, "xmllint --noout '%s' 2>&1", e.svg) > 0);
    cr_expect_eq(fx_run(cmd, &out), 0, "xmllint: %s", out);
    free(out);
    free(cmd);
    /* what the file says, before any script runs */
    char *svg = fx_read(e.svg, NULL);
    cr_expect(strstr(svg, "fixture &lt;&amp;&gt; &quot;flame&quot;</text>"), "title escaped");
    /* the title line: processes, duration, rate, samples */
    char want[160];
    snprintf(want, sizeof(want), " \xc2\xb7 99 Hz \xc2\xb7 %llu samples</text>",
             (unsigned long long)total(&e));
    const char *sub = strstr(svg, "<text id=\"subtitle\"");
    cr_assert(sub, "no subtitle");
    cr_expect(strstr(sub, want) && strstr(sub, want) < strstr(sub, "\n"), "subtitle %.200s", sub);
    cr_expect(strstr(sub, "luajit (pid ") && strstr(sub, "luajit (pid ") < strstr(sub, "\n"),
              "processes in %.200s", sub);
    struct frame *fs;
    size_t n = parse_frames(svg, &fs);
    struct frame *all = find(fs, n, "all");
    cr_assert(all);
    cr_expect_str_eq(all->cls, "root");
    cr_expect(all->x > 9.99 && all->x < 10.01 && all->w > 1179.99 && all->w < 1180.01);
    struct frame *leaf = find(fs, n, "leaf (test.lua:12)");
    cr_assert(leaf);
    cr_expect_str_eq(leaf->cls, "lua");
    cr_expect_str_eq(leaf->title, "leaf (test.lua:12) (7 samples, 33.33%)");
    struct frame *k = find(fs, n, "do_syscall_64_[k]"), *nat = find(fs, n, "lua_pcall");
    cr_assert(k && nat);
    cr_expect_str_eq(k->cls, "kernel");
    cr_expect_str_eq(nat->cls, "native");
    cr_expect(find(fs, n, "anonymous ([string &quot;x(1)&quot;]:1)"), "quotes escaped");
    cr_expect(find(fs, n, "f (bad\\xff\\xfe.lua:7)"), "invalid UTF-8 escaped");
    /* kinds get distinct colour families: Lua green, kernel blue, native warm */
    cr_expect(leaf->g > leaf->r && leaf->g > leaf->b);
    cr_expect(k->b > k->r && k->b > k->g);
    cr_expect(nat->r > nat->b && nat->r >= 205);
    size_t rec = 0;
    for (size_t i = 0; i < n; i++)
        rec += !strncmp(fs[i].title, "rec (deep.lua:5) (1 sample,", 27);
    cr_expect_eq(rec, FX_DEEP - 2, "deep stack frames drawn: %zu", rec);
    free_frames(fs, n);
    free(svg);
    teardown(&e);

    /* an empty report is a valid document too */
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    char *dir = fx_tmpdir(), *p = fx_write(r, dir, "empty.svg");
    cr_assert(asprintf(&cmd, "xmllint --noout '%s' 2>&1", p) > 0);
    cr_expect_eq(fx_run(cmd, &out), 0, "xmllint (empty): %s", out);
    char *es = fx_read(p, NULL);
    cr_expect(strstr(es, ">No samples.<"));
    free(es);
    free(out);
    free(cmd);
    free(p);
    ss_report_free(r);
    fx_rmdir(dir);
}

Test(report_svg, chromium_runs_the_script)
{
    struct env e;
    setup(&e, 1);
    char *dom = chromium(&e, "--dump-dom", NULL);
    cr_assert(strstr(dom, "data-ready=\"1\""), "script did not finish:\n%.500s", dom);
    struct frame *fs;
    size_t n = parse_frames(dom, &fs);
    char *svg = fx_read(e.svg, NULL);
    struct frame *fs0;
    size_t n0 = parse_frames(svg, &fs0);
    cr_expect_eq(n, n0, "frames in DOM %zu, in file %zu", n, n0);
    /* the script's label fitting agrees with the writer's */
    for (size_t i = 0; i < n && i < n0; i++)
        cr_expect_str_eq(fs[i].label, fs0[i].label, "label of %s", fs[i].title);
    struct frame *lj = find(fs, n, "luajit");
    cr_assert(lj);
    cr_expect_str_eq(lj->label, "luajit");
    struct frame *pc = find(fs, n, "lua_pcall");
    cr_expect_str_eq(pc->label, "lua_pcall");
    free_frames(fs0, n0);
    free_frames(fs, n);
    free(svg);
    free(dom);
    teardown(&e);
}

Test(report_svg, search_and_zoom)
{
    struct env e;
    setup(&e, 1);
    /* samples with a "leaf" frame, each stack counted once */
    uint64_t leaf = 0;
    for (size_t i = 0; i < e.fx.n; i++)
        for (uint32_t j = 0; j < e.fx.s[i].st.nframes; j++) {
            const struct ss_frame *f = &e.fx.s[i].st.frames[j];
            if (f->kind == SS_FRAME_LUA && f->name && !strcmp(f->name, "leaf")) {
                leaf += e.fx.s[i].count;
                break;
            }
        }
    char want[64];
    snprintf(want, sizeof(want), "Matched: %.1f%% (%llu of %llu)",
             100.0 * (double)leaf / (double)total(&e), (unsigned long long)leaf,
             (unsigned long long)total(&e));
    char *dom = chromium(&e, "--dump-dom", "?s=%5Eleaf%20&zoom=lua_pcall");
    cr_assert(strstr(dom, "data-ready=\"1\""));
    cr_expect(strstr(dom, want), "want '%s'", want);
    cr_expect(strstr(dom, ">Reset Search<"));
    struct frame *fs;
    size_t n = parse_frames(dom, &fs);
    size_t hits = 0;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(fs[i].title, "leaf (", 6)) {
            hits++;
            cr_expect(fs[i].r == 230 && fs[i].g == 0 && fs[i].b == 230, "%s not highlighted",
                      fs[i].title);
            cr_expect(strstr(fs[i].cls, "match"));
        }
    cr_expect_geq(hits, 3);
    /* zoomed: lua_pcall spans the width, ancestors are parents, others hidden */
    struct frame *pc = find(fs, n, "lua_pcall"), *lj = find(fs, n, "luajit"),
                 *v8 = find(fs, n, "V8 Worker 2"), *run = find(fs, n, "M.run (test.lua:30)");
    cr_assert(pc && lj && v8 && run);
    cr_expect(pc->x > 9.99 && pc->x < 10.01 && pc->w > 1179.99 && pc->w < 1180.01,
              "lua_pcall at %.2f width %.2f", pc->x, pc->w);
    cr_expect(strstr(lj->cls, "parent"), "luajit class '%s'", lj->cls);
    cr_expect(strstr(v8->cls, "hide"), "V8 Worker 2 class '%s'", v8->cls);
    cr_expect(!strstr(run->cls, "hide") && run->w > 100, "M.run grew: %.2f", run->w);
    cr_expect(!strstr(dom, "id=\"unzoom\" class=\"btn hide\""), "Reset Zoom shown");
    free_frames(fs, n);
    free(dom);
    teardown(&e);
}

/* Opened on its own, the graph is laid out for the window's width: frames
 * scale, labels are fitted again, the buttons move with the right edge. */
Test(report_svg, width_follows_the_window)
{
    struct env e;
    setup(&e, 1);
    char *svg = fx_read(e.svg, NULL);
    struct frame *fs0;
    size_t n0 = parse_frames(svg, &fs0);
    const int widths[] = {700, 1600};
    for (size_t wi = 0; wi < 2; wi++) {
        int W = widths[wi];
        char *mode;
        cr_assert(asprintf(&mode, "--window-size=%d,900 --dump-dom", W) > 0);
        char *dom = chromium(&e, mode, NULL);
        cr_assert(strstr(dom, "data-ready=\"1\""));
        char attr[64];
        snprintf(attr, sizeof(attr), "width=\"%d\"", W);
        cr_expect(strstr(dom, attr), "svg width %d not set", W);
        struct frame *fs;
        size_t n = parse_frames(dom, &fs);
        cr_assert_eq(n, n0);
        struct frame *all = find(fs, n, "all");
        cr_assert(all);
        cr_expect(all->x > 9.99 && all->x < 10.01 && all->w > W - 20.01 && all->w < W - 19.99,
                  "all at %.2f width %.2f in a %d px window", all->x, all->w, W);
        double k = (W - 20.0) / 1180.0;
        size_t changed = 0;
        for (size_t i = 0; i < n; i++) {
            cr_expect(fs[i].w > fs0[i].w * k - 0.02 && fs[i].w < fs0[i].w * k + 0.02,
                      "%s: width %.2f, want %.2f", fs[i].title, fs[i].w, fs0[i].w * k);
            /* labels fit their new width (code points, '..' included) */
            size_t cps = 0;
            for (const char *c = fs[i].label; *c; c++) {
                cps += ((unsigned char)*c & 0xc0) != 0x80;
                if (*c == '&' && strchr(c, ';')) c = strchr(c, ';'); /* an entity is one */
            }
            long maxc = (long)((fs[i].w - 3) / (12 * 0.59));
            cr_expect(cps == 0 || (long)cps <= maxc, "label '%s' too long for %.2f px", fs[i].label,
                      fs[i].w);
            changed += strcmp(fs[i].label, fs0[i].label) != 0;
        }
        cr_expect_gt(changed, 0, "no label was fitted again at %d px", W);
        snprintf(attr, sizeof(attr), "id=\"search\" class=\"btn\" x=\"%d\"", W - 10);
        cr_expect(strstr(dom, attr), "Search button not at the right edge of %d px", W);
        free_frames(fs, n);
        free(dom);
        free(mode);
    }
    free_frames(fs0, n0);
    free(svg);
    teardown(&e);
}

/* Screenshot pixels (RGBA) via libpng's simplified API. */
struct shot {
    png_image img;
    png_bytep px;
};

static void pixel(const struct shot *s, int x, int y, int *r, int *g, int *b)
{
    png_bytep p = s->px + ((size_t)y * s->img.width + (size_t)x) * 4;
    *r = p[0];
    *g = p[1];
    *b = p[2];
}

Test(report_svg, screenshot_shows_the_frames)
{
    struct env e;
    setup(&e, 0); /* small enough to fit one screen */
    char *svg = fx_read(e.svg, NULL);
    unsigned h = 0;
    const char *hp = strstr(svg, "height=\"");
    cr_assert(hp && sscanf(hp + 8, "%u", &h) == 1 && h > 100 && h < 2000);
    char *png = fx_path(e.dir, "shot.png"), *mode;
    cr_assert(asprintf(&mode, "--screenshot='%s' --window-size=1200,%u", png, h) > 0);
    free(chromium(&e, mode, NULL));
    struct shot s = {0};
    s.img.version = PNG_IMAGE_VERSION;
    cr_assert(png_image_begin_read_from_file(&s.img, png), "cannot read %s: %s", png,
              s.img.message);
    s.img.format = PNG_FORMAT_RGBA;
    s.px = malloc(PNG_IMAGE_SIZE(s.img));
    cr_assert(png_image_finish_read(&s.img, NULL, s.px, 0, NULL), "%s", s.img.message);
    cr_assert_eq(s.img.width, 1200);
    cr_assert_geq(s.img.height, h);

    struct frame *fs;
    size_t n = parse_frames(svg, &fs);
    const char *names[] = {"all",
                           "luajit",
                           "lua_pcall",
                           "main (test.lua:40)",
                           "leaf (test.lua:12)",
                           "do_syscall_64_[k]",
                           "[GC]",
                           "idle"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct frame *f = find(fs, n, names[i]);
        cr_assert(f, "no frame %s", names[i]);
        /* rect colour near the right end (labels start at the left) */
        int x = (int)(f->x + f->w - 3), y = (int)(f->y + 7), r, g, b;
        pixel(&s, x, y, &r, &g, &b);
        cr_expect(abs(r - f->r) <= 2 && abs(g - f->g) <= 2 && abs(b - f->b) <= 2,
                  "%s at (%d,%d): rgb(%d,%d,%d), want rgb(%d,%d,%d)", names[i], x, y, r, g, b, f->r,
                  f->g, f->b);
        /* the label was drawn: dark glyph pixels in the left part of the rect */
        if (*f->label) {
            int dark = 0;
            for (int yy = (int)f->y + 2; yy < (int)f->y + 14; yy++)
                for (int xx = (int)f->x + 3;
                     xx < (int)(f->x + 3 + 7 * strlen(f->label)) && xx < (int)(f->x + f->w); xx++) {
                    pixel(&s, xx, yy, &r, &g, &b);
                    dark += r + g + b < 200;
                }
            cr_expect_gt(dark, 10, "label '%s' not drawn (%d dark pixels)", f->label, dark);
        }
    }
    /* background above the frames is the gradient, not a frame colour */
    int r, g, b;
    pixel(&s, 600, 55, &r, &g, &b);
    cr_expect(r > 220 && g > 220 && b > 170, "background rgb(%d,%d,%d)", r, g, b);
    free(s.px);
    free_frames(fs, n);
    free(mode);
    free(png);
    free(svg);
    teardown(&e);
}
