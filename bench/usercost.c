/* bench/usercost.c: user-space cost per sample and coverage of the two
 * user-space unwinders.
 *
 * Ours, whole: the capture `stacksnap record` wrote is opened, replayed
 * (ss_replay_run: decode, native unwinding, Lua frames from the recorded
 * target reads, symbols) into perf-script text (ss_perf_writer, to
 * /dev/null) and closed, BN_WHOLE_RUNS times, each from nothing; the least
 * CPU time of this thread, per sample. Then, for the other columns, one
 * ss_replay run again and again without output until replay_s CPU seconds
 * have passed (warm: files and symbol tables kept across runs).
 * perf: `perf script` on the `perf record --call-graph dwarf,16384` data of
 * the same workload at the same rate, to a pipe; its CPU time (wait4, least
 * of BN_WHOLE_RUNS runs) minus the CPU time of `perf script` on an empty
 * recording (least of as many), per sample. Both sides: read the file,
 * unwind, symbolize, write one text block per sample with every frame. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "stacksnap/replay.h"
#include "stacksnap/report.h"
#include "stacksnap/snapfile.h"

extern char **environ;

#define MAXF 512

struct eval {
    const struct bn_truth *t;
    struct bn_cov *cov;
    long samples, frames;
};

static void judge(struct eval *ev, const uint64_t *ips, size_t nip, const int32_t *first,
                  const char *const *chunk, size_t nlua, size_t nframes)
{
    bool full;
    ev->cov->samples++;
    ev->cov->frames += (long)nframes;
    if (bn_truth_root(ev->t, ips, nip, &full)) ev->cov->root++;
    if (full) ev->cov->full++;
    if (!ev->t->native && bn_truth_lua(ev->t, first, chunk, nlua)) ev->cov->lua_ok++;
}

static int on_stack_eval(void *ctx, const struct ss_stack *st)
{
    struct eval *ev = ctx;
    uint64_t ips[MAXF];
    int32_t first[MAXF];
    const char *chunk[MAXF];
    size_t nip = 0, nlua = 0;
    ev->samples++;
    ev->frames += st->nframes;
    for (uint32_t i = 0; i < st->nframes && i < MAXF; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind == SS_FRAME_NATIVE) ips[nip++] = f->addr;
        if (f->kind == SS_FRAME_LUA) {
            first[nlua] = (int32_t)f->first_line;
            chunk[nlua++] = f->module;
        }
    }
    judge(ev, ips, nip, first, chunk, nlua, st->nframes);
    return 0;
}

static int on_stack_count(void *ctx, const struct ss_stack *st)
{
    struct eval *ev = ctx;
    ev->samples++;
    ev->frames += st->nframes;
    return 0;
}

static int on_record(void *ctx, const struct ss_snap_record *rec)
{
    if (rec->type == SS_SNAP_SAMPLE) (*(long *)ctx)++;
    return 0;
}

/* CPU per sample of reading and decoding the capture alone (no unwinding):
 * the part of a replay that is not the unwinder. */
static double decode_only(const char *snap, double budget)
{
    struct ss_snap_reader *rd;
    struct ss_err err = {0};
    long n = 0;
    if (ss_snap_open(&rd, snap, &err) < 0) return 0;
    double t0 = bn_cpu_self(), el = 0;
    int passes = 0;
    do {
        if (ss_snap_rewind(rd, &err) < 0 || ss_snap_foreach(rd, on_record, &n, &err) < 0) break;
        passes++;
        el = bn_cpu_self() - t0;
    } while (el < budget || passes < 2);
    ss_snap_close_reader(rd);
    return n ? el * 1e6 / (double)n : 0;
}

struct whole {
    struct ss_perf_writer *pw;
    long samples;
    int rc;
};

static int on_stack_text(void *ctx, const struct ss_stack *st)
{
    struct whole *wh = ctx;
    struct ss_err err = {0};
    wh->samples++;
    return wh->rc = ss_perf_writer_add(wh->pw, st, &err);
}

static void on_msg(void *ctx, const char *m)
{
    (void)ctx, (void)m;
}

/* One whole replay from nothing to perf-script text on out: CPU seconds,
 * or -1. */
static double whole_replay(const char *snap, FILE *out, long *samples)
{
    struct ss_replay *r;
    struct ss_replay_opts ro = {0};
    struct ss_err err = {0};
    double t0 = bn_cpu_self();
    if (ss_replay_open(&r, snap, &ro, &err) < 0) return -1;
    struct whole wh = {.pw = ss_perf_writer_new(out, ss_replay_header(r)->freq_hz, &err)};
    int rc = wh.pw ? ss_replay_run(r, on_stack_text, on_msg, &wh, &err) : -ENOMEM;
    if (wh.pw && ss_perf_writer_finish(wh.pw, &err) < 0 && rc == 0) rc = -EIO;
    ss_replay_close(r);
    double t = bn_cpu_self() - t0;
    *samples = wh.samples;
    return rc < 0 || wh.rc < 0 ? -1 : t;
}

int bn_replay(const struct bn_opts *o, const char *snap, const struct bn_truth *t,
              struct bn_user *res, struct bn_cov *cov, char *msg, size_t len)
{
    struct ss_replay *r;
    struct ss_replay_opts ro = {0};
    struct ss_err err = {0};
    memset(res, 0, sizeof(*res));
    memset(cov, 0, sizeof(*cov));
    cov->have_root = true;
    cov->have_lua = !t->native;
    if (ss_replay_open(&r, snap, &ro, &err) < 0) {
        snprintf(msg, len, "%s", err.msg);
        return -EINVAL;
    }
    FILE *devnull = fopen("/dev/null", "w");
    double best = -1;
    long wn = 0;
    for (int i = 0; devnull && i < BN_WHOLE_RUNS; i++) {
        double c = whole_replay(snap, devnull, &wn);
        if (c < 0) {
            best = -1;
            break;
        }
        if (best < 0 || c < best) best = c;
    }
    if (devnull) fclose(devnull);
    if (best < 0 || !wn) {
        snprintf(msg, len, "replay %s to perf-script text failed", snap);
        ss_replay_close(r);
        return -EIO;
    }
    res->whole_us = best * 1e6 / (double)wn;
    struct eval ev = {.t = t, .cov = cov};
    double t0 = bn_cpu_self();
    int rc = ss_replay_run(r, on_stack_eval, on_msg, &ev, &err);
    double cold = bn_cpu_self() - t0;
    if (rc < 0 || !ev.samples) {
        snprintf(msg, len, "replay %s: %s", snap, rc < 0 ? err.msg : "no samples");
        ss_replay_close(r);
        return rc < 0 ? rc : -ENODATA;
    }
    res->samples = ev.samples;
    res->cold_us = cold * 1e6 / (double)ev.samples;
    struct eval w = {.t = t};
    t0 = bn_cpu_self();
    double el = 0;
    do {
        if ((rc = ss_replay_run(r, on_stack_count, on_msg, &w, &err)) < 0) break;
        res->replays++;
        el = bn_cpu_self() - t0;
    } while (el < o->replay_s || res->replays < 2);
    ss_replay_close(r);
    if (rc < 0 || !w.samples) {
        snprintf(msg, len, "replay %s: %s", snap, err.msg);
        return rc < 0 ? rc : -ENODATA;
    }
    res->us = el * 1e6 / (double)w.samples;
    res->decode_us = decode_only(snap, o->replay_s / 2);
    res->frames = (double)w.frames / (double)w.samples;
    struct stat st;
    if (stat(snap, &st) == 0) res->bytes = (double)st.st_size / (double)res->samples;
    res->ok = true;
    return 0;
}

/* Run `perf script -i data`; with ev, judge every sample. CPU seconds of
 * perf (user + system) or -1; *wall its wall time. */
static double run_script(const struct bn_opts *o, const char *data, struct eval *ev, double *wall)
{
    int fds[2];
    if (pipe(fds)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 01, 0);
    char *argv[] = {(char *)o->perf, "script", "-i", (char *)data, NULL};
    double t0 = bn_now();
    pid_t pid;
    int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (r) {
        close(fds[0]);
        return -1;
    }
    FILE *f = fdopen(fds[0], "r");
    char line[8192];
    uint64_t ips[MAXF];
    size_t nip = 0;
    bool in = false;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '\n' || (line[0] != ' ' && line[0] != '\t')) {
            if (in && ev) judge(ev, ips, nip, NULL, NULL, 0, nip);
            in = line[0] != '\n';
            nip = 0;
            if (in && ev) ev->samples++;
            continue;
        }
        /* "\t ADDR SYM+OFF (DSO)": perf prints DSO-relative addresses for
         * dwarf callchains of a PIE; make those of the executable absolute */
        char *end;
        unsigned long long ip = strtoull(line, &end, 16);
        if (end == line || nip >= MAXF) continue;
        char *dso = strrchr(end, '(');
        if (ev && dso && !(ip >= ev->t->exe_lo && ip < ev->t->exe_hi)) {
            size_t el = strlen(ev->t->exe);
            ip = !strncmp(dso + 1, ev->t->exe, el) && dso[1 + el] == ')' ? ip + ev->t->bias : 0;
        }
        ips[nip++] = ip;
    }
    if (in && ev) judge(ev, ips, nip, NULL, NULL, 0, nip);
    fclose(f);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) return -1;
    *wall = bn_now() - t0;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) return -1;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

double bn_perf_startup(const struct bn_opts *o)
{
    char data[512];
    snprintf(data, sizeof(data), "%s/empty.perf.data", o->tmp);
    char *argv[] = {(char *)o->perf, "record", "-q", "--call-graph",
                    "dwarf,16384",   "-o",     data, "--",
                    "/bin/true",     NULL};
    int rel;
    pid_t p = bn_spawn(argv, NULL, &rel);
    if (p < 0) return 0;
    bn_release(rel);
    if (bn_wait(p)) return 0;
    double wall, best = -1;
    for (int i = 0; i < BN_WHOLE_RUNS; i++) { /* the least, as for every whole run */
        double c = run_script(o, data, NULL, &wall);
        if (c >= 0 && (best < 0 || c < best)) best = c;
    }
    unlink(data);
    return best > 0 ? best : 0;
}

int bn_perf_script(const struct bn_opts *o, const char *data, const struct bn_truth *t,
                   struct bn_perf *res, struct bn_cov *cov)
{
    memset(cov, 0, sizeof(*cov));
    cov->have_root = true;
    cov->have_lua = !t->native;
    struct eval ev = {.t = t, .cov = cov};
    double startup = res->startup_s;
    memset(res, 0, sizeof(*res));
    res->startup_s = startup;
    res->cpu_s = run_script(o, data, &ev, &res->wall_s);
    res->samples = ev.samples;
    if (res->cpu_s < 0 || !res->samples) return -EINVAL;
    struct stat st;
    if (stat(data, &st) == 0) res->bytes = (double)st.st_size / (double)res->samples;
    for (int i = 1; i < BN_WHOLE_RUNS; i++) { /* the least, as ours and the start-up */
        double wall, c = run_script(o, data, NULL, &wall);
        if (c > 0 && c < res->cpu_s) {
            res->cpu_s = c;
            res->wall_s = wall;
        }
    }
    double net = res->cpu_s - res->startup_s; /* the driver sets startup_s later */
    res->us = net > 0.1 * res->cpu_s ? net * 1e6 / (double)res->samples : 0;
    res->ok = true;
    return 0;
}
