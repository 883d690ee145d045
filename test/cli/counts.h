/* test/cli/counts.h: the counts a run reports, as the tests read them:
 * record's (and replay's) summary line and a capture's counters in `info`
 * (counts.c). */
#ifndef SS_TEST_CLI_COUNTS_H
#define SS_TEST_CLI_COUNTS_H

/* The number right before what (" reached the root through code without
 * CFI", " cut at trace code", ...) on the summary line err; -1 when the
 * clause is not there. */
long long cnt_summary(const char *err, const char *what);
/* The value of counter name in `stacksnap info snap` (0: info leaves zero
 * counters out); -1 when info fails. */
long long cnt_info(const char *snap, const char *name);

#endif
