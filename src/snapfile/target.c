/* snapfile/target.c: replay backend serving recorded target reads (see
 * target.h). */
#include <errno.h>
#include <string.h>

#include "snapfile/target.h"
#include "stacksnap/unwind.h"

void ss_snap_replay_set(struct ss_snap_replay *rp, const struct ss_snap_sample *s)
{
    rp->reads = s->has_reads ? s->reads : NULL;
    rp->n = rp->total = s->has_reads ? s->nreads : 0;
    rp->next = rp->mark = 0;
    rp->astray = false;
    for (uint32_t j = 0; j < rp->total; j++)
        if (!rp->reads[j].addr && !rp->reads[j].len && rp->reads[j].err == SS_READ_REWALK)
            rp->mark = j + 1;
    if (rp->mark) rp->n = rp->mark - 1;
}

void ss_snap_replay_restart(struct ss_snap_replay *rp)
{
    rp->n = rp->mark ? rp->mark - 1 : rp->total;
    rp->next = 0;
    rp->astray = false;
}

bool ss_snap_replay_consumed(const struct ss_snap_replay *rp)
{
    return !rp->astray && rp->next == rp->n;
}

void ss_snap_replay_rewalk(struct ss_snap_replay *rp)
{
    rp->n = rp->total;
    rp->next = rp->mark;
    rp->astray = false;
}

static int find(const struct ss_snap_replay *rp, uint64_t addr, size_t len)
{
    for (uint32_t j = rp->next; j < rp->n; j++)
        if (rp->reads[j].addr == addr && rp->reads[j].len == len) return (int)j;
    for (uint32_t j = 0; j < rp->next && j < rp->n; j++)
        if (rp->reads[j].addr == addr && rp->reads[j].len == len) return (int)j;
    for (uint32_t j = 0; j < rp->n; j++) {
        const struct ss_snap_read *r = &rp->reads[j];
        if (!r->err && addr >= r->addr && len <= r->len && addr - r->addr <= r->len - len)
            return (int)j;
    }
    return -1;
}

int ss_snap_replay_serve(struct ss_snap_replay *rp, struct ss_iov *v)
{
    const struct ss_snap_read *r;
    if (rp->next < rp->n && (r = &rp->reads[rp->next])->addr == v->addr && r->len == v->len) {
        /* the usual case: the next read in recorded order */
        rp->next++;
        rp->hits++;
        v->err = r->err;
        if (!r->err && v->len) memcpy(v->dst, r->data, v->len);
        return r->err == -ESRCH ? -ESRCH : 1;
    }
    rp->astray = true;
    int j = find(rp, v->addr, v->len);
    if (j < 0) {
        v->err = -EFAULT;
        rp->misses++;
        return 0;
    }
    r = &rp->reads[j];
    rp->hits++;
    if (r->addr == v->addr && r->len == v->len && (uint32_t)j >= rp->next)
        rp->next = (uint32_t)j + 1;
    v->err = r->err;
    if (!r->err && v->len) memcpy(v->dst, r->data + (v->addr - r->addr), v->len);
    return r->err == -ESRCH ? -ESRCH : 1;
}

/* Like the live backend: a read that found the process gone (ESRCH) makes
 * the whole call fail, as process_vm_readv did (callers tell the two apart). */
static int replay_readv(void *ctx, struct ss_iov *iov, int n)
{
    int ret = 0;
    for (int i = 0; i < n; i++)
        if (ss_snap_replay_serve(ctx, &iov[i]) < 0) ret = -ESRCH;
    return ret;
}

const struct ss_target_ops ss_snap_target_replay = {.readv = replay_readv};
