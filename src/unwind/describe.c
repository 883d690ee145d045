/* unwind/describe.c: the unwinder's hooks for capture and replay: what it
 * knows about a process (process records must carry exactly the mappings the
 * live walk used, with build-ids, so replay resolves the same files), and
 * swapping a process's target backend for recorded reads. */
#include <errno.h>
#include <string.h>

#include "elf/elf.h"
#include "process/process.h"
#include "unwind/memo.h"
#include "unwind/unwinder.h"

int ss_unwinder_describe(struct ss_unwinder *u, uint32_t pid, struct ss_unwinder_pdesc *out,
                         ss_unwinder_map_fn fn, void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    size_t n;
    const struct ss_mapping *m = ss_proc_mappings(up->proc, &n);
    out->comm = ss_proc_comm(up->proc);
    out->serial = up->serial;
    out->generation = ss_proc_generation(up->proc);
    out->nmaps = n;
    for (size_t i = 0; fn && i < n; i++) {
        struct ss_map_desc d = m[i].d;
        if (m[i].elf && m[i].elf->build_id_len && !d.build_id_len) {
            d.build_id_len = m[i].elf->build_id_len;
            memcpy(d.build_id, m[i].elf->build_id, d.build_id_len);
        }
        fn(ctx, &d);
    }
    return 0;
}

int ss_unwinder_set_target(struct ss_unwinder *u, uint32_t pid, const struct ss_target_ops *ops,
                           void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    if (!up) return -ESRCH;
    if (up->mem.target != ops || up->mem.target_ctx != ctx) { /* other answers: memo.h */
        ss_memo_free(up->memo);
        up->memo = NULL;
    }
    up->mem.target = ops;
    up->mem.target_ctx = ctx;
    return 0;
}
