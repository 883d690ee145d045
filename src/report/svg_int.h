/* report/svg_int: the flame tree and writer shared by the flame graph
 * (svg.c) and the differential flame graph (diff_svg.c), and the geometry
 * shared by the writer and its script. */
#ifndef SS_REPORT_SVG_INT_H
#define SS_REPORT_SVG_INT_H

#include <stdint.h>
#include <stdio.h>

#include "report/table.h"
#include "stacksnap/ss.h"

#define SVG_WIDTH 1200      /* image width as written, px (the script follows the window) */
#define SVG_XPAD 10         /* left/right margin */
#define SVG_FRAME_H 16      /* frame row height */
#define SVG_FONT_SIZE 12    /* label font size, px */
#define SVG_FONT_WIDTH 0.59 /* average glyph width / font size (Verdana-like) */
#define SVG_TOP 76          /* title, subtitle, buttons, legend */
#define SVG_BOTTOM 34       /* details line */
#define SVG_MIN_WIDTH 0.1   /* frames narrower than this (px) are left out */

#define FG_KIND_PROCESS 4
#define FG_KIND_ROOT 5

/* A node: text is a string id in the tree's string table (process nodes: 0
 * = "[unknown]"); total is the width (samples), base the other side's
 * samples of the same node (differential graphs only). */
struct fg_node {
    uint32_t text;
    uint8_t kind;
    uint32_t parent, depth;
    uint64_t total, base;
    uint64_t x;              /* in samples from the left */
    uint32_t nchild, child0; /* children in the CSR array */
};

struct fg_tree {
    const struct rp_strtab *str;
    struct fg_node *n;
    size_t len, cap;
    struct rp_index ix;
    uint32_t maxdepth;
    uint32_t *kids;
};

/* Root node "all" (node 0). 0 or -ENOMEM. */
int rp_fg_init(struct fg_tree *t, const struct rp_strtab *str);
/* The child of parent with that text (created if new); id or -ENOMEM. */
int64_t rp_fg_child(struct fg_tree *t, uint32_t parent, uint32_t text, uint8_t kind);
/* Children sorted by text, x laid out by total. 0 or -ENOMEM. */
int rp_fg_layout(struct fg_tree *t);
void rp_fg_free(struct fg_tree *t);
/* A node's text ("all" for the root). */
const char *rp_fg_text(const struct fg_tree *t, const struct fg_node *n);

struct fg_opts {
    const char *title, *subtitle;
    int diff;            /* colour by share delta (total vs base), hover shows both */
    uint64_t base_total; /* diff: the other side's sample count */
    const char *unit;    /* "sample" */
};
/* Write the laid-out tree as a self-contained SVG. Write errors -> -EIO. */
int rp_fg_write(const struct fg_tree *t, const struct fg_opts *o, FILE *f, struct ss_err *err);

/* The script and style of every flame graph (svg_script.c). */
extern const char rp_svg_style[];
extern const char rp_svg_script[];

#endif
