/* cli/cmd_agent.c: `stacksnap agent` — map the flags to ss_agent_opts, log to
 * stderr (the journal under systemd; a file there is reopened on SIGHUP),
 * run until SIGTERM/SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "process/process.h"
#include "stacksnap/agent.h"
#include "util/caps.h"

static volatile sig_atomic_t g_stop; /* cli/ owns process-wide state */
static char g_log_path[4096];        /* stderr's file when it is one, for SIGHUP */

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* SIGHUP: reopen the log file stderr was redirected to (after logrotate
 * moved it). open, dup2 and close are async-signal-safe. */
static void on_hup(int sig)
{
    (void)sig;
    int e = errno;
    if (g_log_path[0]) {
        int fd = open(g_log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
    }
    errno = e;
}

static void remember_log_path(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) < 0 || !S_ISREG(st.st_mode)) return; /* tty, pipe, journal */
    ssize_t n = readlink("/proc/self/fd/2", g_log_path, sizeof(g_log_path) - 1);
    g_log_path[n > 0 && g_log_path[0] == '/' ? n : 0] = 0;
}

static void log_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "stacksnap: %s\n", msg);
}

int ss_cmd_agent(const struct ss_cli *c)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* logs go to stderr: the journal under systemd, or a file SIGHUP reopens */
    remember_log_path();
    struct sigaction hup = {.sa_handler = on_hup, .sa_flags = SA_RESTART};
    sigaction(SIGHUP, &hup, NULL);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, NULL);
    struct ss_err err = {0};
    for (int i = 0; i < c->npids; i++)
        if (ss_proc_check_access(c->pids[i], &err) < 0) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            return err.code == -ESRCH ? 2 : 1;
        }
    char miss[64];
    if (!c->npids && ss_caps_missing(SS_CAPBIT(SS_CAP_SYS_PTRACE), miss, sizeof(miss))[0])
        fprintf(stderr, "stacksnap: warning: missing CAP_SYS_PTRACE: processes of other users "
                        "are sampled without their files and memory (no symbols, no Lua frames)\n");
    struct ss_agent_opts o = {
        .pids = c->pids,
        .npids = (size_t)c->npids,
        .freq_hz = c->freq,
        .stack_size = c->stack_size,
        .compat = c->compat,
        .no_windows = c->no_lua_window,
        .off_cpu = c->off_cpu,
        .listen = c->listen,
        .max_seconds = c->max_seconds,
        .capture_dir = c->capture_dir,
        .capture_max_bytes = c->capture_max_bytes,
        .capture_segment_s = c->capture_segment,
        .push_url = c->push_url,
        .push_every_s = c->push_every,
        .otlp_url = c->otlp_url,
        .otlp_headers = c->otlp_headers,
        .n_otlp_headers = c->n_otlp_headers,
        .otlp_service = getenv("OTEL_SERVICE_NAME"),
        .push_ca = c->push_ca,
        .push_auth_file = c->push_auth_file,
        .web_config = c->web_config,
        .auth_token_file = c->auth_token_file,
        .healthz_open = c->healthz_open,
        .debuginfod_timeout_s = ss_cli_debuginfod_timeout(),
        .log = log_stderr,
    };
    struct ss_agent *a;
    int rc = ss_agent_new(&a, &o, &err);
    if (rc < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return rc == -EINVAL || rc == -EADDRINUSE || rc == -EADDRNOTAVAIL || rc == -ESRCH ||
                       rc == -ENOENT || rc == -ENOTDIR || rc == -EACCES || rc == -EEXIST ||
                       rc == -ENOTSUP
                   ? 2
                   : 1;
    }
    fprintf(stderr, "stacksnap: agent listening on %s\n", ss_agent_address(a));
    rc = ss_agent_run(a, &g_stop, &err);
    if (rc < 0) fprintf(stderr, "stacksnap: %s\n", err.msg);
    ss_agent_free(a);
    fprintf(stderr, "stacksnap: agent stopped\n");
    return rc < 0 ? 1 : 0;
}
