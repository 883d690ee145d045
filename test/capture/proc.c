/* test/capture/proc.c: see proc.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"
#include "proc.h"

extern char **environ;

int wl_start(struct wl *w, const char *mode, const char *arg)
{
    const char *path = SS_BINARY_DIR "/capture_workload";
    char *argv[] = {(char *)path, (char *)mode, (char *)arg, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int out[2], in[2], r;

    memset(w, 0, sizeof(*w));
    if (pipe2(out, O_CLOEXEC) || pipe2(in, O_CLOEXEC)) return -errno;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    r = posix_spawn(&w->pid, path, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(out[1]);
    close(in[0]);
    w->out_fd = out[0];
    w->in_fd = in[1];
    if (r) {
        close(w->out_fd);
        close(w->in_fd);
        w->pid = 0;
        return -r;
    }
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wl_ready(struct wl *w, struct wl_ready *r, int timeout_ms)
{
    long end = now_ms() + timeout_ms;

    for (;;) {
        char *nl = memchr(w->buf, '\n', w->len);
        if (nl) {
            unsigned long fn, size, pat, top;
            int ok;
            *nl = 0;
            ok = sscanf(w->buf, SS_READY_FMT, &r->pid, &r->tid, &fn, &size, &pat, &top) == 6;
            w->len -= (size_t)(nl + 1 - w->buf);
            memmove(w->buf, nl + 1, w->len);
            if (ok) {
                r->fn = fn, r->fn_size = size, r->pat = pat, r->top = top;
                return 0;
            }
            continue;
        }
        long left = end - now_ms();
        struct pollfd p = {.fd = w->out_fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) return -ETIMEDOUT;
        ssize_t n = read(w->out_fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len);
        if (n <= 0) return n < 0 ? -errno : -EPIPE;
        w->len += (size_t)n;
    }
}

int wl_send(struct wl *w, const char *line)
{
    size_t n = strlen(line);
    return write(w->in_fd, line, n) == (ssize_t)n ? 0 : -EIO;
}

void wl_stop(struct wl *w)
{
    if (w->pid <= 0) return;
    kill(-w->pid, SIGKILL);
    waitpid(w->pid, NULL, 0);
    close(w->out_fd);
    close(w->in_fd);
    w->pid = 0;
}
