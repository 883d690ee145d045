/* bench/bench.h: the bench driver's shared declarations (bench/run runs
 * bench_driver, which measures and prints the markdown report).
 *
 *   bpfrun.c    load one BPF program (our snapshot program or a comparator),
 *               attach it to one task's cpu-clock event, drain, read stats
 *   kcost.c     kernel cost per sample (interleaved slices), in-kernel coverage
 *   luacfg.c    the LuaJIT walker's settings from the profiler's layout table
 *   plan.c      the window plan `record` gives a LuaJIT process
 *   shortcov.c  coverage of short calls (test/cli/short.lua) at load 0 and 4
 *   truth.c     what a correct stack of each workload is: main's address
 *               range, the C workload's functions, the expected Lua frames
 *   usercost.c  in-process replay of our captures, `perf script` on perf.data
 *   slowdown.c  wall time of the workloads under each profiler, interleaved
 *   report.c    the markdown tables
 *   driver.c    options, workloads, the phases, main() */
#ifndef SS_BENCH_H
#define SS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>

#include "../bpf/bench_events.h"
#include "../bpf/snapshot.h"

/* ---- options and workloads (driver.c) ---- */

struct bn_opts {
    bool quick, check;
    bool kernel_only;   /* phase A's kernel cost alone (--kernel-only) */
    bool user_only;     /* phase A's user-space cost and coverage alone (--user-only) */
    unsigned freq;      /* phase A rate (cost, coverage) */
    double attach_s;    /* seconds per program in phase A */
    double record_s;    /* seconds of `stacksnap record` and `perf record` in phase A */
    double replay_s;    /* CPU seconds of warm replays per capture */
    double run_s;       /* target wall time of one slowdown run */
    int rounds;         /* interleaved slowdown rounds */
    const char *bindir; /* build folder (bench_native, stacksnap) */
    const char *srcdir; /* source tree (bench/workload.lua) */
    const char *luajit; /* the luajit binary */
    const char *perf;   /* the perf binary */
    const char *cmdline;
    char tmp[256]; /* scratch folder */
    double t0;     /* start (bn_now) */
};

/* Progress line on stderr, with the time since the start. */
void bn_log(const struct bn_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

enum bn_wl { BN_NATIVE, BN_NATIVE_FP, BN_LUA, BN_JIT, BN_NWL };
extern const char *const bn_wl_name[BN_NWL];
static inline bool bn_wl_lua(int w)
{
    return w == BN_LUA || w == BN_JIT;
}

/* argv of workload w doing iter iterations (0: forever); strings in buf. */
void bn_wl_argv(const struct bn_opts *o, int w, long iter, char **argv, char *buf, size_t len);

/* ---- processes (driver.c) ---- */

/* Fork argv, stopped before exec until bn_release; stdout to out_path
 * (NULL: /dev/null), stderr to /dev/null. */
pid_t bn_spawn(char *const argv[], const char *out_path, int *release_fd);
void bn_release(int release_fd);
/* waitpid; 0 when it exited with status 0. */
int bn_wait(pid_t pid);
/* "elapsed S cpu S" from a workload's output file: wall seconds (or -1),
 * *cpu the CPU seconds of the work (or -1). */
double bn_elapsed(const char *path, double *cpu);
double bn_now(void);
double bn_cpu_self(void); /* this thread's CPU time */
int bn_cmp_double(const void *a, const void *b);

/* ---- truth (truth.c) ---- */

#define BN_LUA_DEPTH 21 /* leaf, rec x19, main chunk */

struct bn_truth {
    pid_t pid;
    bool native;                     /* the C workload: check the whole chain */
    uint64_t main_lo, main_hi;       /* main(), run-time addresses */
    uint64_t fn_lo[3], fn_hi[3];     /* bn_leaf, bn_d40, bn_run (native only) */
    uint64_t exe_lo, exe_hi;         /* executable mapping(s) */
    uint64_t bias;                   /* load bias of the executable */
    char exe[256];                   /* its path */
    int32_t lua_first[BN_LUA_DEPTH]; /* expected first lines, leaf first */
    const char *lua_chunk;           /* expected chunk name suffix */
};

/* Resolve main() (symbol or _start's lea) and, for the C workload, its
 * functions in pid's executable. 0 or -errno (msg says why). */
int bn_truth_init(struct bn_truth *t, pid_t pid, bool native, char *msg, size_t len);
/* pid's executable (path into exe) and its load bias. */
int bn_exe_bias(pid_t pid, char *exe, size_t len, uint64_t *bias);
/* Leaf-first native ips: does the chain reach main (and, for the C workload,
 * through its own functions only)? *full: exactly the 40-frame chain. */
bool bn_truth_root(const struct bn_truth *t, const uint64_t *ips, size_t n, bool *full);
/* Leaf-first Lua frames (first line, chunk): the expected ones? */
bool bn_truth_lua(const struct bn_truth *t, const int32_t *first, const char *const *chunk,
                  size_t n);

/* Coverage counters of one profiler on one workload. */
struct bn_cov {
    long samples, root, full, lua_ok, frames;
    bool have_root, have_lua; /* the column applies */
};

/* ---- BPF programs (bpfrun.c) ---- */

enum bn_prog { BN_PROG_SNAP, BN_PROG_FP, BN_PROG_LUA };

struct bn_prog_info {
    char name[32];
    uint32_t xlated, verified, jited;
    uint64_t run_ns, run_cnt;
    double ns_med, ns_lo, ns_hi; /* per sample: median, least, most of the slices */
    uint64_t seen, emitted, dropped, records;
};

typedef void (*bn_record_fn)(void *ctx, const void *rec, size_t len);

struct bn_bpf;
/* Load a program: stack_size for the snapshot program; cfg for the Lua
 * walker (may be set later with bn_bpf_set_lua_cfg); follow loads the
 * snapshot object's fork-following program too (verifier view); windows
 * loads it as `record` does (the plans map applied), else as
 * `record --no-lua-window` (the window code dropped by the verifier). */
int bn_bpf_open(struct bn_bpf **out, enum bn_prog kind, unsigned stack_size, bool follow,
                bool windows, char *msg, size_t len);
/* The snapshot program (opened with windows): pid's window plan, as
 * `record` sets it (capture.h: ss_capture_set_plan). 0 or -errno. */
struct ss_win_plan;
int bn_bpf_set_plan(struct bn_bpf *b, pid_t pid, const struct ss_win_plan *p);
int bn_bpf_set_lua_cfg(struct bn_bpf *b, const struct bench_lua_cfg *cfg);
/* Attach to pid's cpu-clock event at freq Hz and select it (select false:
 * the program runs but rejects the pid: the floor cost of a run). */
int bn_bpf_attach(struct bn_bpf *b, pid_t pid, unsigned freq, bool select, char *msg, size_t len);
/* Deliver records for up to timeout_ms. */
int bn_bpf_poll(struct bn_bpf *b, int timeout_ms, bn_record_fn fn, void *ctx);
/* Detach, drain the rest, fill info (stats, counters, instruction counts). */
void bn_bpf_detach(struct bn_bpf *b, bn_record_fn fn, void *ctx);
void bn_bpf_info(struct bn_bpf *b, struct bn_prog_info *pi);
/* Verifier view of the fork-following program (follow = true only). */
void bn_bpf_info_follow(struct bn_bpf *b, struct bn_prog_info *pi);
void bn_bpf_close(struct bn_bpf *b);
/* BPF run-time stats on for the life of the driver: fd or -errno. */
int bn_bpf_stats_on(void);

/* LuaJIT walker settings for pid (luajit at exe): layout verified with the
 * profiler's own table and self-checks from a DISPATCH value (r14 of a
 * sample). 0 or -errno. */
int bn_lua_cfg(pid_t pid, const uint64_t *r14, size_t nr14, struct bench_lua_cfg *cfg,
               char *layout_name, size_t namelen, char *msg, size_t len);
/* Update only the VM range for a (new) process of the same executable. */
int bn_lua_cfg_vm(pid_t pid, struct bench_lua_cfg *cfg);
/* First line and chunk of the prototype at pt in pid (cached by caller). */
int bn_lua_proto(pid_t pid, const char *layout_name, uint64_t pt, int32_t *first, char *chunk,
                 size_t len);

/* The window plan `record` gives pid (ss.h: struct ss_win_plan) and up to
 * max distinct r14 values of its samples, from a short capture unwound by
 * our unwinder (plan.c). 0 or -errno (msg says why). */
int bn_take_plan(const struct bn_opts *o, pid_t pid, struct ss_win_plan *plan, uint64_t *r14,
                 size_t *nr14, size_t max, char *msg, size_t len);

/* ---- user-space cost (usercost.c) ---- */

/* Whole runs on each side (ours: a cold replay to perf-script text; perf:
 * `perf script`, and its start-up): the least of this many. */
#define BN_WHOLE_RUNS 5
struct bn_user {
    long samples;     /* per replay */
    double whole_us;  /* least of BN_WHOLE_RUNS whole replays (open, replay writing
                         perf-script text, close), per sample (CPU) */
    double cold_us;   /* first replay, per sample (CPU) */
    double us;        /* warm replays without output, per sample (CPU) */
    double decode_us; /* reading + decoding the capture alone, per sample */
    long replays;     /* warm replays done */
    double frames;    /* frames per sample */
    double bytes;     /* capture file bytes per sample */
    bool ok;
};
struct bn_perf {
    long samples;
    double cpu_s, wall_s, startup_s; /* perf script CPU, wall; CPU of an empty one */
    double us;    /* (cpu - startup) / samples; 0 when that is within start-up noise */
    double bytes; /* perf.data bytes per sample */
    bool ok;
};

int bn_replay(const struct bn_opts *o, const char *snap, const struct bn_truth *t,
              struct bn_user *res, struct bn_cov *cov, char *msg, size_t len);
int bn_perf_script(const struct bn_opts *o, const char *data, const struct bn_truth *t,
                   struct bn_perf *res, struct bn_cov *cov);
/* CPU seconds of `perf script` on an empty dwarf recording (start-up). */
double bn_perf_startup(const struct bn_opts *o);

/* ---- slowdown (slowdown.c) ---- */

enum bn_prof { BN_PROF_NONE, BN_PROF_OURS, BN_PROF_PERF, BN_PROF_FP, BN_PROF_LUA, BN_NPROF };
extern const char *const bn_prof_name[BN_NPROF];

#define BN_NRATES 2
extern const unsigned bn_rates[BN_NRATES];

struct bn_slow {
    long iter[BN_NWL];                           /* calibrated iterations */
    double med[BN_NWL][BN_NPROF][BN_NRATES];     /* median wall seconds (0: not run) */
    double spread[BN_NWL][BN_NPROF][BN_NRATES];  /* (max - min) / median */
    double cpu[BN_NWL][BN_NPROF][BN_NRATES];     /* median CPU seconds of the target */
    double cspread[BN_NWL][BN_NPROF][BN_NRATES]; /* the same spread, CPU seconds */
    int nruns[BN_NWL][BN_NPROF][BN_NRATES];
    int failed;
};

/* lua_cfg: the walker's layout (from phase A) or NULL (no Lua column). */
int bn_slowdown(const struct bn_opts *o, const struct bench_lua_cfg *lua_cfg, struct bn_slow *s);

/* ---- short calls' coverage (shortcov.c) ---- */

#define BN_SHORTROWS 12
struct bn_shortrow {
    int jit, load, who; /* who: 0 ours, 1 ours --no-lua-window, 2 the in-kernel walker */
    long callee, whole, samples;
};
struct bn_shortcov {
    struct bn_shortrow row[BN_SHORTROWS];
    int n;
};
void bn_shortcov(const struct bn_opts *o, struct bn_shortcov *sc);
/* Its table; returns 1 when it has no row. */
int bn_shortcov_report(const struct bn_shortcov *sc, FILE *f);

/* ---- results and report (report.c) ---- */

#define BN_NSIZES 4
extern const unsigned bn_sizes[BN_NSIZES];

struct bn_results {
    /* phase A, per workload */
    struct bn_prog_info snap[BN_NWL][BN_NSIZES], fp[BN_NWL], lua[BN_NWL];
    bool have_snap[BN_NWL][BN_NSIZES], have_fp[BN_NWL], have_lua[BN_NWL];
    struct bn_cov cov_ours[BN_NWL], cov_fp[BN_NWL], cov_lua[BN_NWL], cov_perf[BN_NWL];
    struct bn_user user[BN_NWL];
    struct bn_perf perf[BN_NWL];
    long lua_start[BN_NWL][4]; /* Lua walker: samples by start kind */
    /* LuaJIT workloads: the 16 KiB snapshot with the window plan `record`
     * sets (snap[w][1] is without: --no-lua-window), in the same slices */
    struct bn_prog_info snapw[BN_NWL];
    bool have_snapw[BN_NWL];
    unsigned plan_n[BN_NWL]; /* windows in the plan */
    long win_recs[BN_NWL];   /* its records that carried windows */
    /* the windows' cost from pairs of adjacent slices, with and without
     * (kcost.c): median of the differences, their quartiles, and of the
     * ratios; how many pairs */
    double win_d_med[BN_NWL], win_d_q1[BN_NWL], win_d_q3[BN_NWL], win_r_med[BN_NWL];
    int win_pairs[BN_NWL];
    struct bn_shortcov shortcov; /* short calls' coverage (shortcov.c) */
    bool have_shortcov;
    /* verifier view of programs not measured per workload */
    struct bn_prog_info follow, compat, floor;
    bool have_follow, have_compat, have_floor;
    char layout[64]; /* LuaJIT layout the walker used */
    struct bn_slow slow;
    bool have_slow;
    char notes[8][256];
    int nnotes;
};

/* ---- kernel cost and in-kernel coverage of one workload (kcost.c) ---- */

void bn_kernel_phase(const struct bn_opts *o, int w, pid_t pid, const struct bn_truth *t,
                     struct bn_results *r, struct bench_lua_cfg *lua_cfg_out, bool *have_lua_cfg);

void bn_note(struct bn_results *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the report (markdown); returns the number of missing figures
 * (--check fails when it is not 0). */
int bn_report(const struct bn_opts *o, const struct bn_results *r, FILE *f);

#endif
