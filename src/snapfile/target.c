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
    for (uint32_t j = 0; j < rp->total; j++)
        if (!rp->reads[j].addr && !rp->reads[j].len && rp->reads[j].err == SS_READ_REWALK)
            rp->mark = j + 1;
    if (rp->mark) rp->n = rp->mark - 1;
}

void ss_snap_replay_rewalk(struct ss_snap_replay *rp)
{
    rp->n = rp->total;
    rp->next = rp->mark;
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

/* Like the live backend: a read that found the process gone (ESRCH) makes
 * the whole call fail, as process_vm_readv did (callers tell the two apart). */
static int replay_readv(void *ctx, struct ss_iov *iov, int n)
{
    struct ss_snap_replay *rp = ctx;
    int ret = 0;
    for (int i = 0; i < n; i++) {
        int j = find(rp, iov[i].addr, iov[i].len);
        if (j < 0) {
            iov[i].err = -EFAULT;
            rp->misses++;
            continue;
        }
        const struct ss_snap_read *r = &rp->reads[j];
        rp->hits++;
        if (r->addr == iov[i].addr && r->len == iov[i].len && (uint32_t)j >= rp->next)
            rp->next = (uint32_t)j + 1;
        iov[i].err = r->err;
        if (r->err == -ESRCH) ret = -ESRCH;
        if (!r->err && iov[i].len)
            memcpy(iov[i].dst, r->data + (iov[i].addr - r->addr), iov[i].len);
    }
    return ret;
}

const struct ss_target_ops ss_snap_target_replay = {.readv = replay_readv};
