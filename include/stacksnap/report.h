/* stacksnap report API: aggregate walked stacks and write them as folded
 * stacks, pprof (.pb.gz), an SVG flame graph, a top table, or (streamed,
 * per sample) perf-script text.
 *
 * Frame text (DESIGN.md; the same in folded, SVG, top and pprof names):
 *   native  symbol name, else MODULE+0xOFFSET (module basename, file offset;
 *           "[unknown]+0xADDR" when the module is unknown too)
 *   kernel  as native, then "_[k]" (no module: "[kernel.kallsyms]+0xADDR_[k]")
 *   Lua     NAME (CHUNK:LINE); NULL NAME is "anonymous"; a frame without a
 *           chunk (builtin / fast function) is just NAME
 *   pseudo  its name ("[unknown]" if NULL)
 * The top table names Lua functions NAME (CHUNK:FIRST_LINE), i.e. by the line
 * of definition, so that every line of one function adds up.
 *
 * Escapes. Every writer emits valid UTF-8 without control characters: a byte
 * that is a control character (0x00-0x1f, 0x7f) or not part of a valid UTF-8
 * sequence is written as \xHH ("display" text; used as-is by pprof, SVG and
 * top, XML-escaped in the SVG). The folded format additionally writes a
 * backslash as \\ and ';' as \x3b, so a folded line always splits at ';' into
 * exactly the frames and the escape is reversible (\\ -> \, \xHH -> byte).
 * Spaces are kept (the count is the last space-separated field). perf-script
 * text: see ss_perf_writer below.
 *
 * Errors: negative errno + message in struct ss_err. Nothing here prints
 * except to the FILE * it is given. */
#ifndef STACKSNAP_REPORT_H
#define STACKSNAP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stacksnap/ss.h"

/* ---- formats ---- */
enum ss_report_format {
    SS_REPORT_NONE = 0, /* unknown extension */
    SS_REPORT_FOLDED,   /* .folded, and "-" (stdout) */
    SS_REPORT_PPROF,    /* .pb.gz */
    SS_REPORT_SVG,      /* .svg */
    SS_REPORT_PERF,     /* .txt (perf-script text, streamed) */
    SS_REPORT_SNAP,     /* .snap: a capture, not written by report/ */
    SS_REPORT_OTLP,     /* .otlp: an OTLP ExportProfilesServiceRequest (protobuf) */
};
/* By extension; "-" is folded to stdout. */
enum ss_report_format ss_report_format_of_path(const char *path);
/* By --format name: folded, pprof, svg, txt, snap, otlp. */
enum ss_report_format ss_report_format_of_name(const char *name);
const char *ss_report_format_name(enum ss_report_format f);

/* ---- aggregation ---- */
struct ss_report_opts {
    uint32_t freq_hz;      /* sampling frequency; pprof period = 1e9/freq ns (0: 99) */
    int64_t wall_start_ns; /* wall-clock start (pprof time_nanos); 0 = unknown */
    const char *title;     /* SVG title; NULL = "stacksnap flame graph" (copied) */
    bool off_cpu;          /* --off-cpu: every ss_report_add count is microseconds off the
                              CPU (one sample per call): folded counts are microseconds,
                              pprof has samples/count and off_cpu/nanoseconds, the SVG and
                              the top table say time */
    bool timestamps;       /* keep every add's time and count (OTLP writes them as
                              timestamps_unix_nano and values of its samples) */
};

/* Stacks keyed by pid, tid, comm and the identity of every frame (kind,
 * build-id, addr, offset, name, module, line, first_line), with counts. The
 * report copies all strings it needs: the producer may free its context
 * after ss_report_add returns. */
struct ss_report;
struct ss_report *ss_report_new(const struct ss_report_opts *opts, struct ss_err *err);
void ss_report_free(struct ss_report *r);
/* Add `count` samples of stack s (count 0 is a no-op). -ENOMEM, -EINVAL.
 * A stack without frames is counted as one pseudo frame SS_REPORT_NO_FRAMES
 * in every writer (pprof views would drop a sample without locations). */
#define SS_REPORT_NO_FRAMES "[no frames]"
int ss_report_add(struct ss_report *r, const struct ss_stack *s, uint64_t count,
                  struct ss_err *err);
/* Process labels for pprof (exe path, cgroup or container id; NULL or "":
 * unknown), written on every sample of pid. -ENOMEM. */
int ss_report_set_labels(struct ss_report *r, uint32_t pid, const char *exe, const char *cgroup,
                         struct ss_err *err);
/* Rename native frames already aggregated (a debug file of their module
 * arrived): fn gets each one and returns true with out filled to rename it
 * (name, system_name, sym_offset). Returns the number renamed or -ENOMEM.
 * Stacks keep their counts; writers see the new names. */
typedef bool (*ss_report_namer_fn)(void *ctx, const struct ss_frame *in, struct ss_frame *out);
int ss_report_rename(struct ss_report *r, ss_report_namer_fn fn, void *ctx, struct ss_err *err);
uint64_t ss_report_samples(const struct ss_report *r); /* sum of counts */
/* The count an off-CPU stack adds (opts.off_cpu): its weight in
 * microseconds, rounded, at least 1. */
uint64_t ss_report_weight_us(const struct ss_stack *s);
size_t ss_report_nstacks(const struct ss_report *r); /* distinct keys */

/* ---- writers over an aggregated report (write errors -> -EIO) ---- */
/* comm;root;...;leaf COUNT, one line per distinct text, sorted bytewise. An
 * empty comm is "[unknown]". */
int ss_report_write_folded(const struct ss_report *r, FILE *f, struct ss_err *err);
/* gzipped pprof Profile: sample types samples/count, cpu/nanoseconds; period
 * type cpu/nanoseconds; one sample per key with labels pid, tid (numbers),
 * comm, and exe/cgroup where ss_report_set_labels gave them; native frames are locations with
 * mapping (module, build-id, range, file offset) + address and one Line whose Function is the frame
 * text; Lua frames have one Line: Function{name NAME, filename CHUNK, start_line FIRST_LINE}, line
 * LINE; kernel/pseudo frames have no mapping. */
int ss_report_write_pprof(const struct ss_report *r, FILE *f, struct ss_err *err);
/* OTLP profiles (opentelemetry.proto.profiles.v1development, proto release
 * 1.11.0): an ExportProfilesServiceRequest, uncompressed, one ResourceProfiles
 * per process (docs/otlp.md has the mapping). -ENOTSUP when the build has no
 * OTLP (ss_report_otlp_built). */
int ss_report_write_otlp(const struct ss_report *r, FILE *f, struct ss_err *err);
bool ss_report_otlp_built(void);
/* The wall clock and host for OTLP: CLOCK_REALTIME minus the sample clock
 * (samples' time_ns), the host name, and service.name for every process
 * (NULL: each process's command name). -ENOMEM. */
int ss_report_set_clock(struct ss_report *r, int64_t mono_to_real_ns, const char *host,
                        const char *service, struct ss_err *err);
/* Self-contained interactive flame graph (root at the bottom). */
int ss_report_write_svg(const struct ss_report *r, FILE *f, struct ss_err *err);
/* Table of functions by self samples: self, self%, total, total% (a function
 * counted once per stack), kind, name. n = 0: all rows. */
int ss_report_write_top(const struct ss_report *r, FILE *f, unsigned n, struct ss_err *err);
/* FOLDED, PPROF, SVG or OTLP by format; anything else is -EINVAL. */
int ss_report_write(const struct ss_report *r, enum ss_report_format fmt, FILE *f,
                    struct ss_err *err);
/* Write to a path by its extension ("-" = folded to stdout). Errors name the path. */
int ss_report_save(const struct ss_report *r, const char *path, struct ss_err *err);

/* ---- perf-script text, streamed per sample ----
 * Per sample: "COMM PID/TID [CPU] SECS.USECS: PERIOD cpu-clock:" then one
 * line per frame, leaf first, "\tADDR SYM (DSO)", then a blank line.
 *   native  SYM = symbol or "[unknown]", DSO = module path
 *   kernel  SYM = symbol or "[unknown]", DSO = module or "[kernel.kallsyms]"
 *   Lua     SYM = "NAME [CHUNK:LINE]" (builtin: "NAME"), DSO = "[lua]"
 *   pseudo  SYM = name, DSO = "[stacksnap]"
 * ADDR is the pc for native and kernel frames, 0 for Lua and pseudo frames.
 * so stackcollapse-perf.pl, speedscope and the Firefox Profiler keep Lua
 * names and lines (they cut a symbol at its first '('). Escapes on top of the
 * display escape: Lua/pseudo symbols write \ ( ) ; " ' and the '>' of "->"
 * as \xHH (\\ for backslash); DSOs write spaces as \x20; COMM writes ';', a
 * leading space and a space before a digit as \xHH (so "COMM PID" parses).
 * No symbol offset is written: frames do not carry the symbol start.
 * The writer hands the FILE its text in pieces of 64 KiB (and the rest at
 * finish): an add returns the error of the piece it wrote, if it wrote one. */
struct ss_perf_writer;
struct ss_perf_writer *ss_perf_writer_new(FILE *f, uint32_t freq_hz, struct ss_err *err);
int ss_perf_writer_add(struct ss_perf_writer *w, const struct ss_stack *s, struct ss_err *err);
/* Flush, report any write error, free w (always). */
int ss_perf_writer_finish(struct ss_perf_writer *w, struct ss_err *err);

/* ---- one output file (what `-o FILE` needs) ----
 * Opened at once so a bad path fails before recording starts. Streams .txt
 * samples as they are added; writes aggregated formats at close. */
struct ss_report_sink;
/* fmt SS_REPORT_NONE: by the path's extension. SNAP is -EINVAL. */
struct ss_report_sink *ss_report_sink_open(const char *path, enum ss_report_format fmt,
                                           uint32_t freq_hz, struct ss_err *err);
enum ss_report_format ss_report_sink_format(const struct ss_report_sink *s);
/* Streams into .txt sinks; no-op for the others. */
int ss_report_sink_add(struct ss_report_sink *s, const struct ss_stack *st, struct ss_err *err);
/* Write r (aggregated formats) and close; r may be NULL for .txt or to just
 * close. Frees s (always). */
int ss_report_sink_close(struct ss_report_sink *s, const struct ss_report *r, struct ss_err *err);

/* ---- frame text ----
 * Raw (unescaped) frame text as above, snprintf-style: returns the length it
 * needs, writes at most len bytes including the NUL. */
size_t ss_frame_text(const struct ss_frame *f, char *buf, size_t len);
/* "native", "lua", "kernel", "pseudo" ("?" for others). */
const char *ss_frame_kind_str(uint8_t kind);

#endif
