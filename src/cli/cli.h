/* cli/cli.h: the subcommands. Each returns the process exit status. */
#ifndef SS_CLI_H
#define SS_CLI_H

#include "cli/opts.h"

int ss_cmd_record(const struct ss_cli *c);
int ss_cmd_replay(const struct ss_cli *c); /* replay and report */
int ss_cmd_agent(const struct ss_cli *c);
int ss_cmd_info(const struct ss_cli *c);
int ss_cmd_diff(const struct ss_cli *c);
int ss_cmd_top(const struct ss_cli *c);
int ss_cmd_bpf_info(const struct ss_cli *c);

/* DEBUGINFOD_URLS set: the fetch timeout in seconds (DEBUGINFOD_TIMEOUT,
 * libdebuginfod's own variable; 30 when unset), else 0 (no fetching). */
double ss_cli_debuginfod_timeout(void);

#endif
