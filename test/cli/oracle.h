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
 * compile is its own key ("builtin NAME"), and so is a VM state ([GC]);
 * neither is judged. The chain is the function and chunk of every Lua frame
 * that is not a builtin. No criterion here. */
#ifndef SS_TEST_ORACLE_H
#define SS_TEST_ORACLE_H

#include <stdbool.h>
#include <stddef.h>

#define ORC_KEYS 64
#define ORC_CHAINS 16
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
};

/* Parse folded text (comm;...;leaf COUNT lines) into d. */
void orc_parse(struct orc_dist *d, const char *text);

/* One judged C function. */
struct orc_row {
    char name[256];
    long long off, off_main; /* interpreter samples with Lua frames, on its main chains */
    unsigned chains;         /* the interpreter's chains above it */
    long long on, same, pre, none, wrong;
    char bad[1024]; /* the first wrong chain */
    char want[1024];
};

/* Judge on against off: the keys with >= min samples on both sides (in
 * the interpreter's run: with Lua frames). A JIT-on chain is the same when
 * it is one the interpreter showed above that C function, a prefix when it
 * is a proper prefix of one, none when it has no Lua frame, else wrong.
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

#endif
