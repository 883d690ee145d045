/* report/svg: the flame graph. Merges the stacks into a tree by frame text
 * (root "all", then the process's comm, then frames root first), lays it out
 * (children sorted by text, width by samples, root at the bottom) and writes
 * a self-contained SVG whose script (svg_script.c) adds hover details,
 * click-to-zoom and search. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"
#include "report/svg_int.h"

#define KIND_PROCESS 4
#define KIND_ROOT 5

struct node {
    uint32_t text; /* string id; process nodes: comm id (0 = [unknown]) */
    uint8_t kind;
    uint32_t parent, depth;
    uint64_t total;
    uint64_t x;              /* in samples from the left */
    uint32_t nchild, child0; /* children in the CSR array */
};

struct tree {
    const struct ss_report *r;
    struct node *n;
    size_t len, cap;
    struct rp_index ix;
    uint32_t maxdepth;
};

struct node_key {
    const struct tree *t;
    uint32_t parent, text;
    uint8_t kind;
};

static bool node_eq(const void *ctx, uint32_t idx)
{
    const struct node_key *k = ctx;
    const struct node *n = &k->t->n[idx];
    return n->parent == k->parent && n->text == k->text &&
           (n->kind == KIND_PROCESS) == (k->kind == KIND_PROCESS);
}

static int64_t child(struct tree *t, uint32_t parent, uint32_t text, uint8_t kind)
{
    struct node_key k = {t, parent, text, kind};
    uint64_t h = rp_hash_u64(((uint64_t)parent << 32) | text, kind == KIND_PROCESS);
    uint32_t idx;
    if (rp_index_find(&t->ix, h, node_eq, &k, &idx)) return idx;
    if (t->len >= UINT32_MAX - 1 || rp_grow(&t->n, &t->cap, t->len + 1, sizeof(*t->n)) ||
        rp_index_insert(&t->ix, h, (uint32_t)t->len))
        return -ENOMEM;
    uint32_t depth = t->n[parent].depth + 1;
    t->n[t->len] = (struct node){.text = text, .kind = kind, .parent = parent, .depth = depth};
    if (depth > t->maxdepth) t->maxdepth = depth;
    return (int64_t)t->len++;
}

static const char *node_text(const struct tree *t, const struct node *n)
{
    if (n->kind == KIND_ROOT) return "all";
    if (n->kind == KIND_PROCESS && !n->text) return "[unknown]";
    return rp_s(t->r, n->text);
}

static int child_cmp(const void *a, const void *b, void *ctx)
{
    const struct tree *t = ctx;
    const struct node *x = &t->n[*(const uint32_t *)a], *y = &t->n[*(const uint32_t *)b];
    return strcmp(node_text(t, x), node_text(t, y));
}

/* Build the tree and lay out x; returns 0 or -ENOMEM. *kids: CSR children. */
static int build(struct tree *t, uint32_t **kids)
{
    const struct ss_report *r = t->r;
    if (rp_grow(&t->n, &t->cap, 1, sizeof(*t->n))) return -ENOMEM;
    t->n[0] = (struct node){.kind = KIND_ROOT};
    t->len = 1;
    for (size_t i = 0; i < r->nstacks; i++) {
        const struct rp_stack *s = &r->stacks[i];
        t->n[0].total += s->count;
        int64_t cur = child(t, 0, s->comm, KIND_PROCESS);
        if (cur < 0) return -ENOMEM;
        t->n[cur].total += s->count;
        for (uint32_t j = s->nframes; j-- > 0;) {
            const struct rp_frame *fr = &r->frames[r->fids[s->first + j]];
            cur = child(t, (uint32_t)cur, fr->text, fr->kind);
            if (cur < 0) return -ENOMEM;
            t->n[cur].total += s->count;
        }
    }
    /* children, sorted by text; nodes are created after their parent */
    uint32_t *k = calloc(t->len, sizeof(*k));
    if (!k) return -ENOMEM;
    for (size_t i = 1; i < t->len; i++)
        t->n[t->n[i].parent].nchild++;
    uint32_t pos = 0;
    for (size_t i = 0; i < t->len; i++) {
        t->n[i].child0 = pos;
        pos += t->n[i].nchild;
        t->n[i].nchild = 0;
    }
    for (size_t i = 1; i < t->len; i++) {
        struct node *p = &t->n[t->n[i].parent];
        k[p->child0 + p->nchild++] = (uint32_t)i;
    }
    for (size_t i = 0; i < t->len; i++) {
        struct node *p = &t->n[i];
        qsort_r(k + p->child0, p->nchild, sizeof(*k), child_cmp, t);
        uint64_t x = p->x;
        for (uint32_t c = 0; c < p->nchild; c++) {
            t->n[k[p->child0 + c]].x = x;
            x += t->n[k[p->child0 + c]].total;
        }
    }
    *kids = k;
    return 0;
}

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
    case KIND_PROCESS:
        rr = 160 + 40 * v1, gg = 130 + 30 * v1, bb = 210 + 40 * v2;
        break;
    case KIND_ROOT:
        rr = gg = bb = 200;
        break;
    default:
        rr = 205 + 50 * v3, gg = 230 * v1, bb = 55 * v2;
        break; /* native: hot */
    }
    rp_buf_printf(b, "rgb(%d,%d,%d)", rr, gg, bb);
}

static const char *kind_class(uint8_t kind)
{
    switch (kind) {
    case SS_FRAME_LUA:
        return "lua";
    case SS_FRAME_KERNEL:
        return "kernel";
    case SS_FRAME_PSEUDO:
        return "pseudo";
    case KIND_PROCESS:
        return "process";
    case KIND_ROOT:
        return "root";
    }
    return "native";
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

static void legend(struct rp_buf *b)
{
    static const struct {
        uint8_t kind;
        const char *name;
    } items[] = {{SS_FRAME_LUA, "Lua"},
                 {SS_FRAME_NATIVE, "native"},
                 {SS_FRAME_KERNEL, "kernel"},
                 {SS_FRAME_PSEUDO, "VM state / truncated"},
                 {KIND_PROCESS, "process"}};
    double x = SVG_XPAD;
    for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
        rp_buf_printf(b, "<rect x=\"%.1f\" y=\"36\" width=\"12\" height=\"12\" rx=\"2\" fill=\"",
                      x);
        colour(b, "legend", items[i].kind);
        rp_buf_printf(b, "\"/><text x=\"%.1f\" y=\"46\">%s</text>\n", x + 16, items[i].name);
        x += 16 + strlen(items[i].name) * SVG_FONT_SIZE * SVG_FONT_WIDTH + 18;
    }
}

int ss_report_write_svg(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    struct tree t = {.r = r};
    uint32_t *kids = NULL;
    struct rp_buf b = {0}, disp = {0};
    int rc = 0;
    if (build(&t, &kids)) goto oom;
    uint64_t total = t.n[0].total;
    double scale = total ? (double)(SVG_WIDTH - 2 * SVG_XPAD) / (double)total : 0;
    unsigned height = SVG_TOP + (t.maxdepth + 1) * SVG_FRAME_H + SVG_BOTTOM;

    rp_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
    rp_buf_printf(&b,
                  "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%u\" viewBox=\"0 0 %d %u\" onload=\"init(evt)\" "
                  "data-total=\"%" PRIu64 "\" data-xpad=\"%d\" data-fontsize=\"%d\" "
                  "data-fontwidth=\"%.2f\">\n",
                  SVG_WIDTH, height, SVG_WIDTH, height, total, SVG_XPAD, SVG_FONT_SIZE,
                  SVG_FONT_WIDTH);
    rp_buf_printf(&b, "<style type=\"text/css\"><![CDATA[%s]]></style>\n", rp_svg_style);
    rp_buf_printf(&b, "<script type=\"text/ecmascript\"><![CDATA[%s]]></script>\n", rp_svg_script);
    rp_buf_printf(&b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"url(#bg)\"/>\n",
                  SVG_WIDTH, height);
    rp_buf_puts(&b, "<defs><linearGradient id=\"bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
                    "<stop stop-color=\"#eeeeee\" offset=\"5%\"/>"
                    "<stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient></defs>\n");
    rp_buf_printf(&b, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
    rp_escape_str(&b, r->title, RP_ESC_XML);
    rp_buf_puts(&b, "</text>\n");
    rp_buf_printf(&b,
                  "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
                  SVG_XPAD);
    rp_buf_printf(&b, "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\">Search</text>\n",
                  SVG_WIDTH - SVG_XPAD - 100);
    legend(&b);
    rp_buf_printf(&b, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", SVG_XPAD, height - 12);
    rp_buf_printf(&b, "<text id=\"matched\" x=\"%d\" y=\"%u\"> </text>\n",
                  SVG_WIDTH - SVG_XPAD - 100, height - 12);
    if (!total)
        rp_buf_printf(&b, "<text x=\"%d\" y=\"%d\">No samples.</text>\n", SVG_XPAD,
                      SVG_TOP + SVG_FRAME_H);
    rp_buf_puts(&b, "<g id=\"frames\">\n");
    for (size_t i = 0; i < t.len; i++) {
        const struct node *n = &t.n[i];
        double w = (double)n->total * scale;
        if (w < SVG_MIN_WIDTH) continue;
        double x = SVG_XPAD + (double)n->x * scale;
        double y = SVG_TOP + (double)(t.maxdepth - n->depth) * SVG_FRAME_H;
        rp_buf_reset(&disp);
        rp_escape_str(&disp, node_text(&t, n), RP_ESC_DISPLAY);
        const char *d = disp.p ? disp.p : "";
        rp_buf_printf(&b, "<g class=\"%s\"><title>", kind_class(n->kind));
        rp_escape_str(&b, d, RP_ESC_XML);
        rp_buf_printf(&b,
                      " (%" PRIu64 " sample%s, %.2f%%)</title><rect x=\"%.2f\" y=\"%.1f\" "
                      "width=\"%.2f\" height=\"%d\" fill=\"",
                      n->total, n->total == 1 ? "" : "s", 100.0 * (double)n->total / (double)total,
                      x, y, w, SVG_FRAME_H - 1);
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
    free(t.n);
    free(kids);
    rp_index_free(&t.ix);
    rp_buf_free(&b);
    rp_buf_free(&disp);
    return rc;
}
