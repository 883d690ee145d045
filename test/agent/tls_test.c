/* test/agent/tls_test.c: the agent's TLS and authentication (issue 31) with
 * real clients on loopback: certificates made by the openssl CLI, curl with
 * --cacert/--cert/--key against --web-config (TLS, mTLS per
 * client_auth_type, bcrypt basic auth with hashes made by libxcrypt) and
 * --auth-token-file (bearer token), right, wrong and missing; bad
 * configurations exit 2 naming the file and the key; --push over TLS to a
 * receiver whose certificate only --push-ca verifies, with the
 * Authorization value of --push-auth-file. */
#include <crypt.h>
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "agent_util.h"

/* dir/ca.{crt,key} (the CA), dir/NAME.{crt,key} signed by it for 127.0.0.1;
 * rogue-ca and rogue (a client no one trusts). */
static void make_pki(const char *dir)
{
    char *out = NULL;
    int rc =
        ag_sh(&out, 60,
              "set -e; cd '%s'; "
              "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > srv.ext; "
              "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext; "
              "for ca in ca rogue-ca; do "
              "  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
              "    -keyout $ca.key -out $ca.crt -subj /CN=$ca -days 2 2>/dev/null; done; "
              "mk() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
              "  -keyout $1.key -out $1.csr -subj /CN=$1 2>/dev/null; "
              "  openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2 "
              "  -extfile $3 -out $1.crt 2>/dev/null; }; "
              "mk server ca srv.ext; mk scraper ca cli.ext; mk rogue rogue-ca cli.ext; "
              "chmod 600 *.key",
              dir);
    cr_assert_eq(rc, 0, "openssl could not make the test PKI: %s", out);
    free(out);
}

/* A bcrypt hash of pw made by libxcrypt ($2b$, cost 5 to keep it quick). */
static void bcrypt(const char *pw, char *hash, size_t len)
{
    char salt[64];
    cr_assert(crypt_gensalt_rn("$2b$", 5, NULL, 0, salt, sizeof(salt)), "no bcrypt salt");
    struct crypt_data cd = {0};
    const char *h = crypt_rn(pw, salt, &cd, (int)sizeof(cd));
    cr_assert(h && !strncmp(h, "$2b$05$", 7), "libxcrypt made no bcrypt hash");
    snprintf(hash, len, "%s", h);
}

/* curl with extra arguments; HTTP status (0: curl failed), headers in *hdr. */
static int curl(const char *args, const char *url, char **hdr)
{
    char *res = NULL;
    ag_sh(&res, 20, "curl -s -D - -o /dev/null --max-time 10 %s '%s'", args, url);
    int code = 0;
    const char *l = res ? strstr(res, "HTTP/1.1 ") : NULL;
    if (l) code = atoi(l + 9);
    if (hdr)
        *hdr = res;
    else
        free(res);
    return code;
}

static void start(struct ag_proc *ag, pid_t nat, const char *cfg, const char *extra)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    const char *args[8] = {"-p", pid};
    int n = 2;
    if (cfg) args[n++] = "--web-config", args[n++] = cfg;
    if (extra) args[n++] = extra;
    cr_assert(ag_start(ag, "agent-tls", args) == 0, "the agent did not start with %s",
              cfg ? cfg : "");
}

Test(agent_tls, tls_and_basic_auth, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-tls");
    make_pki(dir);
    char hash[128], text[1024];
    bcrypt("s3cret pass", hash, sizeof(hash));
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: %s/server.key\n"
             "  min_version: TLS12\n"
             "basic_auth_users:\n  prom: '%s'\n",
             dir, hash);
    char *cfg = cli_path(dir, "web.yml");
    cli_store(cfg, text, strlen(text));
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    start(&ag, nat, cfg, NULL);
    char url[128], ca[600], args[1200];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/metrics", ag.port);
    snprintf(ca, sizeof(ca), "--cacert '%s/ca.crt'", dir);
    char *hdr = NULL;
    snprintf(args, sizeof(args), "%s -u 'prom:s3cret pass'", ca);
    cr_expect_eq(curl(args, url, NULL), 200, "TLS + right password");
    snprintf(args, sizeof(args), "%s -u 'prom:wrong'", ca);
    cr_expect_eq(curl(args, url, &hdr), 401, "TLS + wrong password: %s", hdr);
    cr_expect(hdr && strstr(hdr, "WWW-Authenticate: Basic realm=\"stacksnap\""), "%s", hdr);
    free(hdr);
    snprintf(args, sizeof(args), "%s -u 'nobody:s3cret pass'", ca);
    cr_expect_eq(curl(args, url, NULL), 401, "TLS + unknown user");
    cr_expect_eq(curl(ca, url, NULL), 401, "TLS, no credentials");
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", ag.port);
    cr_expect_eq(curl(ca, url, NULL), 401, "/healthz is not open without --healthz-open");
    /* the server's certificate is not trusted without the CA; plain HTTP fails */
    cr_expect_eq(curl("-u 'prom:s3cret pass'", url, NULL), 0, "curl trusted an unknown CA");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", ag.port);
    cr_expect_neq(curl("-u 'prom:s3cret pass'", url, NULL), 200, "plain HTTP was served");
    /* a profile over TLS with basic auth */
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/debug/pprof/profile?seconds=1", ag.port);
    char *prof = cli_path(dir, "p.pb.gz");
    snprintf(args, sizeof(args), "%s -u 'prom:s3cret pass' -o '%s'", ca, prof);
    char *res = NULL;
    ag_sh(&res, 20, "curl -s -f --max-time 10 %s '%s' && echo OK", args, url);
    size_t plen = 0;
    char *pb = cli_load(prof, &plen);
    cr_expect(res && strstr(res, "OK") && pb && plen > 20 && (unsigned char)pb[0] == 0x1f,
              "no profile over TLS: %s", res);
    free(res), free(pb), free(prof);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    cr_expect(!strstr(ag.log, "s3cret"), "the password is in the log:\n%s", ag.log);
    ag_proc_free(&ag);

    /* TLS 1.3 only: a TLS 1.2 client fails */
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "  min_version: TLS13\n");
    cli_store(cfg, text, strlen(text));
    start(&ag, nat, cfg, NULL);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", ag.port);
    cr_expect_eq(curl(ca, url, NULL), 200, "TLS 1.3");
    snprintf(args, sizeof(args), "%s --tls-max 1.2", ca);
    cr_expect_eq(curl(args, url, NULL), 0, "a TLS 1.2 client was served with min_version TLS13");
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_proc_free(&ag);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir), free(cfg);
}

/* curl's exit status (the handshake's fate) and HTTP status. */
static int curl_rc(const char *args, const char *url, int *code)
{
    char *res = NULL;
    ag_sh(&res, 20, "curl -s -o /dev/null -w '%%{http_code}' --max-time 10 %s '%s'; echo \" $?\"",
          args, url);
    int rc = -1;
    *code = -1;
    if (res) sscanf(res, "%d %d", code, &rc);
    free(res);
    return rc;
}

Test(agent_tls, mtls_client_certificates, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-mtls");
    make_pki(dir);
    char text[1024];
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n");
    char *cfg = cli_path(dir, "web.yml");
    cli_store(cfg, text, strlen(text));
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    start(&ag, nat, cfg, "--healthz-open");
    char url[128], good[1200], rogue[1200], none[700], args[1400];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/metrics", ag.port);
    snprintf(good, sizeof(good),
             "--cacert '%s/ca.crt' --cert '%s/scraper.crt' --key '%s/scraper.key'", dir, dir, dir);
    snprintf(rogue, sizeof(rogue),
             "--cacert '%s/ca.crt' --cert '%s/rogue.crt' --key '%s/rogue.key'", dir, dir, dir);
    snprintf(none, sizeof(none), "--cacert '%s/ca.crt'", dir);
    int code;
    cr_expect_eq(curl_rc(good, url, &code), 0, "a client certificate signed by client_ca_file");
    cr_expect_eq(code, 200);
    /* a certificate of another CA, and none: the handshake fails (TLS 1.3
     * and 1.2); there is no HTTP answer at all */
    const char *vers[] = {"", "--tls-max 1.2"};
    for (int v = 0; v < 2; v++) {
        snprintf(args, sizeof(args), "%s %s", rogue, vers[v]);
        int rc = curl_rc(args, url, &code);
        cr_expect(rc != 0 && code == 0, "another CA's certificate %s: curl %d, HTTP %d", vers[v],
                  rc, code);
        snprintf(args, sizeof(args), "%s %s", none, vers[v]);
        rc = curl_rc(args, url, &code);
        cr_expect(rc != 0 && code == 0, "no certificate %s: curl %d, HTTP %d", vers[v], rc, code);
    }
    char *body = NULL;
    ag_sh(&body, 20, "curl -s --max-time 10 %s '%s'", good, url);
    cr_expect(body && ag_metric(body, "stacksnap_http_client_errors_total{reason=\"tls\"}") >= 4,
              "the failed handshakes are not counted:\n%s", body);
    free(body);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_proc_free(&ag);

    /* VerifyClientCertIfGiven: none is fine, a wrong one is not; RequireAnyClientCert: any */
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "  client_ca_file: ca.crt\n  client_auth_type: VerifyClientCertIfGiven\n");
    cli_store(cfg, text, strlen(text));
    start(&ag, nat, cfg, NULL);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/metrics", ag.port);
    cr_expect_eq(curl_rc(none, url, &code), 0, "VerifyClientCertIfGiven, none");
    cr_expect_eq(code, 200);
    cr_expect_eq(curl_rc(good, url, &code), 0, "VerifyClientCertIfGiven, a good one");
    cr_expect_eq(code, 200);
    int rc = curl_rc(rogue, url, &code);
    cr_expect(rc != 0 && code == 0, "VerifyClientCertIfGiven, another CA's: curl %d, HTTP %d", rc,
              code);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_proc_free(&ag);
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "  client_ca_file: ca.crt\n  client_auth_type: RequireAnyClientCert\n");
    cli_store(cfg, text, strlen(text));
    start(&ag, nat, cfg, NULL);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/metrics", ag.port);
    cr_expect_eq(curl_rc(rogue, url, &code), 0, "RequireAnyClientCert, another CA's");
    cr_expect_eq(code, 200);
    rc = curl_rc(none, url, &code);
    cr_expect(rc != 0 && code == 0, "RequireAnyClientCert, none: curl %d, HTTP %d", rc, code);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_proc_free(&ag);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir), free(cfg);
}

Test(agent_tls, bearer_token, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-token");
    char *tok = cli_path(dir, "token");
    cli_store(tok, "tok-3f9a1c77e2\n", 15);
    pid_t nat = ag_spin_native();
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    const char *args[] = {"-p", pid, "--auth-token-file", tok, "--healthz-open", NULL};
    struct ag_proc ag;
    cr_assert(ag_start(&ag, "agent-token", args) == 0, "the agent did not start");
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", ag.port);
    char *hdr = NULL;
    cr_expect_eq(curl("-H 'Authorization: Bearer tok-3f9a1c77e2'", url, NULL), 200, "right token");
    cr_expect_eq(curl("-H 'Authorization: Bearer tok-3f9a1c77e3'", url, &hdr), 401, "wrong token");
    cr_expect(hdr && strstr(hdr, "WWW-Authenticate: Bearer realm=\"stacksnap\""), "%s", hdr);
    free(hdr);
    cr_expect_eq(curl("-H 'Authorization: Bearer tok-3f9a1c77e'", url, NULL), 401, "a prefix");
    cr_expect_eq(curl("", url, NULL), 401, "no token");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/debug/pprof/profile?seconds=1", ag.port);
    cr_expect_eq(curl("", url, NULL), 401, "a profile without the token");
    cr_expect_eq(curl("-H 'Authorization: Bearer tok-3f9a1c77e2'", url, NULL), 200,
                 "a profile with the token");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", ag.port);
    cr_expect_eq(curl("", url, NULL), 200, "/healthz with --healthz-open");
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    cr_expect(!strstr(ag.log, "tok-3f9a"), "the token is in the log:\n%s", ag.log);
    ag_proc_free(&ag);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir), free(tok);
}

Test(agent_tls, bad_configs_exit_2, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-badcfg");
    make_pki(dir);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: "
         "TLS14\n",
         "tls_server_config.min_version"},
        {"tls_server_config:\n  cert_file: server.crt\n", "tls_server_config.key_file"},
        {"tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n",
         "tls_server_config.cert_file"},
        {"tls_server_config:\n  cert_file: server.crt\n  key_file: ca.key\n",
         "tls_server_config.cert_file/key_file"},
        {"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  "
         "client_auth_type: RequireAndVerifyClientCert\n",
         "tls_server_config.client_ca_file"},
        {"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  "
         "client_auth_type: Sometimes\n  client_ca_file: ca.crt\n",
         "tls_server_config.client_auth_type"},
        {"basic_auth_users:\n  prom: plaintext\n", "basic_auth_users.prom"},
        {"tls_config:\n  cert_file: x\n", "tls_config"},
        {"basic_auth_users: [a, b\n", "not YAML"},
    };
    char *cfg = cli_path(dir, "web.yml");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cli_store(cfg, bad[i].yaml, strlen(bad[i].yaml));
        struct cli_res r;
        char *const argv[] = {(char *)cli_ss(), "agent", "--listen", "127.0.0.1:0",
                              "--web-config",   cfg,     NULL};
        cr_assert_eq(cli_run(&r, 30, argv), 0);
        cr_expect_eq(r.status, 2, "config %zu: exit %d: %s", i, r.status, r.err);
        cr_expect(strstr(r.err, cfg) && strstr(r.err, bad[i].want),
                  "config %zu: the error does not name %s and %s: %s", i, cfg, bad[i].want, r.err);
        cli_res_free(&r);
    }
    /* a token file that is missing or empty */
    char *tok = cli_path(dir, "token");
    cli_store(tok, "\n", 1);
    const char *toks[] = {tok, "/nonexistent/token"};
    for (int i = 0; i < 2; i++) {
        struct cli_res r;
        char *const argv[] = {(char *)cli_ss(),    "agent",         "--listen", "127.0.0.1:0",
                              "--auth-token-file", (char *)toks[i], NULL};
        cr_assert_eq(cli_run(&r, 30, argv), 0);
        cr_expect_eq(r.status, 2, "token %s: exit %d: %s", toks[i], r.status, r.err);
        cr_expect(strstr(r.err, toks[i]), "the error does not name %s: %s", toks[i], r.err);
        cli_res_free(&r);
    }
    cli_rmtree(dir);
    free(dir), free(cfg), free(tok);
}

Test(agent_tls, push_tls_ca_and_auth, .timeout = 120)
{
    char *dir = cli_tmpdir("agent-pushtls");
    make_pki(dir);
    char *crt = cli_path(dir, "server.crt"), *key = cli_path(dir, "server.key");
    char *cert_pem = cli_load(crt, NULL), *key_pem = cli_load(key, NULL);
    int port = ag_free_port();
    struct ag_recv *r = ag_recv_start_tls(port, dir, cert_pem, key_pem, "Bearer push-tok-81d2");
    cr_assert(r, "the TLS receiver did not start");
    char *auth = cli_path(dir, "push-auth");
    cli_store(auth, "Bearer push-tok-81d2\n", 21);
    pid_t nat = ag_spin_native();
    char pid[16], url[128], ca[600];
    snprintf(pid, sizeof(pid), "%d", (int)nat);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    /* without --push-ca the receiver's certificate is not trusted: nothing lands */
    char cred_url[160]; /* credentials in the URL stay out of the log */
    snprintf(cred_url, sizeof(cred_url), "https://u:pw-9931@127.0.0.1:%d", port);
    const char *a1[] = {
        "-p", pid, "-F", "99", "--push", cred_url, "--push-every", "1", "--push-auth-file",
        auth, NULL};
    struct ag_proc ag;
    cr_assert(ag_start(&ag, "agent-pushtls", a1) == 0);
    cli_sleep(3.5);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    cr_expect_eq(ag_recv_count(r), 0, "a push went to a server whose certificate is not trusted");
    cr_expect(strstr(ag.log, "certificate"), "no certificate error in the log:\n%s", ag.log);
    cr_expect(!strstr(ag.log, "pw-9931") && strstr(ag.log, "https://***@127.0.0.1"),
              "the URL's password is in the log:\n%s", ag.log);
    ag_proc_free(&ag);
    /* with --push-ca: verified and authorised */
    const char *a2[] = {"-p",
                        pid,
                        "-F",
                        "99",
                        "--push",
                        url,
                        "--push-every",
                        "1",
                        "--push-ca",
                        ca,
                        "--push-auth-file",
                        auth,
                        NULL};
    cr_assert(ag_start(&ag, "agent-pushtls", a2) == 0);
    for (double t = cli_now() + 20; cli_now() < t && ag_recv_count(r) < 2;)
        cli_sleep(0.2);
    cr_expect(ag_recv_count(r) >= 2, "no pushes over TLS (rejection: %s, unauthorised %d)",
              ag_recv_error(r), ag_recv_unauthorized(r));
    cr_expect_eq(ag_recv_unauthorized(r), 0, "a push without the Authorization value");
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    cr_expect(!strstr(ag.log, "push-tok"), "the push token is in the log:\n%s", ag.log);
    ag_proc_free(&ag);
    /* a wrong Authorization value is refused by the server (and counted) */
    char *wrong = cli_path(dir, "wrong-auth");
    cli_store(wrong, "Bearer nope\n", 12);
    const char *a3[] = {"-p",
                        pid,
                        "-F",
                        "99",
                        "--push",
                        url,
                        "--push-every",
                        "1",
                        "--push-ca",
                        ca,
                        "--push-auth-file",
                        wrong,
                        NULL};
    int before = ag_recv_unauthorized(r);
    cr_assert(ag_start(&ag, "agent-pushtls", a3) == 0);
    for (double t = cli_now() + 20; cli_now() < t && ag_recv_unauthorized(r) == before;)
        cli_sleep(0.2);
    cr_expect(ag_recv_unauthorized(r) > before, "the wrong Authorization never reached the server");
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    ag_proc_free(&ag);
    ag_recv_stop(r);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir), free(crt), free(key), free(cert_pem), free(key_pem), free(auth), free(wrong);
}

/* Prometheus's scrape over TLS with basic auth (docs/agent.md's
 * configuration) and go tool pprof over TLS: the real clients. */
Test(agent_tls, prometheus_and_pprof_over_tls, .timeout = 180)
{
    char *prom = cli_which("prometheus"), *go = cli_which("go");
    cr_assert(prom, "prometheus not installed (Debian prometheus; scripts/dev installs it)");
    cr_assert(go, "go not installed (Debian golang-go; scripts/dev installs it)");
    char *dir = cli_tmpdir("agent-promtls");
    make_pki(dir);
    char hash[128], text[2048];
    bcrypt("prom-pass-5521", hash, sizeof(hash));
    snprintf(text, sizeof(text),
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "basic_auth_users:\n  prometheus: '%s'\n",
             hash);
    char *cfg = cli_path(dir, "web.yml");
    cli_store(cfg, text, strlen(text));
    pid_t nat = ag_spin_native();
    struct ag_proc ag;
    start(&ag, nat, cfg, NULL);
    char *pw = cli_path(dir, "password");
    cli_store(pw, "prom-pass-5521\n", 15);
    snprintf(text, sizeof(text),
             "global:\n  scrape_interval: 1s\n"
             "scrape_configs:\n  - job_name: stacksnap\n    scrape_interval: 1s\n"
             "    scheme: https\n    tls_config:\n      ca_file: %s/ca.crt\n"
             "    basic_auth:\n      username: prometheus\n      password_file: %s\n"
             "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
             dir, pw, ag.port);
    char *pcfg = cli_path(dir, "prometheus.yml"), *db = cli_path(dir, "tsdb");
    cli_store(pcfg, text, strlen(text));
    int pport = ag_free_port();
    char a_cfg[600], a_db[600], a_listen[64];
    snprintf(a_cfg, sizeof(a_cfg), "--config.file=%s", pcfg);
    snprintf(a_db, sizeof(a_db), "--storage.tsdb.path=%s", db);
    snprintf(a_listen, sizeof(a_listen), "--web.listen-address=127.0.0.1:%d", pport);
    char *plog = cli_path(dir, "prometheus.log");
    char *const argv[] = {prom, a_cfg, a_db, a_listen, NULL};
    pid_t pp = cli_start(argv, NULL, plog);
    cr_assert(pp > 0);
    /* go tool pprof over TLS with the CA and basic auth in the URL */
    char *out = NULL;
    int rc = ag_sh(&out, 60,
                   "PPROF_TMPDIR='%s' SSL_CERT_FILE='%s/ca.crt' go tool pprof -raw -symbolize=none "
                   "'https://prometheus:prom-pass-5521@127.0.0.1:%d/debug/pprof/profile?seconds=2'",
                   dir, dir, ag.port);
    cr_expect(rc == 0 && strstr(out, "cli_leaf"), "go tool pprof over TLS:\n%.2000s", out);
    free(out);
    double up = -1, samples = -1;
    for (double t_end = cli_now() + 30; cli_now() < t_end && (up != 1 || samples <= 0);
         cli_sleep(0.5)) {
        const char *qs[] = {"up", "stacksnap_samples_total"};
        for (int i = 0; i < 2; i++) {
            if (ag_sh(&out, 10, "curl -s 'http://127.0.0.1:%d/api/v1/query?query=%s'", pport,
                      qs[i]) == 0) {
                const char *v = strstr(out, "\"value\":[");
                const char *s = v ? strstr(v + 9, ",\"") : NULL;
                if (s) *(i ? &samples : &up) = strtod(s + 2, NULL);
            }
            free(out);
        }
    }
    cr_expect(up == 1 && samples > 0,
              "prometheus did not scrape over TLS with basic auth (up %g, samples %g)", up,
              samples);
    kill(pp, SIGTERM);
    cli_wait(pp, 10);
    cr_expect_eq(ag_stop(&ag, 15), 0, "agent exit: %s", ag.log);
    cr_expect(!strstr(ag.log, "prom-pass"), "the password is in the log:\n%s", ag.log);
    ag_proc_free(&ag);
    ag_kill(nat);
    cli_rmtree(dir);
    free(dir), free(cfg), free(pw), free(pcfg), free(db), free(plog), free(prom), free(go);
}
