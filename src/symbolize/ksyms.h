/* symbolize/ksyms.h: kernel symbols for kernel frames (--kernel).
 *
 * Live: the text symbols of /proc/kallsyms, modules included (a symbol of
 * module M is named NAME, its module M). A symbol covers [start, end): end
 * is the next symbol's address. Every symbol a lookup returns is marked
 * used, and the newly used ones are handed to the capture writer
 * (ss_ksyms_take_new), which records them (capture record type 11); replay
 * builds a table of just those (ss_ksyms_add), so the same addresses get the
 * same names anywhere. */
#ifndef SS_SYMBOLIZE_KSYMS_H
#define SS_SYMBOLIZE_KSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"
#include "stacksnap/unwind.h" /* struct ss_ksym */

struct ss_ksyms;

/* Load path (NULL: /proc/kallsyms). -EACCES when every address reads as 0
 * (kernel.kptr_restrict, or reading without CAP_SYSLOG); err says so. */
int ss_ksyms_load(struct ss_ksyms **out, const char *path, struct ss_err *err);
/* An empty table for replay. */
int ss_ksyms_new(struct ss_ksyms **out);
/* Replay: a recorded symbol. 0 or -ENOMEM. */
int ss_ksyms_add(struct ss_ksyms *k, const struct ss_ksym *s);
/* The symbol containing addr, or NULL; marks it used. */
const struct ss_ksym *ss_ksyms_find(struct ss_ksyms *k, uint64_t addr);
/* Symbols first used since the last call: fn for each. */
void ss_ksyms_take_new(struct ss_ksyms *k, void (*fn)(void *ctx, const struct ss_ksym *s),
                       void *ctx);
size_t ss_ksyms_count(const struct ss_ksyms *k);
void ss_ksyms_free(struct ss_ksyms *k);

#endif
