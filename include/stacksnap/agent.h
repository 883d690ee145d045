/* stacksnap agent API: the long-running profiling service.
 *
 * One sampling stream (capture/ + unwind/) feeds, per sample:
 *   - every open profile window (GET /debug/pprof/profile?seconds=N[&pid=P],
 *     the Go net/http/pprof contract: a gzipped pprof of the next N seconds);
 *   - the push window (--push: every push_every_s seconds one pprof per
 *     command name, POSTed to Grafana Pyroscope's /ingest, multipart);
 *   - the rolling capture segment (--capture-dir: .snap files that each
 *     replay on their own, the oldest deleted past capture_max_bytes).
 * HTTP (libmicrohttpd) also serves GET /metrics (Prometheus text, counters
 * stacksnap_*) and GET /healthz. Bad requests get HTTP errors.
 *
 * Knows no command-line flags (cli/cmd_agent.c maps them). Errors: negative
 * errno + message; nothing here prints except through opts.log. */
#ifndef STACKSNAP_AGENT_H
#define STACKSNAP_AGENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_agent;

struct ss_agent_opts {
    const pid_t *pids; /* npids == 0: system-wide */
    size_t npids;
    unsigned freq_hz;    /* default 19 */
    unsigned stack_size; /* default SS_STACK_DEFAULT */
    bool compat, no_windows;
    bool off_cpu;       /* --off-cpu: profiles of where threads block, weighted by time */
    unsigned poll_ms;   /* how long samples may wait before they are walked, default 10
                           (record uses 2: each wakeup costs, ~0.7% of a core at 2 ms idle;
                           the Lua state is copied at sample time by the memory windows) */
    const char *listen; /* "HOST:PORT" ("[::1]:PORT"), "unix:PATH"; NULL = 127.0.0.1:7470 */
    /* The Prometheus exporter-toolkit web configuration (YAML: tls_server_config,
     * basic_auth_users), a file holding the bearer token requests must carry;
     * NULL: none. With either, only /healthz may answer without credentials,
     * when healthz_open. */
    const char *web_config, *auth_token_file;
    bool healthz_open;
    unsigned max_seconds;       /* longest profile request, default 300 */
    unsigned max_profiles;      /* profile requests at once, default 4 (then 429) */
    const char *capture_dir;    /* NULL: no rolling captures */
    uint64_t capture_max_bytes; /* default 256 MiB */
    unsigned capture_segment_s; /* default 600 */
    const char *push_url;       /* NULL: no push; else the Pyroscope base URL */
    unsigned push_every_s;      /* default 15 */
    const char *push_ca;        /* CA file that verifies the push server (default: the system's) */
    const char *push_auth_file; /* file holding the pushes' Authorization header value */
    unsigned push_queue;        /* windows kept while the server is down, default 16 */
    /* NULL: no OTLP push; else the OTLP/HTTP base URL (POST URL/v1development/profiles
     * every push_every_s), with headers "NAME=VALUE" */
    const char *otlp_url;
    const char *const *otlp_headers;
    unsigned n_otlp_headers;
    const char *otlp_service; /* service.name of every process; NULL: its command name */
    /* > 0: fetch the debug files of stripped files by build-id from the
     * debuginfod servers of DEBUGINFOD_URLS (libdebuginfod), each fetch cut
     * after this many seconds; 0: no fetching. */
    double debuginfod_timeout_s;
    /* Log lines (no trailing newline), from any thread; optional. */
    void (*log)(void *ctx, const char *msg);
    void *log_ctx;
};

/* Bind the listen address, load the BPF program, start HTTP and push.
 * Nothing is sampled until ss_agent_run. */
int ss_agent_new(struct ss_agent **out, const struct ss_agent_opts *o, struct ss_err *err);
/* Where HTTP listens: "127.0.0.1:7470" (the real port when 0 was given) or
 * "unix:PATH". */
const char *ss_agent_address(const struct ss_agent *a);
/* Sample until *stop becomes non-zero, then finish: open profile requests
 * are answered with what they have, the last push window is sent (one
 * try), the capture segment is completed. 0 or negative errno. */
int ss_agent_run(struct ss_agent *a, volatile sig_atomic_t *stop, struct ss_err *err);
void ss_agent_free(struct ss_agent *a);

#endif
