/* test/cli/counts.c: the counts a run reports (counts.h), read from the
 * summary line and from `stacksnap info`. */
#include "counts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

long long cnt_summary(const char *err, const char *what)
{
    const char *p = err ? strstr(err, what) : NULL;
    if (!p) return -1;
    const char *b = p;
    while (b > err && b[-1] >= '0' && b[-1] <= '9')
        b--;
    return b < p ? atoll(b) : -1;
}

long long cnt_info(const char *snap, const char *name)
{
    char *argv[] = {(char *)cli_ss(), "info", (char *)snap, NULL};
    struct cli_res r;
    if (cli_run(&r, 60, argv) != 0) return -1;
    long long v = r.status == 0 ? 0 : -1;
    char want[128];
    snprintf(want, sizeof(want), "\ncounter      %s ", name); /* (names padded with spaces) */
    const char *p = r.status == 0 ? strstr(r.out, want) : NULL;
    if (p) v = atoll(p + strlen(want));
    cli_res_free(&r);
    return v;
}
