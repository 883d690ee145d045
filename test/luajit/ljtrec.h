/* test/luajit/ljtrec.h: recording for the JIT tests (test_trace.c,
 * test_jitwit.c): like ljrec.c, plus the runtime's trace statistics and
 * layout, optionally of a process in a container; and the LuaJIT builds
 * they run (Debian 12's and 13's sources, build-luajit.sh). */
#ifndef LJTREC_H
#define LJTREC_H

#include <stdbool.h>
#include <stdint.h>

#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

typedef void (*on_fn)(void *ctx, const struct ss_stack *st, const char *folded);

struct rec {
    struct ss_unwinder *u;
    struct ss_capture *cap;
    on_fn fn;
    void *ctx;
    unsigned samples, errors;
    double unwind_ns;
    struct ss_lj_stats lj;
    uint64_t target_calls;
    uint64_t unw_steps; /* native steps handed to libunwind */
    bool exited;
    int status;
    char layout[64]; /* layout of the first LuaJIT runtime */
    char buf[16384];
};

/* Run argv (in a namespaced chroot of root when set: ljt_spawn_root) for
 * seconds or until it exits, unwinding every sample as it arrives into r
 * (fn per stack). check_guards: also place snapshots by guards; freq 0:
 * 499 Hz. Asserts (criterion) when recording cannot start. */
void ljt_record_ex(char *const argv[], const char *ldp, double seconds, on_fn fn, void *ctx,
                   struct rec *r, bool check_guards, unsigned freq, const char *root);
void ljt_record(char *const argv[], const char *ldp, double seconds, on_fn fn, void *ctx,
                struct rec *r);
/* The luajit binary of a build-luajit.sh variant (gc64-jit, nogc64-jit,
 * ...) of Debian 12's source (build folder ext/) or Debian 13's (cache);
 * builds it when missing (asserts). */
const char *ljt_built(const char *variant);
const char *ljt_built_trixie(const char *variant);

#endif
