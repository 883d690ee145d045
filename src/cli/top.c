/* cli/top.c: `stacksnap top` (placeholder until the live view lands). */
#include <stdio.h>

#include "cli/cli.h"

int ss_cmd_top(const struct ss_cli *c)
{
    (void)c;
    fprintf(stderr, "stacksnap: top: not built yet\n");
    return 1;
}
