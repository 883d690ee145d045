/* cli/topview: the full-screen view of `stacksnap top` (ncurses), fed by
 * record's sampling loop: stacks go into a live top model
 * (stacksnap/top.h); once a second the screen shows the functions by self
 * or total share over the last seconds and cumulatively. Keys: q quit, s
 * sort by self/total, l Lua by function/line, p next process, a every
 * process, space pause. ^C ends record's loop like q. */
#ifndef SS_CLI_TOPVIEW_H
#define SS_CLI_TOPVIEW_H

#include "cli/opts.h"
#include "stacksnap/capture.h"
#include "stacksnap/ss.h"

struct ss_topview;

/* Take over the terminal (stdout must be one). NULL after printing. */
struct ss_topview *ss_topview_open(const struct ss_cli *c);
void ss_topview_add(struct ss_topview *v, const struct ss_stack *st);
/* Keys, and the screen once a second. Returns 1 when the user quit. */
int ss_topview_tick(struct ss_topview *v, double now, struct ss_capture *cap,
                    unsigned long long unwind_errors);
/* Restore the terminal, free v. */
void ss_topview_close(struct ss_topview *v);

#endif
