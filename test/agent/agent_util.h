/* test/agent/agent_util.h: helpers of the agent tests — start `stacksnap
 * agent` and find its port, HTTP through the real curl, Prometheus text
 * lookups, and a Pyroscope ingest receiver on libmicrohttpd that checks
 * each request as Pyroscope's API documentation describes it. */
#ifndef SS_TEST_AGENT_UTIL_H
#define SS_TEST_AGENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A running agent: pid, port (TCP) and its stderr file. */
struct ag_proc {
    pid_t pid;
    int port;
    char *errpath;
    char *log; /* its stderr, once stopped */
};
/* Start `stacksnap agent --listen 127.0.0.1:0 ARGS...` (NULL-terminated);
 * 0 once it says where it listens, -1 (agent killed) otherwise. */
int ag_start(struct ag_proc *p, const char *tag, const char *const *args);
/* SIGTERM, wait, keep its stderr in p->log and remove its folder; returns
 * the exit status (-1 if it had to be killed). */
int ag_stop(struct ag_proc *p, double timeout_s);
void ag_proc_free(struct ag_proc *p);

/* cli_native spinning (its chain main > cli_outer > ... > cli_leaf); the
 * test fails when it does not start. ag_kill: SIGKILL and reap. */
pid_t ag_spin_native(void);
void ag_kill(pid_t pid);

/* GET (or method) http://127.0.0.1:port PATH with curl; body to a malloc'd
 * string (NULL allowed). Returns the HTTP status, 0 when curl failed. */
int ag_http(int port, const char *method, const char *path, char **body, double timeout_s);
/* Value of a sample line "NAME VALUE" in Prometheus text; -1 if absent. */
double ag_metric(const char *text, const char *name);
/* Run a shell command, output (stdout+stderr) malloc'd into *out; exit status. */
int ag_sh(char **out, double timeout_s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Pyroscope ingest receiver on 127.0.0.1:port. */
struct ag_recv;
struct ag_recv *ag_recv_start(int port, const char *dir);
/* The same over TLS (PEM text of cert and key; NULL: plain HTTP), every
 * request refused with 401 unless its Authorization is want_auth (NULL:
 * not checked). */
struct ag_recv *ag_recv_start_tls(int port, const char *dir, const char *cert_pem,
                                  const char *key_pem, const char *want_auth);
/* Requests refused for their Authorization. */
int ag_recv_unauthorized(struct ag_recv *r);
/* Profiles accepted so far; the last accepted name; the first rejection. */
int ag_recv_count(struct ag_recv *r);
void ag_recv_last(struct ag_recv *r, char *name, size_t len, char *path, size_t plen);
const char *ag_recv_error(struct ag_recv *r);
void ag_recv_stop(struct ag_recv *r);
/* The churn: a shell loop starting short processes (luajit LJ,
 * sh, ls, true) for secs seconds; its pid. */
pid_t ag_churn(const char *lj, int secs);
/* The same loop with each command (and the loop shell) run through a
 * symlink in dir named AG_CHURN_PREFIX + luajit, sh, ls, true, loop: their
 * samples carry those command names (the kernel's comm is the exec'd
 * name), told apart from every other process on the machine. */
#define AG_CHURN_PREFIX "churn-"
pid_t ag_churn_named(const char *lj, int secs, const char *dir);
/* A TCP port nothing listens on right now. */
int ag_free_port(void);

#endif
