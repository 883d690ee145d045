/* stacksnap diff API: two profiles (BEFORE and AFTER) side by side, by
 * folded stack, written as a differential flame graph, a table of functions
 * by change in share, or difffolded lines.
 *
 * A side is fed from folded text, an aggregated report (.snap replays) or a
 * gzipped pprof profile; every input becomes folded stacks
 * ("comm;root;...;leaf", report.h escapes) with counts, so the three kinds
 * compare with each other. Shares are of each side's own total.
 *
 * Errors: negative errno + message in struct ss_err (bad input -EINVAL,
 * naming the file and line). Nothing here prints except to the FILE * it is
 * given. */
#ifndef STACKSNAP_DIFF_H
#define STACKSNAP_DIFF_H

#include <stdint.h>
#include <stdio.h>

#include "stacksnap/report.h"
#include "stacksnap/ss.h"

enum ss_diff_side { SS_DIFF_BEFORE = 0, SS_DIFF_AFTER = 1 };

struct ss_diff;
struct ss_diff *ss_diff_new(struct ss_err *err);
void ss_diff_free(struct ss_diff *d);

/* Folded lines "STACK COUNT" (name: for messages). Empty lines are skipped;
 * a line without a count is -EINVAL "NAME:LINE: ...". */
int ss_diff_add_folded(struct ss_diff *d, enum ss_diff_side side, FILE *f, const char *name,
                       struct ss_err *err);
/* Every stack of an aggregated report (its folded text). */
int ss_diff_add_report(struct ss_diff *d, enum ss_diff_side side, const struct ss_report *r,
                       struct ss_err *err);
/* A gzipped (or plain) pprof profile: the "samples" value (else the first),
 * stacks from locations (inlined lines expanded), root = the "comm" label
 * ("[unknown]" without); a Function with a filename is "NAME (FILE:LINE)". */
int ss_diff_add_pprof(struct ss_diff *d, enum ss_diff_side side, FILE *f, const char *name,
                      struct ss_err *err);
/* What a side is called in titles (copied; default "before"/"after"). */
int ss_diff_set_name(struct ss_diff *d, enum ss_diff_side side, const char *name);

uint64_t ss_diff_samples(const struct ss_diff *d, enum ss_diff_side side);

/* "STACK BEFORE AFTER" lines, sorted bytewise by stack. */
int ss_diff_write_folded(const struct ss_diff *d, FILE *f, struct ss_err *err);
/* Table of functions (Lua lines of one function merged: NAME (CHUNK)): self
 * and total share on each side and their change, biggest change (self or
 * total, in points) first. n = 0: all rows. */
int ss_diff_write_table(const struct ss_diff *d, FILE *f, unsigned n, struct ss_err *err);
/* Differential flame graph: AFTER's shape; red where a frame's share grew,
 * blue where it shrank; hover shows both sides and the change. */
int ss_diff_write_svg(const struct ss_diff *d, FILE *f, struct ss_err *err);
/* By extension: .svg, .txt (table), .folded; "-" writes the table to stdout.
 * Errors name the path. */
int ss_diff_save(const struct ss_diff *d, const char *path, struct ss_err *err);

#endif
