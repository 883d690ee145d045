/* snapfile/replay_reads.c: the target a replay's unwinder reads
 * (replay_reads.h): the current sample's recorded reads (target.c), then
 * every successful read recorded before it, by (pid, addr), newest wins. */
#include <stdlib.h>
#include <string.h>

#include "snapfile/replay_reads.h"

struct ss_replay_hist {
    uint32_t pid, len;
    uint64_t addr;
    uint8_t *data;
    struct ss_replay_hist *next;
};

static unsigned hslot(uint32_t pid, uint64_t addr)
{
    return (unsigned)(((addr >> 3) ^ pid) * 0x9e3779b97f4a7c15ull >> 52) &
           (SS_REPLAY_READS_BUCKETS - 1);
}

void ss_replay_reads_add(struct ss_replay_reads *r, uint32_t pid, const struct ss_snap_sample *s)
{
    for (uint32_t i = 0; i < s->nreads; i++) {
        const struct ss_snap_read *rd = &s->reads[i];
        if (rd->err || !rd->len) continue;
        /* a run of reads of one address and size (a recursion's frames read
         * the same function) leaves the last one in the history: skip the
         * others */
        if (i + 1 < s->nreads && !s->reads[i + 1].err && s->reads[i + 1].addr == rd->addr &&
            s->reads[i + 1].len == rd->len)
            continue;
        struct ss_replay_hist **pp = &r->b[hslot(pid, rd->addr)], *h;
        for (h = *pp; h && !(h->pid == pid && h->addr == rd->addr); h = h->next)
            ;
        if (h && h->len != rd->len) { /* keep one size per address: the newest */
            free(h->data);
            h->data = NULL;
        }
        if (!h) {
            if (!(h = calloc(1, sizeof(*h)))) return;
            h->pid = pid;
            h->addr = rd->addr;
            h->next = *pp;
            *pp = h;
        }
        if (!h->data && !(h->data = malloc(rd->len))) continue;
        h->len = rd->len;
        memcpy(h->data, rd->data, rd->len);
    }
}

void ss_replay_reads_free(struct ss_replay_reads *r)
{
    for (unsigned b = 0; b < SS_REPLAY_READS_BUCKETS; b++)
        for (struct ss_replay_hist *h = r->b[b], *n; h; h = n) {
            n = h->next;
            free(h->data);
            free(h);
        }
    memset(r->b, 0, sizeof(r->b));
}

/* Target backend: this sample's reads, then the history. A recorded read
 * that found the process gone fails the call, as it did live. */
static int hist_readv(void *ctx, struct ss_iov *iov, int n)
{
    struct ss_replay_reads *r = ctx;
    int ret = 0;
    for (int i = 0; i < n; i++) {
        int rc = ss_snap_replay_serve(r->target, &iov[i]);
        if (rc < 0) ret = rc; /* the process was gone (target.c) */
        if (rc) continue;
        for (const struct ss_replay_hist *h = r->b[hslot(r->pid, iov[i].addr)]; h; h = h->next)
            if (h->pid == r->pid && h->addr == iov[i].addr && h->data && h->len >= iov[i].len) {
                memcpy(iov[i].dst, h->data, iov[i].len);
                iov[i].err = 0;
                r->hits++;
                break;
            }
    }
    return ret;
}

static void hist_restart(void *ctx)
{
    ss_snap_replay_restart(((struct ss_replay_reads *)ctx)->target);
}

static bool hist_consumed(void *ctx)
{
    return ss_snap_replay_consumed(((struct ss_replay_reads *)ctx)->target);
}

const struct ss_target_ops ss_replay_reads_target = {
    .readv = hist_readv, .restart = hist_restart, .consumed = hist_consumed};
