/* cli/opts: the command-line contract of DESIGN.md, parsed into plain structs.
 * Only cli/ knows about flags. */
#ifndef SS_CLI_OPTS_H
#define SS_CLI_OPTS_H

#include <stdbool.h>
#include <sys/types.h>

#include "stacksnap/report.h"

#define SS_MAX_OUTPUTS 16
#define SS_MAX_PIDS 256
#define SS_MAX_OTLP_HEADERS 16

struct ss_output {
    const char *path; /* "-" = stdout */
    enum ss_report_format fmt;
};

struct ss_cli {
    const char *cmd; /* record | agent | top | replay | report | diff | info */
    /* record */
    pid_t pids[SS_MAX_PIDS];
    int npids;
    bool all;
    char **command; /* argv after "--", NULL-terminated */
    unsigned freq;
    double duration; /* seconds, 0 = until done */
    unsigned stack_size;
    bool bundle, kernel, compat, verbose, bpf_info, no_lua_window;
    bool no_stack_bytes;     /* record: the capture keeps the walked frames only */
    bool off_cpu;            /* --off-cpu (record, agent) */
    unsigned off_cpu_min_us; /* --off-cpu-min-us, default 100 */
    bool off_cpu_min_set;
    /* agent */
    const char *listen, *capture_dir, *push_url;
    const char *web_config, *auth_token_file, *push_ca, *push_auth_file; /* files */
    bool healthz_open;
    unsigned long long capture_max_bytes;
    unsigned capture_segment, push_every, max_seconds;
    const char *otlp_url;                          /* --otlp */
    const char *otlp_headers[SS_MAX_OTLP_HEADERS]; /* --otlp-header K=V */
    unsigned n_otlp_headers;
    /* replay / report / info */
    const char *capture; /* diff: BEFORE */
    const char *after;   /* diff: AFTER */
    const char *symfs;
    int top;
    /* outputs */
    struct ss_output out[SS_MAX_OUTPUTS];
    int nout;
    const char *format; /* --format overrides the extension for every -o */
};

/* Parse argv. Returns 0, or 2 after printing a usage error to stderr;
 * 1 when help was printed (caller exits 0). */
int ss_cli_parse(struct ss_cli *c, int argc, char **argv);
void ss_cli_usage(const char *cmd);

#endif
