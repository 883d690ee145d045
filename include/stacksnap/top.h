/* stacksnap live top model: what `stacksnap top` shows, without the
 * screen. Walked stacks go in as they arrive; functions (Lua and native) are
 * counted per process by self (leaf) and total (anywhere in the stack, once
 * per stack) samples, cumulatively and per second over a sliding window of
 * the last SS_TOP_WINDOW seconds. Lua frames are counted at two
 * granularities: the function (NAME (CHUNK:FIRST_LINE), as the top table)
 * and the line (NAME (CHUNK:LINE), as folded stacks); a query picks one.
 * Names are display text (report.h escapes). Nothing here prints. */
#ifndef STACKSNAP_TOP_H
#define STACKSNAP_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"

#define SS_TOP_WINDOW 5 /* seconds in the sliding window */

struct ss_top;
struct ss_top *ss_top_new(struct ss_err *err);
void ss_top_free(struct ss_top *t);
/* Count one stack in the current second. 0 or -ENOMEM. */
int ss_top_add(struct ss_top *t, const struct ss_stack *s);
/* Start a new second: the oldest second leaves the window. */
void ss_top_tick(struct ss_top *t);

enum ss_top_sort { SS_TOP_SORT_SELF = 0, SS_TOP_SORT_TOTAL = 1 };
struct ss_top_query {
    enum ss_top_sort sort;
    bool lua_lines; /* Lua by line instead of by function */
    uint32_t pid;   /* 0: every process */
};
struct ss_top_row {
    const char *name; /* valid until the next ss_top_add */
    uint8_t kind;     /* enum ss_frame_kind */
    uint64_t self_win, total_win, self_all, total_all;
};
struct ss_top_view {
    struct ss_top_row *rows; /* sorted: window share first, then cumulative */
    size_t nrows;
    uint64_t samples_win, samples_all; /* of the selected processes */
    unsigned window_s;                 /* seconds the window holds so far */
};
/* Rows for a query, into v (reused; free with ss_top_view_free). 0 or -ENOMEM. */
int ss_top_query(struct ss_top *t, const struct ss_top_query *q, struct ss_top_view *v);
void ss_top_view_free(struct ss_top_view *v);

/* Processes seen, by pid (ascending): pid and comm of the i-th; false past the end. */
bool ss_top_process(const struct ss_top *t, size_t i, uint32_t *pid, const char **comm);

#endif
