/* agent/http.c: the agent's HTTP endpoints on libmicrohttpd — a pool of
 * AG_HTTP_THREADS epoll threads that never block: a profile request is
 * suspended while its window fills and resumed by the main thread:
 *   GET /debug/pprof/profile?seconds=N[&pid=P]  gzipped pprof of the next N s
 *   GET /metrics                                Prometheus text exposition
 *   GET /healthz                                200 "ok"
 * Anything else gets an HTTP error: 404 unknown path, 405 not GET/HEAD,
 * 400 bad seconds or pid, 429 too many profiles at once, 503 stopping.
 * A scraper that hangs up mid-profile is noticed and its window dropped.
 * Connection discipline, with libmicrohttpd's own options: an idle
 * connection (also one that stops halfway through its headers) is closed
 * after AG_HTTP_TIMEOUT_S, at most AG_HTTP_MAX_CONNS connections at once
 * and AG_HTTP_MAX_PER_IP from one address (the next are closed at once),
 * requests that are not HTTP get 400 and are closed. A profile request's
 * suspended connection does not time out. */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent_int.h"
#include "agent/webcfg.h"

#define AG_HTTP_THREADS 2
#define AG_HTTP_TIMEOUT_S 5u
#define AG_HTTP_MAX_CONNS 256u
#define AG_HTTP_MAX_PER_IP 32u
#define AG_HANGUP_CHECK_S 0.25

static enum MHD_Result reply(struct ss_agent *a, struct MHD_Connection *c, unsigned code,
                             const char *type, void *body, size_t len,
                             enum MHD_ResponseMemoryMode m)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, m);
    if (!r) {
        if (m == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (code == MHD_HTTP_TOO_MANY_REQUESTS) MHD_add_response_header(r, "Retry-After", "5");
    if (code == 200 && !strcmp(type, "application/octet-stream"))
        MHD_add_response_header(r, "Content-Disposition", "attachment; filename=\"profile\"");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    if (code >= 500) {
        pthread_mutex_lock(&a->mu);
        a->hs.errors_5xx++;
        pthread_mutex_unlock(&a->mu);
    } else if (code >= 400) {
        ag_ce_count(a, AG_CE_REQUEST, "a bad request: answered with a 4xx status");
    }
    return ret;
}

static enum MHD_Result error(struct ss_agent *a, struct MHD_Connection *c, unsigned code,
                             const char *fmt, const char *arg)
{
    char *msg = NULL;
    if (asprintf(&msg, fmt, arg) < 0) return MHD_NO;
    size_t n = strlen(msg);
    char *body = realloc(msg, n + 2);
    if (!body) {
        free(msg);
        return MHD_NO;
    }
    body[n] = '\n';
    body[n + 1] = 0;
    return reply(a, c, code, "text/plain; charset=utf-8", body, n + 1, MHD_RESPMEM_MUST_FREE);
}

/* A positive decimal number up to max; -1 otherwise. */
static long parse_num(const char *s, long max)
{
    if (!s || !*s || strlen(s) > 10) return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= max ? v : -1;
}

/* Has the client hung up? (Peeks at the socket; a request has no body.) */
static bool hung_up(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* One profile request: its window, on the heap while the connection is
 * suspended (freed by completed()). */
struct ag_req {
    struct ag_window w;
    bool listed; /* in a->windows */
};

static void unlink_window(struct ss_agent *a, struct ag_req *q)
{
    if (!q->listed) return;
    for (struct ag_window **pp = &a->windows; *pp; pp = &(*pp)->next)
        if (*pp == &q->w) {
            *pp = q->w.next;
            break;
        }
    q->listed = false;
    a->nprofiles--;
}

/* A profile request, its headers and body read: check it, open its window and
 * suspend the connection until the main thread resumes it. */
static enum MHD_Result profile_start(struct ss_agent *a, struct MHD_Connection *c, void **state)
{
    const char *sec = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
    const char *pid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
    long seconds = 30;
    if (sec && (seconds = parse_num(sec, a->o.max_seconds)) < 0) {
        char m[160];
        snprintf(m, sizeof(m), "bad seconds '%%s': a whole number from 1 to %u", a->o.max_seconds);
        return error(a, c, MHD_HTTP_BAD_REQUEST, m, sec);
    }
    long p = 0;
    if (pid && (p = parse_num(pid, 0x7fffffff)) < 0)
        return error(a, c, MHD_HTTP_BAD_REQUEST, "bad pid '%s'", pid);
    struct ss_report_opts ro = {
        .freq_hz = a->o.freq_hz, .wall_start_ns = ag_wall_ns(), .off_cpu = a->o.off_cpu};
    struct ss_err err = {0};
    struct ag_req *q = calloc(1, sizeof(*q));
    if (!q) return error(a, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", "out of memory");
    q->w.pid = (uint32_t)p;
    q->w.end = ag_now() + (double)seconds;
    q->w.conn = c;
    pthread_mutex_lock(&a->mu);
    bool stopping = a->stopping, full = a->nprofiles >= a->o.max_profiles;
    if (!stopping && !full) {
        a->nprofiles++;
        a->hs.profiles++;
    }
    if (full) a->hs.too_many++;
    pthread_mutex_unlock(&a->mu);
    if (stopping || full) free(q);
    if (stopping) return error(a, c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", "the agent is stopping");
    if (full) {
        char m[96];
        snprintf(m, sizeof(m), "too many profile requests at once (at most %u)", a->o.max_profiles);
        return error(a, c, MHD_HTTP_TOO_MANY_REQUESTS, "%s", m);
    }
    if (!(q->w.rep = ss_report_new(&ro, &err))) {
        pthread_mutex_lock(&a->mu);
        a->nprofiles--;
        pthread_mutex_unlock(&a->mu);
        free(q);
        return error(a, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", err.msg);
    }
    pthread_mutex_lock(&a->mu);
    q->w.next = a->windows;
    a->windows = &q->w;
    q->listed = true;
    a->sending++; /* until completed() */
    pthread_mutex_unlock(&a->mu);
    *state = q;
    /* No libmicrohttpd call under mu: suspend, then tell the main thread;
     * a window that ended meanwhile is resumed here. */
    MHD_suspend_connection(c);
    pthread_mutex_lock(&a->mu);
    q->w.suspended = true;
    bool resume = q->w.done && !q->w.resumed;
    if (resume) q->w.resumed = true;
    pthread_mutex_unlock(&a->mu);
    if (resume) MHD_resume_connection(c);
    return MHD_YES;
}

/* Resumed: answer with the profile, or close if the client is gone. */
static enum MHD_Result profile_finish(struct ss_agent *a, struct MHD_Connection *c,
                                      struct ag_req *q)
{
    pthread_mutex_lock(&a->mu);
    unlink_window(a, q); /* the main thread no longer sees it */
    bool gone = q->w.gone;
    if (gone) a->hs.abandoned++;
    pthread_mutex_unlock(&a->mu);
    struct ss_report *rep = q->w.rep;
    q->w.rep = NULL;
    if (gone) {
        ss_report_free(rep);
        return MHD_NO; /* close the connection */
    }
    char *buf = NULL;
    size_t len = 0;
    struct ss_err err = {0};
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? ss_report_write_pprof(rep, f, &err) : -ENOMEM;
    if (f && fclose(f) && rc == 0) rc = -EIO;
    ss_report_free(rep);
    if (rc < 0) {
        free(buf);
        return error(a, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                     err.msg[0] ? err.msg : "cannot write the profile");
    }
    return reply(a, c, 200, "application/octet-stream", buf, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    struct ss_agent *a = cls;
    if (*state && *state != a) return profile_finish(a, c, *state); /* resumed */
    if (!*state) {                                                  /* first call: headers only */
        *state = a;
        pthread_mutex_lock(&a->mu);
        a->hs.requests++;
        pthread_mutex_unlock(&a->mu);
        /* answer once the whole request is in: a response queued now
         * would make libmicrohttpd close the connection (no keep-alive) */
        return MHD_YES;
    }
    if (*upload_size) { /* a body we do not want */
        *upload_size = 0;
        return MHD_YES;
    }
    int refused;
    if (ag_web_refuse(a, c, url, &refused)) return (enum MHD_Result)refused;
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return error(a, c, MHD_HTTP_METHOD_NOT_ALLOWED, "method %s not allowed (GET only)", method);
    if (!strcmp(url, "/healthz"))
        return reply(a, c, 200, "text/plain; charset=utf-8", (void *)"ok\n", 3,
                     MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/metrics")) {
        size_t len = 0;
        char *m = ag_metrics_text(a, &len);
        if (!m) return error(a, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", "out of memory");
        return reply(a, c, 200, "text/plain; version=0.0.4; charset=utf-8", m, len,
                     MHD_RESPMEM_MUST_FREE);
    }
    if (!strcmp(url, "/debug/pprof/profile")) return profile_start(a, c, state);
    return error(a, c, MHD_HTTP_NOT_FOUND,
                 "no such endpoint: %s "
                 "(/debug/pprof/profile, /metrics, /healthz)",
                 url);
}

/* A request is over (answered and sent, or the connection closed). */
static void completed(void *cls, struct MHD_Connection *c, void **state,
                      enum MHD_RequestTerminationCode why)
{
    (void)c, (void)why;
    struct ss_agent *a = cls;
    if (!*state || *state == a) return;
    struct ag_req *q = *state;
    *state = NULL;
    pthread_mutex_lock(&a->mu);
    unlink_window(a, q); /* closed before it was resumed: at stop */
    a->sending--;
    pthread_mutex_unlock(&a->mu);
    ss_report_free(q->w.rep);
    free(q);
}

static void conn_notify(void *cls, struct MHD_Connection *c, void **sock_state,
                        enum MHD_ConnectionNotificationCode what)
{
    (void)sock_state;
    struct ss_agent *a = cls;
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        __atomic_add_fetch(&a->hs.conns_total, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&a->hs.conns_open, 1, __ATOMIC_RELAXED);
        ag_web_conn_started(a->web, c);
    } else if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
        __atomic_sub_fetch(&a->hs.conns_open, 1, __ATOMIC_RELAXED);
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char b[512];
    vsnprintf(b, sizeof(b), fmt, ap);
    size_t n = strlen(b);
    while (n && b[n - 1] == '\n')
        b[--n] = 0;
    char *html = strstr(b, " ('<html>"); /* the error page libmicrohttpd sent: not for the log */
    char *tail = html ? strstr(html, "')).") : NULL;
    if (tail) memmove(html, tail + 2, strlen(tail + 2) + 1);
    ag_ce_mhd(cls, b);
}

int ag_http_start(struct ss_agent *a, struct ss_err *err)
{
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    a->ce.last = ag_now();
    if (a->web && a->web->tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        ss_err_set(err, -ENOTSUP, "tls_server_config: this libmicrohttpd was built without TLS");
        return -ENOTSUP;
    }
    struct MHD_OptionItem tls[5];
    size_t n = ag_web_options(a->web, tls, &flags);
    tls[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    a->httpd = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, a, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, a, /* first */
        MHD_OPTION_ARRAY, tls, MHD_OPTION_LISTEN_SOCKET, a->listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)AG_HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT, AG_HTTP_MAX_CONNS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, AG_HTTP_MAX_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
        AG_HTTP_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, completed, a, MHD_OPTION_NOTIFY_CONNECTION,
        conn_notify, a, MHD_OPTION_END);
    if (!a->httpd) {
        ss_err_set(err, -EIO, "cannot start the HTTP server on %s", a->address);
        return -EIO;
    }
    a->listen_fd = -1; /* the daemon closes it */
    return 0;
}

void ag_http_stop(struct ss_agent *a)
{
    /* Let the profiles closed early by the stop go out: up to 3 s for
     * them to be sent (idle keep-alive connections do not count). */
    for (int i = 0; a->httpd && i < 300; i++) {
        pthread_mutex_lock(&a->mu);
        unsigned busy = a->sending;
        pthread_mutex_unlock(&a->mu);
        if (!busy) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (a->httpd) MHD_stop_daemon(a->httpd);
    a->httpd = NULL;
    ag_ce_tick(a, ag_now(), true);
}

void ag_windows_tick(struct ss_agent *a, double now)
{
    struct MHD_Connection *resume[16];
    unsigned n;
    do {
        n = 0;
        pthread_mutex_lock(&a->mu);
        for (struct ag_window *w = a->windows; w; w = w->next) {
            if (!w->done && w->suspended && now - w->checked >= AG_HANGUP_CHECK_S) {
                w->checked = now;
                if (hung_up(w->conn)) w->gone = w->done = true;
            }
            if (!w->done && (a->stopping || now >= w->end)) w->done = true;
            if (w->done && w->suspended && !w->resumed && n < 16) {
                w->resumed = true;
                resume[n++] = w->conn;
            }
        }
        pthread_mutex_unlock(&a->mu);
        for (unsigned i = 0; i < n; i++) /* outside mu: libmicrohttpd takes its own locks */
            MHD_resume_connection(resume[i]);
    } while (n == 16);
}
