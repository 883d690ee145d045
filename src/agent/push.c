/* agent/push.c: --push — every push_every_s seconds, one pprof per command
 * name of that window, POSTed to Grafana Pyroscope's ingest API:
 *   POST URL/ingest?name=COMM{host=HOST}&from=S&until=S&format=pprof
 *        &sampleRate=HZ&spyName=stacksnap
 * with a multipart/form-data body whose part "profile" is the gzipped pprof.
 * A sender thread (libcurl) works through a bounded queue: a failed try
 * (connection refused, 5xx, 429) is retried with exponential backoff
 * (1 s doubling to 60 s); when the queue is full the oldest profile is
 * dropped and counted, so memory stays bounded while the server is down.
 * TLS: the server's certificate is always verified (libcurl's default, set
 * explicitly), against --push-ca's CA file when given, else the system's.
 * --push-auth-file's value goes into each request's Authorization header;
 * it is read once and never logged. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"

#define PUSH_APPS 64 /* command names per window; the rest go to "other" */

struct app {
    char comm[16];
    struct ss_report *rep;
};

struct item {
    char name[160]; /* Pyroscope application name with labels */
    int64_t from, until;
    struct ss_report *rep; /* serialized on the first try */
    char *blob;
    size_t len;
};

struct ag_push {
    struct ss_agent *a;
    char url[1024];
    char shown[1024];    /* url for the log: user:password@ replaced by ***@ */
    struct ag_peer peer; /* --push-ca, --push-auth-file */
    char host[64];
    /* main thread: the current window */
    struct app apps[PUSH_APPS + 1];
    unsigned napps;
    double wstart;
    int64_t wfrom;
    /* shared with the sender, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct item *q;
    unsigned qcap, qhead, qlen;
    bool stop;
    struct ag_push_stats st;
    pthread_t th;
    bool started;
};

static void item_free(struct item *it)
{
    ss_report_free(it->rep);
    free(it->blob);
    memset(it, 0, sizeof(*it));
}

/* Pyroscope application names: letters, digits, '.', '_' and '-'. */
static void app_name(char *out, size_t len, const char *comm, const char *host)
{
    char c[16];
    size_t n = 0;
    for (const char *s = comm; *s && n < sizeof(c) - 1; s++)
        c[n++] = (char)((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                                (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'
                            ? *s
                            : '_');
    c[n] = 0;
    snprintf(out, len, "%s{host=%s,agent=stacksnap}", n ? c : "unknown", host);
}

/* One try. 1 sent, 0 retry later, -1 refused for good (4xx). */
static int send_item(struct ag_push *p, CURL *h, struct item *it)
{
    struct ss_agent *a = p->a;
    if (!it->blob) {
        FILE *f = open_memstream(&it->blob, &it->len);
        struct ss_err err = {0};
        int rc = f ? ss_report_write_pprof(it->rep, f, &err) : -ENOMEM;
        if (f && fclose(f) && !rc) rc = -EIO;
        ss_report_free(it->rep);
        it->rep = NULL;
        if (rc < 0) {
            ag_log(a, "push: cannot write the profile of %s: %s", it->name, err.msg);
            return -1;
        }
    }
    char *ename = curl_easy_escape(h, it->name, 0);
    char url[1400];
    snprintf(url, sizeof(url),
             "%s/ingest?name=%s&from=%lld&until=%lld&format=pprof&sampleRate=%u"
             "&spyName=stacksnap",
             p->url, ename ? ename : "unknown", (long long)it->from, (long long)it->until,
             a->o.freq_hz);
    curl_free(ename);
    curl_mime *mime = curl_mime_init(h);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "profile");
    curl_mime_filename(part, "profile.pb.gz");
    curl_mime_type(part, "application/octet-stream");
    curl_mime_data(part, it->blob, it->len);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "stacksnap-agent");
    ag_peer_apply(&p->peer, h);
    struct curl_slist *hdrs = p->peer.auth ? curl_slist_append(NULL, p->peer.auth) : NULL;
    if (hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_mime_free(mime);
    curl_slist_free_all(hdrs);
    if (cc != CURLE_OK) {
        ag_log(a, "push to %s: %s", p->shown, ebuf[0] ? ebuf : curl_easy_strerror(cc));
        return 0;
    }
    if (code >= 200 && code < 300) return 1;
    ag_log(a, "push to %s: HTTP %ld for %s", p->shown, code, it->name);
    return code >= 400 && code < 500 && code != 429 ? -1 : 0;
}

static void *sender(void *arg)
{
    struct ag_push *p = arg;
    CURL *h = curl_easy_init();
    double backoff = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && (!p->qlen || backoff > 0)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double w = backoff > 0 ? backoff : 3600;
            ts.tv_sec += (time_t)w;
            if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT) break;
        }
        if (!p->qlen) {
            if (p->stop) break;
            continue;
        }
        /* take the oldest (the main thread may drop it meanwhile: work on a copy) */
        struct item it = p->q[p->qhead];
        memset(&p->q[p->qhead], 0, sizeof(it));
        p->qhead = (p->qhead + 1) % p->qcap;
        p->qlen--;
        bool last_try = p->stop;
        pthread_mutex_unlock(&p->mu);
        int r = h ? send_item(p, h, &it) : 0;
        pthread_mutex_lock(&p->mu);
        if (r == 1) {
            p->st.sent++;
            backoff = 0;
            item_free(&it);
        } else if (r < 0) {
            p->st.rejected++;
            item_free(&it);
        } else {
            p->st.failed_tries++;
            backoff = backoff ? (backoff * 2 > 60 ? 60 : backoff * 2) : 1;
            if (last_try || p->qlen == p->qcap) { /* stopping, or newer ones took its place */
                p->st.dropped++;
                item_free(&it);
            } else { /* back to the front */
                p->qhead = (p->qhead + p->qcap - 1) % p->qcap;
                p->q[p->qhead] = it;
                p->qlen++;
            }
            if (last_try) { /* one last try each: the server is down */
                while (p->qlen) {
                    p->st.dropped++;
                    item_free(&p->q[p->qhead]);
                    p->qhead = (p->qhead + 1) % p->qcap;
                    p->qlen--;
                }
            }
        }
        if (p->stop && !p->qlen) break;
        if (p->stop) backoff = 0;
    }
    pthread_mutex_unlock(&p->mu);
    curl_easy_cleanup(h);
    return NULL;
}

int ag_push_new(struct ag_push **out, struct ss_agent *a, struct ss_err *err)
{
    const char *u = a->o.push_url;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
        ss_err_set(err, -EINVAL, "bad push URL '%s' (http:// or https://)", u);
        return -EINVAL;
    }
    struct ag_push *p = calloc(1, sizeof(*p));
    if (!p || !(p->q = calloc(a->o.push_queue, sizeof(*p->q)))) {
        free(p);
        ss_err_set(err, -ENOMEM, "push: out of memory");
        return -ENOMEM;
    }
    p->a = a;
    p->qcap = a->o.push_queue;
    p->st.enabled = true;
    snprintf(p->url, sizeof(p->url), "%s", u);
    size_t n = strlen(p->url);
    while (n && p->url[n - 1] == '/')
        p->url[--n] = 0;
    if (n >= 7 && !strcmp(p->url + n - 7, "/ingest")) p->url[n - 7] = 0;
    const char *host = strstr(p->url, "://") + 3, *at = strchr(host, '@');
    const char *slash = strchr(host, '/');
    if (at && (!slash || at < slash)) /* credentials in the URL stay out of the log */
        snprintf(p->shown, sizeof(p->shown), "%.*s***%s", (int)(host - p->url), p->url, at);
    else
        snprintf(p->shown, sizeof(p->shown), "%s", p->url);
    if (gethostname(p->host, sizeof(p->host) - 1) < 0) strcpy(p->host, "unknown");
    for (char *s = p->host; *s; s++)
        if (*s == ',' || *s == '}' || *s == '=' || *s == '{') *s = '_';
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ag_peer_load(&p->peer, &a->o, err);
    if (rc < 0) {
        ag_push_free(p);
        return rc;
    }
    p->wstart = ag_now();
    p->wfrom = ag_wall_ns() / 1000000000;
    if (pthread_create(&p->th, NULL, sender, p)) {
        ag_push_free(p);
        ss_err_set(err, -EAGAIN, "push: cannot start the sender thread");
        return -EAGAIN;
    }
    p->started = true;
    *out = p;
    return 0;
}

void ag_push_add(struct ag_push *p, const struct ss_stack *st, const char *exe, const char *cgroup)
{
    struct app *ap = NULL;
    for (unsigned i = 0; i < p->napps && !ap; i++)
        if (!strncmp(p->apps[i].comm, st->comm, sizeof(st->comm))) ap = &p->apps[i];
    if (!ap && p->napps == PUSH_APPS) {
        ap = &p->apps[PUSH_APPS];
        if (!ap->comm[0]) strcpy(ap->comm, "other");
    } else if (!ap) {
        ap = &p->apps[p->napps++];
        memcpy(ap->comm, st->comm, sizeof(ap->comm));
        ap->comm[sizeof(ap->comm) - 1] = 0;
    }
    struct ss_err err = {0};
    if (!ap->rep) {
        struct ss_report_opts ro = {.freq_hz = p->a->o.freq_hz,
                                    .wall_start_ns = p->wfrom * 1000000000,
                                    .off_cpu = p->a->o.off_cpu};
        if (!(ap->rep = ss_report_new(&ro, &err))) return;
    }
    ss_report_set_labels(ap->rep, st->pid, exe, cgroup, &err);
    ss_report_add(ap->rep, st, p->a->o.off_cpu ? ss_report_weight_us(st) : 1, &err);
}

void ag_push_tick(struct ag_push *p, double now, bool final)
{
    if (!final && now - p->wstart < (double)p->a->o.push_every_s) return;
    int64_t until = ag_wall_ns() / 1000000000;
    if (until <= p->wfrom) until = p->wfrom + 1;
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i <= PUSH_APPS; i++) {
        struct app *ap = &p->apps[i];
        if (!ap->rep) continue;
        if (p->qlen == p->qcap) { /* drop the oldest */
            item_free(&p->q[p->qhead]);
            p->qhead = (p->qhead + 1) % p->qcap;
            p->qlen--;
            p->st.dropped++;
        }
        struct item *it = &p->q[(p->qhead + p->qlen) % p->qcap];
        app_name(it->name, sizeof(it->name), ap->comm, p->host);
        it->from = p->wfrom;
        it->until = until;
        it->rep = ap->rep;
        ap->rep = NULL;
        p->qlen++;
    }
    if (final) p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    memset(p->apps, 0, sizeof(p->apps));
    p->napps = 0;
    p->wstart = now;
    p->wfrom = until;
}

void ag_push_stats(struct ag_push *p, struct ag_push_stats *st)
{
    pthread_mutex_lock(&p->mu);
    *st = p->st;
    st->queued = p->qlen;
    pthread_mutex_unlock(&p->mu);
}

void ag_push_free(struct ag_push *p)
{
    if (!p) return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->th, NULL);
    }
    for (unsigned i = 0; i < p->qcap; i++)
        item_free(&p->q[i]);
    for (unsigned i = 0; i <= PUSH_APPS; i++)
        ss_report_free(p->apps[i].rep);
    free(p->q);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    curl_global_cleanup();
    ag_peer_free(&p->peer);
    free(p);
}
