/* unwind/sideband_view.h: the view of a process gone before its maps were
 * read, from the side band's log at a sample's time (sideband_view.c). */
#ifndef SS_UNWIND_SIDEBAND_VIEW_H
#define SS_UNWIND_SIDEBAND_VIEW_H

#include <stdbool.h>
#include <stdint.h>

struct ss_unwinder;
struct ss_proc;

/* The view of pid at time_ns (-ESRCH: nothing logged, or the sample's ip in
 * no file it mapped: a view that cannot walk it; ss_proc_in_file). */
int ss_sideband_view(struct ss_unwinder *u, uint32_t pid, uint64_t time_ns, uint64_t ip,
                     struct ss_proc **out);
/* Drop a process's log (its exit). */
void ss_sideband_forget(struct ss_unwinder *u, uint32_t pid);
void ss_sideband_free(struct ss_unwinder *u);

#endif
