/* test/cli/debuginfod.c: debug files fetched from a debuginfod server (issue
 * 16). The test splits the debug file off cli_dfdprog (objcopy
 * --only-keep-debug), strips a copy fully (no .symtab, no debug link) and
 * serves the debug file with Debian's `debuginfod` on loopback; no copy of it
 * is anywhere the profiler looks. Checked, one run each:
 *   - without DEBUGINFOD_URLS the loops stay MODULE+0xSTART;
 *   - with it they are named live, also on the samples aggregated before the
 *     file arrived (the capture's debug file record comes after >= 1 sample),
 *     the file is in DEBUGINFOD_CACHE_PATH, and replay gives the same output;
 *   - a server that accepts but never answers (SIGSTOP) is cut after
 *     DEBUGINFOD_TIMEOUT: a clean run with unnamed frames;
 *   - a --bundle capture replays to the same names with the server gone and
 *     the cache removed;
 *   - a dead server (nothing listens): a clean run with unnamed frames;
 *   - `stacksnap agent` fetches too: its profile names the loops and
 *     /metrics counts the fetch (stacksnap_debuginfo_fetches_total). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../agent/agent_util.h"
#include "cli.h"
#include "elf/elf.h"

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              getsockname(s, (struct sockaddr *)&a, &l) == 0);
    close(s);
    return ntohs(a.sin_port);
}

static void run_ok(char *const argv[], double timeout, struct cli_res *r)
{
    cr_assert_eq(cli_run(r, timeout, argv), 0, "cannot run %s", argv[0]);
    cr_assert_eq(r->status, 0, "%s %s: status %d: %s", argv[0], argv[1], r->status, r->err);
}

/* record the stripped program for 1 s into folded (and snap unless NULL). */
static char *record(const char *ss, const char *prog, const char *folded, const char *snap,
                    bool bundle, double *secs)
{
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)ss;
    argv[n++] = "record";
    argv[n++] = "-o";
    argv[n++] = (char *)folded;
    if (snap) argv[n++] = "-o", argv[n++] = (char *)snap;
    if (bundle) argv[n++] = "--bundle";
    argv[n++] = "--";
    argv[n++] = (char *)prog;
    argv[n++] = "1";
    argv[n] = NULL;
    struct cli_res r;
    run_ok(argv, 60, &r);
    if (secs) *secs = r.secs;
    cli_res_free(&r);
    char *text = cli_load(folded, NULL);
    cr_assert(text, "no output %s", folded);
    return text;
}

/* Share of samples whose leaf is one of the two named loops. */
static void expect_named(const char *text, const char *what)
{
    char why[200] = "";
    long long total = cli_folded_check(text, why, sizeof(why));
    cr_assert_gt(total, 50, "%s: %lld samples %s", what, total, why);
    long long a = cli_leaf_count(text, "dfd_alpha_spin"), b = cli_leaf_count(text, "dfd_beta_spin");
    cr_expect(a > 0 && b > 0 && (a + b) * 100 >= total * 95,
              "%s: named loops on %lld + %lld of %lld samples:\n%.1500s", what, a, b, total, text);
    cr_expect(!strstr(text, "dfdprog+0x"), "%s: unnamed frame of the program:\n%.1500s", what,
              text);
}

static void expect_unnamed(const char *text, const char *what)
{
    cr_expect(!strstr(text, "dfd_alpha_spin") && !strstr(text, "dfd_beta_spin"),
              "%s: names without their debug file:\n%.1500s", what, text);
    cr_expect(strstr(text, "dfdprog+0x"), "%s: no MODULE+0xSTART frame:\n%.1500s", what, text);
}

static pid_t serve(const char *dir, int port, const char *srv)
{
    char *db = cli_path(dir, "db.sqlite"), *log = cli_path(dir, "debuginfod.log"), ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    unlink(db);
    char *argv[] = {"debuginfod", "-F", "-d", db, "-p", ps, (char *)srv, NULL};
    pid_t pid = cli_start(argv, NULL, log);
    cr_assert_gt(pid, 0, "cannot start debuginfod (Debian package debuginfod)");
    free(db);
    free(log);
    return pid;
}

/* Until the server has indexed the debug file (GET answers 200). */
static void wait_served(int port, const char *hex)
{
    char url[160];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/buildid/%s/debuginfo", port, hex);
    char *argv[] = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url, NULL};
    for (int i = 0; i < 200; i++) {
        struct cli_res r;
        cr_assert_eq(cli_run(&r, 10, argv), 0);
        bool ok = r.out && !strcmp(r.out, "200");
        cli_res_free(&r);
        if (ok) return;
        cli_sleep(0.1);
    }
    cr_assert_fail("debuginfod on port %d never served %s", port, hex);
}

Test(debuginfod, names_from_a_real_server_live_replay_bundle, .timeout = 150)
{
    char *dbgd = cli_which("debuginfod");
    cr_assert(dbgd, "debuginfod not installed (Debian package debuginfod, scripts/dev PKGS)");
    free(dbgd);
    const char *ss = cli_ss();
    char *dir = cli_tmpdir("dfd"), *built = cli_built("cli_dfdprog");
    char *srv = cli_path(dir, "srv"), *bin = cli_path(dir, "bin");
    cr_assert(mkdir(srv, 0700) == 0 && mkdir(bin, 0700) == 0);
    char *dbg = cli_path(srv, "dfdprog.debug"), *prog = cli_path(bin, "dfdprog");
    struct cli_res r;
    char *split[] = {"objcopy", "--only-keep-debug", built, dbg, NULL};
    run_ok(split, 30, &r);
    cli_res_free(&r);
    char *strip[] = {"strip", "--strip-all", "-o", prog, built, NULL};
    run_ok(strip, 30, &r);
    cli_res_free(&r);

    struct ss_elf_cache *c;
    struct ss_elf *e;
    struct ss_err err = {0};
    char hex[41];
    cr_assert(ss_elf_cache_new(&c, NULL) == 0 && ss_elf_open_path(c, prog, &e, &err) == 0, "%s",
              err.msg);
    cr_assert(e->build_id_len > 0 && !ss_elf_section(e, ".symtab", NULL, NULL) &&
                  !ss_elf_section(e, ".gnu_debuglink", NULL, NULL),
              "the stripped copy must have a build-id, no .symtab and no debug link");
    ss_elf_build_id_hex(e, hex);
    ss_elf_put(e);
    ss_elf_cache_free(c);

    char *f = cli_path(dir, "plain.folded");
    unsetenv("DEBUGINFOD_URLS");
    char *text = record(ss, prog, f, NULL, false, NULL);
    expect_unnamed(text, "without DEBUGINFOD_URLS");
    free(text);
    free(f);

    int port = free_port();
    pid_t srvpid = serve(dir, port, srv);
    wait_served(port, hex);
    char url[64], *cache = cli_path(dir, "cache");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    setenv("DEBUGINFOD_URLS", url, 1);
    setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
    /* the agent, -p on the program: named profile, the fetch counted */
    char *cache_ag = cli_path(dir, "cache-agent");
    setenv("DEBUGINFOD_CACHE_PATH", cache_ag, 1);
    char *pargv[] = {prog, "6", NULL};
    pid_t p6 = cli_start(pargv, NULL, NULL);
    cr_assert_gt(p6, 0);
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", (int)p6);
    const char *aargs[] = {"-p", ps, "-F", "199", NULL};
    struct ag_proc ag;
    cr_assert(ag_start(&ag, "dfd-agent", aargs) == 0, "the agent did not start");
    char *out = NULL;
    cr_expect_eq(ag_sh(&out, 60,
                       "go tool pprof -top -nodecount=20 "
                       "'http://127.0.0.1:%d/debug/pprof/profile?seconds=3' 2>&1",
                       ag.port),
                 0, "%s", out);
    cr_expect(out && strstr(out, "dfd_alpha_spin") && strstr(out, "dfd_beta_spin"),
              "the agent's profile does not name the loops:\n%s", out);
    free(out);
    char *body = NULL;
    cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 10), 200);
    double fetched = ag_metric(body, "stacksnap_debuginfo_fetches_total"),
           failed = ag_metric(body, "stacksnap_debuginfo_fetch_failures_total");
    cr_expect(fetched >= 1, "debuginfo fetches %.0f (failures %.0f):\n%s", fetched, failed, body);
    free(body);
    cr_expect_eq(ag_stop(&ag, 10), 0, "%s", ag.log);
    ag_proc_free(&ag);
    kill(p6, SIGKILL);
    cli_wait(p6, 5);
    cli_rmtree(cache_ag);
    free(cache_ag);

    setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
    char *live = cli_path(dir, "live.folded"), *snap = cli_path(dir, "live.snap");
    text = record(ss, prog, live, snap, false, NULL);
    expect_named(text, "live");
    free(text);
    char cached[4200];
    snprintf(cached, sizeof(cached), "%s/%s/debuginfo", cache, hex);
    cr_expect(access(cached, R_OK) == 0, "the debug file is not in the cache: %s", cached);
    char *info[] = {(char *)ss, "info", snap, NULL};
    run_ok(info, 30, &r);
    const char *line = strstr(r.out, "debug file ");
    unsigned long after = 0;
    cr_expect(line && strstr(line, hex) &&
                  sscanf(strstr(line, "after ") ? strstr(line, "after ") : "", "after %lu",
                         &after) == 1 &&
                  after >= 1,
              "no debug file record after the first samples (renamed frames):\n%s", r.out);
    cli_res_free(&r);
    char *rep = cli_path(dir, "replay.folded");
    char *rargv[] = {(char *)ss, "replay", snap, "-o", rep, NULL};
    run_ok(rargv, 60, &r);
    cli_res_free(&r);
    char *d = cli_diff(live, rep);
    cr_expect(!d, "replay differs from live: %s", d ? d : "");
    free(d);
    /* --no-stack-bytes (issue 31): its replay renames the frames
     * aggregated before the debug file arrived as live did */
    char *nlive = cli_path(dir, "nostack-live.folded"), *nsnap = cli_path(dir, "nostack.snap");
    char *nrep = cli_path(dir, "nostack-replay.folded"), *ncache = cli_path(dir, "cache-nostack");
    setenv("DEBUGINFOD_CACHE_PATH", ncache, 1); /* fetched again, after the first samples */
    char *nargv[] = {(char *)ss, "record", "--no-stack-bytes", "-o", nlive, "-o",
                     nsnap,      "--",     (char *)prog,       "1",  NULL};
    run_ok(nargv, 60, &r);
    cli_res_free(&r);
    text = cli_load(nlive, NULL);
    cr_assert(text);
    expect_named(text, "live, --no-stack-bytes");
    free(text);
    char *ninfo[] = {(char *)ss, "info", nsnap, NULL};
    run_ok(ninfo, 30, &r);
    line = strstr(r.out, "debug file ");
    cr_expect(line && strstr(r.out, "no target memory") && strstr(line, "after ") &&
                  atol(strstr(line, "after ") + 6) >= 1,
              "--no-stack-bytes capture without its debug file record:\n%s", r.out);
    cli_res_free(&r);
    char *nrargv[] = {(char *)ss, "replay", nsnap, "-o", nrep, NULL};
    run_ok(nrargv, 60, &r);
    cli_res_free(&r);
    d = cli_diff(nlive, nrep);
    cr_expect(!d, "--no-stack-bytes replay differs from live: %s", d ? d : "");
    free(d);
    free(nlive);
    free(nsnap);
    free(nrep);
    free(ncache);

    /* a server that accepts connections but never answers */
    kill(srvpid, SIGSTOP);
    char *cache2 = cli_path(dir, "cache-stopped"), *slow = cli_path(dir, "slow.folded");
    setenv("DEBUGINFOD_CACHE_PATH", cache2, 1);
    setenv("DEBUGINFOD_TIMEOUT", "1", 1);
    double secs = 0;
    text = record(ss, prog, slow, NULL, false, &secs);
    expect_unnamed(text, "server that does not answer");
    cr_expect_lt(secs, 8, "record took %.1f s with a 1 s debuginfod timeout", secs);
    free(text);
    unsetenv("DEBUGINFOD_TIMEOUT");
    kill(srvpid, SIGCONT);

    /* --bundle: replay with the server stopped and every cache removed */
    char *cache3 = cli_path(dir, "cache-bundle"), *bl = cli_path(dir, "bundle.folded");
    char *bsnap = cli_path(dir, "bundle.snap"), *brep = cli_path(dir, "bundle-replay.folded");
    setenv("DEBUGINFOD_CACHE_PATH", cache3, 1);
    text = record(ss, prog, bl, bsnap, true, NULL);
    expect_named(text, "live --bundle");
    free(text);
    kill(srvpid, SIGTERM);
    cr_expect_neq(cli_wait(srvpid, 10), -1, "debuginfod did not stop");
    cli_rmtree(cache);
    cli_rmtree(cache2);
    cli_rmtree(cache3);
    unsetenv("DEBUGINFOD_URLS");
    unsetenv("DEBUGINFOD_CACHE_PATH");
    char *bargv[] = {(char *)ss, "replay", bsnap, "-o", brep, NULL};
    run_ok(bargv, 60, &r);
    cli_res_free(&r);
    d = cli_diff(bl, brep);
    cr_expect(!d, "bundled replay without server or cache differs from live: %s", d ? d : "");
    free(d);

    /* nothing listens on the port any more */
    setenv("DEBUGINFOD_URLS", url, 1);
    setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
    char *dead = cli_path(dir, "dead.folded");
    text = record(ss, prog, dead, NULL, false, &secs);
    expect_unnamed(text, "dead server");
    cr_expect_lt(secs, 8, "record took %.1f s with a dead server", secs);
    free(text);
    unsetenv("DEBUGINFOD_URLS");
    unsetenv("DEBUGINFOD_CACHE_PATH");

    cli_rmtree(dir);
    free(dead), free(bl), free(bsnap), free(brep), free(cache3), free(cache2), free(slow);
    free(rep), free(live), free(snap), free(cache), free(dbg), free(prog), free(srv), free(bin);
    free(built), free(dir);
}
