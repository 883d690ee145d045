/* test/capture/proc.h: running capture_workload from a test: spawn it in
 * its own process group with pipes, read its ready lines, kill it. */
#ifndef SS_TEST_CAPTURE_PROC_H
#define SS_TEST_CAPTURE_PROC_H

#include <stdint.h>
#include <sys/types.h>

struct wl {
    pid_t pid;  /* the workload (its process group) */
    int out_fd; /* its stdout */
    int in_fd;  /* its stdin */
    char buf[512];
    size_t len;
};

struct wl_ready {
    pid_t pid, tid;
    uint64_t fn, fn_size, pat, top;
};

/* Start SS_BINARY_DIR/capture_workload MODE [ARG]. 0 or negative errno. */
int wl_start(struct wl *w, const char *mode, const char *arg);
/* Wait up to timeout_ms for the next ready line. 0 or negative errno. */
int wl_ready(struct wl *w, struct wl_ready *r, int timeout_ms);
/* Write a line to its stdin. */
int wl_send(struct wl *w, const char *line);
/* SIGKILL the process group and reap the workload. */
void wl_stop(struct wl *w);

#endif
