/* report/diff_int: the two-sided stack table behind ss_diff (diff.c) as
 * its writers and readers see it. */
#ifndef SS_REPORT_DIFF_INT_H
#define SS_REPORT_DIFF_INT_H

#include "report/report_int.h"
#include "stacksnap/diff.h"

struct ss_diff {
    struct rp_strtab stk; /* folded stack texts; the id indexes cnt */
    uint64_t (*cnt)[2];   /* by stack id: before, after */
    size_t capcnt;
    uint64_t total[2];
    char *name[2];
};

/* Add count samples of one folded stack text (n bytes) to a side. */
int rp_diff_add(struct ss_diff *d, enum ss_diff_side side, const char *stack, size_t n,
                uint64_t count);
/* Folded frame text -> display text: \\ -> \, \x3b -> ; (the rest stays). */
void rp_unfold(struct rp_buf *b, const char *s, size_t n);
/* The kind a frame's text says (report.h frame text). */
uint8_t rp_kind_of_text(const char *s, size_t n);

#endif
