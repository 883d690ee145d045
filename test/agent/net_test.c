/* test/agent/net_test.c: the agent on an open network (issue 31) —
 * hostile clients on loopback against the real `stacksnap agent`:
 * 1,000 half-open connections from one address (slowloris, Python's socket
 * module) while curl from another loopback address gets /healthz within 1 s
 * and /metrics, and go tool pprof pulls a profile;
 * garbage request lines, oversize headers, a bad Content-Length, HTTP/1.0
 * and keep-alive; connections dropped by the hundred while the log stays
 * a few lines and /metrics counts them (132 dropped mid-request, 10,000 of
 * garbage). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "agent_util.h"

/* A TCP connection from src (a loopback address) to 127.0.0.1:port; -1 on failure. */
static int conn_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in s = {.sin_family = AF_INET}, d = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &s.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
    d.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&s, sizeof(s)) < 0 ||
        connect(fd, (struct sockaddr *)&d, sizeof(d)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Read what the server sends until it closes or timeout_s passes; *closed
 * tells which. Malloc'd, NUL-terminated. */
static char *read_until_close(int fd, double timeout_s, bool *closed)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    *closed = false;
    for (double end = cli_now() + timeout_s; cli_now() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, b + len, cap - len, 0);
        if (r <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)r;
        if (len == cap) break;
    }
    b[len] = 0;
    return b;
}

/* curl from a source address: HTTP status (0 when curl failed), time in *secs. */
static int curl_from(const char *src, int port, const char *path, double max_s, const char *out,
                     double *secs)
{
    char *res = NULL;
    ag_sh(&res, max_s + 5,
          "curl -s --interface %s --max-time %g -o '%s' -w '%%{http_code} %%{time_total}' "
          "'http://127.0.0.1:%d%s'",
          src, max_s, out ? out : "/dev/null", port, path);
    int code = 0;
    double t = -1;
    if (res) sscanf(res, "%d %lf", &code, &t);
    free(res);
    if (secs) *secs = t;
    return code;
}

/* 1,000 connections of Python's socket module from 127.0.0.5, each half a
 * request header, trickling a byte a second for 12 s (slowloris.py), while
 * curl from 127.0.0.2 asks /healthz (within 1 s) and /metrics and go tool
 * pprof from 127.0.0.1 pulls a profile; then the agent closes them all. */
Test(agent_net, slowloris_1000_half_open, .timeout = 120)
{
    char *go = cli_which("go");
    cr_assert(go, "go not installed (Debian golang-go; scripts/dev installs it)");
    free(go);
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    const char *args[] = {"-p", pid, "-F", "99", NULL};
    cr_assert(ag_start(&ag, "agent-slow", args) == 0, "the agent did not start");
    char *dir = cli_tmpdir("agent-slow-prof");
    setenv("PPROF_TMPDIR", dir, 1); /* go tool pprof saves what it fetches there */
    char port[16], cmd[1024];
    snprintf(port, sizeof(port), "%d", ag.port);
    snprintf(cmd, sizeof(cmd),
             "ulimit -n 4096; exec python3 '%s/test/agent/slowloris.py' %s 1000 127.0.0.5 12",
             SS_SOURCE_DIR, port);
    char *const py[] = {"sh", "-c", cmd, NULL};
    int out;
    pid_t slow = cli_start(py, &out, NULL);
    char line[128];
    cr_assert(slow > 0 && cli_wait_line(out, 60, line, sizeof(line)) == 0,
              "slowloris.py did not open its connections");
    int opened = -1;
    sscanf(line, "opened %d", &opened);
    cr_log_info("slowloris: %d of 1000 connections from 127.0.0.5 held open", opened);
    cr_assert(opened > 0, "slowloris.py: '%s'", line);
    /* the idle connections are all open: a liveness probe and a scrape from
     * other addresses are still served */
    double t = -1;
    int code = curl_from("127.0.0.2", ag.port, "/healthz", 1.0, NULL, &t);
    cr_log_info("slowloris: /healthz from 127.0.0.2: HTTP %d in %.3f s", code, t);
    cr_expect_eq(code, 200, "/healthz did not answer within 1 s (HTTP %d, %.3f s)", code, t);
    char *mpath = cli_path(dir, "metrics.txt");
    code = curl_from("127.0.0.2", ag.port, "/metrics", 2.0, mpath, &t);
    cr_expect_eq(code, 200, "/metrics from 127.0.0.2: HTTP %d", code);
    char *m = cli_load(mpath, NULL);
    double open_now = m ? ag_metric(m, "stacksnap_http_connections") : -1;
    cr_log_info("slowloris: %.0f connections open in the agent", open_now);
    cr_expect(open_now >= opened && open_now <= 256, "stacksnap_http_connections %.0f", open_now);
    cr_expect(m && ag_metric(m, "stacksnap_http_client_errors_total{reason=\"limit\"}") >= 100,
              "the connections past the limit are not counted:\n%s", m);
    free(m), free(mpath);
    char *raw = cli_path(dir, "raw.txt");
    char *res = NULL;
    int rc = ag_sh(&res, 30,
                   "go tool pprof -raw -symbolize=none "
                   "'http://127.0.0.1:%d/debug/pprof/profile?seconds=2' > '%s' 2>&1",
                   ag.port, raw);
    free(res);
    char *rawtxt = cli_load(raw, NULL);
    cr_expect(rc == 0 && rawtxt && strstr(rawtxt, "cli_leaf"),
              "go tool pprof during the attack (rc %d):\n%s", rc, rawtxt ? rawtxt : "");
    free(rawtxt), free(raw);
    /* once they go silent, the agent closes every one within seconds */
    int closed = -1, held = -1;
    cr_assert(cli_wait_line(out, 60, line, sizeof(line)) == 0, "slowloris.py did not finish");
    sscanf(line, "closed %d of %d", &closed, &held);
    cr_log_info("slowloris: %d of %d closed by the agent", closed, held);
    cr_expect(held == opened && closed == held, "the agent left idle connections open: %s", line);
    close(out);
    cli_wait(slow, 10);
    code = curl_from("127.0.0.5", ag.port, "/healthz", 2.0, NULL, &t);
    cr_expect_eq(code, 200, "/healthz from 127.0.0.5 afterwards: HTTP %d", code);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir);
    ag_proc_free(&ag);
}

/* Send raw bytes on a fresh connection, read until the server closes. */
static char *exchange(int port, const char *req, size_t len, double timeout_s, bool *closed)
{
    int fd = conn_from("127.0.0.1", port);
    cr_assert(fd >= 0);
    send_all(fd, req, len);
    char *r = read_until_close(fd, timeout_s, closed);
    close(fd);
    return r;
}

Test(agent_net, bad_requests_keepalive, .timeout = 120)
{
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    const char *args[] = {"-p", pid, NULL};
    cr_assert(ag_start(&ag, "agent-bad", args) == 0, "the agent did not start");
    bool closed;
    /* a garbage request line: 400, then the connection is closed */
    const char garbage[] = "\x16\x03\x01\xff garbage\x01\x02 not http\r\n\r\n";
    char *r = exchange(ag.port, garbage, sizeof(garbage) - 1, 10, &closed);
    cr_expect(!strncmp(r, "HTTP/1.1 400", 12), "garbage got: %.80s", r);
    cr_expect(closed, "the connection stayed open after the garbage");
    free(r);
    /* garbage without a line end: closed by the timeout, in seconds */
    double t0 = cli_now();
    r = exchange(ag.port, "\x01\x02\x03\x04", 4, 20, &closed);
    cr_expect(closed && cli_now() - t0 < 15, "a request line that never ends was held %.1f s",
              cli_now() - t0);
    free(r);
    /* an oversize header: an error status, then close */
    size_t big = 64 * 1024;
    char *req = malloc(big + 128);
    int n = snprintf(req, 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 4);
    r = exchange(ag.port, req, (size_t)n + big + 4, 10, &closed);
    cr_expect(!strncmp(r, "HTTP/1.1 4", 10), "an oversize header got: %.80s", r);
    cr_expect(closed, "the connection stayed open after the oversize header");
    free(r);
    free(req);
    /* a bad Content-Length */
    const char badlen[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n";
    r = exchange(ag.port, badlen, sizeof(badlen) - 1, 10, &closed);
    cr_expect(!strncmp(r, "HTTP/1.1 400", 12), "a bad Content-Length got: %.80s", r);
    cr_expect(closed, "the connection stayed open after the bad Content-Length");
    free(r);
    /* HTTP/1.0: answered, then closed */
    const char h10[] = "GET /healthz HTTP/1.0\r\n\r\n";
    r = exchange(ag.port, h10, sizeof(h10) - 1, 10, &closed);
    cr_expect(!strncmp(r, "HTTP/1.0 200", 12) || !strncmp(r, "HTTP/1.1 200", 12),
              "HTTP/1.0 got: %.80s", r);
    cr_expect(strstr(r, "\r\n\r\nok\n") != NULL, "HTTP/1.0 body: %s", r);
    cr_expect(closed, "an HTTP/1.0 connection stayed open");
    free(r);
    /* keep-alive: a second request on the same connection is answered */
    int fd = conn_from("127.0.0.1", ag.port);
    cr_assert(fd >= 0);
    const char one[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, one, sizeof(one) - 1);
    r = read_until_close(fd, 1.0, &closed);
    cr_expect(!strncmp(r, "HTTP/1.1 200", 12) && !closed, "keep-alive, first: %.200s", r);
    free(r);
    const char two[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(fd, two, sizeof(two) - 1);
    r = read_until_close(fd, 10, &closed);
    cr_expect(!strncmp(r, "HTTP/1.1 200", 12) && strstr(r, "stacksnap_samples_total") && closed,
              "keep-alive, second: %.200s", r);
    free(r);
    close(fd);
    /* and the agent still serves */
    cr_expect_eq(ag_http(ag.port, "GET", "/healthz", NULL, 5), 200);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_kill(nat);
    ag_proc_free(&ag);
}

Test(agent_net, dropped_connections_log_rate_limited, .timeout = 120)
{
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    const char *args[] = {"-p", pid, NULL};
    cr_assert(ag_start(&ag, "agent-drop", args) == 0, "the agent did not start");
    enum { N = 132 };
    const char half[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: dr";
    for (int i = 0; i < N; i++) {
        int fd = conn_from("127.0.0.1", ag.port);
        cr_assert(fd >= 0);
        send_all(fd, half, sizeof(half) - 1);
        struct linger lg = {1, 0}; /* a reset, as a client that gives up */
        if (i % 2) setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        if (i % 3 == 0) cli_sleep(0.01);
        close(fd);
    }
    /* and garbage, 10,000 connections of it (the bar for the log) */
    enum { G = 10000 };
    double t0 = cli_now();
    for (int i = 0; i < G; i++) {
        int fd = conn_from("127.0.0.1", ag.port);
        cr_assert(fd >= 0, "connection %d refused", i);
        send_all(fd, "\x01\x02 junk\r\n\r\n", 11);
        if (i % 2) { /* wait for the 400 on every other one, so they do not pile up */
            bool closed;
            free(read_until_close(fd, 5, &closed));
        }
        close(fd);
    }
    cr_log_info("dropped connections: %d garbage connections in %.1f s", G, cli_now() - t0);
    /* from another address: 127.0.0.1's 32 may still be closing */
    char *dir = cli_tmpdir("agent-drop-m"), *mpath = cli_path(dir, "metrics.txt");
    int code = 0;
    for (double t_end = cli_now() + 20; cli_now() < t_end && code != 200; cli_sleep(0.5))
        code = curl_from("127.0.0.2", ag.port, "/metrics", 5, mpath, NULL);
    cr_assert_eq(code, 200, "no /metrics after the bad connections");
    cli_sleep(1.0); /* the counts of the last ones */
    cr_assert_eq(curl_from("127.0.0.2", ag.port, "/metrics", 5, mpath, NULL), 200);
    char *body = cli_load(mpath, NULL);
    cr_assert(body);
    cli_rmtree(dir);
    free(dir), free(mpath);
    double total = 0;
    for (const char *l = body; (l = strstr(l, "\nstacksnap_http_client_errors_total{"));) {
        l++;
        const char *sp = strchr(l, ' ');
        if (sp) total += atof(sp + 1);
    }
    cr_log_info("dropped connections: %.0f client errors counted on /metrics", total);
    cr_expect(total >= N + G / 2, "only %.0f client errors counted for %d bad connections:\n%s",
              total, N + G, body);
    free(body);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    int lines = 0;
    for (const char *l = ag.log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
        if (!strncmp(l, "stacksnap: http", 15)) lines++;
    cr_log_info("dropped connections: %d http log lines for %d bad connections", lines, N + G);
    cr_expect(lines <= 8, "%d log lines for %d bad connections:\n%s", lines, N + G, ag.log);
    cr_expect(strstr(ag.log, "client errors") != NULL, "no summary line in the log:\n%s", ag.log);
    ag_kill(nat);
    ag_proc_free(&ag);
}
