/* bench/vmcost.c: bench_vmcost, the kernel cost per sample of our snapshot
 * program against the kernel's own frame-pointer walk, inside an emulated
 * VM (bench/arm64: the arm64 VM; it builds on every architecture).
 *
 *   bench_vmcost [--seconds S] [--rounds R] [--freq HZ] -- WORKLOAD [ARGS...]
 *
 * Runs the workload (bench_native_fp: 40 frames with frame pointers) and,
 * as bench_driver's kernel phase does (kcost.c, bpfrun.c), loads every
 * program at once and attaches one at a time in slices, each round starting
 * with another: our snapshot program copying 8/16/32/64 KiB, the in-kernel
 * frame-pointer walk (bench_fp: bpf_get_stack of the user stack), and the
 * floor (bench_fp attached, the pid not selected: a run that only rejects
 * it). The cost per sample of a slice is the growth of run_time_ns over
 * that of run_cnt; per program the median slice is printed, with its ratio
 * to the frame-pointer walk, one line each:
 *   vmcost PROGRAM ns=N lo=N hi=N runs=N ratio_fp=R xlated=N verified=N copied=BYTES
 * (copied: the snapshot records' mean stack bytes; a copy ends at the end of
 * the stack when that is nearer than the snapshot size)
 * Under emulation absolute times are inflated; ratios within one run hold. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_SLICES 32

struct prog {
    const char *name;
    enum bn_prog kind;
    unsigned size;
    bool select;
    struct bn_bpf *b;
    double ns[MAX_SLICES];
    int nns;
    uint64_t ns0, cnt0, runs;
    uint64_t recs, bytes; /* snapshot records drained, stack bytes they copied */
};

/* A snapshot record: its copied stack bytes counted. */
static void count_copy(void *ctx, const void *rec, size_t len)
{
    struct prog *p = ctx;
    const struct ss_event *e = rec;
    if (len < sizeof(*e)) return;
    p->recs++;
    p->bytes += e->stack_len;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One slice of p on pid: attach, drain for secs, detach; its cost per run. */
static void slice(struct prog *p, pid_t pid, unsigned freq, double secs)
{
    char msg[256];
    struct bn_prog_info pi;
    if (bn_bpf_attach(p->b, pid, freq, p->select, msg, sizeof(msg))) {
        fprintf(stderr, "bench_vmcost: %s: %s\n", p->name, msg);
        return;
    }
    double end = now() + secs;
    bn_record_fn fn = p->kind == BN_PROG_SNAP ? count_copy : NULL;
    while (now() < end)
        bn_bpf_poll(p->b, 50, fn, p);
    bn_bpf_detach(p->b, fn, p);
    bn_bpf_info(p->b, &pi);
    uint64_t dn = pi.run_ns - p->ns0, dc = pi.run_cnt - p->cnt0;
    p->ns0 = pi.run_ns;
    p->cnt0 = pi.run_cnt;
    p->runs += dc;
    if (dc && p->nns < MAX_SLICES) p->ns[p->nns++] = (double)dn / (double)dc;
}

static double median(struct prog *p)
{
    qsort(p->ns, (size_t)p->nns, sizeof(double), cmp_double);
    int n = p->nns;
    return n % 2 ? p->ns[n / 2] : (p->ns[n / 2 - 1] + p->ns[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    double secs = 10;
    int rounds = 5, i = 1;
    unsigned freq = 199;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
            secs = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--freq"))
            freq = (unsigned)atoi(argv[++i]);
        else
            break;
    }
    if (i + 1 >= argc || strcmp(argv[i], "--") || rounds < 1 || rounds > MAX_SLICES || secs <= 0 ||
        !freq) {
        fprintf(stderr, "usage: bench_vmcost [--seconds S] [--rounds R] [--freq HZ] -- "
                        "WORKLOAD [ARGS...]\n");
        return 2;
    }
    int sfd = bn_bpf_stats_on();
    if (sfd < 0) {
        fprintf(stderr, "bench_vmcost: BPF run-time stats: %s\n", strerror(-sfd));
        return 1;
    }
    static const struct {
        const char *name;
        enum bn_prog kind;
        unsigned size;
        bool select;
    } def[] = {
        {"snapshot_8k", BN_PROG_SNAP, 8192, true},
        {"snapshot_16k", BN_PROG_SNAP, 16384, true},
        {"snapshot_32k", BN_PROG_SNAP, 32768, true},
        {"snapshot_64k", BN_PROG_SNAP, 65536, true},
        {"fp", BN_PROG_FP, 0, true},
        {"floor", BN_PROG_FP, 0, false},
    };
    enum { NP = sizeof(def) / sizeof(def[0]) };
    struct prog ps[NP];
    memset(ps, 0, sizeof(ps));
    for (int k = 0; k < NP; k++) {
        ps[k].name = def[k].name;
        ps[k].kind = def[k].kind;
        ps[k].size = def[k].size;
        ps[k].select = def[k].select;
    }
    const int np = NP, fp = 4;
    char msg[256];
    for (int k = 0; k < np; k++)
        if (bn_bpf_open(&ps[k].b, ps[k].kind, ps[k].size, false, false, msg, sizeof(msg))) {
            fprintf(stderr, "bench_vmcost: %s: %s\n", ps[k].name, msg);
            return 1;
        }
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[i + 1], argv + i + 1);
        _exit(127);
    }
    if (pid < 0) return 1;
    sleep(1);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < np; k++)
            slice(&ps[(k + r) % np], pid, freq, secs / rounds);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double fpns = ps[fp].nns ? median(&ps[fp]) : 0;
    int rc = 0;
    for (int k = 0; k < np; k++) {
        struct prog *p = &ps[k];
        if (!p->nns) {
            printf("vmcost %s none\n", p->name);
            rc = 1;
        } else {
            double m = median(p);
            struct bn_prog_info pi;
            bn_bpf_info(p->b, &pi);
            printf("vmcost %s ns=%.0f lo=%.0f hi=%.0f runs=%llu ratio_fp=%.2f xlated=%u "
                   "verified=%u copied=%llu\n",
                   p->name, m, p->ns[0], p->ns[p->nns - 1], (unsigned long long)p->runs,
                   fpns > 0 ? m / fpns : 0, pi.xlated, pi.verified,
                   (unsigned long long)(p->recs ? p->bytes / p->recs : 0));
        }
        bn_bpf_close(p->b);
    }
    close(sfd);
    return rc;
}
