/* test/native/harness.h: run a native_workload, sample it with the real BPF
 * capture, unwind every sample live and tally the resulting chains. */
#ifndef SS_TEST_NATIVE_HARNESS_H
#define SS_TEST_NATIVE_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_unwinder;
struct ss_stack;

struct nw_proc {
    pid_t pid;
    int out_fd;
};

/* Start SS_BINARY_DIR/BIN MODE and wait for its ready line. */
int nw_start(struct nw_proc *p, const char *bin, const char *mode);
void nw_stop(struct nw_proc *p);

/* One distinct chain (frame texts leaf first, ';'-joined) and its count. */
struct nw_chain {
    char *text;
    long count;
    int trunc;
};

struct nw_tally {
    long samples, leaf_samples; /* all samples of the pid; those with the leaf */
    long trunc[SS_TRUNC_ERROR + 1];
    long mismatch_modes; /* samples where rule and libunwind-only walks differ */
    long compared_modes; /* samples compared that way */
    long compared_replay, mismatch_replay;
    struct nw_chain *v; /* chains of leaf samples */
    int n, cap;
    long tid_chain_bad; /* threads test: a tid seen with two different chains */
    /* per tid: first chain seen */
    struct {
        uint32_t tid;
        char *text;
    } tids[64];
    int ntids;
};

struct nw_opts {
    const char *leaf; /* count samples whose leaf frame has this name (or "+MODULE") */
    double seconds;   /* sampling time ... */
    long min_leaf;    /* ... extended (up to max_seconds) until this many leaf samples */
    double max_seconds;
    unsigned freq;       /* Hz */
    bool compare_modes;  /* also unwind with libunwind alone and compare */
    bool compare_replay; /* also unwind offline from the maps + files and compare */
    bool per_tid;        /* record the first chain of each tid */
    /* called for every sample of the pid (stack bytes valid only here) */
    void (*each)(void *ctx, const struct ss_sample *s, const struct ss_stack *st);
    void *each_ctx;
};

/* Sample pid for o->seconds with unwinder u (created here when NULL). */
int nw_sample(pid_t pid, const struct nw_opts *o, struct ss_unwinder *u, struct nw_tally *t);
void nw_tally_free(struct nw_tally *t);
/* The most frequent chain. */
const struct nw_chain *nw_top(const struct nw_tally *t);
/* Log the top chains (criterion info). */
void nw_dump(const struct nw_tally *t, int max);

/* Chain pattern matching: pattern is ';'-joined, leaf first; an element
 * "+MOD" matches one or more frames whose text starts with "MOD" or whose
 * module basename is MOD (e.g. "+libc.so.6"), "rec*201" matches exactly 201
 * frames named rec. */
bool nw_match(const char *chain, const char *pattern);
/* Samples (of leaf samples) whose chain matches pattern. */
long nw_count_matching(const struct nw_tally *t, const char *pattern);

#endif
