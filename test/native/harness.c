/* test/native/harness.c: see harness.h. Chains are stored as
 * "text@module;text@module;..." (leaf first, module basename). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "stacksnap/capture.h"
#include "stacksnap/unwind.h"
#include "process/process.h"
#include "stacksnap/report.h"

extern char **environ;

int nw_start(struct nw_proc *p, const char *bin, const char *mode)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", SS_BINARY_DIR, bin);
    char *argv[] = {path, (char *)mode, NULL};
    int out[2];
    if (pipe2(out, O_CLOEXEC)) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    int r = posix_spawn(&p->pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    p->out_fd = out[0];
    if (r) {
        close(out[0]);
        p->pid = 0;
        return -r;
    }
    char buf[128];
    size_t len = 0;
    struct pollfd pf = {.fd = p->out_fd, .events = POLLIN};
    while (len < sizeof(buf) - 1 && poll(&pf, 1, 10000) > 0) {
        ssize_t n = read(p->out_fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0) break;
        len += n;
        buf[len] = 0;
        if (strchr(buf, '\n')) return 0;
    }
    nw_stop(p);
    return -ETIMEDOUT;
}

void nw_stop(struct nw_proc *p)
{
    if (p->pid <= 0) return;
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    close(p->out_fd);
    p->pid = 0;
}

struct run {
    const struct nw_opts *o;
    pid_t pid;
    struct ss_unwinder *u, *ref, *replay;
    struct nw_tally *t;
};

static void chain_text(const struct ss_stack *st, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < st->nframes && len + 1 < n; i++) {
        char txt[512];
        ss_frame_text(&st->frames[i], txt, sizeof(txt));
        const char *mod = st->frames[i].module;
        const char *base = mod ? strrchr(mod, '/') : NULL;
        len += snprintf(buf + len, n - len, "%s%s@%s", i ? ";" : "", txt,
                        base ? base + 1 : (mod ? mod : "?"));
    }
}

static void add_chain(struct nw_tally *t, const char *text, int trunc)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].text, text)) {
            t->v[i].count++;
            return;
        }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->v = realloc(t->v, t->cap * sizeof(*t->v));
    }
    t->v[t->n].text = strdup(text);
    t->v[t->n].count = 1;
    t->v[t->n].trunc = trunc;
    t->n++;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool same_stack(const struct ss_stack *a, const struct ss_stack *b)
{
    if (a->nframes != b->nframes || a->trunc != b->trunc) return false;
    for (uint32_t i = 0; i < a->nframes; i++)
        if (a->frames[i].addr != b->frames[i].addr || a->frames[i].offset != b->frames[i].offset ||
            !same_str(a->frames[i].name, b->frames[i].name) ||
            !same_str(a->frames[i].module, b->frames[i].module))
            return false;
    return true;
}

/* leaf "NAME" or "+MODULE" (basename) */
static bool leaf_ok(const struct ss_frame *f, const char *leaf)
{
    if (leaf[0] != '+') return f->name && !strcmp(f->name, leaf);
    const char *b = f->module ? strrchr(f->module, '/') : NULL;
    return f->module && !strcmp(b ? b + 1 : f->module, leaf + 1);
}

/* ---- replay: the same process rebuilt from its maps text and files ---- */
static int resolve(void *ctx, const struct ss_map_desc *m)
{
    pid_t pid = *(pid_t *)ctx;
    if (!strcmp(m->path, "[vdso]")) { /* what a capture file bundles */
        size_t len = m->end - m->start;
        void *buf = malloc(len);
        struct iovec l = {buf, len}, rm = {(void *)(uintptr_t)m->start, len};
        int fd = -EIO;
        if (buf && process_vm_readv(pid, &l, 1, &rm, 1, 0) == (ssize_t)len &&
            (fd = memfd_create("vdso", MFD_CLOEXEC)) >= 0 && write(fd, buf, len) != (ssize_t)len) {
            close(fd);
            fd = -EIO;
        }
        free(buf);
        return fd;
    }
    if (m->path[0] != '/') return -ENOENT;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static struct ss_unwinder *replay_unwinder(struct run *r)
{
    if (r->replay) return r->replay;
    struct ss_unwinder_opts uo = {.offline = true};
    struct ss_err err = {0};
    char path[64], *text = NULL;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)r->pid);
    struct ss_map_desc *d = NULL;
    size_t n = 0;
    if (ss_unwinder_new(&r->replay, &uo, &err) < 0 || ss_read_proc_file(path, &text, NULL) < 0 ||
        ss_maps_parse(text, &d, &n) < 0 ||
        ss_unwinder_add_process(r->replay, r->pid, "replay", d, n, resolve, &r->pid, &err) < 0)
        cr_log_error("replay unwinder: %s", err.msg);
    free(d);
    free(text);
    return r->replay;
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct run *r = ctx;
    struct nw_tally *t = r->t;
    if ((pid_t)s->pid != r->pid) return;
    t->samples++;
    struct ss_stack st;
    ss_unwinder_intake(r->u, s);
    if (ss_unwind(r->u, s, &st) < 0 || st.nframes == 0) return;
    t->trunc[st.trunc]++;
    if (r->o->each) r->o->each(r->o->each_ctx, s, &st);
    if (!leaf_ok(&st.frames[0], r->o->leaf)) return;
    t->leaf_samples++;
    static char text[65536];
    chain_text(&st, text, sizeof(text));
    add_chain(t, text, st.trunc);
    if (r->o->per_tid) {
        int k;
        for (k = 0; k < t->ntids; k++)
            if (t->tids[k].tid == s->tid) break;
        if (k == t->ntids && k < 64) {
            t->tids[k].tid = s->tid;
            t->tids[k].text = strdup(text);
            t->ntids++;
        } else if (k < t->ntids && strcmp(t->tids[k].text, text)) {
            t->tid_chain_bad++;
        }
    }
    if (r->o->compare_replay) {
        struct ss_stack copy = st, st2;
        static struct ss_frame saved[1024];
        copy.nframes = st.nframes < 1024 ? st.nframes : 1024;
        memcpy(saved, st.frames, copy.nframes * sizeof(*saved));
        copy.frames = saved;
        t->compared_replay++;
        struct ss_unwinder *ru = replay_unwinder(r);
        if (!ru || ss_unwinder_intake(ru, s) < 0 || ss_unwind(ru, s, &st2) < 0 ||
            !same_stack(&copy, &st2)) {
            t->mismatch_replay++;
            if (t->mismatch_replay <= 3 && ru) {
                static char t2[65536];
                chain_text(&st2, t2, sizeof(t2));
                cr_log_info("replay mismatch:\n live   %s\n replay %s", text, t2);
            }
        }
    }
    if (r->ref) {
        struct ss_stack copy = st;
        static struct ss_frame saved[1024];
        copy.nframes = st.nframes < 1024 ? st.nframes : 1024;
        memcpy(saved, st.frames, copy.nframes * sizeof(*saved));
        copy.frames = saved;
        struct ss_stack st2;
        t->compared_modes++;
        ss_unwinder_intake(r->ref, s);
        if (ss_unwind(r->ref, s, &st2) < 0 || !same_stack(&copy, &st2)) {
            t->mismatch_modes++;
            if (t->mismatch_modes <= 3) {
                static char t2[65536];
                chain_text(&st2, t2, sizeof(t2));
                cr_log_info("mode mismatch:\n rules  %s (%s)\n libunw %s (%s)", text,
                            ss_trunc_str(st.trunc), t2, ss_trunc_str(st2.trunc));
            }
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int nw_sample(pid_t pid, const struct nw_opts *o, struct ss_unwinder *u, struct nw_tally *t)
{
    struct ss_err err = {0};
    struct run r = {.o = o, .pid = pid, .u = u, .t = t};
    bool own = !u;
    int rc = 0;
    if (own && (rc = ss_unwinder_new(&r.u, NULL, &err)) < 0) return rc;
    if (o->compare_modes) {
        struct ss_unwinder_opts uo = {.native_mode = SS_NATIVE_UNW_CURSOR};
        if ((rc = ss_unwinder_new(&r.ref, &uo, &err)) < 0) goto out;
    }
    struct ss_capture *c = NULL;
    struct ss_capture_opts co = {.freq_hz = o->freq ? o->freq : 999, .stack_size = 16384};
    if ((rc = ss_capture_open(&c, &co, &err)) < 0 || (rc = ss_capture_add_pid(c, pid, &err)) < 0 ||
        (rc = ss_capture_start(c, &err)) < 0) {
        cr_log_error("capture: %s", err.msg);
        goto out_c;
    }
    double start = now_s(), end = start + o->seconds;
    double hard = start + (o->max_seconds > o->seconds ? o->max_seconds : o->seconds);
    for (;;) {
        double now = now_s();
        if (now >= hard || (now >= end && t->leaf_samples >= o->min_leaf)) break;
        int n = ss_capture_poll(c, 100, on_sample, &r);
        if (n < 0) {
            rc = n;
            break;
        }
    }
    ss_capture_stop(c);
    while (ss_capture_poll(c, 0, on_sample, &r) > 0)
        ;
out_c:
    ss_capture_close(c);
out:
    if (r.replay) ss_unwinder_free(r.replay);
    if (r.ref) ss_unwinder_free(r.ref);
    if (own) ss_unwinder_free(r.u);
    return rc;
}

void nw_tally_free(struct nw_tally *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->v[i].text);
    free(t->v);
    for (int i = 0; i < t->ntids; i++)
        free(t->tids[i].text);
    memset(t, 0, sizeof(*t));
}

const struct nw_chain *nw_top(const struct nw_tally *t)
{
    const struct nw_chain *best = NULL;
    for (int i = 0; i < t->n; i++)
        if (!best || t->v[i].count > best->count) best = &t->v[i];
    return best;
}

static int by_count(const void *a, const void *b)
{
    const struct nw_chain *x = a, *y = b;
    return (y->count > x->count) - (y->count < x->count);
}

void nw_dump(const struct nw_tally *t, int max)
{
    struct nw_chain *v = malloc((t->n + 1) * sizeof(*v));
    memcpy(v, t->v, t->n * sizeof(*v));
    qsort(v, t->n, sizeof(*v), by_count);
    cr_log_info("%ld samples, %ld with the leaf, %d chains", t->samples, t->leaf_samples, t->n);
    for (int i = 0; i < t->n && i < max; i++) {
        /* show runs of the same frame as "frame*N" */
        static char out[65536];
        size_t len = 0;
        const char *p = v[i].text;
        while (*p && len + 600 < sizeof(out)) {
            const char *e = strchr(p, ';');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            int reps = 1;
            const char *q = e ? e + 1 : NULL;
            while (q && !strncmp(q, p, l) && (q[l] == ';' || q[l] == 0)) {
                reps++;
                q = q[l] ? q + l + 1 : NULL;
            }
            len += snprintf(out + len, sizeof(out) - len, "%s%.*s", len ? ";" : "", (int)l, p);
            if (reps > 1) len += snprintf(out + len, sizeof(out) - len, "*%d", reps);
            if (!q) break;
            p = q;
        }
        cr_log_info("%6ld %s [%s]", v[i].count, out, ss_trunc_str(v[i].trunc));
    }
    free(v);
}

/* Does frame element e ("text@mod") match pattern element p? */
static bool elem_match(const char *e, size_t elen, const char *p, size_t plen)
{
    const char *at = memchr(e, '@', elen);
    size_t tlen = at ? (size_t)(at - e) : elen;
    if (p[0] == '+') {
        p++, plen--;
        if (at && elen - tlen - 1 == plen && !memcmp(at + 1, p, plen)) return true;
        return tlen >= plen && !memcmp(e, p, plen);
    }
    return tlen == plen && !memcmp(e, p, plen);
}

static bool match_at(const char *c, const char *p)
{
    if (!*p) return !*c;
    const char *pe = strchr(p, ';');
    size_t plen = pe ? (size_t)(pe - p) : strlen(p);
    const char *pnext = pe ? pe + 1 : p + plen;
    char elem[256];
    snprintf(elem, sizeof(elem), "%.*s", (int)plen, p);
    long reps = 1;
    char *star = strchr(elem, '*');
    if (star && elem[0] != '+') {
        reps = strtol(star + 1, NULL, 10);
        *star = 0;
    }
    size_t elen2 = strlen(elem);
    bool plus = elem[0] == '+';
    long seen = 0;
    const char *q = c;
    while (*q) {
        const char *ce = strchr(q, ';');
        size_t clen = ce ? (size_t)(ce - q) : strlen(q);
        if (!elem_match(q, clen, elem, elen2)) break;
        seen++;
        q = ce ? ce + 1 : q + clen;
        if (!plus && seen == reps) return match_at(q, pnext);
        if (plus && match_at(q, pnext)) return true;
    }
    return false;
}

bool nw_match(const char *chain, const char *pattern)
{
    return match_at(chain, pattern);
}

long nw_count_matching(const struct nw_tally *t, const char *pattern)
{
    long n = 0;
    for (int i = 0; i < t->n; i++)
        if (nw_match(t->v[i].text, pattern)) n += t->v[i].count;
    return n;
}
