/* test/agent/agent_util.c: see agent_util.h. */
#include "agent_util.h"
#include <criterion/criterion.h>

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/cli.h"

int ag_start(struct ag_proc *p, const char *tag, const char *const *args)
{
    memset(p, 0, sizeof(*p));
    char *dir = cli_tmpdir(tag);
    p->errpath = cli_path(dir, "agent.err");
    free(dir);
    const char *argv[32] = {cli_ss(), "agent", "--listen", "127.0.0.1:0"};
    int n = 4;
    for (int i = 0; args && args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    p->pid = cli_start((char *const *)argv, NULL, p->errpath);
    if (p->pid < 0) return -1;
    for (double end = cli_now() + 20; cli_now() < end; cli_sleep(0.05)) {
        char *e = cli_load(p->errpath, NULL);
        const char *l = e ? strstr(e, "listening on 127.0.0.1:") : NULL;
        if (l) p->port = atoi(l + strlen("listening on 127.0.0.1:"));
        free(e);
        if (p->port > 0) return 0;
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) break;
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    return -1;
}

void ag_proc_free(struct ag_proc *p)
{
    free(p->log);
    free(p->errpath);
    p->log = p->errpath = NULL;
}

int ag_stop(struct ag_proc *p, double timeout_s)
{
    kill(p->pid, SIGTERM);
    int st = cli_wait(p->pid, timeout_s);
    free(p->log);
    p->log = cli_load(p->errpath, NULL);
    char *slash = strrchr(p->errpath, '/');
    *slash = 0;
    cli_rmtree(p->errpath);
    free(p->errpath);
    p->errpath = NULL;
    return st;
}

int ag_sh(char **out, double timeout_s, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&cmd, fmt, ap) < 0) cmd = NULL;
    va_end(ap);
    struct cli_res r;
    char *const argv[] = {"sh", "-c", cmd, NULL};
    int rc = cli_run(&r, timeout_s, argv);
    free(cmd);
    if (rc) return -1;
    if (out) {
        size_t n = r.out_len + r.err_len;
        *out = malloc(n + 1);
        memcpy(*out, r.out, r.out_len);
        memcpy(*out + r.out_len, r.err, r.err_len);
        (*out)[n] = 0;
    }
    rc = r.status;
    cli_res_free(&r);
    return rc;
}

int ag_http(int port, const char *method, const char *path, char **body, double timeout_s)
{
    char *dir = cli_tmpdir("http"), *f = cli_path(dir, "body");
    char *out = NULL;
    ag_sh(&out, timeout_s + 5,
          "curl -s -X %s --max-time %g -o '%s' -w '%%{http_code}' "
          "'http://127.0.0.1:%d%s'",
          method, timeout_s, f, port, path);
    int code = out ? atoi(out) : 0;
    if (body) {
        *body = cli_load(f, NULL);
        if (!*body) *body = strdup("");
    }
    free(out);
    cli_rmtree(dir);
    free(f);
    free(dir);
    return code;
}

double ag_metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, name, n) && l[n] == ' ') return strtod(l + n + 1, NULL);
    return -1;
}

/* The loop; with names, each command runs through a symlink of its own name
 * in names (the loop shell too), so its samples carry that comm. */
static pid_t churn(const char *lj, int secs, const char *names)
{
    char cmd[4096], *const loop_argv[] = {"sh", "-c", cmd, NULL};
    char lj_path[512], sh[512], ls[512], tr[512], loop[512];
    snprintf(lj_path, sizeof(lj_path), "%s", lj);
    snprintf(sh, sizeof(sh), "sh");
    snprintf(ls, sizeof(ls), "ls");
    snprintf(tr, sizeof(tr), "true");
    if (names) {
        const struct {
            char *path;
            const char *name, *target;
        } link[] = {{lj_path, "luajit", lj},
                    {sh, "sh", "/bin/sh"},
                    {ls, "ls", "/bin/ls"},
                    {tr, "true", "/bin/true"},
                    {loop, "loop", "/bin/sh"}};
        for (size_t i = 0; i < sizeof(link) / sizeof(link[0]); i++) {
            snprintf(link[i].path, 512, "%s/%s%s", names, AG_CHURN_PREFIX, link[i].name);
            if (symlink(link[i].target, link[i].path) < 0 && errno != EEXIST) return -1;
        }
    }
    snprintf(cmd, sizeof(cmd),
             "end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do "
             "'%s' -e 'local s=0 for i=1,2e6 do s=s+i%%7 end'; '%s' -c true; '%s' / >/dev/null; "
             "'%s'; done",
             secs, lj_path, sh, ls, tr);
    if (!names) return cli_start(loop_argv, NULL, NULL);
    char *const named[] = {loop, "-c", cmd, NULL};
    return cli_start(named, NULL, NULL);
}

pid_t ag_churn(const char *lj, int secs)
{
    return churn(lj, secs, NULL);
}

pid_t ag_churn_named(const char *lj, int secs, const char *dir)
{
    return churn(lj, secs, dir);
}

int ag_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* ---- the Pyroscope ingest receiver ---- */
struct ag_recv {
    struct MHD_Daemon *d;
    char *dir;
    pthread_mutex_t mu;
    int count;
    char last_name[256], last_path[512], error[512];
    char *want_auth; /* the Authorization header every request must carry */
    int unauthorized;
};

struct req { /* one POST being received */
    struct MHD_PostProcessor *pp;
    char *data;
    size_t len;
    bool got_profile, bad_part;
    char part_err[128];
};

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *type, const char *enc,
                               const char *data, uint64_t off, size_t size)
{
    (void)kind, (void)type, (void)enc, (void)off;
    struct req *q = cls;
    if (strcmp(key, "profile") && strcmp(key, "prev_profile") &&
        strcmp(key, "sample_type_config")) {
        q->bad_part = true;
        snprintf(q->part_err, sizeof(q->part_err), "unknown form field '%s'", key);
        return MHD_YES;
    }
    if (strcmp(key, "profile")) return MHD_YES;
    if (!filename) {
        q->bad_part = true;
        snprintf(q->part_err, sizeof(q->part_err), "field 'profile' is not a file part");
    }
    q->got_profile = true;
    char *n = realloc(q->data, q->len + size + 1);
    if (!n) return MHD_NO;
    q->data = n;
    memcpy(q->data + q->len, data, size);
    q->len += size;
    return MHD_YES;
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, const char *msg)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static void reject(struct ag_recv *r, const char *why)
{
    pthread_mutex_lock(&r->mu);
    if (!r->error[0]) snprintf(r->error, sizeof(r->error), "%s", why);
    pthread_mutex_unlock(&r->mu);
}

static bool number(const char *s)
{
    if (!s || !*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    struct ag_recv *r = cls;
    struct req *q = *state;
    if (!q) {
        q = calloc(1, sizeof(*q));
        *state = q;
        if (!strcmp(method, "POST")) q->pp = MHD_create_post_processor(c, 65536, on_part, q);
        return MHD_YES;
    }
    if (*upload_size) {
        if (q->pp) MHD_post_process(q->pp, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->want_auth) {
        const char *au = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!au || strcmp(au, r->want_auth)) {
            pthread_mutex_lock(&r->mu);
            r->unauthorized++;
            pthread_mutex_unlock(&r->mu);
            return answer(c, 401, "unauthorized");
        }
    }
    char why[600] = "";
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "name");
    const char *from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
    const char *until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "until");
    const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
    if (strcmp(method, "POST"))
        snprintf(why, sizeof(why), "method %s, not POST", method);
    else if (strcmp(url, "/ingest"))
        snprintf(why, sizeof(why), "path %s, not /ingest", url);
    else if (!name || !*name)
        snprintf(why, sizeof(why), "no name");
    else if (!number(from) || !number(until) || atoll(from) > atoll(until))
        snprintf(why, sizeof(why), "bad from/until '%s'/'%s'", from ? from : "",
                 until ? until : "");
    else if (!fmt || strcmp(fmt, "pprof"))
        snprintf(why, sizeof(why), "format '%s', not pprof", fmt ? fmt : "");
    else if (!ct || strncmp(ct, "multipart/form-data", 19) || !strstr(ct, "boundary="))
        snprintf(why, sizeof(why), "Content-Type '%s', not multipart/form-data", ct ? ct : "");
    else if (q->bad_part)
        snprintf(why, sizeof(why), "%s", q->part_err);
    else if (!q->got_profile || q->len < 2 || (unsigned char)q->data[0] != 0x1f ||
             (unsigned char)q->data[1] != 0x8b)
        snprintf(why, sizeof(why), "no gzipped 'profile' part");
    if (why[0]) {
        reject(r, why);
        return answer(c, 400, why);
    }
    pthread_mutex_lock(&r->mu);
    char path[512];
    snprintf(path, sizeof(path), "%s/push-%d.pb.gz", r->dir, r->count);
    cli_store(path, q->data, q->len);
    r->count++;
    snprintf(r->last_name, sizeof(r->last_name), "%s", name);
    snprintf(r->last_path, sizeof(r->last_path), "%s", path);
    pthread_mutex_unlock(&r->mu);
    return answer(c, 200, "");
}

static void done(void *cls, struct MHD_Connection *c, void **state,
                 enum MHD_RequestTerminationCode t)
{
    (void)cls, (void)c, (void)t;
    struct req *q = *state;
    if (!q) return;
    if (q->pp) MHD_destroy_post_processor(q->pp);
    free(q->data);
    free(q);
}

struct ag_recv *ag_recv_start(int port, const char *dir)
{
    return ag_recv_start_tls(port, dir, NULL, NULL, NULL);
}

struct ag_recv *ag_recv_start_tls(int port, const char *dir, const char *cert_pem,
                                  const char *key_pem, const char *want_auth)
{
    struct ag_recv *r = calloc(1, sizeof(*r));
    r->dir = strdup(dir);
    pthread_mutex_init(&r->mu, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r->want_auth = want_auth ? strdup(want_auth) : NULL;
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert_pem},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key_pem},
                                   {MHD_OPTION_END, 0, NULL}};
    r->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | (cert_pem ? MHD_USE_TLS : 0),
                            (uint16_t)port, NULL, NULL, handle, r, MHD_OPTION_SOCK_ADDR, &sa,
                            MHD_OPTION_NOTIFY_COMPLETED, done, r, MHD_OPTION_ARRAY,
                            cert_pem ? tls : tls + 2, MHD_OPTION_END);
    if (!r->d) {
        free(r->want_auth);
        free(r->dir);
        free(r);
        return NULL;
    }
    return r;
}

int ag_recv_unauthorized(struct ag_recv *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->unauthorized;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int ag_recv_count(struct ag_recv *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->count;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void ag_recv_last(struct ag_recv *r, char *name, size_t len, char *path, size_t plen)
{
    pthread_mutex_lock(&r->mu);
    snprintf(name, len, "%s", r->last_name);
    snprintf(path, plen, "%s", r->last_path);
    pthread_mutex_unlock(&r->mu);
}

const char *ag_recv_error(struct ag_recv *r)
{
    return r->error;
}

void ag_recv_stop(struct ag_recv *r)
{
    if (!r) return;
    MHD_stop_daemon(r->d);
    pthread_mutex_destroy(&r->mu);
    free(r->want_auth);
    free(r->dir);
    free(r);
}

pid_t ag_spin_native(void)
{
    char *bin = cli_built("cli_native");
    char *const argv[] = {bin, "0", NULL};
    int fd;
    pid_t pid = cli_start(argv, &fd, NULL);
    char line[64];
    cr_assert(pid > 0 && cli_wait_line(fd, 10, line, sizeof(line)) == 0,
              "cli_native did not start");
    close(fd);
    free(bin);
    return pid;
}

void ag_kill(pid_t pid)
{
    kill(pid, SIGKILL);
    cli_wait(pid, 5);
}
