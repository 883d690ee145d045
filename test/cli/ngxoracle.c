/* test/cli/ngxoracle.c: the differential oracle of issue 32 in nginx with
 * the real lua-resty-core (oracle.h). nginx + the lua module serve a
 * handler whose calls are lua-resty-core's FFI paths (ngx.re.find / match /
 * gsub with "jo", ngx.var.*, ngx.req.get_headers, ngx.shared.DICT:get/set,
 * ngx.encode_base64) and lua-cjson, under wrk; recorded once with jit.off()
 * in init_by_lua (the truth: the interpreter's Lua frames above a C
 * function are the ones that made the call) and once with the JIT on.
 * Above each C function the JIT's chains must be the interpreter's, or a
 * proven prefix of one (counted in record's "Lua frames unproven"), never a
 * frame the interpreter never had there. The JIT-on run also serves a naive
 * fib(30) from a handler: its samples carry the whole chain down to the
 * chunk's main, and a chain cut short starts at a [truncated] root. In
 * Debian 12's case the JIT's server is recorded again beside 4 busy
 * processes (2 s at 4999 Hz), judged against the same interpreter's run.
 * Debian 12's nginx (unpacked .debs, test/luajit/fetch-nginx.sh), Debian
 * 13's and sid's in a container (own mount + pid namespaces, chrooted into
 * a root of test/roots/mkroot.sh). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../luajit/ljtest.h" /* LJT_TRIXIE_PKGS: the Debian 13 root's packages */
#include "cli.h"
#include "oracle.h"

/* %1$s: the root as nginx sees it, %2$s: the prefix, %3$d: the port,
 * %4$s: init_by_lua's JIT switch. */
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
    "  lua_package_path \"%2$s/?.lua;%1$s/usr/share/lua/5.1/?.lua;;\";\n"
    "  lua_package_cpath \"%1$s/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;"
    "/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;\";\n"
    "  lua_shared_dict d 2m;\n"
    "  init_by_lua_block { %4$s require(\"ngx.re\").opt(\"jit_stack_size\", 200 * 1024) }\n"
    "  server {\n    listen 127.0.0.1:%3$d;\n"
    "    location /o {\n"
    "      content_by_lua_block { ngx.say(require(\"ngxoracle\").handle(100)) }\n    }\n"
    "    location /fib {\n      content_by_lua_block {\n"
    "        ngx.sleep(0.06)\n        ngx.say(require(\"ngxoracle\").handle_fib())\n      }\n    "
    "}\n"
    "  }\n}\n";

struct run {
    char *folded, *err;
    char *folded_load, *err_load; /* recorded again beside busy processes (or NULL) */
    /* interpreter samples in an FFI call, of them under ffi.meta.__call,
     * the first under another ffi.meta name */
    long long ffi, ffi_named;
    char ffi_other[600];
    long long fib, fib_whole, fib_cut, fib_bad; /* samples in fib: whole, [truncated], other */
    char fib_example[2048];
    /* samples through code without CFI ("[jit] ..." frames, native_scan.c):
     * all, those from _start, those in anonymous code with frames below
     * but not PCRE2's caller (stale frames: the only such code here is
     * PCRE2's JIT, called by ngx_http_lua_ffi_exec_regex; LuaJIT's traces
     * are the Lua walk's) */
    long long jit, jit_rooted, jit_false;
    char jit_example[2048];
};

/* Code without CFI: its frame has a sound chain below it. */
static void jit_judge(struct run *r, const char *line, long long c)
{
    const char *j = strstr(line, ";[jit] ");
    if (!j) return;
    r->jit += c;
    const char *semi = strchr(line, ';');
    r->jit_rooted += semi && !strncmp(semi, ";_start;", 8) ? c : 0;
    const char *x = strstr(line, ";ngx_http_lua_ffi_exec_regex;");
    if (j == semi || (x && x < j)) return; /* nothing below it (truncated there), or PCRE2's */
    /* code without CFI in a file (sid's libc has some: called from cjson)
     * has callers of all kinds */
    if (strncmp(j, ";[jit] [anon]", 13)) return;
    /* code in no mapping the process view knows (a module mapped after
     * it was read: seen once under ASan) is named [anon] too, and its
     * callers are of all kinds */
    if (strstr(line, ";[unknown]")) return;
    r->jit_false += c;
    if (!r->jit_example[0]) snprintf(r->jit_example, sizeof(r->jit_example), "%.2000s", line);
}

/* record's "N through code without CFI (P% of them reached the root)" as
 * a sample count (-1: not on the line; 0 such samples print no clause). */
static long long nocfi_root(const char *err)
{
    const char *p = strstr(err, " through code without CFI (");
    if (!p) return 0;
    const char *b = p;
    while (b > err && b[-1] >= '0' && b[-1] <= '9')
        b--;
    double pct = 0;
    if (sscanf(p, " through code without CFI (%lf%%", &pct) != 1) return -1;
    return (long long)(atoll(b) * pct / 100.0 + 0.5);
}

/* Deep recursion: every sample with a fib frame starts its Lua chain at the
 * chunk's main under ngx_http_lua_run_thread, then handle_fib; or at a
 * [truncated] root. */
static void fib_judge(struct run *r)
{
    for (const char *l = r->folded; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[16384];
        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), l);
        const char *sp = strrchr(line, ' ');
        long long c = sp ? atoll(sp + 1) : 0;
        /* an FFI call from the interpreter runs under the cdata's __call
         * metamethod: the name of the fast function right above the Lua
         * frames proves the ids' table */
        const char *x = strstr(line, ";ngx_http_lua_ffi_"), *mm = NULL;
        for (const char *p = strstr(line, ";ffi.meta.__"); p && x && p < x;
             p = strstr(p + 1, ";ffi.meta.__"))
            mm = p;
        const char *after = mm ? strchr(mm + 1, ';') : NULL;
        if (after && !strstr(after, " (") /* no Lua frame after it */) {
            r->ffi += c;
            bool named = !strncmp(mm, ";ffi.meta.__call ([builtin]:0);", 31);
            r->ffi_named += named ? c : 0;
            if (!named && !r->ffi_other[0])
                snprintf(r->ffi_other, sizeof(r->ffi_other), "%.590s", mm);
        }
        jit_judge(r, line, c);
        const char *f = strstr(line, ";fib (");
        if (f) {
            r->fib += c;
            const char *m = strstr(line, ";ngx_http_lua_run_thread;main (content_by_lua(");
            const char *h = strstr(line, ";handle_fib (");
            const char *t = strstr(line, ";[truncated]");
            /* the first Lua frame */
            const char *lua = strstr(line, " (content_by_lua("),
                       *lf = strstr(line, "ngxoracle.lua:");
            if (!lua || (lf && lf < lua)) lua = lf;
            if (m && h && m < h && h < f)
                r->fib_whole += c;
            else if (t && t < f && (!lua || t < lua))
                r->fib_cut += c;
            else {
                r->fib_bad += c;
                if (!r->fib_example[0])
                    snprintf(r->fib_example, sizeof(r->fib_example), "%.2000s", line);
            }
        }
        if (!e) break;
        l = e + 1;
    }
}

/* Serve and record once. root: as seen from here; ctr: nginx runs in a
 * container chrooted there (else the unpacked packages, LD_LIBRARY_PATH).
 * busy: then record the same server again for BUSY_SECS beside that many
 * busy processes (r->folded_load; the startup and the traces shared). */
#define BUSY_SECS "2"
static void serve(struct run *r, const char *root, bool ctr, bool jit, char *prefix,
                  const char *host_prefix, unsigned busy)
{
    char cmd[4000];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/conf %s/logs %s/tmp", host_prefix, host_prefix,
             host_prefix);
    cr_assert_eq(system(cmd), 0);
    char *lua = cli_src("test/cli/ngxoracle.lua"), *dst = cli_path(host_prefix, "ngxoracle.lua");
    cr_assert_eq(cli_copy(lua, dst, 0644), 0, "%s", dst);
    free(lua);
    free(dst);
    int port = cli_free_port();
    cr_assert(port > 0);
    char *conf = cli_path(host_prefix, "conf/nginx.conf");
    FILE *f = fopen(conf, "w");
    cr_assert(f);
    fprintf(f, conf_fmt, ctr ? "" : root, prefix, port, jit ? "" : "jit.off()");
    fclose(f);
    char bin[1300], elog[1300], ldp[1300];
    snprintf(bin, sizeof(bin), "%s/usr/sbin/nginx", ctr ? "" : root);
    snprintf(elog, sizeof(elog), "%s/logs/error.log", prefix);
    char *hargv[] = {bin, "-p", prefix, "-c", "conf/nginx.conf", "-e", elog, NULL};
    char *cargv[] = {"unshare", "--mount",         "--pid", "--fork", "--kill-child",
                     "chroot",  (char *)root,      bin,     "-p",     prefix,
                     "-c",      "conf/nginx.conf", "-e",    elog,     NULL};
    if (!ctr) {
        snprintf(ldp, sizeof(ldp), "%s/usr/lib/x86_64-linux-gnu", root);
        setenv("LD_LIBRARY_PATH", ldp, 1); /* the unpacked libluajit */
    }
    pid_t outer = cli_start(ctr ? cargv : hargv, NULL, NULL);
    unsetenv("LD_LIBRARY_PATH");
    cr_assert(outer > 0, "nginx did not start");
    pid_t ngx = outer;
    for (int i = 0; i < 200 && !cli_port_open(port); i++)
        cli_sleep(0.05);
    if (ctr) ngx = cli_first_child(outer);
    if (!cli_port_open(port) || ngx <= 0) {
        kill(outer, SIGKILL);
        cli_wait(outer, 5);
        cr_assert_fail("nginx did not listen on 127.0.0.1:%d (see %s%s)", port, ctr ? root : "",
                       elog);
    }
    char uo[64], uf[64], pid[16];
    snprintf(uo, sizeof(uo), "http://127.0.0.1:%d/o", port);
    snprintf(uf, sizeof(uf), "http://127.0.0.1:%d/fib", port);
    snprintf(pid, sizeof(pid), "%d", (int)ngx);
    /* headers for ngx.req.get_headers to copy and $http_x_last to find */
    static char hdr[80][32];
    /* wrk runs until the recordings are done (stopped then): its -d only
     * bounds it */
    char wd[] = "-d40s";
    char *wo[180] = {"wrk", "-t1", "-c1", wd, "--timeout", "5s"};
    unsigned n = 6;
    for (int i = 0; i < 80; i++) {
        snprintf(hdr[i], sizeof(hdr[i]), i == 79 ? "X-Last: %d" : "X-H%d: value-%d", i, i);
        wo[n++] = "-H";
        wo[n++] = hdr[i];
    }
    wo[n++] = uo;
    wo[n] = NULL;
    char *wf[] = {"wrk", "-t1", "-c1", wd, "--timeout", "5s", uf, NULL};
    pid_t w1 = cli_start(wo, NULL, "/dev/null");
    /* fib only with the JIT on (interpreted it would take most samples) */
    pid_t w2 = jit ? cli_start(wf, NULL, "/dev/null") : 0;
    cr_assert(w1 > 0 && w2 >= 0);
    cli_sleep(jit ? 1 : 0.2); /* traces recorded (the interpreter has none) */
    char *dir = cli_tmpdir("ngxorec");
    char *live = cli_path(dir, "live.folded");
    /* the interpreter's run longer: it is slower, and its walks of C
     * calls give up where the collector moved (resolve.c) */
    char snap[1300];
    snprintf(snap, sizeof(snap), "%s.snap", live);
    char *argv[] = {(char *)cli_ss(), "record", "-p", pid,  "-F", "999", "-d",
                    jit ? "3" : "5",  "-o",     live, "-o", snap, NULL};
    if (!getenv("SS_NGXO_KEEP")) argv[10] = NULL; /* the capture only to keep */
    struct cli_res res, lres = {0};
    int rc = cli_run(&res, 60, argv), lrc = 0;
    char *lfold = cli_path(dir, "load.folded");
    if (busy && rc == 0 && res.status == 0) {
        pid_t bp[8];
        /* 4999 Hz: beside them nginx gets a few % of a CPU */
        char *largv[] = {(char *)cli_ss(), "record", "-p",  pid, "-F", "4999", "-d",
                         BUSY_SECS,        "-o",     lfold, NULL};
        cr_assert_eq(orc_busy_start(bp, busy), 0, "fork");
        lrc = cli_run(&lres, 60, largv);
        orc_busy_stop(bp, busy);
    }
    kill(w1, SIGKILL);
    cli_wait(w1, 20);
    if (w2 > 0) kill(w2, SIGKILL), cli_wait(w2, 20);
    kill(ngx, SIGTERM); /* (in the container: its pid 1, so unshare ends too) */
    cli_wait(outer, 10);
    cr_assert_eq(rc, 0);
    cr_assert_eq(res.status, 0, "record: %s", res.err);
    r->err = strdup(res.err);
    cli_res_free(&res);
    r->folded = cli_load(live, NULL);
    cr_assert(r->folded, "%s", live);
    if (busy) {
        cr_assert_eq(lrc, 0);
        cr_assert_eq(lres.status, 0, "record beside %u busy processes: %s", busy, lres.err);
        r->err_load = strdup(lres.err);
        r->folded_load = cli_load(lfold, NULL);
        cr_assert(r->folded_load, "%s", lfold);
        cli_res_free(&lres);
    }
    free(lfold);
    if (getenv("SS_NGXO_KEEP")) { /* for a look at the stacks */
        snprintf(cmd, sizeof(cmd),
                 "cp %s %s/ngxo-%s-%s.folded; cp %s %s/ngxo-%s-%s.conf; cp %s.snap "
                 "%s/ngxo-%s-%s.snap",
                 live, SS_BINARY_DIR, ctr ? "trixie" : "bookworm", jit ? "jit" : "off", conf,
                 SS_BINARY_DIR, ctr ? "trixie" : "bookworm", jit ? "jit" : "off", live,
                 SS_BINARY_DIR, ctr ? "trixie" : "bookworm", jit ? "jit" : "off");
        cr_expect_eq(system(cmd), 0);
    }
    fib_judge(r);
    cli_rmtree(dir);
    free(dir);
    free(live);
    free(conf);
}

/* The C functions of lua-resty-core's FFI paths and of lua-cjson: the
 * regex calls must be judged (>= 12 samples on both sides) and some of the
 * others (the interpreter's walks of C calls give up where the collector
 * moved since the sample: their counts vary from run to run). */
static const char *const ffi_keys[] = {"ngx_http_lua_ffi_exec_regex",
                                       "ngx_http_lua_ffi_var_get",
                                       "ngx_http_lua_ffi_req_get_headers",
                                       "ngx_http_lua_ffi_shdict_store",
                                       "ngx_http_lua_ffi_encode_base64",
                                       "cjson",
                                       NULL};

/* A copy of folded text with from renamed to to (the same length) in the
 * lines through C function in: a chain known wrong for the oracle to catch. */
static char *mutated(const char *text, const char *in, const char *from, const char *to)
{
    char *t = strdup(text);
    cr_assert(t && strlen(from) == strlen(to));
    for (char *l = t; *l;) {
        char *e = strchr(l, '\n');
        if (e) *e = 0;
        if (strstr(l, in))
            for (char *p = strstr(l, from); p; p = strstr(p + 1, from))
                memcpy(p, to, strlen(to));
        if (!e) break;
        *e = '\n';
        l = e + 1;
    }
    return t;
}

/* The oracle catches frames known wrong: above ngx_http_lua_ffi_exec_regex,
 * the handler renamed in every JIT sample must be wrong (the case:
 * all of them under a function that never calls it), never open; and
 * hk_parse's alone (half of the function's calls) is reported. */
static void control(const char *label, const struct orc_dist *doff, const char *on_text)
{
    static struct orc_dist dbad;
    static struct orc_row rows[ORC_KEYS];
    static const char *const m[][2] = {{";handle (", ";handlx ("}, {";hk_parse (", ";hk_pars_ ("}};
    for (unsigned k = 0; k < 2; k++) {
        char *bad = mutated(on_text, ";ngx_http_lua_ffi_exec_regex", m[k][0], m[k][1]);
        orc_parse(&dbad, bad);
        unsigned nr = orc_compare(doff, &dbad, 12, false, rows, ORC_KEYS);
        long long on = 0, wrong = 0, open = 0, right = 0;
        for (unsigned i = 0; i < nr; i++)
            if (!strcmp(rows[i].name, "ngx_http_lua_ffi_exec_regex"))
                on = rows[i].on, wrong = rows[i].wrong, open = rows[i].open, right = rows[i].same;
        cr_log_info("%s: control, %s renamed above ngx_http_lua_ffi_exec_regex: %lld samples, "
                    "%lld wrong, %lld open",
                    label, m[k][0] + 1, on, wrong, open);
        /* (open: chains of a share the interpreter's lost samples could
         * hold; no renamed sample passes as the interpreter's chain; the
         * samples that kept only main, a proven prefix, have no handler to
         * rename) */
        if (k == 0)
            cr_expect(on > 0 && wrong * 2 >= on && right == 0,
                      "%s: %s renamed in %lld JIT samples, the oracle found %lld wrong (%lld open)",
                      label, m[k][0] + 1, on, wrong, open);
        free(bad);
    }
}

/* The JIT run recorded again beside busy processes, judged against the
 * same interpreter's run (issue 32: the differential holds under load):
 * never a frame the interpreter never had there. */
static void under_load(const char *label, const struct orc_dist *doff, const struct run *on,
                       unsigned busy)
{
    static struct orc_dist dload;
    static struct orc_row rows[ORC_KEYS];
    static char table[16384];
    orc_parse(&dload, on->folded_load);
    unsigned nr = orc_compare(doff, &dload, 12, false, rows, ORC_KEYS);
    long long judged = 0, same = 0, pre = 0, wrong = 0, open = 0;
    for (unsigned i = 0; i < nr; i++) {
        judged += rows[i].on;
        same += rows[i].same;
        pre += rows[i].pre;
        wrong += rows[i].wrong;
        open += rows[i].open;
    }
    orc_table(rows, nr, table, sizeof(table));
    long long j = judged ? judged : 1;
    cr_log_info("%s beside %u busy processes: %lld samples judged: %.2f%% the interpreter's "
                "chain, %.2f%% a proven prefix, %.2f%% wrong, %.2f%% open\n%sjit: %s",
                label, busy, judged, 100.0 * same / j, 100.0 * pre / j, 100.0 * wrong / j,
                100.0 * open / j, table, on->err_load);
    cr_expect_gt(judged, 40, "%s beside %u busy processes: %lld samples judged", label, busy,
                 judged);
    cr_expect_eq(wrong, 0,
                 "%s beside %u busy processes: %lld of %lld samples show frames the interpreter "
                 "never has:\n%s",
                 label, busy, wrong, judged, table);
}

static void oracle(const char *label, const char *root, bool ctr, unsigned busy)
{
    if (access("/usr/bin/wrk", X_OK)) cr_skip_test("wrk not installed (scripts/dev installs it)");
    static struct run off, on;
    memset(&off, 0, sizeof(off));
    memset(&on, 0, sizeof(on));
    /* one prefix: the module's chunk name is the same in both runs */
    char prefix[1200], host_prefix[1200], cmd[2600];
    if (ctr) {
        snprintf(host_prefix, sizeof(host_prefix), "%s/tmp/ngxo-XXXXXX", root);
        cr_assert_not_null(mkdtemp(host_prefix));
        snprintf(prefix, sizeof(prefix), "/tmp/%s", strrchr(host_prefix, '/') + 1);
    } else {
        char *d = cli_tmpdir("ngxo");
        snprintf(host_prefix, sizeof(host_prefix), "%s", d);
        snprintf(prefix, sizeof(prefix), "%s", d);
        free(d);
    }
    serve(&off, root, ctr, false, prefix, host_prefix, 0);
    serve(&on, root, ctr, true, prefix, host_prefix, busy);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", host_prefix);
    cr_expect_eq(system(cmd), 0);
    static struct orc_dist doff, don;
    static struct orc_row rows[ORC_KEYS];
    orc_parse(&doff, off.folded);
    orc_parse(&don, on.folded);
    unsigned nr = orc_compare(&doff, &don, 12, false, rows, ORC_KEYS);
    long long judged = 0, same = 0, pre = 0, none = 0, wrong = 0, open = 0;
    for (unsigned i = 0; i < nr; i++) {
        judged += rows[i].on;
        same += rows[i].same;
        pre += rows[i].pre;
        none += rows[i].none;
        wrong += rows[i].wrong;
        open += rows[i].open;
    }
    static char table[16384];
    orc_table(rows, nr, table, sizeof(table));
    long long uoff = orc_unproven(off.err), uon = orc_unproven(on.err), j = judged ? judged : 1;
    cr_log_info("%s: %lld samples judged: %.2f%% the interpreter's chain, %.2f%% a proven prefix, "
                "%.2f%% no Lua frame, %.2f%% wrong, %.2f%% open (the interpreter's view "
                "incomplete); Lua frames unproven: -joff %lld, jit %lld\n%s"
                "fib: %lld samples, %lld whole, %lld [truncated], %lld other%s%s\n-joff: %sjit: %s",
                label, judged, 100.0 * same / j, 100.0 * pre / j, 100.0 * none / j,
                100.0 * wrong / j, 100.0 * open / j, uoff, uon, table, on.fib, on.fib_whole,
                on.fib_cut, on.fib_bad, on.fib_example[0] ? "\n  e.g. " : "", on.fib_example,
                off.err, on.err);
    int kinds = 0;
    for (int k = 0; ffi_keys[k]; k++) {
        bool seen = false;
        for (unsigned i = 0; i < nr; i++)
            seen |= strstr(rows[i].name, ffi_keys[k]) != NULL;
        kinds += seen;
        cr_expect(seen || k > 0, "%s: %s not judged:\n%s", label, ffi_keys[k], table);
    }
    cr_expect_geq(kinds, 3, "%s: %d of the C functions judged:\n%s", label, kinds, table);
    cr_expect_gt(judged, 300, "%s: %lld samples judged", label, judged);
    /* open: JIT chains the interpreter's incomplete view could have missed
     * (a run whose interpreter lost all of do_find's regex samples: 22% of
     * the function's, 9% of all judged); most are judged */
    cr_expect_leq(open * 4, judged, "%s: %lld of %lld samples open:\n%s", label, open, judged,
                  table);
    control(label, &doff, on.folded);
    if (busy) under_load(label, &doff, &on, busy);
    /* issue 32's bar: the interpreter's chain on >= 99% of the samples
     * judged where its view was complete (open aside); since trace_fwd.c
     * places the FFI call through base64.lua's mutable upvalue (before: its
     * samples kept a proven prefix, 0-93% exact, in all three roots), 100%
     * in every root and run measured (machine load 7-14) */
    cr_expect_geq(same * 100, (judged - open) * 99,
                  "%s: %lld of %lld samples (%lld open) the interpreter's chain:\n%s", label, same,
                  judged, open, table);
    for (unsigned i = 0; i < nr; i++)
        if (strstr(rows[i].name, "ngx_http_lua_ffi_encode_base64"))
            cr_expect_geq(
                rows[i].same * 100, rows[i].on * 95,
                "%s: ngx.encode_base64: %lld of %lld samples the interpreter's chain:\n%s", label,
                rows[i].same, rows[i].on, table);
    /* never a frame that was not on the stack */
    cr_expect_eq(wrong, 0, "%s: %lld of %lld samples show frames the interpreter never has:\n%s",
                 label, wrong, judged, table);
    /* the unproven frames are reported; the interpreter's are all proven */
    cr_expect_eq(uoff, 0, "%s: -joff: %lld Lua frames unproven", label, uoff);
    cr_expect(uon >= 0 && (pre == 0 || uon > 0), "%s: %lld samples kept a prefix, %lld unproven",
              label, pre, uon);
    /* walks that kept no Lua frame: where the collector moved since the
     * sample (resolve.c), or a leaf in trace code that the Lua walk could
     * not claim (the native walk's scan then names other code): counted,
     * bounded loosely (0-12% seen under load) */
    cr_expect_leq(none * 100, judged * 25, "%s: %lld of %lld samples without Lua frames:\n%s",
                  label, none, judged, table);
    /* builtins named by this build's fast-function ids (sid's luajit2 has
     * four more than trixie's: ffi.meta.__call was named __div). Another
     * builtin's frame there (ffi.meta.__index or __eq over __call's own C
     * function) was ~1 in 300 FFI samples: stale metamethod frames, which
     * frames.c's KBASE check and the walk from RB no longer name; then ~1
     * sample in 5 runs: the process's first walk, made before the layout
     * that gives the VM frame's PC and KBASE was known (splice.c) */
    cr_expect(off.ffi > 0 && off.ffi_named == off.ffi,
              "%s: %lld of %lld interpreter samples in FFI calls under ffi.meta.__call (%s)", label,
              off.ffi_named, off.ffi, off.ffi_other);
    /* code without CFI stepped over by the scan: never onto stale return
     * addresses (a C frame of an earlier call between [jit] and the Lua
     * frames), and the summary counts at the root only those from _start */
    long long roots = nocfi_root(on.err);
    cr_log_info("%s: %lld samples through code without CFI, %lld from _start, %lld false; the "
                "summary: %lld at the root%s%s\n",
                label, on.jit, on.jit_rooted, on.jit_false, roots,
                on.jit_example[0] ? "\n  e.g. " : "", on.jit_example);
    cr_expect_eq(on.jit_false, 0,
                 "%s: %lld of %lld samples through code without CFI on stale "
                 "frames: %s",
                 label, on.jit_false, on.jit, on.jit_example);
    cr_expect(roots >= 0 && roots <= on.jit_rooted + 1, /* (the share has one decimal) */
              "%s: the summary counts %lld samples through code without CFI at the root, %lld "
              "start at _start",
              label, roots, on.jit_rooted);
    /* deep recursion: the whole chain, or one that says it is cut */
    cr_expect_gt(on.fib, 100, "%s: only %lld samples in fib", label, on.fib);
    cr_expect_eq(on.fib_bad, 0, "%s: %lld of %lld fib samples neither whole nor [truncated]: %s",
                 label, on.fib_bad, on.fib, on.fib_example);
    cr_expect_geq(on.fib_whole * 100, on.fib * 99, "%s: %lld of %lld fib samples whole", label,
                  on.fib_whole, on.fib);
    free(off.folded);
    free(off.err);
    free(on.folded);
    free(on.err);
    free(on.folded_load);
    free(on.err_load);
}

Test(ngxoracle, bookworm_nginx, .timeout = 120)
{
    char cmd[2048], root[1024];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-nginx.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack nginx + lua module (%s)", cmd);
    snprintf(root, sizeof(root), "%s/ext/nginx", SS_BINARY_DIR);
    /* and beside 4 busy processes (the other cases run on other builds) */
    oracle("nginx (Debian 12)", root, false, 4);
}

/* A Debian root (test/roots/mkroot.sh, cached; made by a fixture first)
 * whose nginx runs in a container. */
static void container(const char *label, const char *suite, const char *name)
{
    char cmd[1024], root[512];
    const char *cache = getenv("SS_CACHE");
    snprintf(root, sizeof(root), "%s/roots/%s", cache && *cache ? cache : "/var/cache/stacksnap",
             name);
    snprintf(cmd, sizeof(cmd), "%s/test/roots/mkroot.sh %s %s %s >/dev/null", SS_SOURCE_DIR, suite,
             LJT_TRIXIE_PKGS, name);
    cr_assert_eq(system(cmd), 0, "could not make the %s root (%s)", suite, cmd);
    oracle(label, root, true, 0);
}

Test(ngxoracle, trixie_nginx_container, .timeout = 300)
{
    container("nginx (Debian 13, container)", "trixie", "trixie");
}

/* sid: a root of its own name (roots/sid holds the OTLP collector's Go
 * packages; cli.cmake's cli_ngxoracle_sid_setup makes this one) */
Test(ngxoracle, sid_nginx_container, .timeout = 300)
{
    container("nginx (Debian sid, container)", "sid", "sid-nginx");
}
