/* agent/procinfo.c: the exe path and cgroup (or container id) of each pid,
 * for pprof labels. Read from /proc once per pid and command name (exec
 * changes both), kept in a bounded table, pruned of exited pids by gc. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>

#include "agent/agent_int.h"
#include "process/procid.h"

#define PI_SLOTS 4096 /* open addressing; at most PI_MAX live entries */
#define PI_MAX 3072

struct pi_ent {
    uint32_t pid; /* 0 = free */
    char comm[16];
    char *exe, *cgroup;
};

struct ag_procinfo {
    struct pi_ent e[PI_SLOTS];
    unsigned n;
};

struct ag_procinfo *ag_procinfo_new(void)
{
    return calloc(1, sizeof(struct ag_procinfo));
}

static void clear(struct pi_ent *e)
{
    free(e->exe);
    free(e->cgroup);
    memset(e, 0, sizeof(*e));
}

void ag_procinfo_free(struct ag_procinfo *p)
{
    if (!p) return;
    for (unsigned i = 0; i < PI_SLOTS; i++)
        clear(&p->e[i]);
    free(p);
}

static void read_info(struct pi_ent *e)
{
    char buf[4096], id[SS_CONTAINER_ID_LEN + 1];
    ss_proc_exe(e->pid, buf, sizeof(buf));
    if (buf[0]) e->exe = strdup(buf);
    ss_proc_cgroup(e->pid, buf, sizeof(buf));
    if (buf[0]) e->cgroup = strdup(ss_cgroup_label(buf, id));
}

void ag_procinfo_get(struct ag_procinfo *p, uint32_t pid, const char *comm, const char **exe,
                     const char **cgroup)
{
    *exe = *cgroup = NULL;
    if (!pid) return;
    unsigned i = (pid * 2654435761u) % PI_SLOTS;
    for (unsigned k = 0; k < PI_SLOTS; k++, i = (i + 1) % PI_SLOTS) {
        struct pi_ent *e = &p->e[i];
        if (e->pid == pid) {
            if (strncmp(e->comm, comm, sizeof(e->comm))) { /* exec'd since */
                free(e->exe);
                free(e->cgroup);
                e->exe = e->cgroup = NULL;
                snprintf(e->comm, sizeof(e->comm), "%s", comm);
                read_info(e);
            }
            *exe = e->exe;
            *cgroup = e->cgroup;
            return;
        }
        if (!e->pid) {
            if (p->n >= PI_MAX) return; /* full until gc: no labels */
            e->pid = pid;
            snprintf(e->comm, sizeof(e->comm), "%s", comm);
            read_info(e);
            p->n++;
            *exe = e->exe;
            *cgroup = e->cgroup;
            return;
        }
    }
}

void ag_procinfo_gc(struct ag_procinfo *p)
{
    /* Rebuild without the exited pids (keeps the probe chains intact). */
    struct pi_ent *old = malloc(sizeof(p->e));
    if (!old) return;
    memcpy(old, p->e, sizeof(p->e));
    memset(p->e, 0, sizeof(p->e));
    p->n = 0;
    for (unsigned i = 0; i < PI_SLOTS; i++) {
        struct pi_ent *e = &old[i];
        if (!e->pid) continue;
        if (kill((pid_t)e->pid, 0) < 0 && errno == ESRCH) {
            clear(e);
            continue;
        }
        unsigned j = (e->pid * 2654435761u) % PI_SLOTS;
        while (p->e[j].pid)
            j = (j + 1) % PI_SLOTS;
        p->e[j] = *e;
        p->n++;
    }
    free(old);
}
