/* report/svg_int: geometry shared by the SVG writer and its script. */
#ifndef SS_REPORT_SVG_INT_H
#define SS_REPORT_SVG_INT_H

#define SVG_WIDTH 1200      /* image width, px */
#define SVG_XPAD 10         /* left/right margin */
#define SVG_FRAME_H 16      /* frame row height */
#define SVG_FONT_SIZE 12    /* label font size, px */
#define SVG_FONT_WIDTH 0.59 /* average glyph width / font size (Verdana-like) */
#define SVG_TOP 60          /* title, buttons, legend */
#define SVG_BOTTOM 34       /* details line */
#define SVG_MIN_WIDTH 0.1   /* frames narrower than this (px) are left out */

/* The script and style of every flame graph (svg_script.c). */
extern const char rp_svg_style[];
extern const char rp_svg_script[];

#endif
