/* test/reliability/rl.c: see rl.h. */
#include "rl.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double rl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int rl_start(struct rl_proc *p, const char *dir, const char *name, char *const argv[],
             void (*pre_exec)(void *), void *ctx)
{
    snprintf(p->out_path, sizeof(p->out_path), "%s/%s.out", dir, name);
    snprintf(p->err_path, sizeof(p->err_path), "%s/%s.err", dir, name);
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        int o = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || n < 0) _exit(126);
        dup2(n, 0);
        dup2(o, 1);
        dup2(e, 2);
        if (pre_exec) pre_exec(ctx);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
    return 0;
}

int rl_wait(struct rl_proc *p, double timeout_s)
{
    double end = rl_now() + timeout_s;
    int st;
    for (;;) {
        pid_t w = waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) return st;
        if (w < 0 && errno != EINTR) return -1;
        if (rl_now() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            return -1;
        }
        usleep(2000);
    }
}

int rl_run(const char *dir, const char *name, char *const argv[], double timeout_s)
{
    struct rl_proc p;
    if (rl_start(&p, dir, name, argv, NULL, NULL) < 0) return -1;
    int st = rl_wait(&p, timeout_s);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *rl_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

size_t rl_count_lines(const char *t)
{
    size_t n = 0;
    for (const char *p = t; *p; p++)
        if (*p == '\n') n++;
    if (*t && t[strlen(t) - 1] != '\n') n++;
    return n;
}

long rl_status_kib(pid_t pid, const char *field)
{
    char path[64], key[64], *s;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    snprintf(key, sizeof(key), "\n%s:", field);
    if (!(s = rl_slurp(path, NULL))) return -1;
    char *l = strstr(s, key);
    long v = l ? strtol(l + strlen(key), NULL, 10) : -1;
    free(s);
    return v;
}

char rl_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *r = strrchr(buf, ')'); /* comm may contain anything but ends at the last ')' */
    return r && r[1] == ' ' ? r[2] : 0;
}

void rl_tmpdir(char *out, size_t cap, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/ss-rl-%s.XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(out))
        out[0] = 0;
    else
        chmod(out, 0755);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void rl_rmtree(const char *dir)
{
    if (dir && dir[0] && !getenv("RL_KEEP")) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

bool rl_have(const char *prog)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}
