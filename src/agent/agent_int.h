/* agent/agent_int.h: the agent's shared state and its parts.
 *
 * Threads: the main thread (ss_agent_run) samples, unwinds and feeds the
 * windows; libmicrohttpd runs one thread per connection (http.c); push.c
 * runs one sender thread. `mu` guards the window list, the stats snapshot
 * and the HTTP counters; the unwinder and capture are main-thread only. */
#ifndef SS_AGENT_INT_H
#define SS_AGENT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/agent.h"
#include "stacksnap/capture.h"
#include "stacksnap/report.h"
#include "stacksnap/unwind.h"

/* One profile request: filled by the main thread until `end` (monotonic s). */
struct ag_window {
    struct ss_report *rep;
    uint32_t pid; /* 0 = every selected process */
    double end;
    bool done; /* main thread no longer touches rep */
    struct ag_window *next;
};

/* What /metrics shows; the main thread refreshes it about twice a second. */
struct ag_stats {
    uint64_t samples, lua, truncated, errors;
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
    uint64_t requests, profiles, errors_4xx, errors_5xx, too_many, abandoned;
};

/* Push counters, kept by the sender thread. */
struct ag_push_stats {
    uint64_t sent, failed_tries, rejected, dropped, queued;
    bool enabled;
};

/* OTLP push counters (otlp_push.c), kept by its sender thread. */
struct ag_otlp_stats {
    uint64_t sent, failed_tries, rejected, dropped, queued;
    uint64_t partial, partial_rejected; /* answers with a partial_success; profiles it rejected */
    bool enabled;
};

struct ag_procinfo;
struct ag_push;
struct ag_otlp;
struct ag_segments;
struct MHD_Daemon;

struct ss_agent {
    struct ss_agent_opts o;
    char *listen, *capture_dir, *push_url; /* copies of the option strings */
    char address[128];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct ag_window *windows;
    unsigned nprofiles; /* profile requests being served */
    unsigned sending;   /* profile requests not yet completed (answer sent) */
    bool stopping;
    struct ag_stats st;      /* snapshot, under mu */
    struct ag_http_stats hs; /* under mu */
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

/* metrics.c: the Prometheus text exposition (malloc'd, *len bytes). */
char *ag_metrics_text(struct ss_agent *a, size_t *len);

/* procinfo.c: exe path and cgroup of a pid, cached (bounded, pruned by gc). */
struct ag_procinfo *ag_procinfo_new(void);
void ag_procinfo_free(struct ag_procinfo *p);
void ag_procinfo_get(struct ag_procinfo *p, uint32_t pid, const char *comm, const char **exe,
                     const char **cgroup);
void ag_procinfo_gc(struct ag_procinfo *p);

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
void ag_push_stats(struct ag_push *p, struct ag_push_stats *st);
/* Stop the sender after one last try of what is queued; free. */
void ag_push_free(struct ag_push *p);

/* segments.c: rolling capture files. */
int ag_seg_new(struct ag_segments **out, struct ss_agent *a, struct ss_err *err);
/* Open the next segment (and a fresh unwinder hooked to it, so that each
 * segment holds every target read its replay needs). */
int ag_seg_begin(struct ag_segments *g, struct ss_unwinder **u, struct ss_err *err);
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
