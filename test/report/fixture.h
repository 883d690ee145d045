/* test/report/fixture: hand-made stacks for the report tests (edge cases:
 * ';' and spaces in names, empty stacks, a 1000-deep stack, non-UTF-8 chunk
 * names, kernel and pseudo frames) and small helpers (temp dirs, running
 * tools, reading files). */
#ifndef SS_TEST_REPORT_FIXTURE_H
#define SS_TEST_REPORT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stacksnap/report.h"
#include "stacksnap/ss.h"

#define FX_DEEP 1000 /* frames in the deep stack */

struct fx_sample {
    struct ss_stack st;
    uint64_t count;
};

/* The corpus: samples with counts; strings are freed by fx_free (the report
 * tests also poison them to prove the report copied what it needs). */
struct fx {
    struct fx_sample *s;
    size_t n;
    uint64_t total;
    char **strs; /* every string of the corpus */
    size_t nstrs, capstrs;
    uint64_t bc; /* next fake bytecode address */
};
void fx_build(struct fx *fx);
void fx_poison(struct fx *fx); /* overwrite every string byte, then keep */
void fx_free(struct fx *fx);
/* Report of the corpus (each sample added count times with count 1 for
 * half of them, once with the count for the others). */
struct ss_report *fx_report(const struct fx *fx, uint32_t freq);

/* A fresh temp dir (removed by fx_rmdir). */
char *fx_tmpdir(void);
void fx_rmdir(char *dir);
char *fx_path(const char *dir, const char *name); /* malloc'd dir/name */
/* Whole file / command output (NUL-terminated, *len set if len). */
char *fx_read(const char *path, size_t *len);
/* Run sh -c cmd; stdout into a malloc'd string; returns exit status or -1. */
int fx_run(const char *cmd, char **out);
int fx_have(const char *prog); /* in PATH */

/* Lines of text (split at '\n', empty last dropped); free with fx_lines_free. */
struct fx_lines {
    char **l;
    size_t n;
};
struct fx_lines fx_split(const char *text);
void fx_lines_free(struct fx_lines *ls);
/* Folded text -> sorted "stack COUNT" lines, merged (sum) by stack. */
struct fx_lines fx_folded_canon(const struct fx_lines *in);
/* Writes report r in format fmt to dir/name and returns the path. */
char *fx_write(const struct ss_report *r, const char *dir, const char *name);

#endif
