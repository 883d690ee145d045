/* test/agent/agent_test.c: `stacksnap agent` end to end, with real clients
 * (issue 19): `go tool pprof` reads the profile endpoint, Debian's
 * prometheus server scrapes /metrics and its query API returns our counter,
 * `promtool check metrics` accepts the exposition, curl sends bad requests
 * and hangs up mid-profile; a Pyroscope ingest receiver (libmicrohttpd,
 * checking the request as the ingest API documents it; no Pyroscope server
 * is packaged in Debian) gets the pushes, also after being down; rolling
 * capture segments each replay on their own and stay under the cap. Real
 * BPF, real workloads (the CLI tests' native and LuaJIT spinners). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "agent_util.h"

static pid_t spin_lua(void)
{
    char *lj = cli_which("luajit");
    cr_assert(lj, "luajit not installed (Debian luajit; scripts/dev installs it)");
    char *lua = cli_src("test/cli/spin.lua");
    char *const argv[] = {lj, lua, "0", NULL};
    pid_t pid = cli_start(argv, NULL, NULL);
    cr_assert(pid > 0);
    free(lua);
    free(lj);
    return pid;
}

/* Prometheus scraping the agent every second; returns its pid. */
static pid_t start_prometheus(const char *dir, int agent_port, int *port)
{
    char *prom = cli_which("prometheus");
    cr_assert(prom, "prometheus not installed (Debian prometheus; scripts/dev installs it)");
    char *cfg = cli_path(dir, "prometheus.yml"), *db = cli_path(dir, "tsdb"), text[512];
    snprintf(text, sizeof(text),
             "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
             "scrape_configs:\n  - job_name: stacksnap\n    scrape_interval: 1s\n"
             "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
             agent_port);
    cli_store(cfg, text, strlen(text));
    *port = ag_free_port();
    char a_cfg[600], a_db[600], a_listen[64];
    snprintf(a_cfg, sizeof(a_cfg), "--config.file=%s", cfg);
    snprintf(a_db, sizeof(a_db), "--storage.tsdb.path=%s", db);
    snprintf(a_listen, sizeof(a_listen), "--web.listen-address=127.0.0.1:%d", *port);
    char *log = cli_path(dir, "prometheus.log");
    char *const argv[] = {prom, a_cfg, a_db, a_listen, NULL};
    pid_t pid = cli_start(argv, NULL, log);
    cr_assert(pid > 0);
    free(prom), free(cfg), free(db), free(log);
    return pid;
}

Test(agent, http_endpoints_real_clients, .timeout = 120)
{
    char *go = cli_which("go"), *promtool = cli_which("promtool");
    cr_assert(go, "go not installed (Debian golang-go; scripts/dev installs it)");
    cr_assert(promtool, "promtool not installed (Debian prometheus; scripts/dev installs it)");
    char *dir = cli_tmpdir("agent-http");
    setenv("PPROF_TMPDIR", dir, 1); /* go tool pprof saves what it fetches there */
    pid_t nat = ag_spin_native(), lua = spin_lua();
    struct ag_proc ag;
    const char *args[] = {"-F", "99", NULL};
    cr_assert(ag_start(&ag, "agent-http", args) == 0, "the agent did not start");
    int pport;
    pid_t prom = start_prometheus(dir, ag.port, &pport);

    /* four profiles at once share the stream: go tool pprof, a pid filter,
     * a plain one, and one whose client hangs up after 1 s */
    char *raw = cli_path(dir, "raw.txt"), *pidprof = cli_path(dir, "pid.pb.gz");
    char cmd[1024];
    snprintf(
        cmd, sizeof(cmd),
        "go tool pprof -raw -symbolize=none 'http://127.0.0.1:%d/debug/pprof/profile?seconds=2' "
        "> '%s' 2>&1",
        ag.port, raw);
    char *const a1[] = {"sh", "-c", cmd, NULL};
    pid_t c1 = cli_start(a1, NULL, NULL);
    char url2[256];
    snprintf(url2, sizeof(url2), "http://127.0.0.1:%d/debug/pprof/profile?seconds=2&pid=%d",
             ag.port, (int)nat);
    char *const a2[] = {"curl", "-s", "-f", "-o", pidprof, url2, NULL};
    pid_t c2 = cli_start(a2, NULL, NULL);
    char url3[256];
    snprintf(url3, sizeof(url3), "http://127.0.0.1:%d/debug/pprof/profile?seconds=2", ag.port);
    char *const a3[] = {"curl", "-s", "-o", "/dev/null", url3, NULL};
    pid_t c3 = cli_start(a3, NULL, NULL);
    char *const a4[] = {"curl", "-s", "--max-time", "1", "-o", "/dev/null", url3, NULL};
    pid_t c4 = cli_start(a4, NULL, NULL);
    cli_sleep(0.7);
    char *body = NULL;
    cr_expect_eq(ag_http(ag.port, "GET", "/debug/pprof/profile?seconds=1", &body, 5), 429,
                 "a fifth profile at once: %s", body);
    free(body);

    /* bad requests get HTTP errors; the agent keeps serving */
    struct {
        const char *method, *path;
        int code;
    } bad[] = {{"GET", "/nope", 404},
               {"GET", "/debug/pprof/profile?seconds=0", 400},
               {"GET", "/debug/pprof/profile?seconds=abc", 400},
               {"GET", "/debug/pprof/profile?seconds=100000", 400},
               {"GET", "/debug/pprof/profile?seconds=1&pid=x", 400},
               {"POST", "/metrics", 405},
               {"GET", "/healthz", 200}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int code = ag_http(ag.port, bad[i].method, bad[i].path, &body, 5);
        cr_expect_eq(code, bad[i].code, "%s %s: %d %s", bad[i].method, bad[i].path, code, body);
        free(body);
    }
    cr_assert_eq(cli_wait(c4, 5), 28, "curl --max-time 1 should time out (28)");
    cr_assert_eq(cli_wait(c1, 15), 0, "go tool pprof failed:\n%s", cli_load(raw, NULL));
    cr_assert_eq(cli_wait(c2, 15), 0, "pid-filtered profile failed");
    cr_assert_eq(cli_wait(c3, 15), 0);

    char *rawt = cli_load(raw, NULL);
    cr_assert(rawt && strstr(rawt, "cli_leaf"), "no native frames of cli_native:\n%.3000s", rawt);
    cr_expect(strstr(rawt, "comm:[cli_native]") && strstr(rawt, "exe:[") &&
                  strstr(rawt, "/cli_native]") && strstr(rawt, "cgroup:["),
              "labels comm, exe, cgroup missing:\n%.3000s", rawt);
    cr_expect(strstr(rawt, "0x0 leaf ") && strstr(rawt, "0x0 M.run ") && strstr(rawt, "spin.lua:"),
              "no Lua frame of luajit spin.lua (system-wide LuaJIT detection):\n%.3000s", rawt);
    /* the pid filter: only that process */
    char *out = NULL;
    cr_assert_eq(ag_sh(&out, 30, "go tool pprof -tags -symbolize=none '%s'", pidprof), 0, "%s",
                 out);
    char want[64];
    snprintf(want, sizeof(want), "pid: Total");
    cr_expect(strstr(out, want), "%s", out);
    const char *pids = strstr(out, "pid: Total");
    cr_expect(pids && strchr(pids, '\n') && strstr(pids, "(  100%)"), "more than one pid:\n%s",
              out);
    free(out);

    /* /metrics: accepted by promtool; counters moved */
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    char *mf = cli_path(dir, "metrics.txt");
    cli_store(mf, body, strlen(body));
    cr_expect_eq(ag_sh(&out, 30, "promtool check metrics < '%s'", mf), 0, "promtool: %s", out);
    free(out);
    cr_expect(ag_metric(body, "stacksnap_samples_total") > 0, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_lua_samples_total") > 0, "%s", body);
    /* Lua frames left out as not proven (issue 32): exposed, a count */
    cr_expect(ag_metric(body, "stacksnap_lua_frames_unproven_total") >= 0, "%s", body);
    /* what the walks cut or stepped over (ss_stack_facts): exposed, each a
     * share of the samples */
    double n = ag_metric(body, "stacksnap_samples_total"),
           trunc = ag_metric(body, "stacksnap_truncated_samples_total"),
           cut = ag_metric(body, "stacksnap_trace_cut_samples_total"),
           stale = ag_metric(body, "stacksnap_scan_stale_samples_total"),
           nocfi = ag_metric(body, "stacksnap_nocfi_samples_total"),
           root = ag_metric(body, "stacksnap_nocfi_root_samples_total");
    cr_expect(cut >= 0 && stale >= 0 && root >= 0 && cut <= trunc && trunc <= n && root <= nocfi &&
                  nocfi <= n,
              "truncated %.0f, cut at trace code %.0f, stale scans %.0f, without CFI %.0f (%.0f "
              "at the root) of %.0f samples:\n%s",
              trunc, cut, stale, nocfi, root, n, body);
    cr_expect(ag_metric(body, "stacksnap_profile_requests_abandoned_total") >= 1, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_profile_requests_rejected_total") >= 1, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_resident_memory_bytes") > 1e6, "%s", body);
    /* off-CPU counters only with --off-cpu (test/cli/offcpu.c checks them) */
    cr_expect(!strstr(body, "stacksnap_offcpu_"), "%s", body);
    free(body);

    /* the real Prometheus server scraped us: its query API has the counter */
    double got = -1;
    for (double t_end = cli_now() + 20; cli_now() < t_end && got <= 0; cli_sleep(0.5)) {
        char q[160];
        snprintf(q, sizeof(q),
                 "curl -s 'http://127.0.0.1:%d/api/v1/query?query=stacksnap_samples_total'", pport);
        if (ag_sh(&out, 10, "%s", q) == 0) {
            const char *v = strstr(out, "\"value\":[");
            const char *s = v ? strchr(v, '"') : NULL; /* after the timestamp: ,"N"] */
            s = v ? strstr(v + 9, ",\"") : NULL;
            if (s) got = strtod(s + 2, NULL);
        }
        free(out);
    }
    cr_expect(got > 0, "prometheus never returned stacksnap_samples_total > 0");

    /* SIGTERM: a profile in flight is answered with what it has, exit 0 */
    char *last = cli_path(dir, "last.pb.gz");
    char url5[256];
    snprintf(url5, sizeof(url5), "http://127.0.0.1:%d/debug/pprof/profile?seconds=60", ag.port);
    char *const a5[] = {"curl", "-s", "-f", "-o", last, url5, NULL};
    pid_t c5 = cli_start(a5, NULL, NULL);
    cli_sleep(1.0);
    double t0 = cli_now();
    cr_expect_eq(ag_stop(&ag, 10), 0, "agent exit status on SIGTERM:\n%s", ag.log);
    cr_expect(cli_now() - t0 < 5, "took %.1fs to stop", cli_now() - t0);
    cr_expect_eq(cli_wait(c5, 10), 0, "the profile in flight at SIGTERM was not answered");
    cr_expect_eq(
        ag_sh(&out, 30, "go tool pprof -raw -symbolize=none '%s' | grep -c cli_leaf", last), 0,
        "%s", out);
    free(out);
    ag_kill(prom);
    ag_kill(nat);
    ag_kill(lua);
    ag_proc_free(&ag);
    cli_rmtree(dir);
    free(rawt), free(raw), free(pidprof), free(mf), free(last), free(dir), free(go), free(promtool);
}

Test(agent, push_pyroscope_with_outage, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-push");
    pid_t nat = ag_spin_native();
    int port = ag_free_port();
    char url[64], pidarg[16];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    snprintf(pidarg, sizeof(pidarg), "%d", (int)nat);
    struct ag_proc ag;
    const char *args[] = {"-p", pidarg, "-F", "99", "--push", url, "--push-every", "1", NULL};
    cr_assert(ag_start(&ag, "agent-push", args) == 0, "the agent did not start");
    cli_sleep(1.5); /* the server is down: tries fail, backoff */
    char *body = NULL;
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    cr_expect(ag_metric(body, "stacksnap_push_failures_total") >= 1, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_push_sent_total") == 0, "%s", body);
    free(body);
    struct ag_recv *r = ag_recv_start(port, dir);
    cr_assert(r, "cannot start the receiver on port %d", port);
    for (double t_end = cli_now() + 15; cli_now() < t_end && ag_recv_count(r) < 2; cli_sleep(0.2))
        ;
    cr_assert(ag_recv_count(r) >= 2, "no pushes after the server came up (rejection: %s)\n%s",
              ag_recv_error(r), cli_load(ag.errpath, NULL));
    cr_expect(!ag_recv_error(r)[0], "a push broke the ingest API: %s", ag_recv_error(r));
    char name[256], path[512];
    ag_recv_last(r, name, sizeof(name), path, sizeof(path));
    cr_expect(!strncmp(name, "cli_native{", 11) && strstr(name, "host="), "app name '%s'", name);
    char *out = NULL;
    cr_expect_eq(ag_sh(&out, 30, "go tool pprof -raw -symbolize=none '%s'", path), 0, "%s", out);
    cr_expect(strstr(out, "cli_leaf"), "pushed profile without the workload:\n%.2000s", out);
    free(out);
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    cr_expect(ag_metric(body, "stacksnap_push_sent_total") >= 2, "%s", body);
    cr_expect(ag_metric(body, "stacksnap_push_queued") <= 16, "%s", body);
    free(body);
    int before = ag_recv_count(r);
    cr_expect_eq(ag_stop(&ag, 10), 0);
    cr_expect(ag_recv_count(r) > before, "the last window was not pushed at SIGTERM");
    ag_recv_stop(r);
    ag_kill(nat);
    ag_proc_free(&ag);
    cli_rmtree(dir);
    free(dir);
}

static int seg_filter(const struct dirent *d)
{
    return strstr(d->d_name, ".snap") != NULL;
}

Test(agent, rolling_captures_replay, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-cap");
    char *cap = cli_path(dir, "caps");
    pid_t nat = ag_spin_native();
    char pidarg[16];
    snprintf(pidarg, sizeof(pidarg), "%d", (int)nat);
    struct ag_proc ag;
    const char *args[] = {"-p",
                          pidarg,
                          "-F",
                          "499",
                          "--capture-dir",
                          cap,
                          "--capture-segment",
                          "1",
                          "--capture-max-bytes",
                          "4194304",
                          NULL};
    cr_assert(ag_start(&ag, "agent-cap", args) == 0, "the agent did not start");
    cli_sleep(3.5);
    cr_expect_eq(ag_stop(&ag, 10), 0, "%s", ag.log);
    struct dirent **names;
    int n = scandir(cap, &names, seg_filter, alphasort);
    cr_assert(n >= 2, "%d segments in %s", n, cap);
    unsigned long long total = 0;
    int replayed = 0;
    for (int i = 0; i < n; i++) {
        char *p = cli_path(cap, names[i]->d_name);
        struct stat st;
        stat(p, &st);
        total += (unsigned long long)st.st_size;
        if (i == 0 || i == n - 1) { /* the oldest kept and the one cut by SIGTERM */
            char *out = NULL;
            int rc = ag_sh(&out, 60, "'%s' replay '%s' -o -", cli_ss(), p);
            cr_expect_eq(rc, 0, "replay %s: %s", p, out);
            cr_expect(strstr(out, "cli_leaf"), "replay of %s lacks the workload:\n%.2000s", p, out);
            replayed += rc == 0;
            free(out);
        }
        free(p);
    }
    cr_expect_eq(replayed, 2);
    /* the cap holds: at most the cap plus the segment being written */
    cr_expect(total <= 4194304ull + 4194304ull / 4 + 65536, "%llu bytes of segments", total);
    cr_expect(strstr(names[0]->d_name, "-0000.snap") == NULL || total < 4194304ull,
              "nothing was deleted although the cap was reached (%llu bytes)", total);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    ag_kill(nat);
    ag_proc_free(&ag);
    cli_rmtree(dir);
    free(cap), free(dir);
}

/* A short soak under process churn (the shell loop of luajit, sh,
 * ls, true): the state of exited processes is freed (the processes gauge
 * falls back once they are gone) and memory does not follow the churn. */
Test(agent, churn_state_freed, .timeout = 120)
{
    char *lj = cli_which("luajit");
    cr_assert(lj, "luajit not installed (Debian luajit; scripts/dev installs it)");
    struct ag_proc ag;
    const char *args[] = {"-F", "99", NULL};
    cr_assert(ag_start(&ag, "agent-churn", args) == 0, "the agent did not start");
    pid_t churn = ag_churn(lj, 6);
    cli_sleep(2);
    char *body = NULL;
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    double rss_early = ag_metric(body, "stacksnap_resident_memory_bytes");
    free(body);
    cr_assert_eq(cli_wait(churn, 30), 0);
    cli_sleep(3); /* the unwinder's gc runs every 2 s */
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 5), 200);
    double seen = ag_metric(body, "stacksnap_processes_seen_total"),
           live = ag_metric(body, "stacksnap_processes"),
           rss = ag_metric(body, "stacksnap_resident_memory_bytes"),
           lua = ag_metric(body, "stacksnap_lua_samples_total"),
           n = ag_metric(body, "stacksnap_samples_total"),
           trunc = ag_metric(body, "stacksnap_truncated_samples_total");
    cr_log_info("churn: %.0f processes seen, %.0f with state after, %.0f samples, %.1f%% "
                "truncated, %.0f with Lua, RSS %.1f -> %.1f MiB",
                seen, live, n, n > 0 ? 100 * trunc / n : 0, lua, rss_early / 1048576,
                rss / 1048576);
    cr_expect(seen >= 20, "only %.0f processes seen under churn:\n%s", seen, body);
    cr_expect(live < seen / 2, "state of exited processes kept: %.0f of %.0f\n%s", live, seen,
              body);
    cr_expect(lua > 0, "no Lua frames of the short luajit processes:\n%s", body);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine keeps freed memory resident */
    cr_expect(rss < rss_early * 1.5 + 16 * 1048576, "RSS grew from %.0f to %.0f", rss_early, rss);
#endif
    free(body);
    cr_expect_eq(ag_stop(&ag, 10), 0, "%s", ag.log);
    ag_proc_free(&ag);
    free(lj);
}

/* --listen unix:PATH: served over the socket, removed at exit; SIGHUP
 * reopens the log file (after a logrotate-style move). */
Test(agent, unix_socket, .timeout = 60)
{
    char *dir = cli_tmpdir("agent-unix"), *sock = cli_path(dir, "agent.sock"),
         *err = cli_path(dir, "err");
    char listen[600];
    snprintf(listen, sizeof(listen), "unix:%s", sock);
    char *const argv[] = {(char *)cli_ss(), "agent", "--listen", listen, NULL};
    pid_t pid = cli_start(argv, NULL, err);
    cr_assert(pid > 0);
    char *out = NULL;
    int ok = 0;
    for (double t_end = cli_now() + 20; cli_now() < t_end && !ok; cli_sleep(0.1)) {
        free(out);
        out = NULL;
        ok = ag_sh(&out, 10, "curl -s --unix-socket '%s' http://agent/healthz", sock) == 0 &&
             !strcmp(out, "ok\n");
    }
    cr_expect(ok, "no /healthz over %s: %s", sock, out);
    free(out);
    cr_expect_eq(ag_sh(&out, 10, "curl -s -f --unix-socket '%s' http://agent/nope", sock), 22,
                 "404 over the socket: %s", out);
    free(out);
    char *moved = cli_path(dir, "err.1");
    cr_assert(rename(err, moved) == 0);
    kill(pid, SIGHUP);
    cli_sleep(0.2);
    kill(pid, SIGTERM);
    cr_expect_eq(cli_wait(pid, 10), 0);
    cr_expect(access(sock, F_OK) < 0, "%s left behind", sock);
    char *before = cli_load(moved, NULL), *after = cli_load(err, NULL);
    cr_expect(before && strstr(before, "listening on unix:"), "%s", before);
    cr_expect(after && strstr(after, "agent stopped"), "SIGHUP did not reopen the log: '%s'",
              after);
    free(before), free(after), free(moved);
    cli_rmtree(dir);
    free(dir), free(sock), free(err);
}
