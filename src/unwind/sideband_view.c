/* unwind/sideband_view.c: the mappings of processes as the kernel's side band
 * told them (ss.h: struct ss_map_event; capture/sideband_log.c), for a process
 * whose /proc maps are gone when its first sample is walked: it exec'd and
 * exited in the milliseconds between the sample and its walk. Per process a
 * short log in time order: file mappings and execs. The view of such
 * a process at a sample's time is the mappings logged after its last exec
 * before that time, and up to it; its files are opened by path in our root
 * and must be the mapped ones (device, inode): the process's own root is
 * gone with it (a container's process keeps its walk truncated). A table
 * of SB_PIDS logs found by pid, reused in the order they were made: a log
 * lives until its exit marker or until SB_PIDS newer processes mapped
 * something (when the recorder falls behind, the side band is read up to
 * now before the waiting samples are: their processes' logs must outlive
 * every process started meanwhile; a table by pid modulo 256 lost them to
 * colliding pids). Bounded logs, grown as needed (full, a log keeps its
 * oldest mappings: the program's and ld.so's): the side band covers every
 * process of the machine. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "process/process.h"
#include "unwind/sideband_view.h"
#include "unwind/unwinder.h"
#include "util/safeopen.h"

#define SB_PIDS 2048    /* logs: processes whose samples may still wait */
#define SB_BUCKETS 4096 /* pid -> log chains */
#define SB_LOG_MAX 48   /* events a process: a dynamically linked program maps ~20 */
#define SB_NONE UINT32_MAX

struct sb_ev {
    uint64_t time_ns;
    bool exec;
    struct ss_map_desc d; /* d.path owned; an exec's: the new command name */
};

struct sb_proc {
    uint32_t pid, n, cap; /* n 0 and pid 0: unused */
    uint32_t next;        /* the bucket's chain */
    struct sb_ev *ev;     /* cap events */
};

struct ss_sblog {
    uint32_t bucket[SB_BUCKETS];
    struct sb_proc p[SB_PIDS];
    uint32_t hand; /* the next log to (re)use: the oldest made */
};

static void drop(struct sb_proc *l, uint32_t k) /* the first k events */
{
    if (k == 0) return; /* also an unused log, whose ev is NULL */
    for (uint32_t i = 0; i < k; i++)
        free((char *)l->ev[i].d.path);
    memmove(l->ev, l->ev + k, (l->n - k) * sizeof(l->ev[0]));
    l->n -= k;
}

static struct sb_proc *find(struct ss_sblog *t, uint32_t pid)
{
    for (uint32_t i = t ? t->bucket[pid % SB_BUCKETS] : SB_NONE; i != SB_NONE; i = t->p[i].next)
        if (t->p[i].pid == pid) return &t->p[i];
    return NULL;
}

/* Out of its chain, its events freed (the array kept for reuse). */
static void unlink_log(struct ss_sblog *t, struct sb_proc *l)
{
    uint32_t i = (uint32_t)(l - t->p);
    for (uint32_t *pp = &t->bucket[l->pid % SB_BUCKETS]; *pp != SB_NONE; pp = &t->p[*pp].next)
        if (*pp == i) {
            *pp = l->next;
            break;
        }
    drop(l, l->n);
    l->pid = 0;
    l->next = SB_NONE;
}

/* pid's log, else a new one in place of the oldest made. */
static struct sb_proc *log_of(struct ss_unwinder *u, uint32_t pid)
{
    struct ss_sblog *t = u->sb;
    if (!t) {
        if (!(t = u->sb = calloc(1, sizeof(*t)))) return NULL;
        for (uint32_t i = 0; i < SB_BUCKETS; i++)
            t->bucket[i] = SB_NONE;
        for (uint32_t i = 0; i < SB_PIDS; i++)
            t->p[i].next = SB_NONE;
    }
    struct sb_proc *l = find(t, pid);
    if (l) return l;
    l = &t->p[t->hand];
    t->hand = (t->hand + 1) % SB_PIDS;
    if (l->pid) unlink_log(t, l);
    l->pid = pid;
    l->next = t->bucket[pid % SB_BUCKETS];
    t->bucket[pid % SB_BUCKETS] = (uint32_t)(l - t->p);
    return l;
}

void ss_unwinder_map_event(struct ss_unwinder *u, const struct ss_map_event *ev)
{
    if (u->o.offline || !ev->pid) return;
    struct sb_proc *l = log_of(u, ev->pid);
    if (!l) return;
    if (ev->kind == SS_MAP_EV_EXEC) { /* keep the image before it: its samples may wait */
        uint32_t last = l->n;
        for (uint32_t i = l->n; i-- > 0 && last == l->n;)
            if (l->ev[i].exec) last = i;
        if (last < l->n) drop(l, last);
        if (l->n == SB_LOG_MAX) drop(l, l->n);
    } else if (l->n == SB_LOG_MAX || (ev->prot & PROT_WRITE) || !ev->path || ev->path[0] != '/' ||
               ev->path[1] == '/' || !strncmp(ev->path, "/dev/", 5) ||
               !strncmp(ev->path, "/memfd:", 7) || strstr(ev->path, " (deleted)")) {
        /* a full log keeps its start; code and its tables are not writable;
         * //anon, [vdso], devices, memfds, deleted files: nothing to open */
        return;
    }
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 8;
        struct sb_ev *e = realloc(l->ev, (cap < SB_LOG_MAX ? cap : SB_LOG_MAX) * sizeof(*e));
        if (!e) return;
        l->ev = e;
        l->cap = cap < SB_LOG_MAX ? cap : SB_LOG_MAX;
    }
    char *path = strdup(ev->kind == SS_MAP_EV_MMAP ? ev->path : ev->comm);
    if (!path) return;
    struct sb_ev *e = &l->ev[l->n++];
    *e = (struct sb_ev){.time_ns = ev->time_ns, .exec = ev->kind == SS_MAP_EV_EXEC};
    e->d = (struct ss_map_desc){.start = ev->start,
                                .end = ev->start + ev->len,
                                .offset = ev->pgoff,
                                .inode = ev->inode,
                                .dev_major = ev->dev_major,
                                .dev_minor = ev->dev_minor,
                                .prot = (ev->prot & PROT_READ ? SS_MAP_R : 0u) |
                                        (ev->prot & PROT_WRITE ? SS_MAP_W : 0u) |
                                        (ev->prot & PROT_EXEC ? SS_MAP_X : 0u),
                                .path = path};
}

void ss_sideband_forget(struct ss_unwinder *u, uint32_t pid)
{
    struct sb_proc *l = find(u->sb, pid);
    if (l) unlink_log(u->sb, l);
}

void ss_sideband_free(struct ss_unwinder *u)
{
    for (unsigned i = 0; u->sb && i < SB_PIDS; i++) {
        drop(&u->sb->p[i], u->sb->p[i].n);
        free(u->sb->p[i].ev);
    }
    free(u->sb);
    u->sb = NULL;
}

/* The mapped file, if the path in our root still names it. */
static int open_mapped(void *ctx, const struct ss_map_desc *m)
{
    (void)ctx;
    int fd = open(m->path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != m->inode ||
        major(st.st_dev) != m->dev_major || minor(st.st_dev) != m->dev_minor) {
        close(fd);
        return -ESTALE;
    }
    return ss_reopen_regular(fd);
}

int ss_sideband_view(struct ss_unwinder *u, uint32_t pid, uint64_t time_ns, uint64_t ip,
                     struct ss_proc **out)
{
    const struct sb_proc *l = find(u->sb, pid);
    if (!l || !l->n) return -ESRCH;
    uint32_t from = 0, to = 0;
    const char *comm = NULL;
    for (uint32_t i = 0; i < l->n && l->ev[i].time_ns <= time_ns; i++, to = i)
        if (l->ev[i].exec) {
            from = i + 1;
            comm = l->ev[i].d.path;
        }
    /* as the kernel does: a mapping replaces what it overlaps (ld.so
     * reserves a library's whole span, then maps its segments over it) */
    struct ss_map_desc d[2 * SB_LOG_MAX];
    size_t n = 0;
    for (uint32_t i = from; i < to; i++) {
        const struct ss_map_desc *m = &l->ev[i].d;
        size_t k = n;
        for (size_t j = 0; j < k; j++) {
            struct ss_map_desc *o = &d[j];
            if (o->end <= m->start || o->start >= m->end) continue;
            if (o->start < m->start && o->end > m->end && n < 2 * SB_LOG_MAX) { /* split */
                d[n] = *o;
                d[n].offset += m->end - o->start;
                d[n++].start = m->end;
            }
            if (o->start < m->start) {
                o->end = m->start;
            } else {
                uint64_t cut = (o->end < m->end ? o->end : m->end) - o->start;
                o->start += cut;
                o->offset += cut;
            }
        }
        if (n < 2 * SB_LOG_MAX) d[n++] = *m;
    }
    if (!n) return -ESRCH;
    int r = ss_proc_new(out, (pid_t)pid, d, n, open_mapped, NULL, u->files, NULL);
    if (r < 0) return r;
    /* the sample's own code must be a file's: in anonymous code (a JIT's)
     * nothing here can step out of it, and nothing of the process can be
     * read any more: such a sample stays an unwind error, as without the
     * log */
    if (!ss_proc_in_file(*out, ip)) {
        ss_proc_free(*out);
        *out = NULL;
        return -ESRCH;
    }
    if (comm) ss_proc_set_comm(*out, comm);
    return 0;
}
