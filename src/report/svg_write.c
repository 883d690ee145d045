/* report/svg_write: a laid-out flame tree as a self-contained SVG (title,
 * subtitle, legend, frames with hover titles; the script of svg_script.c
 * adds hover details, zoom, search and following the window's width). In a
 * differential graph a frame is red when its share of its side's samples
 * grew, blue when it shrank, paler the smaller the change. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"
#include "report/svg_int.h"

/* Deterministic colour per kind, varied by the name's hash. */
static void colour(struct rp_buf *b, const char *name, uint8_t kind)
{
    uint64_t h = rp_hash(name, strlen(name), 7);
    double v1 = (double)(h & 0xffff) / 65535.0, v2 = (double)((h >> 16) & 0xffff) / 65535.0,
           v3 = (double)((h >> 32) & 0xffff) / 65535.0;
    int rr, gg, bb;
    switch (kind) {
    case SS_FRAME_LUA:
        rr = 70 + 60 * v1, gg = 180 + 50 * v2, bb = 70 + 50 * v1;
        break;
    case SS_FRAME_KERNEL:
        rr = 70 + 50 * v1, gg = 150 + 60 * v2, bb = 210 + 45 * v3;
        break;
    case SS_FRAME_PSEUDO:
        rr = gg = bb = 165 + 40 * v1;
        break;
    case FG_KIND_PROCESS:
        rr = 160 + 40 * v1, gg = 130 + 30 * v1, bb = 210 + 40 * v2;
        break;
    case FG_KIND_ROOT:
        rr = gg = bb = 200;
        break;
    default:
        rr = 205 + 50 * v3, gg = 230 * v1, bb = 55 * v2;
        break; /* native: hot */
    }
    rp_buf_printf(b, "rgb(%d,%d,%d)", rr, gg, bb);
}

static double absd(double d)
{
    return d < 0 ? -d : d;
}

/* Differential colour: d = change in share (-1..1), dmax the largest |d|. */
static void diff_colour(struct rp_buf *b, double d, double dmax)
{
    double v = dmax > 0 ? absd(d) / dmax : 0;
    if (v > 1) v = 1;
    int c = (int)(235.5 - 190 * v);
    if (d > 0)
        rp_buf_printf(b, "rgb(250,%d,%d)", c, c);
    else if (d < 0)
        rp_buf_printf(b, "rgb(%d,%d,250)", c, c);
    else
        rp_buf_puts(b, "rgb(235,235,235)");
}

static const char *kind_class(uint8_t kind)
{
    return kind == FG_KIND_PROCESS   ? "process"
           : kind == FG_KIND_ROOT    ? "root"
           : kind <= SS_FRAME_PSEUDO ? ss_frame_kind_str(kind)
                                     : "native";
}

/* The label that fits w pixels: whole text, a prefix + "..", or nothing. */
static void label(struct rp_buf *b, const char *disp, double w)
{
    long maxc = (long)((w - 3) / (SVG_FONT_SIZE * SVG_FONT_WIDTH));
    if (maxc < 3) return;
    size_t n = strlen(disp), i = 0;
    long c = 0;
    while (i < n && c < maxc) { /* disp is valid UTF-8: count code points */
        size_t k = rp_utf8_seq((const unsigned char *)disp + i, n - i);
        i += k ? k : 1;
        c++;
    }
    if (i >= n) {
        rp_escape(b, disp, n, RP_ESC_XML);
        return;
    }
    i = 0;
    for (c = 0; c < maxc - 2; c++) {
        size_t k = rp_utf8_seq((const unsigned char *)disp + i, n - i);
        i += k ? k : 1;
    }
    rp_escape(b, disp, i, RP_ESC_XML);
    rp_buf_puts(b, "..");
}

static void legend(struct rp_buf *b, int diff)
{
    static const struct {
        uint8_t kind;
        const char *name;
    } items[] = {{SS_FRAME_LUA, "Lua"},
                 {SS_FRAME_NATIVE, "native"},
                 {SS_FRAME_KERNEL, "kernel"},
                 {SS_FRAME_PSEUDO, "VM state / truncated"},
                 {FG_KIND_PROCESS, "process"}};
    static const struct {
        double d;
        const char *name;
    } ditems[] = {{1, "share grew"}, {-1, "share shrank"}, {0, "same share"}};
    double x = SVG_XPAD;
    size_t n = diff ? sizeof(ditems) / sizeof(ditems[0]) : sizeof(items) / sizeof(items[0]);
    for (size_t i = 0; i < n; i++) {
        const char *name = diff ? ditems[i].name : items[i].name;
        rp_buf_printf(b, "<rect x=\"%.1f\" y=\"52\" width=\"12\" height=\"12\" rx=\"2\" fill=\"",
                      x);
        if (diff)
            diff_colour(b, ditems[i].d, 1);
        else
            colour(b, "legend", items[i].kind);
        rp_buf_printf(b, "\"/><text x=\"%.1f\" y=\"62\">%s</text>\n", x + 16, name);
        x += 16 + strlen(name) * SVG_FONT_SIZE * SVG_FONT_WIDTH + 18;
    }
}

static double share(uint64_t v, uint64_t total)
{
    return total ? (double)v / (double)total : 0;
}

/* " (N samples, P%)" or, differential, " (before N samples, P%; after ...; +D points)" */
static void frame_title(struct rp_buf *b, const struct fg_node *n, const struct fg_opts *o,
                        uint64_t total)
{
    const char *u = o->unit ? o->unit : "sample";
    if (!o->diff) {
        rp_buf_printf(b, " (%" PRIu64 " %s%s, %.2f%%)", n->total, u,
                      n->total == 1 || o->unit ? "" : "s", /* a unit ("µs") has no plural */
                      100.0 * share(n->total, total));
        return;
    }
    double sb = share(n->base, o->base_total), sa = share(n->total, total);
    rp_buf_printf(b,
                  " (before %" PRIu64 " %s%s, %.2f%%; after %" PRIu64 " %s%s, %.2f%%; "
                  "%+.2f points)",
                  n->base, u, n->base == 1 ? "" : "s", 100.0 * sb, n->total, u,
                  n->total == 1 ? "" : "s", 100.0 * sa, 100.0 * (sa - sb));
}

static void header(struct rp_buf *b, const struct fg_tree *t, const struct fg_opts *o,
                   unsigned height)
{
    uint64_t total = t->n[0].total;
    rp_buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
    rp_buf_printf(b,
                  "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%u\" viewBox=\"0 0 %d %u\" onload=\"init(evt)\" "
                  "data-total=\"%" PRIu64 "\" data-xpad=\"%d\" data-fontsize=\"%d\" "
                  "data-fontwidth=\"%.2f\" data-diff=\"%d\">\n",
                  SVG_WIDTH, height, SVG_WIDTH, height, total, SVG_XPAD, SVG_FONT_SIZE,
                  SVG_FONT_WIDTH, o->diff ? 1 : 0);
    rp_buf_printf(b, "<style type=\"text/css\"><![CDATA[%s]]></style>\n", rp_svg_style);
    rp_buf_printf(b, "<script type=\"text/ecmascript\"><![CDATA[%s]]></script>\n", rp_svg_script);
    rp_buf_printf(b,
                  "<rect id=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" "
                  "fill=\"url(#bg)\"/>\n",
                  SVG_WIDTH, height);
    rp_buf_puts(b, "<defs><linearGradient id=\"bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
                   "<stop stop-color=\"#eeeeee\" offset=\"5%\"/>"
                   "<stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient></defs>\n");
    rp_buf_printf(b, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
    rp_escape_str(b, o->title ? o->title : "stacksnap flame graph", RP_ESC_XML);
    rp_buf_puts(b, "</text>\n");
    rp_buf_printf(b, "<text id=\"subtitle\" x=\"%d\" y=\"42\">", SVG_WIDTH / 2);
    rp_escape_str(b, o->subtitle ? o->subtitle : "", RP_ESC_XML);
    rp_buf_puts(b, "</text>\n");
    rp_buf_printf(b, "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
                  SVG_XPAD);
    rp_buf_printf(b, "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\">Search</text>\n",
                  SVG_WIDTH - SVG_XPAD);
    legend(b, o->diff);
    rp_buf_printf(b, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", SVG_XPAD, height - 12);
    rp_buf_printf(b, "<text id=\"matched\" x=\"%d\" y=\"%u\"> </text>\n", SVG_WIDTH - SVG_XPAD,
                  height - 12);
    if (!total)
        rp_buf_printf(b, "<text x=\"%d\" y=\"%d\">No samples.</text>\n", SVG_XPAD,
                      SVG_TOP + SVG_FRAME_H);
}

int rp_fg_write(const struct fg_tree *t, const struct fg_opts *o, FILE *f, struct ss_err *err)
{
    struct rp_buf b = {0}, disp = {0};
    int rc = 0;
    uint64_t total = t->n[0].total;
    double scale = total ? (double)(SVG_WIDTH - 2 * SVG_XPAD) / (double)total : 0;
    unsigned height = SVG_TOP + (t->maxdepth + 1) * SVG_FRAME_H + SVG_BOTTOM;
    double dmax = 0;
    for (size_t i = 0; o->diff && i < t->len; i++) {
        double d = absd(share(t->n[i].total, total) - share(t->n[i].base, o->base_total));
        if (t->n[i].total && d > dmax) dmax = d;
    }
    header(&b, t, o, height);
    rp_buf_puts(&b, "<g id=\"frames\">\n");
    for (size_t i = 0; i < t->len; i++) {
        const struct fg_node *n = &t->n[i];
        double w = (double)n->total * scale;
        if (w < SVG_MIN_WIDTH) continue;
        double x = SVG_XPAD + (double)n->x * scale;
        double y = SVG_TOP + (double)(t->maxdepth - n->depth) * SVG_FRAME_H;
        rp_buf_reset(&disp);
        rp_escape_str(&disp, rp_fg_text(t, n), RP_ESC_DISPLAY);
        const char *d = disp.p ? disp.p : "";
        rp_buf_printf(&b, "<g class=\"%s\"><title>", kind_class(n->kind));
        rp_escape_str(&b, d, RP_ESC_XML);
        frame_title(&b, n, o, total);
        rp_buf_printf(&b,
                      "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"", x,
                      y, w, SVG_FRAME_H - 1);
        if (o->diff)
            diff_colour(&b, share(n->total, total) - share(n->base, o->base_total), dmax);
        else
            colour(&b, d, n->kind);
        rp_buf_printf(&b, "\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3,
                      y + SVG_FRAME_H - 4.5);
        label(&b, d, w);
        rp_buf_puts(&b, "</text></g>\n");
        if (b.len >= 1 << 16) {
            if (b.oom) goto oom;
            if ((rc = rp_fwrite(f, b.p, b.len, "SVG output", err))) goto out;
            rp_buf_reset(&b);
        }
    }
    rp_buf_puts(&b, "</g>\n</svg>\n");
    if (b.oom || disp.oom) goto oom;
    if (!(rc = rp_fwrite(f, b.p, b.len, "SVG output", err))) rc = rp_fflush(f, "SVG output", err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "SVG output: out of memory");
    rc = -ENOMEM;
out:
    rp_buf_free(&b);
    rp_buf_free(&disp);
    return rc;
}
