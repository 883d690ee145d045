/* agent/http.c: the agent's HTTP endpoints on libmicrohttpd (one thread per
 * connection, so a profile request can wait for its window):
 *   GET /debug/pprof/profile?seconds=N[&pid=P]  gzipped pprof of the next N s
 *   GET /metrics                                Prometheus text exposition
 *   GET /healthz                                200 "ok"
 * Anything else gets an HTTP error: 404 unknown path, 405 not GET/HEAD,
 * 400 bad seconds or pid, 429 too many profiles at once, 503 stopping.
 * A scraper that hangs up mid-profile is noticed and its window dropped. */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent_int.h"

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
    pthread_mutex_lock(&a->mu);
    if (code >= 500)
        a->hs.errors_5xx++;
    else if (code >= 400)
        a->hs.errors_4xx++;
    pthread_mutex_unlock(&a->mu);
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

static void unlink_window(struct ss_agent *a, struct ag_window *w)
{
    for (struct ag_window **pp = &a->windows; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    a->nprofiles--;
}

static enum MHD_Result profile(struct ss_agent *a, struct MHD_Connection *c)
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
    struct ag_window w = {.pid = (uint32_t)p, .end = ag_now() + (double)seconds};
    pthread_mutex_lock(&a->mu);
    bool stopping = a->stopping, full = a->nprofiles >= a->o.max_profiles;
    if (!stopping && !full) {
        a->nprofiles++;
        a->hs.profiles++;
    }
    if (full) a->hs.too_many++;
    pthread_mutex_unlock(&a->mu);
    if (stopping) return error(a, c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", "the agent is stopping");
    if (full) {
        char m[96];
        snprintf(m, sizeof(m), "too many profile requests at once (at most %u)", a->o.max_profiles);
        return error(a, c, MHD_HTTP_TOO_MANY_REQUESTS, "%s", m);
    }
    if (!(w.rep = ss_report_new(&ro, &err))) {
        pthread_mutex_lock(&a->mu);
        a->nprofiles--;
        pthread_mutex_unlock(&a->mu);
        return error(a, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", err.msg);
    }
    pthread_mutex_lock(&a->mu);
    w.next = a->windows;
    a->windows = &w;
    bool gone = false;
    while (!w.done && !gone) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        if (!w.done) {
            pthread_mutex_unlock(&a->mu);
            gone = hung_up(c);
            pthread_mutex_lock(&a->mu);
        }
    }
    unlink_window(a, &w); /* the main thread no longer sees it */
    if (gone) a->hs.abandoned++;
    pthread_mutex_unlock(&a->mu);
    if (gone) {
        ss_report_free(w.rep);
        return MHD_NO; /* close the connection */
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? ss_report_write_pprof(w.rep, f, &err) : -ENOMEM;
    if (f && fclose(f) && rc == 0) rc = -EIO;
    ss_report_free(w.rep);
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
    if (!*state) { /* first call: headers only */
        *state = a;
        pthread_mutex_lock(&a->mu);
        a->hs.requests++;
        pthread_mutex_unlock(&a->mu);
        if (strcmp(method, "GET") && strcmp(method, "HEAD")) return MHD_YES; /* read the body */
    }
    if (*upload_size) { /* a body we do not want */
        *upload_size = 0;
        return MHD_YES;
    }
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
    if (!strcmp(url, "/debug/pprof/profile")) {
        pthread_mutex_lock(&a->mu);
        a->sending++; /* until completed() */
        pthread_mutex_unlock(&a->mu);
        *state = &a->sending;
        return profile(a, c);
    }
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
    if (*state != &a->sending) return;
    pthread_mutex_lock(&a->mu);
    a->sending--;
    pthread_mutex_unlock(&a->mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char b[512];
    vsnprintf(b, sizeof(b), fmt, ap);
    size_t n = strlen(b);
    while (n && b[n - 1] == '\n')
        b[--n] = 0;
    ag_log(cls, "http: %s", b);
}

int ag_http_start(struct ss_agent *a, struct ss_err *err)
{
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    a->httpd = MHD_start_daemon(flags, 0, NULL, NULL, handle, a, MHD_OPTION_EXTERNAL_LOGGER,
                                mhd_log, a, MHD_OPTION_LISTEN_SOCKET, a->listen_fd,
                                MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT,
                                60u, MHD_OPTION_NOTIFY_COMPLETED, completed, a, MHD_OPTION_END);
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
}

void ag_windows_tick(struct ss_agent *a, double now)
{
    bool woke = false;
    pthread_mutex_lock(&a->mu);
    for (struct ag_window *w = a->windows; w; w = w->next)
        if (!w->done && (a->stopping || now >= w->end)) {
            w->done = true;
            woke = true;
        }
    if (woke) pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}
