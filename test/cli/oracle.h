/* test/cli/oracle.h: the differential oracle of issue 32 on folded text
 * (jitoracle.c: plain luajit, ngxoracle.c: nginx). A recording with the JIT
 * off gives, per C function, the exact chains of Lua frames above it; a
 * recording of the same workload with the JIT on is judged against them,
 * sample by sample: the interpreter's chain, a proven prefix of it, no Lua
 * frame at all, or wrong (a frame the interpreter never had there).
 *
 * The C function of a sample (its key) is the outermost native frame above
 * the last Lua frame (or lua_pcall), past the call machinery that differs
 * between the interpreter and traces (lj_cf_*, lj_vm_ffi_call, unnamed
 * frames of luajit or libluajit, [unknown]); a builtin that traces do not
 * compile is its own key ("builtin NAME;CFUNC": the C function it called),
 * and so is a VM state ([GC]); neither is judged, but the chains of a
 * builtin's key count as the interpreter's chains above its C function
 * (traces compile string.sub, ffi.string, ... into their code, which calls
 * lj_str_new itself). string.format is its own key ("string.format") on
 * both sides: under its builtin frame in the interpreter (which calls
 * unnamed code), and at its IR-call helpers (lj_strfmt_putf*,
 * _putquoted) with the JIT on. The chain is the function and chunk of
 * every Lua frame that is not a builtin. No criterion here.
 *
 * The truth side is incomplete: the interpreter's walks in nginx keep Lua
 * frames on 60-85% of its samples, and which ones they lose can depend on
 * the caller. A JIT chain the interpreter never showed above a function
 * is judged wrong only when the interpreter's view of that function is
 * complete enough to have shown it (orc_compare: ORC_SEEN); otherwise it
 * is open, counted apart. */
#ifndef SS_TEST_ORACLE_H
#define SS_TEST_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define ORC_KEYS 64
#define ORC_CHAINS 48
/* a chain the interpreter never showed is wrong when, at its share of the
 * JIT's samples, >= ORC_SEEN of it were due in the interpreter's view even
 * if every sample the interpreter lost was this chain */
#define ORC_SEEN 5.0
struct orc_key {
    char name[256];
    struct {
        char chain[1024];
        long long n;
    } c[ORC_CHAINS];
    unsigned nc;
    long long total, other; /* other: chains beyond c[] */
};
struct orc_dist {
    struct orc_key k[ORC_KEYS];
    unsigned n;
    long long samples;
    const char *text; /* the folded text parsed (the caller keeps it) */
};

/* Parse folded text (comm;...;leaf COUNT lines) into d. */
void orc_parse(struct orc_dist *d, const char *text);

/* One judged C function. */
struct orc_row {
    char name[256];
    long long off, off_main; /* interpreter samples with Lua frames, on its main chains */
    unsigned chains;         /* the interpreter's chains above it */
    long long lost;          /* its samples in the function without Lua frames */
    long long on, same, pre, none, wrong, open; /* open: see ORC_SEEN */
    char bad[1024];                             /* the first wrong chain */
    char unseen[1024];                          /* the first open one */
    char want[1024];
};

/* Judge on against off: the keys with >= min samples on both sides (in
 * the interpreter's run: with Lua frames). A JIT-on chain is the same when
 * it is one the interpreter showed above that C function, a prefix when it
 * is a proper prefix of one, none when it has no Lua frame, else wrong, or
 * open when the interpreter's view could have missed it (ORC_SEEN).
 * single: only keys whose interpreter samples show one chain (>= 97% of
 * them), and only that chain counts. Returns the rows. */
unsigned orc_compare(const struct orc_dist *off, const struct orc_dist *on, long long min,
                     bool single, struct orc_row *rows, unsigned cap);

/* "N Lua frames unproven" of record's summary line (stderr), 0 when the
 * line has no such count, -1 without a summary. */
long long orc_unproven(const char *err);

/* One line per row into buf (a table: interpreter samples, JIT samples,
 * shares same / prefix / none / wrong). */
void orc_table(const struct orc_row *rows, unsigned n, char *buf, size_t cap);

/* Runs under load (issue 32: the differential holds with busy processes
 * beside the target): start n processes that spin (60 s at most), pids
 * into pid; 0, or -1 when a fork failed (none left running). */
int orc_busy_start(pid_t *pid, unsigned n);
void orc_busy_stop(const pid_t *pid, unsigned n);

#endif
