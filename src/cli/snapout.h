/* cli/snapout: the `.snap` output of record — header, process records that
 * follow the unwinder's view of each process, samples with their target
 * reads, counters, and with --bundle the mapped ELF files. */
#ifndef SS_CLI_SNAPOUT_H
#define SS_CLI_SNAPOUT_H

#include "cli/opts.h"
#include "stacksnap/capture.h"
#include "stacksnap/unwind.h"

struct ss_snapout;

/* Returns 0 or an exit status after printing. */
int ss_snapout_open(struct ss_snapout **out, const struct ss_cli *c, const char *path);
/* Route the unwinder's target reads into the capture. */
void ss_snapout_hook(struct ss_snapout *so, struct ss_unwinder_opts *uo);
/* After ss_unwind of s: process record if needed, then the sample. */
int ss_snapout_sample(struct ss_snapout *so, struct ss_unwinder *u, const struct ss_sample *s);
/* A sample record does not write (the live walk failed): drop its reads. */
void ss_snapout_skip(struct ss_snapout *so);
/* Push buffered records to the file (record calls it about once a second, so
 * a SIGKILL loses little). 0 or -1 after printing. */
int ss_snapout_flush(struct ss_snapout *so);
/* Counters, trailer, close. 0 or -1 after printing. */
int ss_snapout_close(struct ss_snapout *so, struct ss_capture *cap, struct ss_unwinder *u);

#endif
