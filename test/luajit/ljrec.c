/* test/luajit/ljrec.c: see ljrec.h. */
#include "ljrec.h"

#include <criterion/logging.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ljtest.h"

#include "stacksnap/capture.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "unwind/lua_runtimes.h"

struct rctx {
    struct ss_unwinder *u;
    struct ss_capture *cap;
    ljr_fn fn;
    void *ctx;
    struct ljr_stats *st;
    char buf[16384];
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static size_t frame_text(const struct ss_frame *f, char *b, size_t cap)
{
    int n;
    if (f->kind == SS_FRAME_LUA)
        n = snprintf(b, cap, "%s (%s:%u)", f->name ? f->name : "?", f->module ? f->module : "?",
                     f->line);
    else if (f->name)
        n = snprintf(b, cap, "%s", f->name);
    else {
        const char *m = f->module ? strrchr(f->module, '/') : NULL;
        n = snprintf(b, cap, "%s+0x%llx",
                     m           ? m + 1
                     : f->module ? f->module
                                 : "?",
                     (unsigned long long)f->offset);
    }
    return n < 0 ? 0 : (size_t)n;
}

static void fold(const struct ss_stack *st, char *buf, size_t cap, bool lua_only)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t k = st->nframes; k-- > 0;) {
        const struct ss_frame *f = &st->frames[k];
        if (lua_only && f->kind != SS_FRAME_LUA) continue;
        char one[512];
        frame_text(f, one, sizeof(one));
        int n = snprintf(buf + len, cap - len, "%s%s", len ? ";" : "", one);
        if (n < 0 || (size_t)n >= cap - len) break;
        len += (size_t)n;
    }
}

void ljr_fold(const struct ss_stack *st, char *buf, size_t cap)
{
    fold(st, buf, cap, false);
}

void ljr_lua_only(const struct ss_stack *st, char *buf, size_t cap)
{
    fold(st, buf, cap, true);
}

static void on_sample(void *p, const struct ss_sample *s)
{
    struct rctx *r = p;
    struct ss_stack st;
    r->st->samples++;
    double t0 = now_ns();
    ss_unwinder_intake(r->u, s);
    int rc = ss_unwind(r->u, s, &st);
    r->st->unwind_ns += now_ns() - t0;
    if (rc < 0) {
        r->st->errors++;
        return;
    }
    for (uint32_t i = 0; i < st.nframes; i++)
        if (st.frames[i].kind == SS_FRAME_LUA) {
            r->st->lua++;
            break;
        }
    fold(&st, r->buf, sizeof(r->buf), false);
    r->fn(r->ctx, &st, r->buf);
    ljr_take_plan(r->u, r->cap, s->pid);
}

void ljr_take_plan(struct ss_unwinder *u, struct ss_capture *c, uint32_t pid)
{
    struct ss_win_plan plan; /* as record does: the runtime's windows from now on */
    struct ss_err err = {0};
    if (ss_unwinder_take_plan(u, pid, &plan) && ss_capture_set_plan(c, (pid_t)pid, &plan, &err) < 0)
        cr_log_warn("window plan not installed: %s", err.msg);
}

/* pid still runs (a child of ours that exited is reaped here). */
static bool alive(pid_t pid, struct ljr_stats *st)
{
    pid_t w = waitpid(pid, &st->status, WNOHANG);
    if (w == pid) {
        st->exited = true;
        return false;
    }
    return kill(pid, 0) == 0;
}

int ljr_record(pid_t pid, unsigned freq, double seconds, ljr_fn fn, void *ctx, struct ljr_stats *st,
               char *msg, size_t msglen)
{
    struct ss_err err = {0};
    struct ss_capture *c = NULL;
    struct ss_capture_opts o = {.freq_hz = freq, .stack_size = 16384};
    struct ss_unwinder_opts uo = {0};
    static struct rctx r; /* big buffer: keep off the stack */
    memset(st, 0, sizeof(*st));
    memset(&r, 0, sizeof(r));
    r.fn = fn;
    r.ctx = ctx;
    r.st = st;
    int rc = ss_unwinder_new(&r.u, &uo, &err);
    if (rc == 0) rc = ss_capture_open(&c, &o, &err);
    r.cap = c;
    if (rc == 0) rc = ss_capture_add_pid(c, pid, &err);
    if (rc == 0) rc = ss_capture_start(c, &err);
    if (rc) {
        snprintf(msg, msglen, "%s", err.msg);
        if (c) ss_capture_close(c);
        if (r.u) ss_unwinder_free(r.u);
        return rc;
    }
    double end = now_ns() + seconds * 1e9;
    while (now_ns() < end && alive(pid, st))
        if (ss_capture_poll(c, 1, on_sample, &r) < 0) break;
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, on_sample, &r) > 0)
        ;
    struct ss_capture_stats cs;
    ss_capture_stats(c, &cs);
    st->dropped = cs.dropped;
    const struct ss_lj_runtime *rts[4];
    if (ss_unwinder_lua_runtimes(r.u, (uint32_t)pid, rts, 4) > 0) {
        const char *lay = ss_lj_runtime_layout(rts[0]);
        snprintf(st->layout, sizeof(st->layout), "%s", lay ? lay : "");
        st->derived = ss_lj_runtime_layout_derived(rts[0]);
        snprintf(st->diag, sizeof(st->diag), "%s", ss_lj_runtime_diag(rts[0]));
    }
    struct ss_unwinder_stats us;
    ss_unwinder_stats(r.u, &us);
    st->target_reads = us.target_calls;
    ss_capture_close(c);
    ss_unwinder_free(r.u);
    msg[0] = 0;
    return 0;
}

int ljr_run_root(const char *root, char *const argv[], unsigned settle_ms, unsigned freq,
                 double seconds, ljr_fn fn, void *ctx, struct ljr_stats *st, char *msg,
                 size_t msglen)
{
    pid_t outer;
    pid_t pid = ljt_spawn_root(root, SS_SOURCE_DIR "/test/luajit", argv, &outer);
    if (pid < 0) {
        snprintf(msg, msglen, "cannot start %s in a namespaced chroot of %s", argv[0], root);
        return -ECHILD;
    }
    usleep(settle_ms * 1000u);
    int rc = ljr_record(pid, freq, seconds, fn, ctx, st, msg, msglen);
    ljt_kill(outer);
    return rc;
}

int ljr_run(char *const argv[], const char *ldp, unsigned settle_ms, unsigned freq, double seconds,
            ljr_fn fn, void *ctx, struct ljr_stats *st, char *msg, size_t msglen)
{
    pid_t pid = ljt_spawn(argv, ldp);
    if (pid < 0) {
        snprintf(msg, msglen, "cannot spawn %s", argv[0]);
        return -ECHILD;
    }
    usleep(settle_ms * 1000u);
    int rc = ljr_record(pid, freq, seconds, fn, ctx, st, msg, msglen);
    if (!st->exited) ljt_kill(pid);
    return rc;
}
