/* bench/plan.c: the window plan `stacksnap record` would give a LuaJIT
 * process, and DISPATCH values (r14) of its samples, from a short capture
 * with the profiler's own loader (capture/) and unwinder (unwind/): the
 * kernel-cost phase applies that plan to its window program (kcost.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "stacksnap/capture.h"
#include "stacksnap/unwind.h"

struct take {
    struct ss_unwinder *u;
    struct ss_capture *c;
    struct ss_win_plan *plan;
    bool have;
    uint64_t *r14;
    size_t *nr14, max;
    long samples, plans;
};

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct take *t = ctx;
    struct ss_stack st;
    t->samples++;
    uint64_t v = s->regs[SS_REG_R14];
    size_t i = 0;
    while (i < *t->nr14 && t->r14[i] != v)
        i++;
    if (i == *t->nr14 && i < t->max) t->r14[(*t->nr14)++] = v;
    ss_unwinder_intake(t->u, s);
    if (ss_unwind(t->u, s, &st) < 0) return;
    if (!ss_unwinder_take_plan(t->u, s->pid, t->plan)) return;
    struct ss_err err = {0};
    t->have = ss_capture_set_plan(t->c, (pid_t)s->pid, t->plan, &err) == 0;
    t->plans++;
}

int bn_take_plan(const struct bn_opts *o, pid_t pid, struct ss_win_plan *plan, uint64_t *r14,
                 size_t *nr14, size_t max, char *msg, size_t len)
{
    struct ss_capture *c = NULL;
    struct ss_unwinder_opts uo = {0};
    struct ss_capture_opts co = {.freq_hz = o->freq, .stack_size = 16384};
    struct ss_err err = {0};
    struct take t = {.plan = plan, .r14 = r14, .nr14 = nr14, .max = max};
    int r;

    *nr14 = 0;
    memset(plan, 0, sizeof(*plan));
    if ((r = ss_unwinder_new(&t.u, &uo, &err)) < 0 || (r = ss_capture_open(&c, &co, &err)) < 0 ||
        (r = ss_capture_add_pid(c, pid, &err)) < 0 || (r = ss_capture_start(c, &err)) < 0) {
        snprintf(msg, len, "%s", err.msg);
        goto out;
    }
    t.c = c;
    /* as record: a short poll, so the live reads see the sampled stack;
     * long enough for the plan's sizes to follow the samples (plan.c), the
     * last plan handed out is the one record keeps */
    double end = bn_now() + 2.0;
    while (bn_now() < end)
        ss_capture_poll(c, 2, on_sample, &t);
    ss_capture_stop(c);
    r = t.have ? 0 : -ENOENT;
    if (r) snprintf(msg, len, "the unwinder gave no plan in %ld samples", t.samples);
out:
    ss_capture_close(c);
    ss_unwinder_free(t.u);
    return r;
}
