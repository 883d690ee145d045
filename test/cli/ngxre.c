/* test/cli/ngxre.c: samples in PCRE's JIT code under OpenResty's ngx.re
 * reach the handler's Lua chain (issue 32). nginx + the lua module of Debian
 * 12 (unpacked .debs, test/luajit/fetch-nginx.sh) serves a handler whose hot
 * path is ngx.re.find(s, re, "jo") under wrk; the JIT code is anonymous
 * memory without CFI that the native walk steps over by a validated stack
 * scan. PCRE runs on its default JIT stack, 32 KiB of locals on the machine
 * stack, mostly pages never touched: the kernel-side copy goes on past them
 * (bpf/pages.h) to the callers above, hence the 64 KiB snapshot. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"

static const char conf_fmt[] =
    "load_module %1$s/usr/lib/nginx/modules/ndk_http_module.so;\n"
    "load_module %1$s/usr/lib/nginx/modules/ngx_http_lua_module.so;\n"
    "master_process off;\ndaemon off;\nworker_processes 1;\n"
    "pid %2$s/logs/nginx.pid;\nerror_log %2$s/logs/error.log;\n"
    "events { worker_connections 64; }\n"
    "http {\n  access_log off;\n"
    "  client_body_temp_path %2$s/tmp/body;\n  proxy_temp_path %2$s/tmp/proxy;\n"
    "  fastcgi_temp_path %2$s/tmp/fcgi;\n  uwsgi_temp_path %2$s/tmp/uwsgi;\n"
    "  scgi_temp_path %2$s/tmp/scgi;\n"
    "  lua_package_path \"%1$s/usr/share/lua/5.1/?.lua;;\";\n"
    "  server {\n    listen 127.0.0.1:%3$d;\n    location /re {\n      content_by_lua_block {\n"
    "        local s = string.rep(\"ab\", 2000) .. \"c123x\"\n"
    "        local function hk_parse(n)\n          local hits = 0\n"
    "          for i = 1, n do\n"
    "            local from = ngx.re.find(s, [[[ab]+c[0-9]+x]], \"jo\")\n"
    "            if from then hits = hits + 1 end\n          end\n          return hits\n"
    "        end\n        ngx.say(hk_parse(300))\n      }\n    }\n  }\n}\n";

Test(ngxre, pcre_jit_samples_reach_the_handler, .timeout = 240)
{
    if (access("/usr/bin/wrk", X_OK)) cr_skip_test("wrk not installed (scripts/dev installs it)");
    char cmd[2048], root[1024];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-nginx.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack nginx + lua module (%s)", cmd);
    snprintf(root, sizeof(root), "%s/ext/nginx", SS_BINARY_DIR);
    char *dir = cli_tmpdir("ngxre");
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/conf %s/logs %s/tmp", dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    int port = cli_free_port();
    cr_assert(port > 0);
    char *conf = cli_path(dir, "conf/nginx.conf");
    FILE *f = fopen(conf, "w");
    cr_assert(f);
    fprintf(f, conf_fmt, root, dir, port);
    fclose(f);
    char ldp[1100], bin[1100], elog[1100];
    snprintf(ldp, sizeof(ldp), "%s/usr/lib/x86_64-linux-gnu", root);
    snprintf(bin, sizeof(bin), "%s/usr/sbin/nginx", root);
    snprintf(elog, sizeof(elog), "%s/logs/error.log", dir);
    setenv("LD_LIBRARY_PATH", ldp, 1); /* the unpacked libluajit */
    char *nargv[] = {bin, "-p", dir, "-c", "conf/nginx.conf", "-e", elog, NULL};
    pid_t ngx = cli_start(nargv, NULL, NULL);
    unsetenv("LD_LIBRARY_PATH");
    cr_assert(ngx > 0, "nginx did not start");
    for (int i = 0; i < 100 && !cli_port_open(port); i++)
        cli_sleep(0.05);
    if (!cli_port_open(port)) {
        kill(ngx, SIGKILL);
        cli_wait(ngx, 5);
        cr_assert_fail("nginx did not listen on 127.0.0.1:%d (see %s)", port, elog);
    }
    char url[64], pid[16];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/re", port);
    snprintf(pid, sizeof(pid), "%d", (int)ngx);
    char *wargv[] = {"wrk", "-t1", "-c2", "-d8s", url, NULL};
    pid_t wrk = cli_start(wargv, NULL, "/dev/null");
    cr_assert(wrk > 0);
    cli_sleep(1);
    char *live = cli_path(dir, "live.folded");
    char *argv[] = {(char *)cli_ss(), "record", "-p", pid,  "-F", "499", "--stack-size",
                    "65528",          "-d",     "4",  "-o", live, NULL};
    struct cli_res r;
    int rc = cli_run(&r, 60, argv);
    cli_wait(wrk, 20);
    kill(ngx, SIGTERM);
    cli_wait(ngx, 10);
    cr_assert_eq(rc, 0);
    cr_assert_eq(r.status, 0, "record: %s", r.err);
    cli_res_free(&r);
    char *text = cli_load(live, NULL);
    cr_assert(text);
    /* samples in the JIT code: its frame, or an unnamed anonymous leaf where
     * the walk could not step out of it */
    long long n = 0, good = 0;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[8192];
        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), l);
        const char *sp = strrchr(line, ' ');
        long long c = sp ? atoll(sp + 1) : 0;
        const char *jit = strstr(line, ";[jit] [anon]");
        if (jit || strstr(line, ";[unknown]+0x")) {
            n += c;
            const char *h = strstr(line, ";hk_parse (content_by_lua(nginx.conf:");
            if (jit && !strncmp(line, "nginx;_start;", 13) && strstr(line, ";main;") && h &&
                h < jit && strstr(h, ";ngx_http_lua_ffi_exec_regex;"))
                good += c;
        }
        if (!e) break;
        l = e + 1;
    }
    cr_log_info("%lld of %lld samples in PCRE's JIT code reach the handler", good, n);
    cr_expect_geq(n, 100, "only %lld samples in the JIT code:\n%.3000s", n, text);
    cr_expect_geq(good * 100, n * 95,
                  "%lld of %lld samples in the JIT code reach hk_parse:\n%.4000s", good, n, text);
    free(text);
    cli_rmtree(dir);
    free(live);
    free(conf);
    free(dir);
}
