/* cli/agent.c: `stacksnap agent` — map the flags to ss_agent_opts, log to
 * stderr (the journal under systemd), run until SIGTERM/SIGINT. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "process/process.h"
#include "stacksnap/agent.h"
#include "util/caps.h"

static volatile sig_atomic_t g_stop; /* cli/ owns process-wide state */

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
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
    /* logs go to stderr, which systemd's journal reopens for us: SIGHUP
     * must not end the agent */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGHUP, &ign, NULL);
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
        .listen = c->listen,
        .max_seconds = c->max_seconds,
        .capture_dir = c->capture_dir,
        .capture_max_bytes = c->capture_max_bytes,
        .capture_segment_s = c->capture_segment,
        .push_url = c->push_url,
        .push_every_s = c->push_every,
        .log = log_stderr,
    };
    struct ss_agent *a;
    int rc = ss_agent_new(&a, &o, &err);
    if (rc < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return rc == -EINVAL || rc == -EADDRINUSE || rc == -EADDRNOTAVAIL || rc == -ESRCH ||
                       rc == -ENOENT || rc == -ENOTDIR || rc == -EACCES || rc == -EEXIST
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
