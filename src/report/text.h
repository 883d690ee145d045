/* report/text: frame text (DESIGN.md) and the escapes every writer uses
 * (documented in include/stacksnap/report.h). */
#ifndef SS_REPORT_TEXT_H
#define SS_REPORT_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "report/table.h"

enum rp_esc {
    RP_ESC_DISPLAY,   /* controls and invalid UTF-8 -> \xHH */
    RP_ESC_FOLDED,    /* display + '\' -> \\, ';' -> \x3b */
    RP_ESC_PERF_SYM,  /* display + '\' -> \\, ( ) ; " ' and '>' of "->" -> \xHH */
    RP_ESC_PERF_DSO,  /* display + ' ' -> \x20 */
    RP_ESC_PERF_COMM, /* display + ';', leading ' ', ' ' before a digit -> \xHH */
    RP_ESC_XML,       /* display + & < > " ' as entities */
};
/* Append s (n bytes) to b escaped for mode. */
void rp_escape(struct rp_buf *b, const char *s, size_t n, enum rp_esc mode);
static inline void rp_escape_str(struct rp_buf *b, const char *s, enum rp_esc mode)
{
    rp_escape(b, s, strlen(s), mode);
}
/* Length of the valid UTF-8 sequence (a non-control char) at s, 0 if invalid. */
size_t rp_utf8_seq(const unsigned char *s, size_t n);

const char *rp_basename(const char *path);

/* The fields frame text is built from (ss_frame or the report's copy). */
struct rp_frame_view {
    uint8_t kind;
    uint64_t addr, offset;
    const char *name, *module; /* NULL or "" = unknown */
    uint32_t line, first_line;
};
/* Append the raw frame text (report.h); func != 0: the top-table function
 * name (Lua: first_line instead of line). */
void rp_frame_text(struct rp_buf *b, const struct rp_frame_view *f, int func);

#endif
