/* unwind/kernel.c: kernel frames (include/stacksnap/unwind.h): the
 * kernel stack the BPF program took with a sample (the kernel's own
 * unwinder did the walking) named from the unwinder's kernel symbol table
 * (symbolize/ksyms.h), put leafward of the user frames. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "symbolize/ksyms.h"
#include "unwind/procs.h"
#include "unwind/unwinder.h"

int ss_unwinder_kernel_syms(struct ss_unwinder *u, const char *path, struct ss_err *err)
{
    struct ss_ksyms *k;
    int r = ss_ksyms_load(&k, path, err);
    if (r < 0) return r;
    ss_ksyms_free(u->ksyms);
    u->ksyms = k;
    return 0;
}

int ss_unwinder_add_ksym(struct ss_unwinder *u, const struct ss_ksym *s)
{
    if (!u->ksyms && ss_ksyms_new(&u->ksyms) < 0) return -ENOMEM;
    ss_unwinder_memo_drop(u); /* kernel frames' names change */
    return ss_ksyms_add(u->ksyms, s);
}

void ss_unwinder_take_ksyms(struct ss_unwinder *u, void (*fn)(void *ctx, const struct ss_ksym *s),
                            void *ctx)
{
    ss_ksyms_take_new(u->ksyms, fn, ctx);
}

/* The frames of the tracepoint that took an off-CPU sample's stack (BPF
 * trampolines, bpf_trace_runN, __traceiter_...: their number varies by
 * kernel): not where the thread blocked. */
static bool tracing_frame(const struct ss_ksym *k)
{
    static const char *const pre[] = {"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_",
                                      "trace_sched_switch"};
    if (!k || !k->name) return false;
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        if (!strncmp(k->name, pre[i], strlen(pre[i]))) return true;
    return false;
}

unsigned ss_unwind_kernel(struct ss_unwinder *u, const struct ss_sample *s, unsigned nn)
{
    unsigned nk = s->nkernel < SS_KSTACK_MAX ? s->nkernel : SS_KSTACK_MAX, skip = 0;
    if (!nk || !s->kernel || u->out_cap < (size_t)nn + nk) return nn; /* no room: none */
    if (s->flags & SS_SAMPLE_OFFCPU)
        while (skip < nk && tracing_frame(ss_ksyms_find(u->ksyms, s->kernel[skip])))
            skip++;
    nk -= skip;
    if (!nk) return nn;
    memmove(u->out + nk, u->out, nn * sizeof(*u->out));
    for (unsigned i = 0; i < nk; i++) {
        struct ss_frame *f = &u->out[i];
        const struct ss_ksym *k = ss_ksyms_find(u->ksyms, s->kernel[skip + i]);
        memset(f, 0, sizeof(*f));
        f->kind = SS_FRAME_KERNEL;
        f->addr = s->kernel[skip + i];
        if (k) {
            f->name = k->name;
            f->module = k->module;
            f->sym_offset = f->addr - k->start;
        }
    }
    return nn + nk;
}
