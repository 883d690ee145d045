/* test/otlp/otlp_agent.c: `stacksnap agent --otlp URL --otlp-header K=V`
 * (issue 30) posts to an OTLP/HTTP receiver on loopback (libmicrohttpd) that
 * checks the method, path /v1development/profiles, Content-Type
 * application/x-protobuf, Content-Encoding gzip and the given headers,
 * gunzips the body (zlib) and answers an ExportProfilesServiceResponse with
 * a partial_success rejecting one profile. The body decodes with protoc
 * and the v1.11.0 schema into samples of the workload; the agent logs and
 * counts the partial success on /metrics; it retried while the receiver was
 * down. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "../agent/agent_util.h"
#include "../cli/cli.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pbtext.h"

struct orecv {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    char *dir;
    int count;
    char last[512], error[600];
};

struct oreq {
    char *data;
    size_t len;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const void *body, size_t n,
                             const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (type) MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* gunzip (zlib's gzip header mode): 0 or -1. */
static int gunzip(const char *in, size_t len, char **out, size_t *olen)
{
    z_stream zs = {0};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return -1;
    size_t cap = len * 4 + 4096, n = 0;
    char *b = malloc(cap);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    int z;
    do {
        if (cap - n < 4096) b = realloc(b, cap *= 2);
        zs.next_out = (Bytef *)b + n;
        zs.avail_out = (uInt)(cap - n);
        z = inflate(&zs, Z_NO_FLUSH);
        n = cap - zs.avail_out;
    } while (z == Z_OK);
    inflateEnd(&zs);
    if (z != Z_STREAM_END) {
        free(b);
        return -1;
    }
    *out = b;
    *olen = n;
    return 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    struct orecv *r = cls;
    struct oreq *q = *state;
    if (!q) {
        *state = calloc(1, sizeof(*q));
        return MHD_YES;
    }
    if (*upload_size) {
        q->data = realloc(q->data, q->len + *upload_size);
        memcpy(q->data + q->len, upload, *upload_size);
        q->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    char why[600] = "";
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    const char *tenant = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Scope-OrgID");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char *body = NULL;
    size_t blen = 0;
    if (strcmp(method, "POST"))
        snprintf(why, sizeof(why), "method %s, not POST", method);
    else if (strcmp(url, "/v1development/profiles"))
        snprintf(why, sizeof(why), "path %s, not /v1development/profiles", url);
    else if (!ct || strcmp(ct, "application/x-protobuf"))
        snprintf(why, sizeof(why), "Content-Type '%s'", ct ? ct : "");
    else if (!ce || strcmp(ce, "gzip"))
        snprintf(why, sizeof(why), "Content-Encoding '%s'", ce ? ce : "");
    else if (!tenant || strcmp(tenant, "tenant-1") || !auth || strcmp(auth, "Bearer s3cr=t"))
        snprintf(why, sizeof(why), "headers X-Scope-OrgID '%s', Authorization '%s'",
                 tenant ? tenant : "", auth ? auth : "");
    else if (gunzip(q->data, q->len, &body, &blen))
        snprintf(why, sizeof(why), "the body (%zu bytes) is not gzip", q->len);
    if (why[0]) {
        pthread_mutex_lock(&r->mu);
        if (!r->error[0]) snprintf(r->error, sizeof(r->error), "%s", why);
        pthread_mutex_unlock(&r->mu);
        return reply(c, 400, why, strlen(why), "text/plain");
    }
    pthread_mutex_lock(&r->mu);
    snprintf(r->last, sizeof(r->last), "%s/push-%d.otlp", r->dir, r->count++);
    cli_store(r->last, body, blen);
    pthread_mutex_unlock(&r->mu);
    free(body);
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess ps =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    ps.rejected_profiles = 1;
    ps.error_message = "test receiver rejects one profile";
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    resp.partial_success = &ps;
    uint8_t out[512];
    size_t n =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(
            &resp, out);
    return reply(c, 200, out, n, "application/x-protobuf");
}

static void done(void *cls, struct MHD_Connection *c, void **state,
                 enum MHD_RequestTerminationCode t)
{
    (void)cls, (void)c, (void)t;
    struct oreq *q = *state;
    if (!q) return;
    free(q->data);
    free(q);
}

static struct orecv *orecv_start(int port, const char *dir)
{
    struct orecv *r = calloc(1, sizeof(*r));
    r->dir = strdup(dir);
    pthread_mutex_init(&r->mu, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL, handle, r,
                            MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, done, r,
                            MHD_OPTION_END);
    return r->d ? r : NULL;
}

static int orecv_count(struct orecv *r, char *last, size_t len)
{
    pthread_mutex_lock(&r->mu);
    int n = r->count;
    if (last) snprintf(last, len, "%s", r->last);
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void orecv_stop(struct orecv *r)
{
    MHD_stop_daemon(r->d);
    pthread_mutex_destroy(&r->mu);
    free(r->dir);
    free(r);
}

Test(otlp_agent, push_with_outage_and_partial_success, .timeout = 150)
{
    char *dir = cli_tmpdir("otlp-agent");
    char *bin = cli_built("cli_native");
    char *argv[] = {bin, "0", NULL};
    int ofd = -1;
    pid_t nat = cli_start(argv, &ofd, NULL);
    cr_assert(nat > 0);
    char line[128];
    cr_assert(cli_wait_line(ofd, 30, line, sizeof(line)) == 0, "cli_native did not start");
    int port = ag_free_port();
    char url[64], pidarg[16];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
    snprintf(pidarg, sizeof(pidarg), "%d", (int)nat);
    struct ag_proc ag;
    const char *args[] = {"-p",
                          pidarg,
                          "-F",
                          "99",
                          "--otlp",
                          url,
                          "--otlp-header",
                          "X-Scope-OrgID=tenant-1",
                          "--otlp-header",
                          "Authorization=Bearer s3cr=t",
                          "--push-every",
                          "1",
                          NULL};
    setenv("OTEL_SERVICE_NAME", "checkout-svc", 1); /* the agent's service.name */
    int started = ag_start(&ag, "otlp-agent", args);
    unsetenv("OTEL_SERVICE_NAME");
    cr_assert(started == 0, "the agent did not start");
    cli_sleep(1.5); /* the receiver is down: tries fail, backoff */
    char *body = NULL;
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    cr_expect(ag_metric(body, "stacksnap_otlp_failures_total") >= 1, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_otlp_sent_total") == 0, "%s", body);
    free(body);
    struct orecv *r = orecv_start(port, dir);
    cr_assert(r, "cannot start the receiver on port %d", port);
    for (double t_end = cli_now() + 20; cli_now() < t_end && orecv_count(r, NULL, 0) < 2;
         cli_sleep(0.2))
        ;
    char last[512];
    cr_assert(orecv_count(r, last, sizeof(last)) >= 2,
              "no OTLP pushes after the receiver came up (rejection: %s)\n%s", r->error,
              cli_load(ag.errpath, NULL));
    cr_expect(!r->error[0], "a push broke OTLP/HTTP: %s", r->error);
    /* the body: an ExportProfilesServiceRequest of the workload */
    char why[1024] = "";
    struct pbt *req = otlp_decode_file(SS_OTLP_PROTO_DIR, last, why, sizeof(why));
    cr_assert(req, "%s", why);
    char *folded = otlp_folded(req, 0, why, sizeof(why));
    cr_assert(folded, "the pushed request breaks a rule: %s", why);
    cr_expect(strstr(folded, "cli_native;") && strstr(folded, "cli_leaf"),
              "pushed profiles without the workload:\n%.2000s", folded);
    cr_expect_str_eq(otlp_resource_attr(req, 0, "service.name"), "checkout-svc");
    cr_expect_str_eq(otlp_resource_attr(req, 0, "process.executable.name"), "cli_native");
    const char *exe = otlp_resource_attr(req, 0, "process.executable.path");
    cr_expect(exe && strstr(exe, "cli_native"), "process.executable.path '%s'", exe ? exe : "");
    free(folded);
    pbt_free(req);
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    cr_expect(ag_metric(body, "stacksnap_otlp_sent_total") >= 2, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_otlp_partial_success_total") >= 2, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_otlp_rejected_profiles_total") >= 2, "%s", body);
    free(body);
    int before = orecv_count(r, NULL, 0);
    cr_expect_eq(ag_stop(&ag, 10), 0);
    cr_expect(orecv_count(r, NULL, 0) > before, "the last window was not pushed at SIGTERM");
    cr_expect(strstr(ag.log, "partial success: 1 profiles rejected: test receiver rejects one"),
              "the partial success was not logged:\n%s", ag.log);
    orecv_stop(r);
    kill(nat, SIGKILL);
    cli_wait(nat, 10);
    ag_proc_free(&ag);
    cli_rmtree(dir);
    free(dir);
    free(bin);
    close(ofd);
}

Test(otlp_agent, bad_flags)
{
    const char *cases[][6] = {
        {"agent", "--otlp", "ftp://x", NULL},
        {"agent", "--otlp-header", "A=b", NULL},
        {"agent", "--otlp", "http://127.0.0.1:1", "--otlp-header", "novalue", NULL},
        {"agent", "--otlp", "http://127.0.0.1:1", "--otlp-header", "Bad Name=x", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[8] = {(char *)cli_ss()};
        int n = 1;
        for (int k = 0; cases[i][k]; k++)
            argv[n++] = (char *)cases[i][k];
        argv[n] = NULL;
        struct cli_res res;
        cr_assert(cli_run(&res, 30, argv) == 0);
        cr_expect_eq(res.status, 2, "case %zu: exit %d:\n%s", i, res.status, res.err);
        cr_expect(strstr(res.err, "otlp"), "case %zu: the error does not say what:\n%s", i,
                  res.err);
        cli_res_free(&res);
    }
}
