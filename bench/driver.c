/* bench/driver.c: bench_driver, the measuring half of bench/run.
 *
 *   bench_driver --bindir DIR --srcdir DIR [--quick] [--check] [--cmdline S]
 *
 * Phase A, per workload (kept running, ITER 0): each BPF program in turn
 * attached for attach_s seconds at the same rate (our snapshot program at
 * 8/16/32/64 KiB, the frame-pointer comparator, the LuaJIT walker), then
 * `stacksnap record -p PID` and `perf record --call-graph dwarf,16384 -p PID`
 * for as long; then our capture is replayed in-process and `perf script`
 * runs on perf's data (user-space cost, coverage). Phase B: slowdown.
 * The markdown report goes to stdout; progress to stderr. Exit 1 with
 * --check when a figure is missing. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "stacksnap/capture.h"

const char *const bn_wl_name[BN_NWL] = {"C, 40 frames, no FP", "C, 40 frames, FP build",
                                        "LuaJIT -joff", "LuaJIT JIT"};
const unsigned bn_sizes[BN_NSIZES] = {8192, 16384, 32768, 65536};

/* ---- small helpers ---- */

double bn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bn_cpu_self(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bn_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void bn_wl_argv(const struct bn_opts *o, int w, long iter, char **argv, char *buf, size_t len)
{
    int n = 0;
    size_t used = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        argv[n++] = buf + used;                                                                    \
        used += (size_t)snprintf(buf + used, len - used, __VA_ARGS__) + 1;                         \
    } while (0)
    switch (w) {
    case BN_NATIVE:
    case BN_NATIVE_FP:
        PUT("%s/%s", o->bindir, w == BN_NATIVE ? "bench_native" : "bench_native_fp");
        break;
    default:
        PUT("%s", o->luajit);
        if (w == BN_LUA) PUT("-joff");
        PUT("%s/bench/workload.lua", o->srcdir);
    }
    PUT("%ld", iter);
#undef PUT
    argv[n] = NULL;
}

pid_t bn_spawn(char *const argv[], const char *out_path, int *release_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return -errno;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        char b;
        close(p[1]);
        int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_RDWR);
        if (o < 0 || nul < 0) _exit(126);
        dup2(o, 1);
        dup2(nul, 2);
        dup2(nul, 0);
        if (read(p[0], &b, 1) != 1) _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[0]);
    *release_fd = p[1];
    return pid;
}

void bn_release(int fd)
{
    if (write(fd, "g", 1) != 1) { /* the child is gone: waitpid says so */
    }
    close(fd);
}

int bn_wait(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) < 0) return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

double bn_elapsed(const char *path, double *cpu)
{
    FILE *f = fopen(path, "r");
    char line[256];
    double v = -1, c = -1;
    if (cpu) *cpu = -1;
    if (!f) return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "elapsed %lf cpu %lf", &v, &c) >= 1) break;
    fclose(f);
    if (cpu) *cpu = c;
    return v;
}

void bn_note(struct bn_results *r, const char *fmt, ...)
{
    if (r->nnotes >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
    va_end(ap);
}

/* ---- phase A ---- */

struct grow {
    uint8_t *p;
    size_t n, cap, rec; /* records of rec bytes */
};

static void keep_rec(void *ctx, const void *rec, size_t len)
{
    struct grow *g = ctx;
    if (len < g->rec) return;
    if (g->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 1024;
        uint8_t *np = realloc(g->p, nc * g->rec);
        if (!np) return;
        g->p = np;
        g->cap = nc;
    }
    memcpy(g->p + g->n++ * g->rec, rec, g->rec);
}

struct r14set {
    uint64_t v[16];
    size_t n;
};

static void keep_r14(void *ctx, const void *rec, size_t len)
{
    struct r14set *s = ctx;
    const struct ss_event *e = rec;
    if (len < sizeof(*e) || s->n >= 16) return;
    uint64_t r14 = e->regs[SS_PT_R14];
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == r14) return;
    s->v[s->n++] = r14;
}

/* Attach b to pid for attach_s seconds, delivering records to fn. */
static int measure(const struct bn_opts *o, struct bn_bpf *b, pid_t pid, bool select,
                   bn_record_fn fn, void *ctx, struct bn_prog_info *pi)
{
    char msg[256];
    double secs = o->attach_s;
    if (bn_bpf_attach(b, pid, o->freq, select, msg, sizeof(msg))) {
        fprintf(stderr, "bench: %s\n", msg);
        return -1;
    }
    double end = bn_now() + secs;
    while (bn_now() < end)
        bn_bpf_poll(b, 100, fn, ctx);
    bn_bpf_detach(b, fn, ctx);
    bn_bpf_info(b, pi);
    return 0;
}

static void eval_fp(const struct grow *g, const struct bn_truth *t, struct bn_cov *cov)
{
    memset(cov, 0, sizeof(*cov));
    cov->have_root = true;
    cov->have_lua = !t->native;
    for (size_t i = 0; i < g->n; i++) {
        const struct bench_fp_event *e = (const void *)(g->p + i * g->rec);
        size_t n = e->nbytes > 0 ? (size_t)e->nbytes / 8 : 0;
        bool full;
        cov->samples++;
        cov->frames += (long)n;
        if (i == 0 && getenv("BENCH_DEBUG"))
            for (size_t k = 0; k < n; k++)
                fprintf(stderr, "fp[%zu] %llx\n", k, (unsigned long long)e->ips[k]);
        if (bn_truth_root(t, (const uint64_t *)e->ips, n, &full)) cov->root++;
        cov->full += full;
    }
}

struct ptcache {
    uint64_t pt[64];
    int32_t first[64];
    char chunk[64][64];
    size_t n;
};

static void eval_lua(const struct grow *g, const struct bn_truth *t, const char *layout,
                     struct bn_cov *cov, long *starts)
{
    struct ptcache pc = {0};
    memset(cov, 0, sizeof(*cov));
    cov->have_lua = true;
    for (size_t i = 0; i < g->n; i++) {
        const struct bench_lua_event *e = (const void *)(g->p + i * g->rec);
        int32_t first[BENCH_LUA_MAX];
        const char *chunk[BENCH_LUA_MAX];
        size_t m = e->n < BENCH_LUA_MAX ? e->n : BENCH_LUA_MAX, n = 0;
        cov->samples++;
        if (e->start < 4) starts[e->start]++;
        for (size_t k = 0; k < m; k++) {
            /* VARG or dummy slots, C and fast functions: not Lua frames */
            if (!e->frames[k].fn || !e->frames[k].pt) continue;
            uint64_t pt = e->frames[k].pt;
            size_t j = 0;
            while (j < pc.n && pc.pt[j] != pt)
                j++;
            if (j == pc.n && pc.n < 64) {
                pc.pt[j] = pt;
                pc.first[j] = -1;
                pc.chunk[j][0] = 0;
                if (pt) bn_lua_proto(t->pid, layout, pt, &pc.first[j], pc.chunk[j], 64);
                pc.n++;
            }
            first[n] = j < pc.n ? pc.first[j] : -1;
            chunk[n++] = j < pc.n ? pc.chunk[j] : NULL;
        }
        cov->frames += (long)n;
        if (i == 0 && getenv("BENCH_DEBUG"))
            for (size_t k = 0; k < n; k++)
                fprintf(stderr, "lua[%zu] %d %s (start %d end %d)\n", k, first[k], chunk[k],
                        e->start, e->end);
        if (e->end == BENCH_LUA_END_BOTTOM && bn_truth_lua(t, first, chunk, n)) cov->lua_ok++;
    }
}

static int run_cli(char **argv)
{
    int rel;
    pid_t p = bn_spawn(argv, NULL, &rel);
    if (p < 0) return -1;
    bn_release(rel);
    return bn_wait(p);
}

static void phase_a(const struct bn_opts *o, int w, struct bn_results *r,
                    struct bench_lua_cfg *lua_cfg_out, bool *have_lua_cfg)
{
    char buf[1024], out[512], msg[256], snap[512], data[512], secs[32], pidb[32], hz[16];
    char *argv[16];
    int rel;
    bool native = !bn_wl_lua(w);
    bn_wl_argv(o, w, 0, argv, buf, sizeof(buf));
    snprintf(out, sizeof(out), "%s/wl.out", o->tmp);
    pid_t pid = bn_spawn(argv, out, &rel);
    if (pid < 0) {
        bn_note(r, "%s: cannot start", bn_wl_name[w]);
        return;
    }
    bn_release(rel);
    usleep(400000); /* past start-up (and the JIT's first traces) */
    struct bn_truth t;
    if (bn_truth_init(&t, pid, native, msg, sizeof(msg))) {
        bn_note(r, "%s: %s", bn_wl_name[w], msg);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return;
    }
    fprintf(stderr, "bench: %s (pid %d): kernel cost and coverage\n", bn_wl_name[w], (int)pid);

    /* our snapshot program at each size */
    struct r14set r14 = {0};
    for (int s = 0; s < BN_NSIZES; s++) {
        if (w == BN_NATIVE_FP && bn_sizes[s] != 16384) continue;
        struct bn_bpf *b;
        bool follow = w == BN_NATIVE && s == 1;
        if (bn_bpf_open(&b, BN_PROG_SNAP, bn_sizes[s], follow, msg, sizeof(msg))) {
            bn_note(r, "snapshot %u: %s", bn_sizes[s], msg);
            continue;
        }
        if (!measure(o, b, pid, true, keep_r14, &r14, &r->snap[w][s])) r->have_snap[w][s] = true;
        if (follow) {
            bn_bpf_info_follow(b, &r->follow);
            r->have_follow = true;
        }
        bn_bpf_close(b);
    }

    /* floor: a program that only rejects the pid (this machine's cost of a
     * BPF run on a sample, with nothing done) */
    struct bn_bpf *b;
    if (w == BN_NATIVE && !bn_bpf_open(&b, BN_PROG_FP, 0, false, msg, sizeof(msg))) {
        if (!measure(o, b, pid, false, NULL, NULL, &r->floor)) r->have_floor = true;
        bn_bpf_close(b);
    }

    /* frame-pointer comparator */
    struct grow g = {.rec = sizeof(struct bench_fp_event)};
    if (!bn_bpf_open(&b, BN_PROG_FP, 0, false, msg, sizeof(msg))) {
        if (!measure(o, b, pid, true, keep_rec, &g, &r->fp[w])) {
            r->have_fp[w] = true;
            eval_fp(&g, &t, &r->cov_fp[w]);
        }
        bn_bpf_close(b);
    } else {
        bn_note(r, "frame-pointer comparator: %s", msg);
    }
    free(g.p);

    /* LuaJIT walker */
    if (!native) {
        struct bench_lua_cfg cfg;
        char layout[64];
        if (bn_lua_cfg(pid, r14.v, r14.n, &cfg, layout, sizeof(layout), msg, sizeof(msg))) {
            bn_note(r, "%s: LuaJIT walker not run: %s", bn_wl_name[w], msg);
        } else if (!bn_bpf_open(&b, BN_PROG_LUA, 0, false, msg, sizeof(msg))) {
            snprintf(r->layout, sizeof(r->layout), "%s", layout);
            *lua_cfg_out = cfg;
            *have_lua_cfg = true;
            struct grow lg = {.rec = sizeof(struct bench_lua_event)};
            bn_bpf_set_lua_cfg(b, &cfg);
            if (!measure(o, b, pid, true, keep_rec, &lg, &r->lua[w])) {
                r->have_lua[w] = true;
                eval_lua(&lg, &t, layout, &r->cov_lua[w], r->lua_start[w]);
            }
            bn_bpf_close(b);
            free(lg.p);
        } else {
            bn_note(r, "LuaJIT walker: %s", msg);
        }
    }

    /* the whole profiler, then perf, on the same process at the same rate */
    if (w != BN_NATIVE_FP) {
        char ss[512];
        snprintf(ss, sizeof(ss), "%s/stacksnap", o->bindir);
        snprintf(snap, sizeof(snap), "%s/wl%d.snap", o->tmp, w);
        snprintf(data, sizeof(data), "%s/wl%d.perf.data", o->tmp, w);
        snprintf(secs, sizeof(secs), "%g", o->attach_s);
        snprintf(pidb, sizeof(pidb), "%d", (int)pid);
        snprintf(hz, sizeof(hz), "%u", o->freq);
        fprintf(stderr, "bench: %s: stacksnap record, perf record\n", bn_wl_name[w]);
        char *sa[] = {ss, "record", "-p", pidb, "-F", hz, "-d", secs, "-o", snap, NULL};
        bool ours = run_cli(sa) == 0;
        char *pa[] = {(char *)o->perf, "record", "-q", "-F", hz,   "--call-graph",
                      "dwarf,16384",   "-p",     pidb, "-o", data, "--",
                      "sleep",         secs,     NULL};
        bool perf = run_cli(pa) == 0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        pid = 0;
        fprintf(stderr, "bench: %s: replay, perf script\n", bn_wl_name[w]);
        if (!ours)
            bn_note(r, "%s: stacksnap record failed", bn_wl_name[w]);
        else if (bn_replay(o, snap, &t, &r->user[w], &r->cov_ours[w], msg, sizeof(msg)))
            bn_note(r, "%s: %s", bn_wl_name[w], msg);
        if (!perf || bn_perf_script(o, data, &t, &r->perf[w], &r->cov_perf[w]))
            bn_note(r, "%s: perf record/script failed", bn_wl_name[w]);
        unlink(snap);
        unlink(data);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* Verifier view of the compat program (perf buffer variant). */
static void compat_info(struct bn_results *r)
{
    struct ss_capture *c;
    struct ss_err err = {0};
    struct ss_capture_opts co = {.compat = true};
    struct ss_bpf_prog_info pi;
    if (ss_capture_open(&c, &co, &err) < 0) return;
    if (!ss_capture_prog_info(c, &pi, &err)) {
        snprintf(r->compat.name, sizeof(r->compat.name), "%s", pi.name);
        r->compat.xlated = pi.xlated_insns;
        r->compat.verified = pi.verified_insns;
        r->compat.jited = pi.jited_bytes;
        r->have_compat = true;
    }
    ss_capture_close(c);
}

static int usage(const char *me)
{
    fprintf(stderr,
            "usage: %s --bindir DIR --srcdir DIR [--quick] [--check] [--cmdline TEXT]\n"
            "          [--luajit PATH] [--perf PATH] [--seconds S] [--rounds N]\n",
            me);
    return 2;
}

int main(int argc, char **argv)
{
    struct bn_opts o = {.freq = 999,
                        .attach_s = 2.5,
                        .replay_s = 2,
                        .run_s = 1.0,
                        .rounds = 5,
                        .luajit = "/usr/bin/luajit",
                        .perf = "/usr/bin/perf",
                        .cmdline = "bench/run"};
    double seconds = 0;
    int rounds = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            o.quick = true;
        else if (!strcmp(a, "--check"))
            o.check = true;
        else if (!strcmp(a, "--bindir") && v)
            o.bindir = argv[++i];
        else if (!strcmp(a, "--srcdir") && v)
            o.srcdir = argv[++i];
        else if (!strcmp(a, "--cmdline") && v)
            o.cmdline = argv[++i];
        else if (!strcmp(a, "--luajit") && v)
            o.luajit = argv[++i];
        else if (!strcmp(a, "--perf") && v)
            o.perf = argv[++i];
        else if (!strcmp(a, "--seconds") && v)
            seconds = atof(argv[++i]);
        else if (!strcmp(a, "--rounds") && v)
            rounds = atoi(argv[++i]);
        else
            return usage(argv[0]);
    }
    if (!o.bindir || !o.srcdir) return usage(argv[0]);
    if (o.quick) {
        o.attach_s = 0.5;
        o.replay_s = 0.3;
        o.run_s = 0.3;
        o.rounds = 1;
    }
    if (seconds > 0) o.attach_s = seconds;
    if (rounds > 0) o.rounds = rounds;
    snprintf(o.tmp, sizeof(o.tmp), "/tmp/stacksnap-bench-XXXXXX");
    if (!mkdtemp(o.tmp)) {
        perror("bench: mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int stats = bn_bpf_stats_on();
    if (stats < 0) {
        fprintf(stderr, "bench: cannot enable BPF stats (%s): run as root\n", strerror(-stats));
        return 1;
    }
    static struct bn_results r;
    struct bench_lua_cfg lua_cfg;
    bool have_lua_cfg = false;
    double t0 = bn_now();
    for (int w = 0; w < BN_NWL; w++)
        phase_a(&o, w, &r, &lua_cfg, &have_lua_cfg);
    compat_info(&r);
    fprintf(stderr, "bench: perf script start-up\n");
    double startup = bn_perf_startup(&o);
    for (int w = 0; w < BN_NWL; w++)
        if (r.perf[w].ok) {
            r.perf[w].startup_s = startup;
            double net = r.perf[w].cpu_s - startup;
            if (net > 0) r.perf[w].us = net * 1e6 / (double)r.perf[w].samples;
        }
    fprintf(stderr, "bench: phase A took %.0f s; slowdown\n", bn_now() - t0);
    bn_slowdown(&o, have_lua_cfg ? &lua_cfg : NULL, &r.slow);
    r.have_slow = true;
    close(stats);
    int missing = bn_report(&o, &r, stdout);
    fprintf(stderr, "bench: done in %.0f s%s\n", bn_now() - t0,
            missing ? " (some figures are missing)" : "");
    rmdir(o.tmp);
    if (o.check && missing) {
        fprintf(stderr, "bench: --check: %d figures missing\n", missing);
        return 1;
    }
    return 0;
}
