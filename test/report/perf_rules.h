/* test/report/perf_rules: how FlameGraph's stackcollapse-perf.pl,
 * speedscope and the Firefox Profiler read perf-script text, reimplemented
 * in C from their rules:
 *  - event line: stackcollapse ^(\S.+?)\s+(\d+)\/?(\d+)?\s+ (shortest comm of
 *    >= 2 chars), comm spaces -> '_'; speedscope the same shape plus the
 *    time \s+(\d+\.\d+):\s+ and event (\S+):\s*$; Firefox greedy
 *    ^(.*)\s+([\d.]+): then ^(.*)\s+(?:(\d+)\/)?(\d+)\b, name trimmed
 *  - frame line (all three): ^\s*(\w+)\s*(.+) \((\S*)\), then strip a
 *    trailing +0x[\da-f]+
 *  - stackcollapse then: --kernel adds _[k] for modules matching kernel. or
 *    vmlinux$; skips symbols starting with '('; splits at "->" (inlines get
 *    _[i]); [unknown] becomes [module basename]; tidy: ';' -> ':', cut at the
 *    first '(' (unless Go-style .(...). or "(anonymous namespace)"), drop
 *    quotes; a blank line ends a sample (comm first, root ... leaf). */
#ifndef SS_TEST_REPORT_PERF_RULES_H
#define SS_TEST_REPORT_PERF_RULES_H

#include "fixture.h"

struct sc {
    struct fx_lines out; /* canonical "stack count" lines */
    size_t unrecognized;
};
struct sc stackcollapse(const char *text, int annotate_kernel);
int sc_frame(const char *line, char **func, char **mod);
char *sc_tidy(const char *func);

struct event {
    char *comm;
    unsigned long pid, tid;
    double time;
    char *name;
};
int ss_event(const char *line, struct event *e); /* speedscope */
int ff_event(const char *line, struct event *e); /* Firefox Profiler */

#endif
