/* unwind/sideband_view.c: the mappings of processes as the kernel's side band
 * told them (ss.h: struct ss_map_event; capture/sideband_log.c), for a process
 * whose /proc maps are gone when its first sample is walked: it exec'd and
 * exited in the milliseconds between the sample and its walk. Per process a
 * short log in time order: file mappings and execs. The view of such
 * a process at a sample's time is the mappings logged after its last exec
 * before that time, and up to it; its files are opened by path in our root
 * and must be the mapped ones (device, inode): the process's own root is
 * gone with it (a container's process keeps its walk truncated). A fixed
 * table by pid (a colliding pid replaces the older log), bounded logs
 * (full, a log keeps its oldest mappings: the program's and ld.so's): the
 * side band covers every process of the machine. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "process/process.h"
#include "unwind/unwinder.h"
#include "util/safeopen.h"

#define SB_SLOTS 256  /* pids: a walk follows its sample by milliseconds */
#define SB_LOG_MAX 48 /* events a process: a dynamically linked program maps ~20 */

struct sb_ev {
    uint64_t time_ns;
    bool exec;
    struct ss_map_desc d; /* d.path owned; an exec's: the new command name */
};

struct ss_sblog {
    uint32_t pid, n; /* n 0: a free slot */
    struct sb_ev ev[SB_LOG_MAX];
};

static void drop(struct ss_sblog *l, uint32_t k) /* the first k events */
{
    for (uint32_t i = 0; i < k; i++)
        free((char *)l->ev[i].d.path);
    memmove(l->ev, l->ev + k, (l->n - k) * sizeof(l->ev[0]));
    l->n -= k;
}

void ss_unwinder_map_event(struct ss_unwinder *u, const struct ss_map_event *ev)
{
    if (u->o.offline) return;
    if (!u->sb && !(u->sb = calloc(SB_SLOTS, sizeof(*u->sb)))) return;
    struct ss_sblog *l = &u->sb[ev->pid % SB_SLOTS];
    if (l->pid != ev->pid) {
        drop(l, l->n);
        l->pid = ev->pid;
    }
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
    struct ss_sblog *l = u->sb ? &u->sb[pid % SB_SLOTS] : NULL;
    if (l && l->pid == pid) drop(l, l->n);
}

void ss_sideband_free(struct ss_unwinder *u)
{
    for (unsigned i = 0; u->sb && i < SB_SLOTS; i++)
        drop(&u->sb[i], u->sb[i].n);
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

/* The sample's own code must be a file's: in anonymous code (a JIT's)
 * nothing here can step out of it, and nothing of the process can be read
 * any more: such a sample stays an unwind error, as without the log. */
bool ss_sideband_covers(struct ss_proc *p, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find(p, ip);
    return mp && mp->elf;
}

int ss_sideband_view(struct ss_unwinder *u, uint32_t pid, uint64_t time_ns, uint64_t ip,
                     struct ss_proc **out)
{
    struct ss_sblog *l = u->sb ? &u->sb[pid % SB_SLOTS] : NULL;
    if (!l || l->pid != pid || !l->n) return -ESRCH;
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
    if (!ss_sideband_covers(*out, ip)) {
        ss_proc_free(*out);
        *out = NULL;
        return -ESRCH;
    }
    if (comm) ss_proc_set_comm(*out, comm);
    return 0;
}
