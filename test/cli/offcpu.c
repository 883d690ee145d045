/* test/cli/offcpu.c: `record --off-cpu` (issue 17) against ground truth,
 * with real BPF and real luajit. The Lua program (offcpu_sleep.lua) measures their own time in each
 * blocking call; the profile's microseconds must give the same shares within 3 points, on whole
 * chains (Lua frames down to the C call and, with --kernel, the kernel's wait). Interpreter: usleep
 * 3 ms and 1 ms told apart by their Lua function; JIT (traces inline both functions): usleep 3 ms
 * and nanosleep 1 ms told apart by their native chain; a pipe fed at a known pace. Replay gives the
 * same folded text; pprof says off_cpu/nanoseconds plus a count; --off-cpu-min-us drops the shorter
 * waits and says so, in the capture's counters too (info, replay); the agent's
 * /debug/pprof/profile of a sleeper with --off-cpu is its time, its /metrics has the off-CPU
 * counters. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "profile.pb-c.h"

struct run {
    char *dir, *folded, *snap, *pb, *text, *err;
    double truth[3];
};

static void record(struct run *r, const char *tag, char *const extra[], char *const cmd[])
{
    r->dir = cli_tmpdir(tag);
    r->folded = cli_path(r->dir, "o.folded");
    r->snap = cli_path(r->dir, "o.snap");
    r->pb = cli_path(r->dir, "o.pb.gz");
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    argv[n++] = "--off-cpu";
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    char *outs[] = {"-o", r->folded, "-o", r->snap, "-o", r->pb, "--", NULL};
    for (int i = 0; outs[i]; i++)
        argv[n++] = outs[i];
    /* at a higher priority: on a loaded machine a thread preempted in user
     * space waits too, which the program's clock counts and an off-CPU
     * profile (waits in system calls) does not */
    char *nice[] = {"nice", "-n", "-10", NULL};
    for (int i = 0; nice[i]; i++)
        argv[n++] = nice[i];
    for (int i = 0; cmd[i]; i++)
        argv[n++] = cmd[i];
    argv[n] = NULL;
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 120, argv), 0);
    cr_assert_eq(res.status, 0, "record: %s", res.err);
    r->err = strdup(res.err);
    const char *t = strstr(res.err, "truth ");
    r->truth[2] = 0;
    cr_assert(t && sscanf(t, "truth %lf %lf %lf", &r->truth[0], &r->truth[1], &r->truth[2]) >= 2,
              "no truth line: %s", res.err);
    cli_res_free(&res);
    r->text = cli_load(r->folded, NULL);
    cr_assert(r->text);
    char why[200];
    cr_assert_gt(cli_folded_check(r->text, why, sizeof(why)), 0, "%s", why);
}

static void run_free(struct run *r)
{
    cli_rmtree(r->dir);
    free(r->text);
    free(r->err);
    free(r->folded);
    free(r->snap);
    free(r->pb);
    free(r->dir);
}

/* Microseconds of the luajit lines that contain every needle (NULL-ended)
 * and none of the nots. */
static long long weight(const char *text, const char *const *needles, const char *const *nots)
{
    long long sum = 0;
    char *t = strdup(text);
    for (char *l = t, *e; l && *l; l = e ? e + 1 : NULL) {
        e = strchr(l, '\n');
        if (e) *e = 0;
        char *sp = strrchr(l, ' ');
        if (!sp || strncmp(l, "luajit;", 7)) continue;
        *sp = 0;
        bool ok = true;
        for (int i = 0; needles && needles[i] && ok; i++)
            ok = strstr(l, needles[i]) != NULL;
        for (int i = 0; nots && nots[i] && ok; i++)
            ok = strstr(l, nots[i]) == NULL;
        if (ok) sum += atoll(sp + 1);
    }
    free(t);
    return sum;
}

static void shares(const struct run *r, long long a, long long b, long long all)
{
    double want = r->truth[0] / (r->truth[0] + r->truth[1]);
    double got = (double)a / (double)(a + b);
    cr_expect_lt(fabs(got - want), 0.03,
                 "share of the first wait %.3f, truth %.3f (%lld/%lld us, truth %.6f/%.6f s)"
                 ":\n%.3000s",
                 got, want, a, b, r->truth[0], r->truth[1], r->text);
    /* whole chains: both waits account for (nearly) all the time, which is
     * what the program measured */
    cr_expect_geq((a + b) * 100, all * 90, "%lld + %lld of %lld us on whole chains:\n%.3000s", a, b,
                  all, r->text);
    double truth_us = (r->truth[0] + r->truth[1]) * 1e6;
    cr_expect(fabs((double)all - truth_us) < 0.1 * truth_us, "%lld us off the CPU, truth %.0f", all,
              truth_us);
}

Test(offcpu, interpreter_usleep)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *extra[] = {"--kernel", NULL}, *cmd[] = {"luajit", "-joff", lua, "usleep", NULL};
    record(&r, "offcpu", extra, cmd);
    const char *na[] = {"main (", ";a (", ";usleep;", NULL},
               *nb[] = {"main (", ";b (", ";usleep;", NULL};
    long long a = weight(r.text, na, NULL), b = weight(r.text, nb, NULL),
              all = weight(r.text, NULL, NULL);
    shares(&r, a, b, all);
    /* the kernel's side of the wait, above the user frames */
    const char *nk[] = {";usleep;", "nanosleep_[k];", ";schedule_[k]", NULL};
    long long k = weight(r.text, nk, NULL);
    cr_expect_geq(k * 10, all * 9, "%lld of %lld us with the kernel's wait:\n%.3000s", k, all,
                  r.text);

    char *again = cli_path(r.dir, "r.folded");
    char *rargv[] = {(char *)cli_ss(), "replay", r.snap, "-o", again, NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 60, rargv), 0);
    cr_assert_eq(res.status, 0, "replay: %s", res.err);
    cli_res_free(&res);
    char *d = cli_diff(r.folded, again);
    cr_expect(!d, "replay differs: %s", d);
    free(d);

    Perftools__Profiles__Profile *p = cli_load_pprof(r.pb);
    cr_assert(p, "%s: unreadable or not a profile", r.pb);
    cr_assert_eq(p->n_sample_type, 2);
    cr_expect_str_eq(p->string_table[p->sample_type[0]->type], "samples");
    cr_expect_str_eq(p->string_table[p->sample_type[0]->unit], "count");
    cr_expect_str_eq(p->string_table[p->sample_type[1]->type], "off_cpu");
    cr_expect_str_eq(p->string_table[p->sample_type[1]->unit], "nanoseconds");
    long long cnt = 0, ns = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        cnt += p->sample[i]->value[0];
        ns += p->sample[i]->value[1];
    }
    long long total = weight(r.text, NULL, NULL);
    cr_expect_geq(ns, total * 1000, "pprof %lld ns, folded %lld us", ns, total);
    cr_expect(cnt >= 500 && cnt <= 700, "%lld samples (300 rounds of two waits)", cnt);
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(again);
    free(lua);
    run_free(&r);
}

Test(offcpu, jit_usleep_nanosleep)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *cmd[] = {"luajit", lua, "nanosleep", NULL};
    record(&r, "offcpuj", NULL, cmd);
    const char *na[] = {"offcpu_sleep.lua:", ";usleep;", NULL},
               *nb[] = {"offcpu_sleep.lua:", "nanosleep", NULL};
    const char *notu[] = {";usleep;", NULL};
    long long a = weight(r.text, na, NULL), b = weight(r.text, nb, notu),
              all = weight(r.text, NULL, NULL);
    shares(&r, a, b, all);
    free(lua);
    run_free(&r);
}

/* JIT on, both waits in usleep (issue 32): traces inline a, b and now into
 * the loop, whose copy keeps no snapshot between the calls; each call there
 * is taken as the pre-roll call it copies (trace_calls.c), whose frames are
 * exact (a: the snapshot after it is its own) or proven (b: both snapshots
 * around it show main;b). Never under a function that was not on the stack:
 * now() never waits in usleep, no wait is shown under both a and b, and the
 * record summary counts the frames it left out (now's, around b's wait). */
Test(offcpu, jit_usleep_frames_proven)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *cmd[] = {"luajit", lua, "usleep", NULL};
    record(&r, "offcpuju", NULL, cmd);
    const char *nnow[] = {";now (", ";usleep;", NULL}, *nall[] = {";usleep;", NULL};
    const char *nab[] = {";a (", ";b (", ";usleep;", NULL};
    long long inow = weight(r.text, nnow, NULL), all = weight(r.text, nall, NULL);
    long long ab = weight(r.text, nab, NULL);
    cr_expect_eq(inow, 0, "%lld us of usleep under now(), which never calls it:\n%.3000s", inow,
                 r.text);
    cr_expect_eq(ab, 0, "%lld us of usleep under both a and b:\n%.3000s", ab, r.text);
    const char *na[] = {";a (", ";usleep;", NULL}, *nb[] = {";b (", ";usleep;", NULL};
    long long a = weight(r.text, na, NULL), b = weight(r.text, nb, NULL);
    cr_log_info("JIT usleep: %lld us, %.1f%% under a, %.1f%% under b, the rest under main only "
                "(truth: %.1f%% a); %s",
                all, 100.0 * a / (all ? all : 1), 100.0 * b / (all ? all : 1),
                100.0 * r.truth[0] / (r.truth[0] + r.truth[1]), r.err);
    cr_expect(strstr(r.err, " Lua frames unproven"), "no unproven count: %s", r.err);
    free(lua);
    run_free(&r);
}

/* The target of issue 32: the 3:1 usleep loop by Lua function with the JIT
 * on, 75% +-3 (the program's own measure), as with -joff. */
Test(offcpu, jit_usleep_by_function)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *cmd[] = {"luajit", lua, "usleep", NULL};
    record(&r, "offcpujf", NULL, cmd);
    const char *na[] = {";a (", ";usleep;", NULL}, *nb[] = {";b (", ";usleep;", NULL};
    long long a = weight(r.text, na, NULL), b = weight(r.text, nb, NULL),
              all = weight(r.text, NULL, NULL);
    shares(&r, a, b, all);
    free(lua);
    run_free(&r);
}

Test(offcpu, pipe_reads)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua"), sh[600];
    snprintf(sh, sizeof(sh),
             "i=0; while [ $i -lt 250 ]; do echo x; sleep 0.004; i=$((i+1)); done | "
             "luajit -joff %s pipe",
             lua);
    char *cmd[] = {"sh", "-c", sh, NULL};
    record(&r, "offcpup", NULL, cmd);
    const char *nr[] = {"main (", ";wait_line (", NULL},
               *ns[] = {"main (", ";nap (", ";usleep;", NULL};
    long long rd = weight(r.text, nr, NULL), sl = weight(r.text, ns, NULL),
              all = weight(r.text, NULL, NULL);
    shares(&r, rd, sl, all);
    free(lua);
    run_free(&r);
}

Test(offcpu, threshold)
{
    struct run r;
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *extra[] = {"--off-cpu-min-us", "2000", NULL},
         *cmd[] = {"luajit", "-joff", lua, "usleep", "200", NULL};
    record(&r, "offcput", extra, cmd);
    const char *na[] = {";a (", NULL}, *nb[] = {";b (", NULL};
    long long a = weight(r.text, na, NULL), b = weight(r.text, nb, NULL);
    /* a loaded machine stretches some 1 ms sleeps past 2 ms (the program
     * says how much of b's time they were): only those may be sampled, and
     * the first samples, walked before the LuaJIT runtime's windows are in
     * place, may name b for an a that had returned */
    cr_expect_lt((double)b, 1e6 * r.truth[2] + 0.25e6 * r.truth[1],
                 "%lld us of b's waits sampled, %.6f s of them 2 ms or more (of %.6f s):\n%.3000s",
                 b, r.truth[2], r.truth[1], r.text);
    cr_expect_gt(a, 500000, "%lld us of 3 ms waits", a);
    unsigned long long waits = 0, shorter = 0;
    const char *s = strstr(r.err, "off-CPU: ");
    cr_assert(s && sscanf(s, "off-CPU: %llu waits, %llu shorter", &waits, &shorter) == 2, "%s",
              r.err);
    cr_expect_geq(shorter, 150, "%s", r.err);
    cr_expect_geq(waits, 400, "%s", r.err);
    /* the same counters in the capture: info lists them, replay says them */
    unsigned long long unmatched = 0;
    cr_assert(sscanf(s, "off-CPU: %*u waits, %*u shorter than %*u us, %llu not", &unmatched) == 1,
              "%s", r.err);
    char *iargv[] = {(char *)cli_ss(), "info", r.snap, NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 60, iargv), 0);
    cr_assert_eq(res.status, 0, "info: %s", res.err);
    unsigned long long v[3] = {0, 0, 0};
    const char *names[3] = {"capture.off_blocks", "capture.off_short", "capture.off_unmatched"};
    for (int i = 0; i < 3; i++) {
        const char *l = strstr(res.out, names[i]);
        if (l) sscanf(l + strlen(names[i]), "%llu", &v[i]);
    }
    cr_expect(v[0] == waits && v[1] == shorter && v[2] == unmatched,
              "info counters %llu %llu %llu, record said %llu %llu %llu:\n%s", v[0], v[1], v[2],
              waits, shorter, unmatched, res.out);
    cli_res_free(&res);
    char *again = cli_path(r.dir, "r.folded");
    char *rargv[] = {(char *)cli_ss(), "replay", r.snap, "-o", again, NULL};
    cr_assert_eq(cli_run(&res, 60, rargv), 0);
    cr_assert_eq(res.status, 0, "replay: %s", res.err);
    unsigned long long rw = 0, rs = 0, ru = 0;
    s = strstr(res.err, "off-CPU: ");
    cr_expect(s &&
                  sscanf(s, "off-CPU: %llu waits, %llu shorter than the threshold, %llu not", &rw,
                         &rs, &ru) == 3 &&
                  rw == waits && rs == shorter && ru == unmatched,
              "replay: %s\nrecord: %s", res.err, r.err);
    cli_res_free(&res);
    free(again);
    free(lua);
    run_free(&r);
}

Test(offcpu, agent_profile)
{
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *dir = cli_tmpdir("offcpua"), *pb = cli_path(dir, "a.pb.gz"), pidarg[32], url[128];
    char *lj[] = {"luajit", "-joff", lua, "usleep", "100000", NULL};
    pid_t sleeper = cli_start(lj, NULL, "/dev/null");
    cr_assert_gt(sleeper, 0);
    snprintf(pidarg, sizeof(pidarg), "%d", (int)sleeper);
    char *ag[] = {(char *)cli_ss(), "agent",    "--off-cpu",      "-p",
                  pidarg,           "--listen", "127.0.0.1:7496", NULL};
    pid_t agent = cli_start(ag, NULL, NULL);
    cr_assert_gt(agent, 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:7496/debug/pprof/profile?seconds=2");
    char *curl[] = {"curl", "-sf", "--retry", "10", "--retry-connrefused", "--retry-delay", "1",
                    "-o",   pb,    url,       NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 60, curl), 0);
    int st = res.status;
    cli_res_free(&res);
    /* /metrics has the off-CPU counters, and promtool accepts it */
    char *mf = cli_path(dir, "metrics.txt"), *promtool = cli_which("promtool"), cmd[512];
    char *mcurl[] = {"curl", "-sf", "-o", mf, "http://127.0.0.1:7496/metrics", NULL};
    cr_assert_eq(cli_run(&res, 30, mcurl), 0);
    cr_expect_eq(res.status, 0, "curl /metrics");
    cli_res_free(&res);
    char *metrics = cli_load(mf, NULL);
    cr_assert(metrics, "%s", mf);
    cr_assert(promtool, "promtool not installed (Debian prometheus; scripts/dev installs it)");
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s'", promtool, mf);
    char *sh[] = {"sh", "-c", cmd, NULL};
    cr_assert_eq(cli_run(&res, 30, sh), 0);
    cr_expect_eq(res.status, 0, "promtool: %s%s", res.out, res.err);
    cli_res_free(&res);
    /* the sleeper blocks ~500 times a second (3 ms and 1 ms): nearly all sampled */
    double m[4] = {-1, -1, -1, -1};
    const char *mn[4] = {"\nstacksnap_offcpu_waits_total ", "\nstacksnap_offcpu_short_waits_total ",
                         "\nstacksnap_offcpu_unmatched_waits_total ",
                         "\nstacksnap_offcpu_samples_total "};
    for (int i = 0; i < 4; i++) {
        const char *l = strstr(metrics, mn[i]);
        if (l) m[i] = atof(l + strlen(mn[i]));
    }
    cr_expect(m[0] >= 300 && m[1] >= 0 && m[2] >= 0 && m[3] >= 0.8 * m[0] && m[3] <= m[0],
              "off-CPU metrics %g waits, %g short, %g unmatched, %g samples:\n%s", m[0], m[1], m[2],
              m[3], metrics);
    free(metrics), free(mf), free(promtool);
    kill(agent, SIGTERM);
    cli_wait(agent, 10);
    kill(sleeper, SIGKILL);
    cli_wait(sleeper, 10);
    cr_assert_eq(st, 0, "curl %s", url);
    Perftools__Profiles__Profile *p = cli_load_pprof(pb);
    cr_assert(p, "%s: unreadable or not a profile", pb);
    cr_assert_eq(p->n_sample_type, 2);
    cr_expect_str_eq(p->string_table[p->sample_type[1]->type], "off_cpu");
    cr_expect_str_eq(p->string_table[p->sample_type[1]->unit], "nanoseconds");
    long long ns = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        ns += p->sample[i]->value[1];
    /* the sleeper is off the CPU nearly all of the 2 s */
    cr_expect(ns > 1.5e9 && ns < 2.5e9, "%lld ns off the CPU in a 2 s profile", ns);
    perftools__profiles__profile__free_unpacked(p, NULL);
    cli_rmtree(dir);
    free(pb);
    free(dir);
    free(lua);
}

/* nginx + the lua module (Debian 12 packages, unpacked by
 * test/luajit/fetch-nginx.sh as for luajit_servers) under wrk: one Lua
 * handler reads a line from a FIFO fed every 2 ms (a blocking file read in
 * the event loop). Its waits (in open until the feeder opens the FIFO, or
 * in read) must come out on its Lua line, above the kernel's FIFO wait,
 * and the idle event loop's epoll_wait under ngx_process_events_and_timers. */
Test(offcpu, nginx_blocking_read, .timeout = 240)
{
    char *ext = cli_built("ext"), *fetch = cli_src("test/luajit/fetch-nginx.sh"), cmd[800];
    snprintf(cmd, sizeof(cmd), "%s %s", fetch, ext);
    free(fetch);
    cr_assert_eq(system(cmd), 0, "could not unpack nginx + lua module (%s)", cmd);
    char *dir = cli_tmpdir("offcpun"), root[600], conf[700], fifo[700], folded[700];
    snprintf(root, sizeof(root), "%s/nginx", ext);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(folded, sizeof(folded), "%s/n.folded", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/logs %s/tmp %s/conf", dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(conf, sizeof(conf), "%s/conf/nginx.conf", dir);
    FILE *f = fopen(conf, "w");
    cr_assert(f);
    fprintf(f,
            "load_module %s/usr/lib/nginx/modules/ndk_http_module.so;\n"
            "load_module %s/usr/lib/nginx/modules/ngx_http_lua_module.so;\n"
            "master_process off; daemon off; worker_processes 1;\n"
            "pid %s/logs/nginx.pid; error_log %s/logs/error.log;\n"
            "events { worker_connections 64; }\n"
            "http { access_log off; client_body_temp_path %s/tmp/body;\n"
            "  proxy_temp_path %s/tmp/proxy; fastcgi_temp_path %s/tmp/fcgi;\n"
            "  uwsgi_temp_path %s/tmp/uwsgi; scgi_temp_path %s/tmp/scgi;\n"
            "  lua_package_path \"%s/usr/share/lua/5.1/?.lua;;\";\n"
            "  server { listen 127.0.0.1:7495;\n"
            "    location /io { content_by_lua_block {\n"
            "        local function read_line(path)\n"
            "          local fh = io.open(path, \"r\")\n"
            "          local l = fh:read(\"*l\")\n"
            "          fh:close()\n"
            "          return l\n"
            "        end\n"
            "        ngx.say(read_line(\"%s\"))\n"
            "    } }\n"
            "  }\n"
            "}\n",
            root, root, dir, dir, dir, dir, dir, dir, dir, root, fifo);
    fclose(f);
    char bin[700], elog[700], pidarg[32], ldp[700];
    snprintf(bin, sizeof(bin), "%s/usr/sbin/nginx", root);
    snprintf(elog, sizeof(elog), "%s/logs/error.log", dir);
    snprintf(ldp, sizeof(ldp), "LD_LIBRARY_PATH=%s/usr/lib/x86_64-linux-gnu", root);
    char *nargv[] = {"env", ldp, bin, "-p", dir, "-c", "conf/nginx.conf", "-e", elog, NULL};
    pid_t ngx = cli_start(nargv, NULL, "/dev/null");
    cr_assert_gt(ngx, 0);
    snprintf(cmd, sizeof(cmd),
             "i=0; while [ $i -lt 2500 ]; do echo line > %s; sleep 0.002; "
             "i=$((i+1)); done",
             fifo);
    char *feed[] = {"sh", "-c", cmd, NULL};
    pid_t feeder = cli_start(feed, NULL, "/dev/null");
    cli_sleep(1);
    snprintf(pidarg, sizeof(pidarg), "%d", (int)ngx);
    char *rec[] = {
        (char *)cli_ss(), "record", "--off-cpu", "--kernel", "-p", pidarg, "-d", "3", "-o",
        folded,           NULL};
    pid_t r = cli_start(rec, NULL, NULL);
    cli_sleep(0.3);
    char *wrk[] = {"wrk", "-t1", "-c1", "-d2s", "http://127.0.0.1:7495/io", NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 30, wrk), 0);
    char wout[600];
    snprintf(wout, sizeof(wout), "%s%s", res.out, res.err);
    cli_res_free(&res);
    int st = cli_wait(r, 30);
    kill(feeder, SIGKILL);
    cli_wait(feeder, 10);
    kill(ngx, SIGTERM);
    cli_wait(ngx, 10);
    char *el = cli_load(elog, NULL);
    cr_assert_eq(st, 0, "record of nginx failed (nginx's log: %s)", el ? el : "none");
    free(el);
    char *text = cli_load(folded, NULL);
    cr_assert(text);
    long long all = 0, io = 0, loop = 0;
    char *t = strdup(text);
    for (char *l = t, *e; l && *l; l = e ? e + 1 : NULL) {
        e = strchr(l, '\n');
        if (e) *e = 0;
        char *sp = strrchr(l, ' ');
        if (!sp) continue;
        long long n = atoll(sp + 1);
        all += n;
        /* the wait is in open (no writer yet) or in read (no line yet) */
        if (strstr(l, ";read_line (content_by_lua(nginx.conf:") &&
            ((strstr(l, ";read;") && strstr(l, "pipe_read_[k]")) || strstr(l, ";fifo_open_[k]")))
            io += n;
        if (strstr(l, ";ngx_process_events_and_timers;") && strstr(l, ";epoll_wait;")) loop += n;
    }
    free(t);
    /* the time outside the idle event loop is the handler's */
    cr_expect_geq(io * 10, (all - loop) * 8,
                  "%lld of %lld us (%lld in epoll_wait) on the handler's read line (wrk: %s):\n"
                  "%.3000s",
                  io, all, loop, wout, text);
    cr_expect_gt(io, 500000, "%lld us on the handler's read line", io);
    cr_expect_gt(loop, 0, "no epoll_wait under ngx_process_events_and_timers:\n%.3000s", text);
    free(text);
    cli_rmtree(dir);
    free(dir);
    free(ext);
}
