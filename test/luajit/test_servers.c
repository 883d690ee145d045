/* test/luajit/test_servers.c: Lua on stacks that C code switches, recorded
 * with real BPF and unwound live (ljrec.h), JIT off:
 *  - nginx + lua module (OpenResty luajit2, unpacked .debs) serving two
 *    locations on 127.0.0.1 under two wrk load generators, plus a timer:
 *    requests and timers are coroutines resumed from C
 *    (ngx_http_lua_run_thread) that yield (ngx.sleep) in the middle, so
 *    several are alive at once. Every sample shows exactly one of them:
 *    its handler's Lua frames (chunk `content_by_lua(nginx.conf:N)`) right
 *    on ngx_http_lua_run_thread. A third location runs a handler of short
 *    calls (~1, 5 and 20 us): its whole chain must be exact as well.
 *  - Tarantool 2.6 fibers (each on its own native stack, switched by
 *    coro_transfer) yielding between slices of work: every sample shows
 *    exactly one fiber's chain on that fiber's native stack (coro_init).
 *  - Tarantool 2.6 with the JIT on: samples in trace code (its SnapShot has
 *    no mcofs, src/unwind/luajit/trace.c) show the Lua frames from
 *    jit_base with the trace's function at its start line, and the native
 *    frames below the VM frame down to coro_init. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "ljcheck.h"
#include "ljtest.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"

/* Copy the template, replacing @ROOT@, @PREFIX@, @PORT@ and @JIT@. */
static void write_conf(const char *path, const char *root, const char *prefix, int port, bool jit)
{
    FILE *in = fopen(DIR "nginx.conf.in", "r"), *out = fopen(path, "w");
    cr_assert(in && out, "nginx.conf: %s", strerror(errno));
    char line[1024];
    while (fgets(line, sizeof(line), in)) {
        for (char *p = line; *p; p++) {
            if (!strncmp(p, "@ROOT@", 6)) {
                fputs(root, out);
                p += 5;
            } else if (!strncmp(p, "@PREFIX@", 8)) {
                fputs(prefix, out);
                p += 7;
            } else if (!strncmp(p, "@JIT@", 5)) {
                fputs(jit ? "jit.on()" : "jit.off()", out);
                p += 4;
            } else if (!strncmp(p, "@PORT@", 6)) {
                fprintf(out, "%d", port);
                p += 5;
            } else {
                fputc(*p, out);
            }
        }
    }
    fclose(in);
    fclose(out);
}

static pid_t spawn_quiet(char *const argv[], const char *ldp, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (ldp) setenv("LD_LIBRARY_PATH", ldp, 1);
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* Timer samples: the timer's coroutine sits on the event loop's stack. */
static bool run_thread_below(const struct ss_stack *st, const char *folded)
{
    (void)st;
    return strstr(folded, ";ngx_http_lua_run_thread;") != NULL;
}

/* nginx with the lua module under two wrk clients. root: the unpacked
 * Debian 12 packages (host) or, with ctr, a Debian 13 root whose nginx runs
 * in its own mount + pid namespaces chrooted there (ljt_spawn_root); the
 * prefix then lives in the root's /tmp and every path in nginx.conf is the
 * container's. jit: the handlers' loops run as traces. */
static void nginx_case(const char *label, const char *root, bool ctr, bool jit, const char *layout)
{
    if (access("/usr/bin/wrk", X_OK)) cr_skip_test("wrk not installed (scripts/dev installs it)");
    char cmd[4096], prefix[512], conf[1200], ldp[600], bin[600];
    const char *inside = ctr ? "" : root; /* paths as nginx sees them */
    snprintf(prefix, sizeof(prefix), "%s/ngx-XXXXXX", ctr ? "/tmp" : SS_BINARY_DIR);
    char host_prefix[1100];
    if (ctr) {
        snprintf(host_prefix, sizeof(host_prefix), "%s/tmp/ngx-XXXXXX", root);
        cr_assert_not_null(mkdtemp(host_prefix));
        snprintf(prefix, sizeof(prefix), "/tmp/%s", strrchr(host_prefix, '/') + 1);
    } else {
        cr_assert_not_null(mkdtemp(prefix));
        snprintf(host_prefix, sizeof(host_prefix), "%s", prefix);
    }
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/conf %s/logs %s/tmp", host_prefix, host_prefix,
             host_prefix);
    cr_assert_eq(system(cmd), 0);
    int port = cli_free_port();
    cr_assert(port > 0);
    snprintf(conf, sizeof(conf), "%s/conf/nginx.conf", host_prefix);
    write_conf(conf, inside, prefix, port, jit);
    snprintf(ldp, sizeof(ldp), "%s/usr/lib/x86_64-linux-gnu", root);
    snprintf(bin, sizeof(bin), "%s/usr/sbin/nginx", inside);
    char elog[600];
    snprintf(elog, sizeof(elog), "%s/logs/error.log", prefix);
    char *nargv[] = {bin, "-p", prefix, "-c", "conf/nginx.conf", "-e", elog, NULL};
    pid_t outer = 0, ngx;
    if (ctr)
        ngx = ljt_spawn_root(root, SS_SOURCE_DIR "/test/luajit", nargv, &outer);
    else
        ngx = outer = spawn_quiet(nargv, ldp, NULL);
    cr_assert(ngx > 0, "%s: nginx did not start", label);
    for (int i = 0; i < 100 && !cli_port_open(port); i++)
        usleep(50 * 1000);
    if (!cli_port_open(port)) {
        stop(outer);
        cr_assert_fail("%s: nginx did not listen on 127.0.0.1:%d (see %s%s)", label, port,
                       ctr ? root : "", elog);
    }
    char ua[128], ub[128], uc[128], wa[1200], wb[1200], wc[1200];
    snprintf(ua, sizeof(ua), "http://127.0.0.1:%d/a", port);
    snprintf(ub, sizeof(ub), "http://127.0.0.1:%d/b", port);
    snprintf(uc, sizeof(uc), "http://127.0.0.1:%d/c", port);
    snprintf(wa, sizeof(wa), "%s/wrk-a.txt", host_prefix);
    snprintf(wb, sizeof(wb), "%s/wrk-b.txt", host_prefix);
    snprintf(wc, sizeof(wc), "%s/wrk-c.txt", host_prefix);
    char *wargv_a[] = {"/usr/bin/wrk", "-t1", "-c1", "-d6s", "--timeout", "5s", ua, NULL};
    char *wargv_b[] = {"/usr/bin/wrk", "-t1", "-c1", "-d6s", "--timeout", "5s", ub, NULL};
    char *wargv_c[] = {"/usr/bin/wrk", "-t1", "-c1", "-d6s", "--timeout", "5s", uc, NULL};
    pid_t w1 = spawn_quiet(wargv_a, NULL, wa), w2 = spawn_quiet(wargv_b, NULL, wb),
          w3 = spawn_quiet(wargv_c, NULL, wc);
    usleep(300 * 1000);

    static struct ljc c;
    memset(&c, 0, sizeof(c));
    const char *A = "content_by_lua(nginx.conf:30)", *B = "content_by_lua(nginx.conf:42)",
               *T = "init_worker_by_lua(nginx.conf:18)";
    snprintf(c.wbuf[0], sizeof(c.wbuf[0]), "main (%s:9);handle_a (%s:6);work_a (%s:3);spin (%s:2)",
             A, A, A, A);
    snprintf(c.wbuf[1], sizeof(c.wbuf[1]),
             "main (%s:9);handle_b (%s:6);render_b (%s:3);spin (%s:2)", B, B, B, B);
    snprintf(c.wbuf[2], sizeof(c.wbuf[2]), "anonymous (%s:5);tspin (%s:2)", T, T);
    /* /c: a handler of short calls (parse ~1 us, route ~5, render ~20 with
     * the JIT off), the shape the sample-time Lua state is for (issue 14) */
    const char *C = "content_by_lua(nginx.conf:54)", *leaf[3] = {"parse", "route", "render"};
    for (int k = 0; k < 3; k++)
        snprintf(c.wbuf[3 + k], sizeof(c.wbuf[3 + k]),
                 "main (%s:11);handle_c (%s:8);%s (%s:%d);spin (%s:2)", C, C, leaf[k], C, 3 + k, C);
    for (int k = 0; k < 6; k++)
        c.want[k] = c.wbuf[k];
    c.below = "ngx_http_lua_run_thread";
    c.extra = run_thread_below;
    c.layout = layout;
    c.coverage_pct = 60; /* the worker also parses, writes, waits */
    c.min_judged = 60;
    struct ljr_stats *st = &c.st;
    char msg[256];
    int rc = ljr_record(ngx, 499, 3.0, ljc_on, &c, st, msg, sizeof(msg));
    stop(w1);
    stop(w2);
    stop(w3);
    stop(outer);
    cr_assert_eq(rc, 0, "%s: recording nginx failed: %s", label, msg);
    cr_log_info("%s: %u samples, %u with Lua frames, %u judged, %u exact; per chain a %u b %u "
                "timer %u, short calls c: parse %u route %u render %u; %.1f us/sample; layout %s%s",
                label, c.samples, c.lua, c.judged, c.exact, c.hits[0], c.hits[1], c.hits[2],
                c.hits[3], c.hits[4], c.hits[5],
                st->samples ? st->unwind_ns / st->samples / 1000 : 0, st->layout,
                st->derived ? " (derived)" : "");
    cr_expect_str_eq(st->layout, c.layout, "%s: layout %s (diag '%s')", label, st->layout,
                     st->diag);
    cr_expect(st->derived, "%s: layout not derived from the code", label);
    cr_expect(c.judged >= c.min_judged, "%s: only %u judged samples of %u", label, c.judged,
              c.samples);
    cr_expect(c.exact * 100 >= c.judged * 98, "%s: %u of %u exact; first wrong:\n%s", label,
              c.exact, c.judged, c.bad);
    cr_expect(c.lua * 100 >= c.samples * c.coverage_pct, "%s: %u of %u samples with Lua frames",
              label, c.lua, c.samples);
    /* each chain seen: 3% of the judged samples (the worker's time is
     * split four ways); the short calls take 1/27, 5/27 and 21/27 of /c's
     * share: parse (spin(100), under a microsecond) is seen in 0-0.3% of
     * the samples, not required; when seen, its chain must be exact too */
    static const unsigned min_pm[6] = {30, 30, 30, 0, 20, 50}; /* per mille */
    for (int k = 0; k < 6; k++)
        cr_expect(c.hits[k] * 1000 >= c.judged * min_pm[k], "%s: chain %d seen %u/%u: %s", label, k,
                  c.hits[k], c.judged, c.want[k]);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", host_prefix);
    cr_expect_eq(system(cmd), 0);
}

Test(luajit_servers, openresty_requests_and_timer_under_wrk)
{
    char cmd[1024], root[512];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-nginx.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack nginx + lua module (%s)", cmd);
    snprintf(root, sizeof(root), "%s/ext/nginx", SS_BINARY_DIR);
    nginx_case("nginx (Debian 12, luajit2)", root, false, false, "openresty-luajit2-2.1-20230119");
}

/* Debian 13: nginx 1.26 + lua module 0.10.28 on libluajit 2.1.1737090214,
 * in a container; with the JIT off and on. */
Test(luajit_servers, trixie_nginx_container_under_wrk)
{
    char root[512];
    ljt_trixie_root(root, sizeof(root));
    nginx_case("nginx (Debian 13, container, JIT off)", root, true, false, "derived-gc64-jit");
}

Test(luajit_servers, trixie_nginx_container_jit_under_wrk)
{
    char root[512];
    ljt_trixie_root(root, sizeof(root));
    nginx_case("nginx (Debian 13, container, JIT on)", root, true, true, "derived-gc64-jit");
}

/* Fiber samples run on the fiber's own stack, rooted in coro_init. */
static bool on_fiber_stack(const struct ss_stack *st, const char *folded)
{
    (void)folded;
    const struct ss_frame *root = &st->frames[st->nframes - 1];
    return st->nframes && root->name && !strcmp(root->name, "coro_init");
}

Test(luajit_servers, tarantool_fibers)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    static struct ljc c;
    const char *S = DIR "fibers_tt.lua";
    snprintf(c.wbuf[0], sizeof(c.wbuf[0]), "anonymous (%s:6);pack (%s:4);spin (%s:3)", S, S, S);
    snprintf(c.wbuf[1], sizeof(c.wbuf[1]), "anonymous (%s:7);index (%s:5);spin (%s:3)", S, S, S);
    c.want[0] = c.wbuf[0];
    c.want[1] = c.wbuf[1];
    c.below = "lua_pcall";
    c.extra = on_fiber_stack;
    c.layout = "tarantool-2.6-luajit-nogc64";
    c.each_pct = 20;
    char *argv[] = {"/usr/bin/tarantool", (char *)S, NULL};
    ljc_run("tarantool fibers", argv, NULL, 2.5, &c);
}

/* JIT on: leaf's loop is a trace; recorded from 300 ms after the start, so
 * most samples come before any interpreter sample could verify G. */
Test(luajit_servers, tarantool_jit_traces)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    static struct ljc c;
    const char *S = DIR "w_tt_jit.lua";
    snprintf(c.wbuf[0], sizeof(c.wbuf[0]), "main (%s:7);a (%s:5);b (%s:4);c (%s:3);leaf (%s:2)", S,
             S, S, S, S);
    c.want[0] = c.wbuf[0];
    c.below = "lua_pcall";
    c.extra = on_fiber_stack;
    c.layout = "tarantool-2.6-luajit-nogc64";
    c.coverage_pct = 90;
    char *argv[] = {"/usr/bin/tarantool", (char *)S, NULL};
    ljc_run("tarantool JIT traces", argv, NULL, 2.5, &c);
    cr_expect(c.exact * 100 >= c.samples * 90, "only %u of %u samples show %s", c.exact, c.samples,
              c.want[0]);
}
