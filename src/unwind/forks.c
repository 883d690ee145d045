/* unwind/forks.c: forked children not yet sampled. A fork marker only
 * notes the child and its parent (a slot in a fixed table, by pid); most
 * children exec right away and are never sampled before, and their exec
 * marker drops the note. A child sampled before its exec gets, at its first
 * sample, a copy of its parent's view (ss_proc_fork), which /proc does not
 * replace until the exec marker comes (or FORK_FROZEN_MS pass: a child that
 * never execs is then read from /proc like any other). */
#include <stdlib.h>

#include "process/process.h"
#include "unwind/unwinder.h"

#define FORK_SLOTS 4096 /* a colliding fork replaces the older note */
#define FORK_FROZEN_MS 1000

struct ss_fork {
    uint32_t pid, ppid;
    uint64_t parent_serial; /* the parent's view at the fork, 0: it had none */
};

void ss_forks_note(struct ss_unwinder *u, uint32_t pid, uint32_t ppid)
{
    if (!u->forks && !(u->forks = calloc(FORK_SLOTS, sizeof(*u->forks)))) return;
    struct ss_uproc *pp = ss_unwinder_proc(u, ppid, false, NULL);
    u->forks[pid % FORK_SLOTS] = (struct ss_fork){pid, ppid, pp ? pp->serial : 0};
}

void ss_forks_drop(struct ss_unwinder *u, uint32_t pid)
{
    if (u->forks && u->forks[pid % FORK_SLOTS].pid == pid) u->forks[pid % FORK_SLOTS].pid = 0;
}

struct ss_proc *ss_forks_take(struct ss_unwinder *u, uint32_t pid)
{
    struct ss_fork *f = u->forks ? &u->forks[pid % FORK_SLOTS] : NULL;
    if (!f || f->pid != pid) return NULL;
    struct ss_fork n = *f;
    f->pid = 0;
    /* the parent's view: the one it had at the fork (not one it exec'd
     * since), or read now when it had none */
    struct ss_uproc *pp = ss_unwinder_proc(u, n.ppid, !n.parent_serial, NULL);
    struct ss_proc *cp = NULL;
    if (!pp || (n.parent_serial && pp->serial != n.parent_serial) || !ss_proc_is_live(pp->proc) ||
        ss_proc_fork(&cp, pp->proc, (pid_t)pid, FORK_FROZEN_MS, NULL) < 0)
        return NULL;
    return cp;
}

void ss_forks_free(struct ss_unwinder *u)
{
    free(u->forks);
    u->forks = NULL;
}
