/* agent/sendq.c: the agent's senders' queue (--push to Pyroscope, --otlp to
 * an OTLP receiver). The main thread puts requests (a request body, made from
 * its report on the first try) into a bounded queue; one sender thread
 * (libcurl) takes the oldest and tries it. The sender's ops build the HTTP
 * request and give the retry policy: a failed try (no connection, or an
 * answer the policy calls retryable) is retried with exponential backoff
 * (1 s doubling to 60 s); any other answer refuses the request for good.
 * When the queue is full the oldest request is dropped and counted, so
 * memory stays bounded while the server is down. On stop each queued
 * request gets one last try while the server answers; once a try fails the
 * rest are dropped. TLS and the Authorization value come from the peer
 * (peer.c); the common curl options are set here. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent_int.h"

#define ANSWER_MAX (1u << 20) /* answer bytes kept (a partial_success is small) */

struct ag_sendq {
    struct ss_agent *a;
    const struct ag_sendq_ops *ops;
    void *ctx;
    const struct ag_peer *peer;
    char what[32];      /* "push", "otlp push": for the log */
    char shown[1100];   /* the URL for the log (no credentials) */
    pthread_mutex_t mu; /* the queue, stop and stats */
    pthread_cond_t cv;
    struct ag_sendq_req *q;
    unsigned cap, head, len;
    bool stop;
    struct ag_send_stats st;
    pthread_t th;
    bool started;
};

static void req_free(struct ag_sendq_req *r)
{
    ss_report_free(r->rep);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

struct answer {
    char *p;
    size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct answer *r = ctx;
    size_t k = size * n;
    if (r->len + k > ANSWER_MAX) return k; /* keep the start only */
    char *b = realloc(r->p, r->len + k + 1);
    if (!b) return 0;
    memcpy(b + r->len, data, k);
    r->p = b;
    r->len += k;
    return k;
}

/* One try. 1 sent, 0 retry later, -1 refused for good. */
static int try_req(struct ag_sendq *q, CURL *h, struct ag_sendq_req *r)
{
    if (!r->body) {
        struct ss_err err = {0};
        int rc = q->ops->body(q->ctx, r, &err);
        ss_report_free(r->rep);
        r->rep = NULL;
        if (rc < 0) {
            ag_log(q->a, "%s: cannot write the profile%s%s: %s", q->what, r->name[0] ? " of " : "",
                   r->name, err.msg[0] ? err.msg : strerror(-rc));
            return -1;
        }
    }
    curl_easy_reset(h);
    void *tmp = q->ops->prepare(q->ctx, h, r);
    ag_peer_apply(q->peer, h);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "stacksnap-agent");
    struct answer ans = {0};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &ans);
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (q->ops->done) q->ops->done(tmp);
    int rc;
    if (cc != CURLE_OK) {
        ag_log(q->a, "%s to %s: %s", q->what, q->shown, ebuf[0] ? ebuf : curl_easy_strerror(cc));
        rc = 0;
    } else if (code >= 200 && code < 300) {
        if (q->ops->answered) q->ops->answered(q->ctx, ans.p, ans.len);
        rc = 1;
    } else {
        ag_log(q->a, "%s to %s: HTTP %ld%s%s", q->what, q->shown, code, r->name[0] ? " for " : "",
               r->name);
        rc = q->ops->retryable(code) ? 0 : -1;
    }
    free(ans.p);
    return rc;
}

/* Under mu: the oldest request out of the queue. */
static void drop_oldest(struct ag_sendq *q)
{
    req_free(&q->q[q->head]);
    q->head = (q->head + 1) % q->cap;
    q->len--;
    q->st.dropped++;
}

static void *sender(void *arg)
{
    struct ag_sendq *q = arg;
    CURL *h = curl_easy_init();
    double backoff = 0;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && (!q->len || backoff > 0)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(backoff > 0 ? backoff : 3600);
            if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) == ETIMEDOUT) break;
        }
        if (!q->len) {
            if (q->stop) break;
            continue;
        }
        /* take the oldest (the main thread may drop it meanwhile: work on a copy) */
        struct ag_sendq_req r = q->q[q->head];
        memset(&q->q[q->head], 0, sizeof(r));
        q->head = (q->head + 1) % q->cap;
        q->len--;
        bool last_try = q->stop;
        pthread_mutex_unlock(&q->mu);
        int rc = h ? try_req(q, h, &r) : 0;
        pthread_mutex_lock(&q->mu);
        if (rc == 1) {
            q->st.sent++;
            backoff = 0;
            req_free(&r);
        } else if (rc < 0) {
            q->st.rejected++;
            req_free(&r);
        } else {
            q->st.failed_tries++;
            backoff = backoff ? (backoff * 2 > 60 ? 60 : backoff * 2) : 1;
            if (last_try || q->len == q->cap) { /* stopping, or newer ones took its place */
                q->st.dropped++;
                req_free(&r);
            } else { /* back to the front */
                q->head = (q->head + q->cap - 1) % q->cap;
                q->q[q->head] = r;
                q->len++;
            }
            while (last_try && q->len) /* one last try each: the server is down */
                drop_oldest(q);
        }
        if (q->stop && !q->len) break;
        if (q->stop) backoff = 0;
    }
    pthread_mutex_unlock(&q->mu);
    curl_easy_cleanup(h);
    return NULL;
}

int ag_sendq_new(struct ag_sendq **out, const struct ag_sendq_opts *o, struct ss_err *err)
{
    struct ag_sendq *q = calloc(1, sizeof(*q));
    if (!q || !(q->q = calloc(o->cap ? o->cap : 1, sizeof(*q->q)))) {
        free(q);
        ss_err_set(err, -ENOMEM, "%s: out of memory", o->what);
        return -ENOMEM;
    }
    q->a = o->a;
    q->ops = o->ops;
    q->ctx = o->ctx;
    q->peer = o->peer;
    q->cap = o->cap ? o->cap : 1;
    q->st.enabled = true;
    snprintf(q->what, sizeof(q->what), "%s", o->what);
    snprintf(q->shown, sizeof(q->shown), "%s", o->shown_url);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (pthread_create(&q->th, NULL, sender, q)) {
        ag_sendq_free(q);
        ss_err_set(err, -EAGAIN, "%s: cannot start the sender thread", o->what);
        return -EAGAIN;
    }
    q->started = true;
    *out = q;
    return 0;
}

void ag_sendq_put(struct ag_sendq *q, const struct ag_sendq_req *r)
{
    pthread_mutex_lock(&q->mu);
    if (q->len == q->cap) drop_oldest(q);
    q->q[(q->head + q->len) % q->cap] = *r;
    q->len++;
    pthread_mutex_unlock(&q->mu);
}

void ag_sendq_wake(struct ag_sendq *q, bool final)
{
    pthread_mutex_lock(&q->mu);
    if (final) q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ag_sendq_stats(struct ag_sendq *q, struct ag_send_stats *st)
{
    pthread_mutex_lock(&q->mu);
    *st = q->st;
    st->queued = q->len;
    pthread_mutex_unlock(&q->mu);
}

void ag_sendq_free(struct ag_sendq *q)
{
    if (!q) return;
    if (q->started) {
        ag_sendq_wake(q, true);
        pthread_join(q->th, NULL);
    }
    for (unsigned i = 0; i < q->cap; i++)
        req_free(&q->q[i]);
    free(q->q);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    curl_global_cleanup();
    free(q);
}
