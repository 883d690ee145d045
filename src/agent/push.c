/* agent/push.c: --push — every push_every_s seconds, one pprof per command
 * name of that window, POSTed to Grafana Pyroscope's ingest API:
 *   POST URL/ingest?name=COMM{host=HOST}&from=S&until=S&format=pprof
 *        &sampleRate=HZ&spyName=stacksnap
 * with a multipart/form-data body whose part "profile" is the gzipped pprof.
 * The agent's send queue (sendq.c) sends them: a failed try (connection
 * refused, 5xx, 429) is retried with backoff, other 4xx are refused; a full
 * queue drops its oldest profile. TLS: the server's certificate is always
 * verified (libcurl's default, set explicitly), against --push-ca's CA file
 * when given, else the system's. --push-auth-file's value goes into each
 * request's Authorization header; it is read once and never logged. */
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
    struct ag_sendq *q;
};

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

static int body(void *ctx, struct ag_sendq_req *r, struct ss_err *err)
{
    (void)ctx;
    FILE *f = open_memstream(&r->body, &r->len);
    int rc = f ? ss_report_write_pprof(r->rep, f, err) : -ENOMEM;
    if (f && fclose(f) && !rc) rc = -EIO;
    return rc;
}

struct
try {
    curl_mime *mime;
    struct curl_slist *hdrs;
};

/* POST URL/ingest?name=...: multipart/form-data, part "profile". */
static void *prepare(void *ctx, CURL *h, const struct ag_sendq_req *r)
{
    struct ag_push *p = ctx;
    struct try *t = calloc(1, sizeof(*t));
    char *ename = curl_easy_escape(h, r->name, 0);
    char url[1400];
    snprintf(url, sizeof(url),
             "%s/ingest?name=%s&from=%lld&until=%lld&format=pprof&sampleRate=%u"
             "&spyName=stacksnap",
             p->url, ename ? ename : "unknown", (long long)r->from, (long long)r->until,
             p->a->o.freq_hz);
    curl_free(ename);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (!t) return NULL; /* the try fails: no body */
    t->mime = curl_mime_init(h);
    curl_mimepart *part = curl_mime_addpart(t->mime);
    curl_mime_name(part, "profile");
    curl_mime_filename(part, "profile.pb.gz");
    curl_mime_type(part, "application/octet-stream");
    curl_mime_data(part, r->body, r->len);
    curl_easy_setopt(h, CURLOPT_MIMEPOST, t->mime);
    t->hdrs = p->peer.auth ? curl_slist_append(NULL, p->peer.auth) : NULL;
    if (t->hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, t->hdrs);
    return t;
}

static void done(void *tmp)
{
    struct try *t = tmp;
    if (!t) return;
    curl_mime_free(t->mime);
    curl_slist_free_all(t->hdrs);
    free(t);
}

/* Pyroscope: 4xx but 429 is the request's fault (not retried). */
static bool retryable(long code)
{
    return !(code >= 400 && code < 500 && code != 429);
}

static const struct ag_sendq_ops push_ops = {
    .body = body, .prepare = prepare, .done = done, .retryable = retryable};

int ag_push_new(struct ag_push **out, struct ss_agent *a, struct ss_err *err)
{
    const char *u = a->o.push_url;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
        ss_err_set(err, -EINVAL, "bad push URL '%s' (http:// or https://)", u);
        return -EINVAL;
    }
    struct ag_push *p = calloc(1, sizeof(*p));
    if (!p) {
        ss_err_set(err, -ENOMEM, "push: out of memory");
        return -ENOMEM;
    }
    p->a = a;
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
    int rc = ag_peer_load(&p->peer, &a->o, err);
    if (rc < 0) {
        ag_push_free(p);
        return rc;
    }
    p->wstart = ag_now();
    p->wfrom = ag_wall_ns() / 1000000000;
    struct ag_sendq_opts qo = {.a = a,
                               .what = "push",
                               .shown_url = p->shown,
                               .peer = &p->peer,
                               .cap = a->o.push_queue,
                               .ops = &push_ops,
                               .ctx = p};
    if ((rc = ag_sendq_new(&p->q, &qo, err)) < 0) {
        ag_push_free(p);
        return rc;
    }
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
    for (unsigned i = 0; i <= PUSH_APPS; i++) {
        struct app *ap = &p->apps[i];
        if (!ap->rep) continue;
        struct ag_sendq_req r = {.rep = ap->rep, .from = p->wfrom, .until = until};
        app_name(r.name, sizeof(r.name), ap->comm, p->host);
        ag_sendq_put(p->q, &r);
        ap->rep = NULL;
    }
    ag_sendq_wake(p->q, final);
    memset(p->apps, 0, sizeof(p->apps));
    p->napps = 0;
    p->wstart = now;
    p->wfrom = until;
}

void ag_push_stats(struct ag_push *p, struct ag_send_stats *st)
{
    ag_sendq_stats(p->q, st);
}

void ag_push_free(struct ag_push *p)
{
    if (!p) return;
    ag_sendq_free(p->q); /* its last tries use the peer */
    for (unsigned i = 0; i <= PUSH_APPS; i++)
        ss_report_free(p->apps[i].rep);
    ag_peer_free(&p->peer);
    free(p);
}
