/* test/luajit/ljrec.h: record a live process with real BPF (capture.h) and
 * unwind every sample at once with ss_unwind (native + LuaJIT splice), the
 * way `stacksnap record` does, but polling every millisecond so that the
 * live reads of the Lua stacks happen while the sampled state still exists.
 * Each stack is handed to a callback as one folded line, root first:
 * native frames by symbol (or "MODULE+0xOFF"), Lua frames as
 * "NAME (CHUNK:LINE)". */
#ifndef LJREC_H
#define LJREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ljr_stats {
    unsigned samples, lua; /* all samples, samples with >= 1 Lua frame */
    unsigned errors;       /* ss_unwind < 0 */
    uint64_t dropped;      /* capture drops */
    double unwind_ns;      /* total time in ss_unwind */
    uint64_t target_reads; /* process_vm_readv calls of the unwinder */
    char layout[64];       /* layout of the first LuaJIT runtime ("" none) */
    bool derived;          /* that layout was built from facts derived from the code */
    char diag[256];        /* its diagnostic ("" when all is well) */
    bool exited;           /* the process exited (and was reaped) while recorded */
    int status;            /* its wait status then */
};

/* fn gets the stack and its folded text (root first, ';'-joined). */
typedef void (*ljr_fn)(void *ctx, const struct ss_stack *st, const char *folded);

/* Sample pid at freq Hz for seconds (or until it exits; a child of the
 * caller that exits is reaped), call fn per sample. Returns 0 or a negative errno (capture could
 * not start: msg). */
int ljr_record(pid_t pid, unsigned freq, double seconds, ljr_fn fn, void *ctx, struct ljr_stats *st,
               char *msg, size_t msglen);

/* Spawn argv (LD_LIBRARY_PATH=ldp when set, stdout to /dev/null), let it
 * start for settle_ms, record it as ljr_record does, then SIGKILL it. */
int ljr_run(char *const argv[], const char *ldp, unsigned settle_ms, unsigned freq, double seconds,
            ljr_fn fn, void *ctx, struct ljr_stats *st, char *msg, size_t msglen);

/* The same for argv run in a namespaced chroot of root (ljt_spawn_root:
 * test/luajit is /mnt inside), recording the process that runs argv. */
int ljr_run_root(const char *root, char *const argv[], unsigned settle_ms, unsigned freq,
                 double seconds, ljr_fn fn, void *ctx, struct ljr_stats *st, char *msg,
                 size_t msglen);

/* Folded text of a stack, root first (see above). */
void ljr_fold(const struct ss_stack *st, char *buf, size_t cap);
/* After a sample is unwound, as `record` does: a LuaJIT runtime just
 * verified gets its window plan (the Lua state copied at every sample). */
struct ss_capture;
struct ss_unwinder;
void ljr_take_plan(struct ss_unwinder *u, struct ss_capture *c, uint32_t pid);

/* Only the Lua part of a folded line: frames containing " (" joined by ';'
 * (root first). */
void ljr_lua_only(const struct ss_stack *st, char *buf, size_t cap);

#endif
