/* agent/segments.c: --capture-dir — rolling capture segments
 * DIR/stacksnap-YYYYmmddTHHMMSSZ-N.snap, one every capture_segment_s
 * seconds or sooner when one passes a quarter of capture_max_bytes. Each
 * is a whole capture (snapfile/snapout.c) written from a fresh unwinder,
 * so it holds every process record and target read its replay needs. Past
 * the cap the oldest segments are deleted (never the one being written). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "snapfile/snapout.h"
#include "util/pac.h"

struct ag_segments {
    struct ss_agent *a;
    struct ss_snapout *so; /* NULL: none open (a write failed) */
    char path[4096];
    double start, last_flush;
    unsigned seq;
    uint64_t segments, errors, bytes;
};

static void warn(void *ctx, const char *msg)
{
    ag_log(ctx, "capture: %s", msg);
}

int ag_seg_new(struct ag_segments **out, struct ss_agent *a, struct ss_err *err)
{
    const char *dir = a->o.capture_dir;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        ss_err_set(err, -e, "capture folder %s: %s", dir, strerror(e));
        return -e;
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) < 0) {
        int e = errno ? errno : ENOTDIR;
        ss_err_set(err, -e, "capture folder %s: not a writable folder", dir);
        return -e;
    }
    if (a->o.capture_max_bytes < (1u << 20)) {
        ss_err_set(err, -EINVAL, "capture cap %llu bytes is below the minimum of 1 MiB",
                   (unsigned long long)a->o.capture_max_bytes);
        return -EINVAL;
    }
    struct ag_segments *g = calloc(1, sizeof(*g));
    if (!g) {
        ss_err_set(err, -ENOMEM, "capture: out of memory");
        return -ENOMEM;
    }
    g->a = a;
    *out = g;
    return 0;
}

static int is_segment(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return !strncmp(d->d_name, "stacksnap-", 10) && n > 15 && !strcmp(d->d_name + n - 5, ".snap");
}

/* Delete the oldest segments while the folder's segments pass the cap;
 * sets g->bytes to what stays. Names sort by time, then sequence. */
static void prune(struct ag_segments *g)
{
    const char *dir = g->a->o.capture_dir;
    struct dirent **names = NULL;
    int n = scandir(dir, &names, is_segment, alphasort);
    if (n < 0) return;
    uint64_t *size = calloc((size_t)n + 1, sizeof(*size)), total = 0;
    char p[4096];
    for (int i = 0; size && i < n; i++) {
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]->d_name);
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) size[i] = (uint64_t)st.st_size;
        total += size[i];
    }
    for (int i = 0; size && i < n && total > g->a->o.capture_max_bytes; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]->d_name);
        if (!strcmp(p, g->path) && g->so) continue; /* being written */
        if (unlink(p) == 0) total -= size[i];
    }
    g->bytes = total;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(size);
}

int ag_seg_begin(struct ag_segments *g, struct ss_unwinder **u, struct ss_err *err)
{
    struct ss_agent *a = g->a;
    struct ss_unwinder_opts uo = {.pac_mask = ss_pac_mask(), /* the segment's header's too */
                                  .plan_ready = ag_give_plan,
                                  .plan_ctx = a};
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
    snprintf(g->path, sizeof(g->path), "%s/stacksnap-%s-%04u.snap", a->o.capture_dir, ts, g->seq++);
    struct ss_snapout_opts so = {.path = g->path,
                                 .stack_size = ss_capture_stack_size(a->cap),
                                 .freq_hz = a->o.freq_hz,
                                 .off_cpu = a->o.off_cpu,
                                 .command = "stacksnap agent",
                                 .warn = warn,
                                 .warn_ctx = a};
    struct ss_err e = {0};
    g->so = NULL;
    if (ss_snapout_open(&g->so, &so, &e) < 0) {
        g->errors++;
        ag_log(a, "capture: %s (no capture until the next segment)", e.msg);
    } else {
        g->segments++;
        ss_snapout_hook(g->so, &uo);
    }
    g->start = g->last_flush = ag_now();
    return ss_unwinder_new(u, &uo, err);
}

static void failed(struct ag_segments *g, const char *msg)
{
    struct ss_agent *a = g->a;
    ag_log(a, "capture: %s (segment closed early)", msg);
    g->errors++;
    struct ss_err err = {0};
    ss_snapout_close(g->so, NULL, NULL, &err); /* what was written stays readable */
    g->so = NULL;
}

void ag_seg_sample(struct ag_segments *g, struct ss_unwinder *u, const struct ss_sample *s,
                   bool walked)
{
    if (!g->so) return;
    if (!walked) {
        ss_snapout_skip(g->so);
        return;
    }
    struct ss_err err = {0};
    if (ss_snapout_sample(g->so, u, s, &err) < 0) failed(g, err.msg);
}

void ag_seg_proc_event(struct ag_segments *g, const struct ss_proc_event *ev)
{
    struct ss_err err = {0};
    if (g->so && ss_snapout_proc_event(g->so, ev, &err) < 0) failed(g, err.msg);
}

void ag_seg_debugfile(struct ag_segments *g, const uint8_t *id, size_t len, const char *path)
{
    struct ss_err err = {0};
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (g->so && ss_snapout_debugfile(g->so, id, len, path, now, &err) < 0) failed(g, err.msg);
}

bool ag_seg_tick(struct ag_segments *g, double now)
{
    if (g->so && now - g->last_flush >= 1.0) {
        struct ss_err err = {0};
        if (ss_snapout_flush(g->so, &err) < 0)
            failed(g, err.msg);
        else
            prune(g);
        g->last_flush = now;
    }
    uint64_t written = g->so ? ss_snapout_bytes(g->so) : 0;
    return now - g->start >= (double)g->a->o.capture_segment_s ||
           written >= g->a->o.capture_max_bytes / 4;
}

void ag_seg_end(struct ag_segments *g, struct ss_capture *cap, struct ss_unwinder *u)
{
    if (g->so) {
        struct ss_err err = {0};
        if (ss_snapout_close(g->so, cap, u, &err) < 0) {
            g->errors++;
            ag_log(g->a, "capture: %s", err.msg);
        }
        g->so = NULL;
    }
    prune(g);
}

void ag_seg_stats(const struct ag_segments *g, uint64_t *segments, uint64_t *errors,
                  uint64_t *bytes, bool *capturing)
{
    *segments = g->segments;
    *errors = g->errors;
    *bytes = g->bytes;
    *capturing = g->so != NULL;
}

void ag_seg_free(struct ag_segments *g)
{
    if (!g) return;
    if (g->so) {
        struct ss_err err = {0};
        ss_snapout_close(g->so, NULL, NULL, &err);
    }
    free(g);
}
