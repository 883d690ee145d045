/* agent/otlp_push.c: --otlp — every push_every_s seconds, the window's
 * profile of every process as one OTLP ExportProfilesServiceRequest
 * (report/otlp.c), gzipped and POSTed as OTLP/HTTP protobuf to
 *   URL/v1development/profiles
 * with Content-Type application/x-protobuf, Content-Encoding gzip and the
 * --otlp-header K=V headers. The agent's send queue (sendq.c) sends them,
 * as the Pyroscope push's: a failed try (connection refused, 429, 502, 503,
 * 504: OTLP's retryable answers) is retried with backoff; other 4xx/5xx
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
    struct ag_sendq *q;
    pthread_mutex_t mu; /* the answers' counters (sender thread) */
    uint64_t partial, partial_rejected;
};

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

static int body(void *ctx, struct ag_sendq_req *r, struct ss_err *err)
{
    (void)ctx;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? ss_report_write_otlp(r->rep, f, err) : -ENOMEM;
    if (f && fclose(f) && !rc) rc = -EIO;
    if (!rc) rc = gzip_buf(buf, len, (unsigned char **)&r->body, &r->len);
    free(buf);
    return rc;
}

/* A 2xx answer: its partial_success, if any rejected profiles. */
static void answered(void *ctx, const char *body, size_t len)
{
    struct ag_otlp *p = ctx;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *m =
        len ? opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
                  NULL, len, (const uint8_t *)body)
            : NULL;
    if (len && !m) {
        ag_log(p->a, "otlp push to %s: the answer is no ExportProfilesServiceResponse (%zu bytes)",
               p->url, len);
        return;
    }
    const Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
        *ps = m ? m->partial_success : NULL;
    if (ps && (ps->rejected_profiles > 0 || (ps->error_message && ps->error_message[0]))) {
        ag_log(p->a, "otlp push to %s: partial success: %lld profiles rejected: %.300s", p->url,
               (long long)ps->rejected_profiles, ps->error_message ? ps->error_message : "");
        pthread_mutex_lock(&p->mu);
        p->partial++;
        if (ps->rejected_profiles > 0) p->partial_rejected += (uint64_t)ps->rejected_profiles;
        pthread_mutex_unlock(&p->mu);
    }
    if (m)
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
            m, NULL);
}

/* POST the gzipped request with the content headers and --otlp-header's. */
static void *prepare(void *ctx, CURL *h, const struct ag_sendq_req *r)
{
    struct ag_otlp *p = ctx;
    curl_easy_setopt(h, CURLOPT_URL, p->url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, p->hdrs);
    return NULL;
}

/* OTLP/HTTP: 429, 502, 503 and 504 are retryable, every other answer final. */
static bool retryable(long code)
{
    return code == 429 || code == 502 || code == 503 || code == 504;
}

static const struct ag_sendq_ops otlp_ops = {
    .body = body, .prepare = prepare, .retryable = retryable, .answered = answered};

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
    if (!p) {
        ss_err_set(err, -ENOMEM, "otlp push: out of memory");
        return -ENOMEM;
    }
    p->a = a;
    pthread_mutex_init(&p->mu, NULL);
    int rc = ag_peer_load(&p->peer, &a->o, err);
    if (rc < 0) {
        ag_otlp_free(p);
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
    p->wstart = ag_now();
    struct ag_sendq_opts qo = {.a = a,
                               .what = "otlp push",
                               .shown_url = p->url,
                               .peer = &p->peer,
                               .cap = a->o.push_queue,
                               .ops = &otlp_ops,
                               .ctx = p};
    if (!h) {
        ag_otlp_free(p);
        ss_err_set(err, -ENOMEM, "otlp push: out of memory");
        return -ENOMEM;
    }
    if ((rc = ag_sendq_new(&p->q, &qo, err)) < 0) {
        ag_otlp_free(p);
        return rc;
    }
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
    if (p->rep) {
        ag_sendq_put(p->q, &(struct ag_sendq_req){.rep = p->rep});
        p->rep = NULL;
    }
    ag_sendq_wake(p->q, final);
    p->wstart = now;
}

void ag_otlp_stats(struct ag_otlp *p, struct ag_otlp_stats *st)
{
    ag_sendq_stats(p->q, &st->q);
    pthread_mutex_lock(&p->mu);
    st->partial = p->partial;
    st->partial_rejected = p->partial_rejected;
    pthread_mutex_unlock(&p->mu);
}

void ag_otlp_free(struct ag_otlp *p)
{
    if (!p) return;
    ag_sendq_free(p->q); /* its last tries use the peer, the headers and mu */
    ss_report_free(p->rep);
    curl_slist_free_all(p->hdrs);
    ag_peer_free(&p->peer);
    pthread_mutex_destroy(&p->mu);
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
