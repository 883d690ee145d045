/* capture/execstack.c: the stacks the BPF side copies at the entry of each
 * exec (bpf/execstack.h), kept per thread until the process's exec or exit
 * marker, and given to that thread's samples inside the exec: a sample
 * whose stack copy failed while it interrupted the kernel, at the same user
 * ip and sp as the copy (the old image's registers after the kernel switched
 * the memory map). Such a sample then carries the stack it would have
 * copied before the switch (SS_SAMPLE_EXECSTACK), so it is unwound like any
 * other, and a capture records it that way: replay needs nothing new.
 * A few slots by thread: execs of the same moment are few; a colliding one
 * replaces the older copy. */
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "capture/capture_int.h"

#define EXS_SLOTS 32

struct ss_exs {
    uint32_t tid, tgid; /* tid 0: free */
    uint64_t ip, sp;
    uint32_t len, holes;
    uint8_t *buf; /* stack_size bytes, kept for the slot's next use */
};

bool ss_capture_exs_take(struct ss_capture *c, const void *data, size_t size)
{
    struct ss_event e;
    if (size < sizeof(e)) return false;
    memcpy(&e, data, sizeof(e));
    if (!(e.flags & SS_EV_EXECSTACK)) return false;
    if (e.stack_len > e.stack_room || e.stack_room > c->stack_size ||
        e.stack_room > size - sizeof(e) || !e.tid) {
        c->bad++;
        return true;
    }
    if (!c->exs && !(c->exs = calloc(EXS_SLOTS, sizeof(*c->exs)))) return true;
    struct ss_exs *x = &c->exs[e.tid % EXS_SLOTS];
    if (!x->buf && !(x->buf = malloc(c->stack_size))) return true;
    x->tid = e.tid;
    x->tgid = e.tgid;
    x->ip = e.regs[SS_PT_IP];
    x->sp = e.regs[SS_PT_SP];
    x->len = e.stack_len;
    x->holes = ss_ev_holes(&e);
    memcpy(x->buf, (const uint8_t *)data + sizeof(e), x->len);
    return true;
}

void ss_capture_exs_apply(struct ss_capture *c, struct ss_sample *s)
{
    if (!c->exs || s->stack_len || !(s->flags & SS_SAMPLE_KERNEL)) return;
    struct ss_exs *x = &c->exs[s->tid % EXS_SLOTS];
    if (x->tid != s->tid || x->ip != s->regs[SS_REG_IP] || x->sp != s->regs[SS_REG_SP] || !x->len)
        return;
    s->stack = x->buf;
    s->stack_len = x->len;
    s->holes = x->holes;
    s->flags |= SS_SAMPLE_EXECSTACK;
    if (x->len >= s->stack_req) s->flags &= ~SS_SAMPLE_PARTIAL;
    c->exec_stacks++;
}

void ss_capture_exs_drop(struct ss_capture *c, uint32_t tgid)
{
    for (int i = 0; c->exs && i < EXS_SLOTS; i++)
        if (c->exs[i].tgid == tgid) c->exs[i].tid = c->exs[i].tgid = 0;
}

void ss_capture_exs_free(struct ss_capture *c)
{
    for (int i = 0; c->exs && i < EXS_SLOTS; i++)
        free(c->exs[i].buf);
    free(c->exs);
    c->exs = NULL;
}
