/* agent/agent_int.h: the agent's shared state and its parts.
 *
 * Threads: the main thread (ss_agent_run) samples, unwinds, feeds the
 * windows and resumes the profile requests whose window is over;
 * libmicrohttpd runs a small pool of epoll threads (http.c) that never
 * block (a profile request is suspended while its window fills); push.c
 * runs one sender thread. `mu` guards the window list, the stats snapshot
 * and the HTTP counters; `ce.mu` the client-error counters and their log;
 * the unwinder and capture are main-thread only. */
#ifndef SS_AGENT_INT_H
#define SS_AGENT_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/agent.h"
#include "stacksnap/capture.h"
#include "stacksnap/report.h"
#include "stacksnap/unwind.h"

struct MHD_Connection;
struct ag_web;

/* One profile request: filled by the main thread until `end` (monotonic s). */
struct ag_window {
    struct ss_report *rep;
    uint32_t pid; /* 0 = every selected process */
    double end;
    bool done; /* main thread no longer touches rep */
    bool gone; /* the client hung up while it waited */
    /* the request's connection, suspended while the window fills: resumed
     * once (by whoever sees it done and suspended first) */
    struct MHD_Connection *conn;
    bool suspended, resumed;
    double checked; /* last look for a hang-up */
    struct ag_window *next;
};

/* What /metrics shows; the main thread refreshes it about twice a second. */
struct ag_stats {
    uint64_t samples, lua, errors;
    uint64_t lua_unproven; /* Lua frames left out as not proven (ss_stack_unproven) */
    /* samples by ss_stack_facts (truncated: the walk or a Lua chain) */
    uint64_t truncated, trace_cut, scan_stale, nocfi, nocfi_root;
    uint64_t markers[SS_PROC_EXIT + 1];   /* process markers by kind */
    uint64_t processes_seen;              /* over every unwinder (one per capture segment) */
    uint64_t debug_fetched, debug_failed; /* debuginfod fetches, over every unwinder */
    struct ss_capture_stats cap;
    struct ss_unwinder_stats unw;
    uint64_t segments, segment_errors, capture_bytes;
    bool capturing;
};

/* HTTP counters, kept by the connection threads. */
struct ag_http_stats {
    uint64_t requests, profiles, errors_5xx, too_many, abandoned;
    uint64_t conns_total, conns_open; /* atomics (libmicrohttpd's connection callback) */
};

/* Client errors by reason (stacksnap_http_client_errors_total{reason}). */
enum ag_ce {
    AG_CE_REQUEST,      /* answered 4xx by us: bad path, method, argument, too many */
    AG_CE_UNAUTHORIZED, /* 401: no or wrong credentials */
    AG_CE_CLIENT_CERT,  /* 403: no verified client certificate */
    AG_CE_MALFORMED,    /* 400 from libmicrohttpd: not HTTP */
    AG_CE_OVERSIZE,     /* 413/414/431: request line or headers too big */
    AG_CE_INCOMPLETE,   /* the client hung up mid-request */
    AG_CE_NETWORK,      /* reset, send/receive failed */
    AG_CE_LIMIT,        /* refused: total or per-address connection limit */
    AG_CE_TLS,          /* TLS handshake or record failure */
    AG_CE_OTHER,        /* anything else libmicrohttpd reports */
    AG_CE_N
};
const char *ag_ce_name(enum ag_ce r);

/* The counters and the rate-limited log of client errors (httplog.c): the
 * first error of each reason is logged as is, the rest summarised with
 * their counts at most once per AG_CE_LOG_EVERY seconds. */
#define AG_CE_LOG_EVERY 10.0
struct ag_clerr {
    pthread_mutex_t mu;
    uint64_t total[AG_CE_N], pending[AG_CE_N];
    bool said[AG_CE_N];
    double last; /* monotonic s of the last summary */
};

/* A sender's counters (sendq.c), kept by its sender thread. */
struct ag_send_stats {
    uint64_t sent, failed_tries, rejected, dropped, queued;
    bool enabled;
};

/* OTLP push counters (otlp_push.c): the queue's and the answers'. */
struct ag_otlp_stats {
    struct ag_send_stats q;
    uint64_t partial, partial_rejected; /* answers with a partial_success; profiles it rejected */
};

struct ag_procinfo;
struct ag_push;

/* peer.c: the push server's CA (--push-ca) and Authorization header value
 * (--push-auth-file), shared by the Pyroscope and the OTLP push. */
struct ag_peer {
    char *ca;   /* --push-ca, or NULL: the system's CAs */
    char *auth; /* "Authorization: VALUE", or NULL */
};
int ag_peer_load(struct ag_peer *pe, const struct ss_agent_opts *o, struct ss_err *err);
void ag_peer_apply(const struct ag_peer *pe, CURL *h); /* verify the peer (CA) */
void ag_peer_free(struct ag_peer *pe);
struct ag_otlp;
struct ag_segments;
struct MHD_Daemon;

struct ss_agent {
    struct ss_agent_opts o;
    char *listen, *capture_dir, *push_url; /* copies of the option strings */
    char address[128];
    pthread_mutex_t mu;
    struct ag_window *windows;
    unsigned nprofiles; /* profile requests being served */
    unsigned sending;   /* profile requests not yet completed (answer sent) */
    bool stopping;
    struct ag_stats st;      /* snapshot, under mu */
    struct ag_http_stats hs; /* under mu */
    struct ag_clerr ce;
    struct ag_web *web; /* TLS and authentication (webcfg.c), NULL: none */
    /* main thread */
    struct ss_capture *cap;
    struct ss_unwinder *u;
    struct ag_procinfo *procs;
    struct ag_push *push;
    struct ag_otlp *otlp;
    struct ag_segments *seg;
    struct ag_stats live;
    uint64_t seen_before;                         /* processes seen by the unwinders freed so far */
    uint64_t fetched_before, fetch_failed_before; /* their debuginfod fetches */
    struct MHD_Daemon *httpd;
    int listen_fd;
    double t0;
};

void ag_log(const struct ss_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double ag_now(void); /* CLOCK_MONOTONIC seconds */
int64_t ag_wall_ns(void);

/* listen.c: a listening socket for "HOST:PORT" or "unix:PATH"; fills desc. */
int ag_listen(const char *spec, char *desc, size_t desclen, struct ss_err *err);

/* http.c */
int ag_http_start(struct ss_agent *a, struct ss_err *err);
void ag_http_stop(struct ss_agent *a);
/* Close the windows whose time is up (all when stopping) and wake their requests. */
void ag_windows_tick(struct ss_agent *a, double now);

/* httplog.c: count one client error; msg (may be NULL) is libmicrohttpd's text. */
void ag_ce_count(struct ss_agent *a, enum ag_ce r, const char *msg);
/* libmicrohttpd's log message: a client error counted, or logged as is. */
void ag_ce_mhd(struct ss_agent *a, const char *msg);
/* The summary line when due (or now when final). */
void ag_ce_tick(struct ss_agent *a, double now, bool final);
void ag_ce_totals(struct ss_agent *a, uint64_t out[AG_CE_N]);

/* httpauth.c: TLS options for MHD_start_daemon (ops has room for 4; adds
 * MHD_USE_TLS to flags); the number of options. */
struct MHD_OptionItem;
size_t ag_web_options(const struct ag_web *w, struct MHD_OptionItem *ops, unsigned *flags);
/* A new connection (before its TLS handshake): make GnuTLS require and
 * verify the client certificate as client_auth_type says, so a wrong one
 * fails the handshake. */
void ag_web_conn_started(const struct ag_web *w, struct MHD_Connection *c);
/* Refuse the request (403 client certificate, 401 credentials)? Then
 * *ret is what the handler returns. */
bool ag_web_refuse(struct ss_agent *a, struct MHD_Connection *c, const char *url, int *ret);

/* metrics.c: the Prometheus text exposition (malloc'd, *len bytes). */
char *ag_metrics_text(struct ss_agent *a, size_t *len);

/* procinfo.c: exe path and cgroup of a pid, cached (bounded, pruned by gc). */
struct ag_procinfo *ag_procinfo_new(void);
void ag_procinfo_free(struct ag_procinfo *p);
void ag_procinfo_get(struct ag_procinfo *p, uint32_t pid, const char *comm, const char **exe,
                     const char **cgroup);
void ag_procinfo_gc(struct ag_procinfo *p);

/* sendq.c: the senders' bounded queue, backoff and sender thread. A request
 * is a report (made into its body on the sender thread's first try) or a
 * body, with the sender's label and window. */
struct ag_sendq_req {
    struct ss_report *rep; /* owned; freed once the body is made */
    char *body;            /* owned (malloc) */
    size_t len;
    char name[160]; /* the sender's label for the log (Pyroscope: application name) */
    int64_t from, until;
};
struct ag_sendq_ops {
    /* The body of r from r->rep (sender thread): 0 or negative errno. */
    int (*body)(void *ctx, struct ag_sendq_req *r, struct ss_err *err);
    /* Set URL, body and headers of one try on h (after curl_easy_reset);
     * returns what done frees after the try (NULL: nothing). */
    void *(*prepare)(void *ctx, CURL *h, const struct ag_sendq_req *r);
    void (*done)(void *tmp);
    /* The retry policy: a non-2xx answer worth another try (backoff). */
    bool (*retryable)(long code);
    /* A 2xx answer's body (optional). */
    void (*answered)(void *ctx, const char *body, size_t len);
};
struct ag_sendq_opts {
    struct ss_agent *a;
    const char *what;      /* "push": log lines "push to URL: ..." */
    const char *shown_url; /* the URL as logged */
    const struct ag_peer *peer;
    unsigned cap; /* requests queued at most */
    const struct ag_sendq_ops *ops;
    void *ctx;
};
struct ag_sendq;
int ag_sendq_new(struct ag_sendq **out, const struct ag_sendq_opts *o, struct ss_err *err);
/* Queue r (its rep and body are the queue's now); a full queue drops its oldest. */
void ag_sendq_put(struct ag_sendq *q, const struct ag_sendq_req *r);
/* Wake the sender for what was put; final: stop after one last try each. */
void ag_sendq_wake(struct ag_sendq *q, bool final);
void ag_sendq_stats(struct ag_sendq *q, struct ag_send_stats *st);
void ag_sendq_free(struct ag_sendq *q); /* stops (last tries), joins, frees */

/* otlp_push.c (--otlp): the window as one OTLP request per push_every_s */
int ag_otlp_new(struct ag_otlp **out, struct ss_agent *a, struct ss_err *err);
void ag_otlp_add(struct ag_otlp *p, const struct ss_stack *st, const char *exe, const char *cgroup);
void ag_otlp_tick(struct ag_otlp *p, double now, bool final);
void ag_otlp_stats(struct ag_otlp *p, struct ag_otlp_stats *st);
void ag_otlp_free(struct ag_otlp *p);
/* NAME=VALUE with NAME an HTTP token and no control characters in VALUE. */
int ag_otlp_header_ok(const char *kv);

/* push.c */
int ag_push_new(struct ag_push **out, struct ss_agent *a, struct ss_err *err);
/* Account one walked stack in the current push window. */
void ag_push_add(struct ag_push *p, const struct ss_stack *st, const char *exe, const char *cgroup);
/* The window is over when due (or final): queue its profiles for sending. */
void ag_push_tick(struct ag_push *p, double now, bool final);
void ag_push_stats(struct ag_push *p, struct ag_send_stats *st);
/* Stop the sender after one last try of what is queued; free. */
void ag_push_free(struct ag_push *p);

/* segments.c: rolling capture files. */
int ag_seg_new(struct ag_segments **out, struct ss_agent *a, struct ss_err *err);
/* Open the next segment (and a fresh unwinder hooked to it, so that each
 * segment holds every target read its replay needs). */
int ag_seg_begin(struct ag_segments *g, struct ss_unwinder **u, struct ss_err *err);
/* pid's new plan of windows (the walkers'), to the capture: after each walk,
 * and as ss_unwinder_opts.plan_ready (ctx: the agent) in the middle of the
 * first walk that verified a LuaJIT state. */
void ag_give_plan(void *ctx, uint32_t pid);
void ag_seg_sample(struct ag_segments *g, struct ss_unwinder *u, const struct ss_sample *s,
                   bool walked);
void ag_seg_proc_event(struct ag_segments *g, const struct ss_proc_event *ev);
void ag_seg_debugfile(struct ag_segments *g, const uint8_t *id, size_t len, const char *path);
/* Flush; true when the segment is due to end (time or size). */
bool ag_seg_tick(struct ag_segments *g, double now);
/* Complete the current segment (counters, trailer) and prune old ones. */
void ag_seg_end(struct ag_segments *g, struct ss_capture *cap, struct ss_unwinder *u);
void ag_seg_stats(const struct ag_segments *g, uint64_t *segments, uint64_t *errors,
                  uint64_t *bytes, bool *capturing);
void ag_seg_free(struct ag_segments *g);

#endif
