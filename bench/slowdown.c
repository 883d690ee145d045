/* bench/slowdown.c: how much each profiler slows its target down.
 *
 * A fixed amount of work per workload (calibrated once to about run_s
 * seconds without a profiler), run under: nothing; `stacksnap record -F HZ
 * -o X.folded -- CMD` (capture + live unwinding + folded output, the whole
 * profiler); `perf record -F HZ --call-graph dwarf,16384 -o X -- CMD`; the
 * in-kernel frame-pointer comparator and (Lua workloads) the in-kernel
 * LuaJIT walker, loaded by this process and attached to the task before it
 * execs. The workload times its own work (CLOCK_MONOTONIC around it), so
 * profiler start-up and shutdown never count. Conditions run interleaved,
 * round after round (each round starts at a different condition); medians.
 * The C workload's frame-pointer column runs the FP build against its own
 * baseline. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

const char *const bn_prof_name[BN_NPROF] = {"none", "stacksnap", "perf dwarf", "in-kernel FP",
                                            "in-kernel Lua"};
const unsigned bn_rates[BN_NRATES] = {99, 999};

#define MAX_ROUNDS 15

struct cond {
    int wl, prof, rate;
};

/* Comparator runs: load, spawn stopped, attach, release, drain until exit. */
static double run_comparator(const struct cond *c, char **argv, const char *out,
                             const struct bench_lua_cfg *lua_cfg, double *cpu)
{
    struct bn_bpf *b;
    char msg[256];
    int rel;
    if (bn_bpf_open(&b, c->prof == BN_PROF_FP ? BN_PROG_FP : BN_PROG_LUA, 0, false, false, msg,
                    sizeof(msg)))
        return -1;
    struct bench_lua_cfg cfg;
    if (lua_cfg) {
        cfg = *lua_cfg;
        cfg.vm_lo = cfg.vm_hi = cfg.G = 0; /* not this process's */
        bn_bpf_set_lua_cfg(b, &cfg);
    }
    pid_t pid = bn_spawn(argv, out, &rel);
    if (pid < 0 || bn_bpf_attach(b, pid, bn_rates[c->rate], true, msg, sizeof(msg))) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            bn_release(rel);
            waitpid(pid, NULL, 0);
        }
        bn_bpf_close(b);
        return -1;
    }
    bn_release(rel);
    bool vm_set = !lua_cfg;
    int st = 0;
    for (;;) {
        bn_bpf_poll(b, vm_set ? 100 : 1, NULL, NULL);
        if (!vm_set && bn_lua_cfg_vm(pid, &cfg) == 0) { /* exec done: its VM range */
            bn_bpf_set_lua_cfg(b, &cfg);
            vm_set = true;
        }
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || w < 0) break;
    }
    bn_bpf_detach(b, NULL, NULL);
    bn_bpf_close(b);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) return -1;
    return bn_elapsed(out, cpu);
}

/* Wall seconds of the work (or -1); *cpu its CPU seconds. */
static double run_cond(const struct bn_opts *o, const struct cond *c, long iter,
                       const struct bench_lua_cfg *lua_cfg, double *cpu)
{
    char buf[1024], hz[16], out[512], folded[512], data[512];
    char *wargv[16], *argv[32];
    int n = 0, rel;
    bn_wl_argv(o, c->wl, iter, wargv, buf, sizeof(buf));
    snprintf(hz, sizeof(hz), "%u", bn_rates[c->rate]);
    snprintf(out, sizeof(out), "%s/slow.out", o->tmp);
    snprintf(folded, sizeof(folded), "%s/slow.folded", o->tmp);
    snprintf(data, sizeof(data), "%s/slow.perf.data", o->tmp);
    char ss[512];
    snprintf(ss, sizeof(ss), "%s/stacksnap", o->bindir);
    unlink(out);
    switch (c->prof) {
    case BN_PROF_FP:
    case BN_PROF_LUA:
        return run_comparator(c, wargv, out, c->prof == BN_PROF_LUA ? lua_cfg : NULL, cpu);
    case BN_PROF_OURS: {
        char *pre[] = {ss, "record", "-F", hz, "-o", folded, "--"};
        for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
            argv[n++] = pre[i];
        break;
    }
    case BN_PROF_PERF: {
        char *pre[] = {(char *)o->perf, "record",      "-q", "-F", hz,
                       "--call-graph",  "dwarf,16384", "-o", data, "--"};
        for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
            argv[n++] = pre[i];
        break;
    }
    default:
        break;
    }
    for (int i = 0; wargv[i]; i++)
        argv[n++] = wargv[i];
    argv[n] = NULL;
    pid_t pid = bn_spawn(argv, out, &rel);
    if (pid < 0) return -1;
    bn_release(rel);
    if (bn_wait(pid)) return -1;
    unlink(folded);
    unlink(data);
    return bn_elapsed(out, cpu);
}

static long calibrate(const struct bn_opts *o, int wl)
{
    long iter = wl == BN_LUA ? 20 : wl == BN_JIT ? 40 : 100;
    struct cond c = {wl, BN_PROF_NONE, 0};
    double cpu;
    for (int k = 0; k < 3; k++) {
        double e = run_cond(o, &c, iter, NULL, &cpu);
        if (e <= 0) return -1;
        long want = (long)((double)iter * o->run_s / e + 0.5);
        if (want < 1) want = 1;
        if (e > o->run_s * 0.5) return want; /* long enough to trust */
        iter = want;
    }
    return iter;
}

int bn_slowdown(const struct bn_opts *o, const struct bench_lua_cfg *lua_cfg, struct bn_slow *s)
{
    struct cond cs[64];
    int nc = 0;
    static const int wls[] = {BN_NATIVE, BN_NATIVE_FP, BN_LUA, BN_JIT};
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < sizeof(wls) / sizeof(wls[0]); i++) {
        int w = wls[i];
        if ((s->iter[w] = calibrate(o, w)) <= 0) {
            bn_log(o, "slowdown: %s does not run", bn_wl_name[w]);
            s->failed++;
            continue;
        }
        cs[nc++] = (struct cond){w, BN_PROF_NONE, 0};
        for (int r = 0; r < BN_NRATES; r++) {
            if (w == BN_NATIVE_FP) {
                cs[nc++] = (struct cond){w, BN_PROF_FP, r};
                continue;
            }
            cs[nc++] = (struct cond){w, BN_PROF_OURS, r};
            cs[nc++] = (struct cond){w, BN_PROF_PERF, r};
            if (w != BN_NATIVE) cs[nc++] = (struct cond){w, BN_PROF_FP, r};
            if (bn_wl_lua(w) && lua_cfg) cs[nc++] = (struct cond){w, BN_PROF_LUA, r};
        }
    }
    int rounds = o->rounds < MAX_ROUNDS ? o->rounds : MAX_ROUNDS;
    static double v[BN_NWL][BN_NPROF][BN_NRATES][MAX_ROUNDS];
    static double u[BN_NWL][BN_NPROF][BN_NRATES][MAX_ROUNDS];
    for (int round = 0; round < rounds; round++) {
        bn_log(o, "slowdown round %d/%d (%d runs)", round + 1, rounds, nc);
        for (int k = 0; k < nc; k++) {
            const struct cond *c = &cs[(k + round * 5) % nc];
            double cpu, e = run_cond(o, c, s->iter[c->wl], lua_cfg, &cpu);
            if (e <= 0) {
                s->failed++;
                continue;
            }
            int *m = &s->nruns[c->wl][c->prof][c->rate];
            u[c->wl][c->prof][c->rate][*m] = cpu;
            v[c->wl][c->prof][c->rate][(*m)++] = e;
        }
    }
    for (int w = 0; w < BN_NWL; w++)
        for (int p = 0; p < BN_NPROF; p++)
            for (int r = 0; r < BN_NRATES; r++) {
                int m = s->nruns[w][p][r];
                if (!m) continue;
                double *x = v[w][p][r];
                qsort(x, (size_t)m, sizeof(double), bn_cmp_double);
                s->med[w][p][r] = m % 2 ? x[m / 2] : (x[m / 2 - 1] + x[m / 2]) / 2;
                s->spread[w][p][r] = (x[m - 1] - x[0]) / s->med[w][p][r];
                x = u[w][p][r];
                qsort(x, (size_t)m, sizeof(double), bn_cmp_double);
                s->cpu[w][p][r] = m % 2 ? x[m / 2] : (x[m / 2 - 1] + x[m / 2]) / 2;
                if (s->cpu[w][p][r] > 0) s->cspread[w][p][r] = (x[m - 1] - x[0]) / s->cpu[w][p][r];
            }
    return 0;
}
