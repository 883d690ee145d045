/* elf/debuginfod.c: the background fetcher of debug files by build-id
 * (libdebuginfod). One worker thread, one debuginfod client, a request list
 * guarded by one mutex; see debuginfod.h. */
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elf/debuginfod.h"

enum { REQ_QUEUED, REQ_RUNNING, REQ_DONE, REQ_DELIVERED };

struct dfd_req {
    uint8_t id[20];
    uint8_t len;
    int state, rc;
    char *path; /* malloc'd by libdebuginfod */
};

struct ss_dfd {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work queued / a fetch ended / stop */
    pthread_t th;
    struct dfd_req *v;
    size_t n, cap;
    bool stop;
    double timeout_s;
    double deadline; /* of the running fetch (monotonic seconds) */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* libdebuginfod calls this while it waits for the server: nonzero aborts. */
static int progress(debuginfod_client *c, long a, long b)
{
    (void)a, (void)b;
    struct ss_dfd *d = debuginfod_get_user_data(c);
    pthread_mutex_lock(&d->mu);
    int stop = d->stop || mono_s() > d->deadline;
    pthread_mutex_unlock(&d->mu);
    return stop;
}

static void *worker(void *arg)
{
    struct ss_dfd *d = arg;
    debuginfod_client *c = debuginfod_begin();
    if (c) {
        debuginfod_set_user_data(c, d);
        debuginfod_set_progressfn(c, progress);
    }
    pthread_mutex_lock(&d->mu);
    for (;;) {
        size_t i = 0;
        while (i < d->n && d->v[i].state != REQ_QUEUED)
            i++;
        if (d->stop) break;
        if (i == d->n) {
            pthread_cond_wait(&d->cv, &d->mu);
            continue;
        }
        struct dfd_req r = d->v[i]; /* d->v may move while unlocked */
        d->v[i].state = REQ_RUNNING;
        d->deadline = mono_s() + d->timeout_s;
        pthread_mutex_unlock(&d->mu);
        char *path = NULL;
        int rc = c ? debuginfod_find_debuginfo(c, r.id, r.len, &path) : -ENOMEM;
        if (rc >= 0) close(rc);
        pthread_mutex_lock(&d->mu);
        if (rc < 0 && mono_s() > d->deadline) rc = -ETIME;
        d->v[i].rc = rc < 0 ? rc : 0;
        d->v[i].path = rc < 0 ? NULL : path;
        if (rc < 0) free(path);
        d->v[i].state = REQ_DONE;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    if (c) debuginfod_end(c);
    return NULL;
}

int ss_dfd_new(struct ss_dfd **out, double timeout_s, struct ss_err *err)
{
    struct ss_dfd *d = calloc(1, sizeof(*d));
    if (!d) {
        ss_err_set(err, -ENOMEM, "debuginfod: out of memory");
        return -ENOMEM;
    }
    d->timeout_s = timeout_s > 0 ? timeout_s : 30;
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&d->th, NULL, worker, d);
    if (rc) {
        pthread_cond_destroy(&d->cv);
        pthread_mutex_destroy(&d->mu);
        free(d);
        ss_err_set(err, -rc, "debuginfod: cannot start the fetch thread: %s", strerror(rc));
        return -rc;
    }
    *out = d;
    return 0;
}

void ss_dfd_free(struct ss_dfd *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    for (size_t i = 0; i < d->n; i++)
        free(d->v[i].path);
    free(d->v);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

int ss_dfd_request(struct ss_dfd *d, const uint8_t *id, size_t len)
{
    if (!len || len > sizeof(d->v[0].id)) return 0;
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    size_t i = 0;
    while (i < d->n && !(d->v[i].len == len && !memcmp(d->v[i].id, id, len)))
        i++;
    if (i == d->n) {
        if (d->n == d->cap) {
            size_t cap = d->cap ? 2 * d->cap : 16;
            struct dfd_req *nv = realloc(d->v, cap * sizeof(*nv));
            if (!nv) rc = -ENOMEM;
            if (nv) d->v = nv, d->cap = cap;
        }
        if (!rc) {
            struct dfd_req *r = &d->v[d->n++];
            memset(r, 0, sizeof(*r));
            memcpy(r->id, id, len);
            r->len = (uint8_t)len;
            r->state = REQ_QUEUED;
            pthread_cond_broadcast(&d->cv);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int ss_dfd_poll(struct ss_dfd *d, ss_dfd_fn fn, void *ctx)
{
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        size_t i = 0;
        while (i < d->n && d->v[i].state != REQ_DONE)
            i++;
        struct dfd_req r = {0};
        if (i < d->n) {
            r = d->v[i];
            d->v[i].state = REQ_DELIVERED;
            d->v[i].path = NULL;
        }
        pthread_mutex_unlock(&d->mu);
        if (i == d->n || !r.len) return n; /* callbacks run unlocked */
        fn(ctx, r.id, r.len, r.path, r.rc);
        free(r.path);
        n++;
    }
}

size_t ss_dfd_pending(struct ss_dfd *d)
{
    size_t k = 0;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->n; i++)
        k += d->v[i].state == REQ_QUEUED || d->v[i].state == REQ_RUNNING;
    pthread_mutex_unlock(&d->mu);
    return k;
}

void ss_dfd_wait(struct ss_dfd *d, double max_s)
{
    double end = mono_s() + max_s;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        size_t k = 0;
        for (size_t i = 0; i < d->n; i++)
            k += d->v[i].state == REQ_QUEUED || d->v[i].state == REQ_RUNNING;
        double now = mono_s();
        if (!k || now >= end) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double w = end - now < 0.1 ? end - now : 0.1;
        ts.tv_nsec += (long)(w * 1e9);
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
}
