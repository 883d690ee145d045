/* capture/procev.c: the process markers (bpf/procevents.h): loading and
 * attaching their programs when a consumer asked for them, decoding a
 * marker record, and for the compat program's per-CPU perf buffers the
 * batch that puts samples and markers back in time order. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "capture/capture_int.h"
#include "snapshot.h" /* bpf/: shared with the BPF side */
#include "procevents.h"
#include "snapshot.skel.h"
#include "snapshot_compat.skel.h"

_Static_assert(SS_PEV_FORK == SS_PROC_FORK && SS_PEV_EXEC == SS_PROC_EXEC &&
                   SS_PEV_EXIT == SS_PROC_EXIT,
               "marker kinds");
_Static_assert(offsetof(struct ss_pev, flags) == offsetof(struct ss_event, flags) &&
                   offsetof(struct ss_pev, time_ns) == offsetof(struct ss_event, time_ns),
               "markers and samples share their first words");

static struct bpf_program **progs(struct ss_capture *c, const char **names)
{
    static const char *const rb[3] = {"tp_btf/sched_process_fork", "tp_btf/sched_process_exec",
                                      "tp_btf/sched_process_exit"};
    static const char *const tp[3] = {"tracepoint task/task_newtask",
                                      "tracepoint sched/sched_process_exec",
                                      "tracepoint sched/sched_process_exit"};
    for (int i = 0; i < 3; i++)
        names[i] = c->compat ? tp[i] : rb[i];
    if (c->skel) {
        c->pev_prog[0] = c->skel->progs.pev_fork;
        c->pev_prog[1] = c->skel->progs.pev_exec;
        c->pev_prog[2] = c->skel->progs.pev_exit;
    } else {
        c->pev_prog[0] = c->cskel->progs.pev_newtask;
        c->pev_prog[1] = c->cskel->progs.pev_exec_tp;
        c->pev_prog[2] = c->cskel->progs.pev_exit_tp;
    }
    return c->pev_prog;
}

void ss_capture_pev_autoload(struct ss_capture *c)
{
    const char *names[3];
    struct bpf_program **p = progs(c, names);
    for (int i = 0; i < 3; i++)
        bpf_program__set_autoload(p[i], c->o.proc_event != NULL);
    if (c->skel) { /* the stack at exec entry comes with the markers */
        bpf_program__set_autoload(c->skel->progs.execstack_execve, c->o.proc_event != NULL);
        bpf_program__set_autoload(c->skel->progs.execstack_execveat, c->o.proc_event != NULL);
    }
}

/* The execstack programs: without them (no syscall tracepoints in this
 * kernel) samples inside an exec keep their failed copy; nothing else
 * changes, so a failure is not an error. */
static void exs_attach(struct ss_capture *c)
{
    ss_capture_ensure_tracefs();
    c->exs_link[0] = bpf_program__attach(c->skel->progs.execstack_execve);
    c->exs_link[1] = bpf_program__attach(c->skel->progs.execstack_execveat);
}

int ss_capture_pev_attach(struct ss_capture *c, struct ss_err *err)
{
    const char *names[3];
    struct bpf_program **p = progs(c, names);

    if (!c->o.proc_event) return 0;
    if (c->compat) ss_capture_ensure_tracefs();
    libbpf_print_fn_t old = libbpf_set_print(ss_capture_libbpf_silent);
    if (c->skel) exs_attach(c);
    for (int i = 0; i < 3; i++) {
        c->pev_link[i] = bpf_program__attach(p[i]);
        if (!c->pev_link[i]) {
            int r = -errno;
            libbpf_set_print(old);
            ss_err_set(err, r, "attach %s (process markers): %s", names[i], strerror(-r));
            return r;
        }
    }
    libbpf_set_print(old);
    return 0;
}

void ss_capture_pev_close(struct ss_capture *c)
{
    for (int i = 0; i < 3; i++) {
        bpf_link__destroy(c->pev_link[i]);
        c->pev_link[i] = NULL;
    }
    for (int i = 0; i < 2; i++) {
        bpf_link__destroy(c->exs_link[i]);
        c->exs_link[i] = NULL;
    }
    ss_capture_exs_free(c);
    free(c->batch);
    free(c->batch_idx);
    c->batch = NULL;
    c->batch_idx = NULL;
}

bool ss_capture_pev_deliver(struct ss_capture *c, const void *data, size_t size)
{
    struct ss_pev e;
    uint32_t flags;

    if (size < offsetof(struct ss_pev, time_ns)) return false;
    memcpy(&flags, (const char *)data + offsetof(struct ss_pev, flags), sizeof(flags));
    if (!(flags & SS_EV_PROC)) return false;
    if (size < sizeof(e)) {
        c->bad++;
        return true;
    }
    memcpy(&e, data, sizeof(e));
    if (e.kind < SS_PEV_FORK || e.kind > SS_PEV_EXIT) {
        c->bad++;
        return true;
    }
    struct ss_proc_event ev = {.kind = e.kind,
                               .pid = e.tgid,
                               .tid = e.tid,
                               .ppid = e.kind == SS_PEV_FORK ? e.ppid : 0,
                               .cpu = e.cpu,
                               .time_ns = e.time_ns};
    c->markers++;
    if (ev.kind != SS_PEV_FORK) {
        ss_capture_exs_drop(c, ev.pid);
        /* the process's window plan was for the image it had: a plan left
         * behind would serve a reused pid, and the map fills (system-wide,
         * 8192 LuaJIT processes and later ones get none); the unwinder gives
         * the new image its own */
        __u32 key = ev.pid;
        if (c->plans_set) bpf_map_delete_elem(c->plans_fd, &key);
    }
    if (c->o.proc_event) c->o.proc_event(c->o.proc_event_arg, &ev);
    return true;
}

/* ---- compat: one poll's records, delivered sorted by time ---- */
struct batch_ent {
    uint64_t time_ns;
    size_t off, size;
    size_t seq; /* arrival: equal times keep their order */
};

int ss_capture_batch_add(struct ss_capture *c, const void *data, size_t size)
{
    if (size < offsetof(struct ss_event, time_ns) + 8) return -EINVAL;
    size_t need = c->batch_len + ((size + 7) & ~(size_t)7);
    if (need > c->batch_cap) {
        size_t cap = c->batch_cap ? c->batch_cap : 1 << 16;
        while (cap < need)
            cap *= 2;
        uint8_t *n = realloc(c->batch, cap);
        if (!n) return -ENOMEM;
        c->batch = n;
        c->batch_cap = cap;
    }
    if (c->batch_n == c->batch_icap) {
        size_t cap = c->batch_icap ? c->batch_icap * 2 : 64;
        struct batch_ent *n = realloc(c->batch_idx, cap * sizeof(*n));
        if (!n) return -ENOMEM;
        c->batch_idx = n;
        c->batch_icap = cap;
    }
    struct batch_ent *e = &((struct batch_ent *)c->batch_idx)[c->batch_n];
    memcpy(&e->time_ns, (const char *)data + offsetof(struct ss_event, time_ns), 8);
    e->off = c->batch_len;
    e->size = size;
    e->seq = c->batch_n++;
    memcpy(c->batch + c->batch_len, data, size);
    c->batch_len = need;
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const struct batch_ent *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void ss_capture_batch_flush(struct ss_capture *c,
                            void (*deliver)(struct ss_capture *c, const void *data, size_t size))
{
    struct batch_ent *v = c->batch_idx;
    if (c->batch_n > 1) qsort(v, c->batch_n, sizeof(*v), by_time);
    for (size_t i = 0; i < c->batch_n; i++)
        deliver(c, c->batch + v[i].off, v[i].size);
    c->batch_n = 0;
    c->batch_len = 0;
    /* a burst's buffer is not kept for ever */
    if (c->batch_cap > (8u << 20)) {
        free(c->batch);
        c->batch = NULL;
        c->batch_cap = 0;
    }
}
