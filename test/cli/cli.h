/* test/cli/cli.h: helpers of the end-to-end CLI tests — run the real
 * `stacksnap` binary (and workloads) as subprocesses with timeouts, files and
 * folders, folded-text checks, and an in-process replay (library API) for
 * checks that must not depend on the executable's own environment.
 * Nothing here uses criterion: the fixture tool shares it. */
#ifndef SS_TEST_CLI_H
#define SS_TEST_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A finished subprocess. status: exit code, 128+signal, or -1 when it was
 * killed after its timeout. out/err: everything it wrote (NUL-terminated). */
struct cli_res {
    int status;
    char *out, *err;
    size_t out_len, err_len;
    double secs;
};

/* Run argv (NULL-terminated; argv[0] looked up in PATH) with stdin from
 * /dev/null, stdout/stderr captured. Returns 0, or -errno if it could not
 * be started. */
int cli_run(struct cli_res *r, double timeout_s, char *const argv[]);
void cli_res_free(struct cli_res *r);

/* Start argv in the background, stdout to a pipe (*out_fd, may be NULL =
 * /dev/null), stderr to err_path (NULL = inherit). Returns the pid or -errno. */
pid_t cli_start(char *const argv[], int *out_fd, const char *err_path);
/* Read the first line of fd (e.g. "ready ...") within timeout_s; 0 or -1. */
int cli_wait_line(int fd, double timeout_s, char *line, size_t len);
/* waitpid with a timeout; SIGKILL (and reap) when it runs out. Returns the
 * status as cli_res.status does. */
int cli_wait(pid_t pid, double timeout_s);

double cli_now(void);
void cli_sleep(double s);

/* Servers under test on loopback: a port free now (or -1), whether one
 * accepts connections, and the first child of pid (a pid namespace's pid 1
 * under unshare --fork), or 0. */
int cli_free_port(void);
bool cli_port_open(int port);
pid_t cli_first_child(pid_t pid);

/* Folders and files. */
char *cli_tmpdir(const char *tag); /* /tmp/ss-cli-TAG-XXXXXX */
void cli_rmtree(const char *dir);
char *cli_path(const char *dir, const char *name); /* malloc'd dir/name */
char *cli_load(const char *path, size_t *len);     /* NULL (errno) if unreadable */
int cli_store(const char *path, const void *buf, size_t len);
int cli_copy(const char *from, const char *to, mode_t mode);
/* Where two files first differ: NULL when identical, else a malloc'd line
 * "A: ... / B: ..." quoting the first differing line of each. */
char *cli_diff(const char *a, const char *b);

/* The stacksnap binary and built helpers (malloc'd paths). */
const char *cli_ss(void);
char *cli_built(const char *name);
char *cli_src(const char *rel); /* SS_SOURCE_DIR/rel */
/* Absolute path of a program in PATH (malloc'd) or NULL. */
char *cli_which(const char *prog);

/* Folded text: every line "STACK COUNT" with COUNT >= 1 and a non-empty
 * stack. Returns the sum of counts, or -1 and a reason in why. */
long long cli_folded_check(const char *text, char *why, size_t whylen);
/* Lines containing needle (the number of distinct stacks that match). */
int cli_count_lines(const char *text, const char *needle);

/* Sum of the counts of the folded lines whose leaf frame is exactly leaf. */
long long cli_leaf_count(const char *text, const char *leaf);

/* Replay a capture in this process (ss_replay + report sinks) into folded
 * and/or perf-script text files; messages joined with '\n' into msgs.
 * Returns 0 or a negative errno. */
int cli_replay_inproc(const char *snap, const char *symfs, const char *folded, const char *txt,
                      char *msgs, size_t msgslen);
/* The same, runs times over one ss_replay (its later runs reuse what the
 * first opened): run K into DIR/runK.folded and DIR/runK.txt. */
int cli_replay_runs(const char *snap, const char *symfs, int runs, const char *dir, char *msgs,
                    size_t msgslen);
/* One in-process run with replay's memo of walks on or off (ss_replay_opts
 * no_memo); *hits: the samples the memo answered, *native_hits: the native
 * walks the memo of native walks answered above the leaf. */
int cli_replay_memo(const char *snap, bool memo, const char *folded, const char *txt,
                    long long *hits, long long *native_hits, char *msgs, size_t msgslen);
/* One in-process run without the memo, native frames walked in native
 * mode mode (enum ss_native_mode; check: ss_replay_opts.check_rules), into
 * txt; the unwinder's counters of native steps: by rules, by the slow path
 * (libunwind, or libdw for another architecture), rule steps checked and
 * those that differed; how long the run took. */
struct cli_steps {
    long long rule, slow, checks, diffs;
    double secs; /* the run's time (the capture opened before) */
};
int cli_replay_steps(const char *snap, int mode, bool check, const char *txt, struct cli_steps *st,
                     char *msgs, size_t msgslen);

/* Copy capture IN to OUT with the header's arch string (and, nregs != 0, its
 * registers per sample) replaced; every record re-framed with fresh CRCs,
 * the trailer's offset fixed. For tests of captures of another architecture
 * made from real ones. 0 or a negative errno. */
int cli_snap_set_arch(const char *in, const char *arch, uint32_t nregs, const char *out);

/* A gzipped pprof file unpacked (free with
 * perftools__profiles__profile__free_unpacked), or NULL. */
struct Perftools__Profiles__Profile;
struct Perftools__Profiles__Profile *cli_load_pprof(const char *path);

#endif
