/* agent/otlp_push.c: --otlp — every push_every_s seconds, the window's
 * profile of every process as one OTLP ExportProfilesServiceRequest
 * (report/otlp.c), gzipped and POSTed as OTLP/HTTP protobuf to
 *   URL/v1development/profiles
 * with Content-Type application/x-protobuf, Content-Encoding gzip and the
 * --otlp-header K=V headers. A sender thread (libcurl) works through a
 * bounded queue as the Pyroscope push does (push.c): a failed try
 * (connection refused, 429, 502, 503, 504: OTLP's retryable answers) is
 * retried with exponential backoff (1 s doubling to 60 s); other 4xx/5xx
 * answers are not retried; a full queue drops its oldest request. A 2xx
 * answer's ExportProfilesServiceResponse with a partial_success that
 * rejected profiles is logged and counted. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "agent/agent_int.h"

#ifdef SS_HAVE_OTLP
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#define RESP_MAX (1u << 20) /* response bytes kept (a partial_success is small) */

struct oitem {
    struct ss_report *rep; /* serialized on the first try */
    unsigned char *blob;   /* the gzipped request */
    size_t len;
};

struct ag_otlp {
    struct ss_agent *a;
    char url[1100];
    struct curl_slist *hdrs; /* with --push-auth-file's Authorization */
    struct ag_peer peer;     /* --push-ca, --push-auth-file */
    char host[256];
    char service[256]; /* "" : each process's command name */
    int64_t mono_to_real;
    /* main thread: the current window */
    struct ss_report *rep;
    double wstart;
    /* shared with the sender, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct oitem *q;
    unsigned qcap, qhead, qlen;
    bool stop;
    struct ag_otlp_stats st;
    pthread_t th;
    bool started;
};

static void oitem_free(struct oitem *it)
{
    ss_report_free(it->rep);
    free(it->blob);
    memset(it, 0, sizeof(*it));
}

static int64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* in gzipped (zlib, fastest level as the pprof writer) into *out. */
static int gzip_buf(const char *in, size_t len, unsigned char **out, size_t *olen)
{
    z_stream zs = {0};
    if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    unsigned char *b = malloc(cap);
    if (!b) {
        deflateEnd(&zs);
        return -ENOMEM;
    }
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = b;
    zs.avail_out = (uInt)cap;
    int z = deflate(&zs, Z_FINISH);
    *olen = cap - zs.avail_out;
    deflateEnd(&zs);
    if (z != Z_STREAM_END) {
        free(b);
        return -EIO;
    }
    *out = b;
    return 0;
}

static int serialize(struct ag_otlp *p, struct oitem *it)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct ss_err err = {0};
    int rc = f ? ss_report_write_otlp(it->rep, f, &err) : -ENOMEM;
    if (f && fclose(f) && !rc) rc = -EIO;
    ss_report_free(it->rep);
    it->rep = NULL;
    if (!rc) rc = gzip_buf(buf, len, &it->blob, &it->len);
    free(buf);
    if (rc < 0)
        ag_log(p->a, "otlp push: cannot write the profiles: %s",
               err.msg[0] ? err.msg : strerror(-rc));
    return rc;
}

struct resp {
    char *p;
    size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t k = size * n;
    if (r->len + k > RESP_MAX) return k; /* keep the start only */
    char *b = realloc(r->p, r->len + k + 1);
    if (!b) return 0;
    memcpy(b + r->len, data, k);
    r->p = b;
    r->len += k;
    return k;
}

/* A 2xx answer: its partial_success, if any rejected profiles. */
static void partial(struct ag_otlp *p, const struct resp *r)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *m =
        r->len
            ? opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
                  NULL, r->len, (const uint8_t *)r->p)
            : NULL;
    if (r->len && !m) {
        ag_log(p->a, "otlp push to %s: the answer is no ExportProfilesServiceResponse (%zu bytes)",
               p->url, r->len);
        return;
    }
    const Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
        *ps = m ? m->partial_success : NULL;
    if (ps && (ps->rejected_profiles > 0 || (ps->error_message && ps->error_message[0]))) {
        ag_log(p->a, "otlp push to %s: partial success: %lld profiles rejected: %.300s", p->url,
               (long long)ps->rejected_profiles, ps->error_message ? ps->error_message : "");
        pthread_mutex_lock(&p->mu);
        p->st.partial++;
        if (ps->rejected_profiles > 0) p->st.partial_rejected += (uint64_t)ps->rejected_profiles;
        pthread_mutex_unlock(&p->mu);
    }
    if (m)
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
            m, NULL);
}

/* One try. 1 sent, 0 retry later, -1 refused for good. */
static int send_item(struct ag_otlp *p, CURL *h, struct oitem *it)
{
    if (!it->blob && serialize(p, it) < 0) return -1;
    struct resp r = {0};
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, p->url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)it->blob);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, p->hdrs);
    ag_peer_apply(&p->peer, h);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "stacksnap-agent");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    int rc;
    if (cc != CURLE_OK) {
        ag_log(p->a, "otlp push to %s: %s", p->url, ebuf[0] ? ebuf : curl_easy_strerror(cc));
        rc = 0;
    } else if (code >= 200 && code < 300) {
        partial(p, &r);
        rc = 1;
    } else {
        ag_log(p->a, "otlp push to %s: HTTP %ld", p->url, code);
        rc = code == 429 || code == 502 || code == 503 || code == 504 ? 0 : -1;
    }
    free(r.p);
    return rc;
}

static void *sender(void *arg)
{
    struct ag_otlp *p = arg;
    CURL *h = curl_easy_init();
    double backoff = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && (!p->qlen || backoff > 0)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(backoff > 0 ? backoff : 3600);
            if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT) break;
        }
        if (!p->qlen) {
            if (p->stop) break;
            continue;
        }
        struct oitem it = p->q[p->qhead]; /* the main thread may drop it meanwhile */
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
            oitem_free(&it);
        } else if (r < 0) {
            p->st.rejected++;
            oitem_free(&it);
        } else {
            p->st.failed_tries++;
            backoff = backoff ? (backoff * 2 > 60 ? 60 : backoff * 2) : 1;
            if (last_try || p->qlen == p->qcap) {
                p->st.dropped++;
                oitem_free(&it);
            } else { /* back to the front */
                p->qhead = (p->qhead + p->qcap - 1) % p->qcap;
                p->q[p->qhead] = it;
                p->qlen++;
            }
            while (last_try && p->qlen) { /* one last try each: the server is down */
                p->st.dropped++;
                oitem_free(&p->q[p->qhead]);
                p->qhead = (p->qhead + 1) % p->qcap;
                p->qlen--;
            }
        }
        if (p->stop && !p->qlen) break;
        if (p->stop) backoff = 0;
    }
    pthread_mutex_unlock(&p->mu);
    curl_easy_cleanup(h);
    return NULL;
}

int ag_otlp_header_ok(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return 0;
    for (const char *s = kv; s < eq; s++) /* an HTTP token */
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return 0;
    for (const char *s = eq + 1; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t') return 0;
    return 1;
}

int ag_otlp_new(struct ag_otlp **out, struct ss_agent *a, struct ss_err *err)
{
    const char *u = a->o.otlp_url;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
        ss_err_set(err, -EINVAL, "bad --otlp URL '%s' (http:// or https://)", u);
        return -EINVAL;
    }
    for (unsigned i = 0; i < a->o.n_otlp_headers; i++)
        if (!ag_otlp_header_ok(a->o.otlp_headers[i])) {
            ss_err_set(err, -EINVAL, "bad --otlp-header '%s' (NAME=VALUE)", a->o.otlp_headers[i]);
            return -EINVAL;
        }
    struct ag_otlp *p = calloc(1, sizeof(*p));
    if (!p || !(p->q = calloc(a->o.push_queue, sizeof(*p->q)))) {
        free(p);
        ss_err_set(err, -ENOMEM, "otlp push: out of memory");
        return -ENOMEM;
    }
    p->a = a;
    p->qcap = a->o.push_queue;
    p->st.enabled = true;
    int rc = ag_peer_load(&p->peer, &a->o, err);
    if (rc < 0) {
        free(p->q);
        free(p);
        return rc;
    }
    size_t n = strlen(u);
    while (n && u[n - 1] == '/')
        n--;
    snprintf(p->url, sizeof(p->url), "%.*s/v1development/profiles", (int)(n < 1000 ? n : 1000), u);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    if (h) h = curl_slist_append(h, "Content-Encoding: gzip");
    for (unsigned i = 0; h && i < a->o.n_otlp_headers; i++) {
        const char *kv = a->o.otlp_headers[i], *eq = strchr(kv, '=');
        char line[2048];
        snprintf(line, sizeof(line), "%.*s: %s", (int)(eq - kv), kv, eq + 1);
        struct curl_slist *nh = curl_slist_append(h, line);
        if (!nh) curl_slist_free_all(h);
        h = nh;
    }
    if (h && p->peer.auth) {
        struct curl_slist *nh = curl_slist_append(h, p->peer.auth);
        if (!nh) curl_slist_free_all(h);
        h = nh;
    }
    p->hdrs = h;
    if (gethostname(p->host, sizeof(p->host) - 1) < 0) p->host[0] = 0;
    snprintf(p->service, sizeof(p->service), "%s", a->o.otlp_service ? a->o.otlp_service : "");
    p->mono_to_real = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    p->wstart = ag_now();
    if (!h || pthread_create(&p->th, NULL, sender, p)) {
        ag_otlp_free(p);
        ss_err_set(err, -EAGAIN, "otlp push: cannot start the sender thread");
        return -EAGAIN;
    }
    p->started = true;
    *out = p;
    return 0;
}

void ag_otlp_add(struct ag_otlp *p, const struct ss_stack *st, const char *exe, const char *cgroup)
{
    struct ss_err err = {0};
    if (!p->rep) {
        /* time_unix_nano: the window's first sample (its timestamps are within) */
        struct ss_report_opts ro = {
            .freq_hz = p->a->o.freq_hz, .off_cpu = p->a->o.off_cpu, .timestamps = true};
        if (!(p->rep = ss_report_new(&ro, &err))) return;
        if (ss_report_set_clock(p->rep, p->mono_to_real, p->host, p->service, &err) < 0) {
            ss_report_free(p->rep);
            p->rep = NULL;
            return;
        }
    }
    ss_report_set_labels(p->rep, st->pid, exe, cgroup, &err);
    ss_report_add(p->rep, st, p->a->o.off_cpu ? ss_report_weight_us(st) : 1, &err);
}

void ag_otlp_tick(struct ag_otlp *p, double now, bool final)
{
    if (!final && now - p->wstart < (double)p->a->o.push_every_s) return;
    pthread_mutex_lock(&p->mu);
    if (p->rep) {
        if (p->qlen == p->qcap) { /* drop the oldest */
            oitem_free(&p->q[p->qhead]);
            p->qhead = (p->qhead + 1) % p->qcap;
            p->qlen--;
            p->st.dropped++;
        }
        p->q[(p->qhead + p->qlen) % p->qcap] = (struct oitem){.rep = p->rep};
        p->qlen++;
        p->rep = NULL;
    }
    if (final) p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    p->wstart = now;
}

void ag_otlp_stats(struct ag_otlp *p, struct ag_otlp_stats *st)
{
    pthread_mutex_lock(&p->mu);
    *st = p->st;
    st->queued = p->qlen;
    pthread_mutex_unlock(&p->mu);
}

void ag_otlp_free(struct ag_otlp *p)
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
        oitem_free(&p->q[i]);
    ss_report_free(p->rep);
    free(p->q);
    curl_slist_free_all(p->hdrs);
    ag_peer_free(&p->peer);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    curl_global_cleanup();
    free(p);
}
#else
int ag_otlp_header_ok(const char *kv)
{
    return strchr(kv, '=') != NULL;
}

int ag_otlp_new(struct ag_otlp **out, struct ss_agent *a, struct ss_err *err)
{
    (void)a;
    *out = NULL;
    ss_err_set(err, -ENOTSUP,
               "--otlp: this stacksnap was built without OTLP (no opentelemetry-proto 1.11.0 "
               ".proto files at build time)");
    return -ENOTSUP;
}

void ag_otlp_add(struct ag_otlp *p, const struct ss_stack *st, const char *exe, const char *cgroup)
{
    (void)p, (void)st, (void)exe, (void)cgroup;
}

void ag_otlp_tick(struct ag_otlp *p, double now, bool final)
{
    (void)p, (void)now, (void) final;
}

void ag_otlp_stats(struct ag_otlp *p, struct ag_otlp_stats *st)
{
    (void)p;
    memset(st, 0, sizeof(*st));
}

void ag_otlp_free(struct ag_otlp *p)
{
    (void)p;
}
#endif
