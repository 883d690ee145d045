/* cli/outputs: the `-o FILE` set of one run — an aggregated report feeding
 * every report sink, plus summary counters. record and replay share it. */
#ifndef SS_CLI_OUTPUTS_H
#define SS_CLI_OUTPUTS_H

#include <stdbool.h>

#include "cli/opts.h"
#include "stacksnap/report.h"

struct ss_pcount {
    uint32_t pid;
    char comm[16];
    uint64_t samples;
};

struct ss_outputs {
    struct ss_report *rep;
    struct ss_report_sink *sinks[SS_MAX_OUTPUTS];
    int nsinks;
    bool aggregate; /* feed rep (some output or command needs it) */
    bool off_cpu;   /* counts are microseconds off the CPU */
    /* summary */
    uint64_t samples, lua, errors;
    uint64_t lua_unproven; /* Lua frames left out as not proven (ss_stack_unproven) */
    /* samples by ss_stack_facts: truncated (the walk or a Lua chain), cut at
     * trace code the Lua walk could not claim, with stale scan candidates
     * refused, through code without CFI, and those of them at the root */
    uint64_t truncated, trace_cut, scan_stale, nocfi, nocfi_root;
    struct ss_pcount *procs;
    size_t nprocs, cap;
};

/* Open every non-capture output of c (fails before any work is done when a
 * path cannot be written). Returns 0 or an exit status (1/2) after printing. */
int ss_outputs_open(struct ss_outputs *o, const struct ss_cli *c, uint32_t freq);
/* The clock and host of OTLP outputs: the capture header's (replay) or the
 * one a live capture gets (record); service.name from $OTEL_SERVICE_NAME,
 * else each process's command name. Returns 0 or 1 after printing. */
struct ss_snap_header;
int ss_outputs_set_clock(struct ss_outputs *o, const struct ss_snap_header *h);
/* Exit status for an output path that cannot be opened (negative errno):
 * 2 when the path is the cause (bad input), 1 for resource failures. */
int ss_cli_open_status(int code);
/* A process record (the capture's, live or replayed): the report labels the
 * process with its exe and cgroup (OTLP's process.executable.path and
 * container.id, pprof's exe and cgroup labels). Returns 0 or 1 after printing. */
struct ss_snap_process;
int ss_outputs_process(struct ss_outputs *o, const struct ss_snap_process *p);
/* pid has a stack accounted already. */
bool ss_outputs_knows(const struct ss_outputs *o, uint32_t pid);
/* Account one walked stack. */
int ss_outputs_add(struct ss_outputs *o, const struct ss_stack *st);
/* A debug file of build-id id arrived in u: rename the frames aggregated so
 * far (streamed outputs keep what they wrote). Returns 0 or 1 after printing. */
struct ss_unwinder;
int ss_outputs_rename(struct ss_outputs *o, struct ss_unwinder *u, const uint8_t *id, size_t len);
/* Write aggregated formats, close everything. Returns 0 or 1 after printing. */
int ss_outputs_close(struct ss_outputs *o);
/* Close (if not yet) and free the summary state. */
void ss_outputs_free(struct ss_outputs *o);
/* "N samples (comm pid: n, ...), L% with Lua frames, T% truncated (N samples)",
 * then the counts of what the walks cut or stepped over (ss_stack_facts) */
void ss_outputs_summary(const struct ss_outputs *o, FILE *f);
/* --off-cpu's counters (ss_capture_stats off_*): "stacksnap: off-CPU: N
 * waits, S shorter than M us, U not in a system call (no sample)"; min_us 0:
 * "than the threshold" (a replay does not know it). */
void ss_outputs_offcpu_summary(FILE *f, uint64_t waits, uint64_t shorter, uint64_t unmatched,
                               unsigned min_us);
/* The native walks' steps (record -v; replay with STACKSNAP_CHECK_RULES):
 * "stacksnap: native steps: R by rules, S by the slow path", with checked:
 * "; C rule steps checked, D differ". */
struct ss_unwinder_stats;
void ss_outputs_native_steps(FILE *f, const struct ss_unwinder_stats *st, bool checked);

#endif
