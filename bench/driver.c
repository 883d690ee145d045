/* bench/driver.c: bench_driver, the measuring half of bench/run.
 *
 *   bench_driver --bindir DIR --srcdir DIR [--quick] [--check] [--cmdline S]
 *
 * Phase A, per workload (kept running, ITER 0): each BPF program attached
 * for attach_s seconds in all, in interleaved slices, at the same rate (our
 * snapshot program at 8/16/32/64 KiB, the frame-pointer comparator, the
 * LuaJIT walker: kcost.c), then
 * `stacksnap record -p PID` and `perf record --call-graph dwarf,16384 -p PID`
 * for twice as long; then our capture is replayed in-process and `perf script`
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

void bn_log(const struct bn_opts *o, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bench [%5.1f s] ", bn_now() - o->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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
    bn_log(o, "%s (pid %d): kernel cost and coverage", bn_wl_name[w], (int)pid);

    if (!o->user_only) bn_kernel_phase(o, w, pid, &t, r, lua_cfg_out, have_lua_cfg);

    /* the whole profiler, then perf, on the same process at the same rate */
    if (w != BN_NATIVE_FP && !o->kernel_only) {
        char ss[512];
        snprintf(ss, sizeof(ss), "%s/stacksnap", o->bindir);
        snprintf(snap, sizeof(snap), "%s/wl%d.snap", o->tmp, w);
        snprintf(data, sizeof(data), "%s/wl%d.perf.data", o->tmp, w);
        snprintf(secs, sizeof(secs), "%g", o->record_s);
        snprintf(pidb, sizeof(pidb), "%d", (int)pid);
        snprintf(hz, sizeof(hz), "%u", o->freq);
        bn_log(o, "%s: stacksnap record, perf record", bn_wl_name[w]);
        char *sa[] = {ss, "record", "-p", pidb, "-F", hz, "-d", secs, "-o", snap, NULL};
        bool ours = run_cli(sa) == 0;
        char *pa[] = {(char *)o->perf, "record", "-q", "-F", hz,   "--call-graph",
                      "dwarf,16384",   "-p",     pidb, "-o", data, "--",
                      "sleep",         secs,     NULL};
        bool perf = run_cli(pa) == 0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        pid = 0;
        bn_log(o, "%s: replay, perf script", bn_wl_name[w]);
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
            "usage: %s --bindir DIR --srcdir DIR [--quick] [--check] [--kernel-only]\n"
            "          [--cmdline TEXT] [--luajit PATH] [--perf PATH] [--seconds S] [--rounds N]\n",
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
        else if (!strcmp(a, "--kernel-only"))
            o.kernel_only = true;
        else if (!strcmp(a, "--user-only"))
            o.user_only = true;
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
    o.record_s = 2 * o.attach_s; /* more samples: perf script's start-up is large */
    if (rounds > 0) o.rounds = rounds;
    snprintf(o.tmp, sizeof(o.tmp), "/tmp/stacksnap-bench-XXXXXX");
    if (!mkdtemp(o.tmp)) {
        perror("bench: mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    o.t0 = bn_now();
    int stats = bn_bpf_stats_on();
    if (stats < 0) {
        bn_log(&o, "cannot enable BPF stats (%s): run as root", strerror(-stats));
        return 1;
    }
    static struct bn_results r;
    struct bench_lua_cfg lua_cfg;
    bool have_lua_cfg = false;
    for (int w = 0; w < BN_NWL; w++)
        phase_a(&o, w, &r, &lua_cfg, &have_lua_cfg);
    compat_info(&r);
    if (o.kernel_only) { /* the kernel cost tables alone: the rest is missing */
        bn_report(&o, &r, stdout);
        close(stats);
        return 0;
    }
    if (!o.user_only) {
        bn_shortcov(&o, &r.shortcov);
        r.have_shortcov = true;
    }
    bn_log(&o, "perf script start-up");
    double startup = bn_perf_startup(&o);
    for (int w = 0; w < BN_NWL; w++)
        if (r.perf[w].ok) {
            r.perf[w].startup_s = startup;
            double net = r.perf[w].cpu_s - startup;
            /* below a tenth of the whole, the difference is start-up noise */
            r.perf[w].us = net > 0.1 * r.perf[w].cpu_s ? net * 1e6 / (double)r.perf[w].samples : 0;
        }
    if (!o.user_only) {
        bn_log(&o, "phase A took %.0f s; slowdown", bn_now() - o.t0);
        bn_slowdown(&o, have_lua_cfg ? &lua_cfg : NULL, &r.slow);
        r.have_slow = true;
    }
    close(stats);
    int missing = bn_report(&o, &r, stdout);
    bn_log(&o, "done in %.0f s%s", bn_now() - o.t0, missing ? " (some figures are missing)" : "");
    static const char *const left[] = {"wl.out", "slow.out", "slow.folded", "slow.perf.data"};
    for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", o.tmp, left[i]);
        unlink(p);
    }
    rmdir(o.tmp);
    if (o.check && missing) {
        bn_log(&o, "--check: %d figures missing", missing);
        return 1;
    }
    return 0;
}
