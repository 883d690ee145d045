/* test/luajit/ljtrec.c: recording and builds for the JIT tests (ljtrec.h). */
#include "ljtrec.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ljrec.h"
#include "ljtest.h"
#include "stacksnap/capture.h"
#include "unwind/lua_runtimes.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void on_sample(void *p, const struct ss_sample *s)
{
    struct rec *r = p;
    struct ss_stack st;
    r->samples++;
    double t0 = now_ns();
    ss_unwinder_intake(r->u, s);
    int rc = ss_unwind(r->u, s, &st);
    r->unwind_ns += now_ns() - t0;
    if (rc < 0) {
        r->errors++;
        return;
    }
    ljr_fold(&st, r->buf, sizeof(r->buf));
    r->fn(r->ctx, &st, r->buf);
    ljr_take_plan(r->u, r->cap, s->pid);
}

/* Spawn argv, record it for seconds (or until it exits), then kill it;
 * check_guards: place trace snapshots by their guards too (guards.c);
 * freq: sampling rate (0: 499 Hz). */
void ljt_record_ex(char *const argv[], const char *ldp, double seconds, on_fn fn, void *ctx,
                   struct rec *r, bool check_guards, unsigned freq, const char *root)
{
    struct ss_err err = {0};
    struct ss_capture *c = NULL;
    struct ss_capture_opts o = {.freq_hz = freq ? freq : 499, .stack_size = 16384};
    struct ss_unwinder_opts uo = {.lj_check_guards = check_guards};
    memset(r, 0, sizeof(*r));
    r->fn = fn;
    r->ctx = ctx;
    cr_assert_eq(ss_unwinder_new(&r->u, &uo, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_open(&c, &o, &err), 0, "%s", err.msg);
    r->cap = c;
    /* in a container: record the process inside, wait for unshare */
    pid_t outer = 0;
    pid_t pid = root ? ljt_spawn_root(root, SS_SOURCE_DIR "/test/luajit", argv, &outer)
                     : ljt_spawn(argv, ldp);
    cr_assert(pid > 0, "cannot start %s%s%s", argv[0], root ? " in " : "", root ? root : "");
    pid_t child = root ? outer : pid;
    cr_assert_eq(ss_capture_add_pid(c, pid, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_capture_start(c, &err), 0, "%s", err.msg);
    double end = now_ns() + seconds * 1e9;
    while (now_ns() < end) {
        if (waitpid(child, &r->status, WNOHANG) == child) {
            r->exited = true;
            break;
        }
        if (ss_capture_poll(c, 1, on_sample, r) < 0) break;
    }
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, on_sample, r) > 0)
        ;
    const struct ss_lj_runtime *rts[4];
    if (ss_unwinder_lua_runtimes(r->u, (uint32_t)pid, rts, 4) > 0) {
        ss_lj_runtime_stats(rts[0], &r->lj);
        const char *lay = ss_lj_runtime_layout(rts[0]);
        snprintf(r->layout, sizeof(r->layout), "%s", lay ? lay : "");
        /* a whole run without Lua frames says why here */
        const char *d = ss_lj_runtime_diag(rts[0]);
        if (d && d[0]) cr_log_warn("LuaJIT runtime: %s", d);
        if (r->lj.g_rejects)
            cr_log_info("%llu G candidates rejected", (unsigned long long)r->lj.g_rejects);
    }
    struct ss_unwinder_stats us;
    ss_unwinder_stats(r->u, &us);
    r->target_calls = us.target_calls;
    r->unw_steps = us.unw_steps;
    if (!r->exited) ljt_kill(child);
    ss_capture_close(c);
    ss_unwinder_free(r->u);
}

void ljt_record(char *const argv[], const char *ldp, double seconds, on_fn fn, void *ctx,
                struct rec *r)
{
    ljt_record_ex(argv, ldp, seconds, fn, ctx, r, false, 0, NULL);
}

const char *ljt_built(const char *variant)
{
    static char bin[600];
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s/ext", SS_SOURCE_DIR,
             SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "building Debian's LuaJIT source failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/ext/lj-%s/luajit", SS_BINARY_DIR, variant);
    cr_assert_eq(access(bin, X_OK), 0, "%s missing", bin);
    return bin;
}

/* Debian 13's luajit source, built by build-luajit.sh into ${SS_CACHE}. */
const char *ljt_built_trixie(const char *variant)
{
    static char bin[600];
    char cmd[1024], dir[512];
    ljt_cache("luajit", dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-luajit.sh %s trixie", SS_SOURCE_DIR, dir);
    cr_assert_eq(system(cmd), 0, "building Debian 13's LuaJIT source failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/lj-trixie-%s/luajit", dir, variant);
    cr_assert_eq(access(bin, X_OK), 0, "%s missing", bin);
    return bin;
}
