/* test/reliability/rl.h: helpers of the reliability tests: run programs
 * (the stacksnap CLI, workloads) with captured output and a deadline, read
 * /proc facts (RSS, run state), scratch directories. */
#ifndef RL_H
#define RL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RL_STACKSNAP SS_BINARY_DIR "/stacksnap"

/* Built with AddressSanitizer (so is the stacksnap under test): its
 * quarantine keeps freed memory, so memory-growth bounds do not apply. */
#if defined(__SANITIZE_ADDRESS__)
#define RL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_ASAN 1
#endif
#endif
#ifndef RL_ASAN
#define RL_ASAN 0
#endif
#define RL_TORN_LUA SS_SOURCE_DIR "/test/reliability/torn.lua"

/* A started program: stdout/stderr go to files in dir (out_path, err_path). */
struct rl_proc {
    pid_t pid;
    char out_path[512], err_path[512];
};

/* Start argv (NULL-terminated) with stdout/stderr redirected to
 * DIR/NAME.out and DIR/NAME.err; pre_exec (optional) runs in the child. */
int rl_start(struct rl_proc *p, const char *dir, const char *name, char *const argv[],
             void (*pre_exec)(void *), void *ctx);
/* Wait at most timeout_s; returns the wait status, or -1 after killing the
 * program when the deadline passed. */
int rl_wait(struct rl_proc *p, double timeout_s);
/* Start + wait; exit code (0-255), 128+signal, or -1 on timeout. */
int rl_run(const char *dir, const char *name, char *const argv[], double timeout_s);

/* Whole file into a malloc'd NUL-terminated string (NULL if unreadable). */
char *rl_slurp(const char *path, size_t *len);
/* Number of lines of text (a last line without newline counts). */
size_t rl_count_lines(const char *text);

/* A KiB field of /proc/PID/status ("VmRSS", "RssAnon"), -1 if gone. RssAnon
 * is the process's own memory; VmRSS also counts pages of mapped files
 * (for the profiler: the ELF images of whatever runs on the machine). */
long rl_status_kib(pid_t pid, const char *field);
/* Run state letter from /proc/PID/stat ('R', 'S', 'T', 't', ...), 0 if gone. */
char rl_state(pid_t pid);

/* mkdtemp under $TMPDIR (or /tmp), mode 0755. */
void rl_tmpdir(char *out, size_t cap, const char *tag);
void rl_rmtree(const char *dir);

double rl_now(void);
bool rl_have(const char *prog); /* in PATH */

#endif
