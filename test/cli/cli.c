/* test/cli/cli.c: see cli.h. */
#include "cli.h"
#include "profile.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <zlib.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int decode(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int cli_wait(pid_t pid, double timeout_s)
{
    double end = cli_now() + timeout_s;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return decode(st);
        if (w < 0 && errno != EINTR) return -1;
        if (cli_now() > end) break;
        cli_sleep(0.005);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static int tmpfile_fd(void)
{
    char p[] = "/tmp/ss-cli-out-XXXXXX";
    int fd = mkstemp(p);
    if (fd >= 0) unlink(p);
    return fd;
}

static char *slurp_fd(int fd, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return NULL;
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) return NULL;
    ssize_t n = pread(fd, b, (size_t)st.st_size, 0);
    n = n < 0 ? 0 : n;
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

int cli_run(struct cli_res *r, double timeout_s, char *const argv[])
{
    memset(r, 0, sizeof(*r));
    int o = tmpfile_fd(), e = tmpfile_fd();
    if (o < 0 || e < 0) return -errno;
    double t0 = cli_now();
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    r->status = cli_wait(pid, timeout_s);
    r->secs = cli_now() - t0;
    r->out = slurp_fd(o, &r->out_len);
    r->err = slurp_fd(e, &r->err_len);
    close(o);
    close(e);
    return r->out && r->err ? 0 : -ENOMEM;
}

void cli_res_free(struct cli_res *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

pid_t cli_start(char *const argv[], int *out_fd, const char *err_path)
{
    int p[2] = {-1, -1};
    if (out_fd && pipe2(p, O_CLOEXEC) < 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        int in = open("/dev/null", O_RDWR);
        dup2(in, 0);
        dup2(out_fd ? p[1] : in, 1);
        if (err_path) {
            int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (e >= 0) dup2(e, 2);
        }
        setpgid(0, 0); /* signals to the test's group do not reach it */
        /* ... but it dies with the test (a test killed at its timeout left
         * an ASan agent running for the rest of the suite) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    return pid;
}

int cli_wait_line(int fd, double timeout_s, char *line, size_t len)
{
    double end = cli_now() + timeout_s;
    size_t n = 0;
    while (n + 1 < len) {
        double left = end - cli_now();
        if (left <= 0) return -1;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0) continue;
        char c;
        if (read(fd, &c, 1) != 1) return -1;
        if (c == '\n') break;
        line[n++] = c;
    }
    line[n] = 0;
    return 0;
}

char *cli_tmpdir(const char *tag)
{
    char *d;
    if (asprintf(&d, "/tmp/ss-cli-%s-XXXXXX", tag) < 0) return NULL;
    if (!mkdtemp(d)) {
        free(d);
        return NULL;
    }
    return d;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

void cli_rmtree(const char *dir)
{
    if (dir) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *cli_path(const char *dir, const char *name)
{
    char *p;
    return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

char *cli_load(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t l = 0;
    char *b = slurp_fd(fd, &l);
    close(fd);
    if (len) *len = l;
    return b;
}

int cli_store(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    int rc = write(fd, buf, len) == (ssize_t)len ? 0 : -EIO;
    close(fd);
    return rc;
}

static void le_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Append record (type, flags, payload) at o, framed as docs/capture-format.md
 * says; returns the new end. */
static size_t put_rec(uint8_t *o, size_t at, uint16_t type, uint16_t flags, const uint8_t *pl,
                      uint32_t len)
{
    uint8_t *h = o + at;
    memcpy(h, "\x9eSR\n", 4);
    le_put(h + 4, type, 2);
    le_put(h + 6, flags, 2);
    le_put(h + 8, len, 4);
    le_put(h + 12, (uint32_t)crc32(0, pl, len), 4);
    le_put(h + 16, (uint32_t)crc32(0, h, 16), 4);
    memmove(h + 20, pl, len);
    return at + 20 + len;
}

int cli_snap_set_arch(const char *in, const char *arch, uint32_t nregs, const char *out)
{
    size_t n, alen = strlen(arch);
    uint8_t *b = (uint8_t *)cli_load(in, &n), *o = b ? malloc(n + alen + 64) : NULL;
    int rc = -EINVAL;
    if (!o || n < 36 || memcmp(b, "\x89SSNAP\r\n", 8)) goto out;
    memcpy(o, b, 16);
    size_t at = 16;
    for (size_t off = 16; off + 20 <= n;) {
        const uint8_t *h = b + off, *pl = h + 20;
        uint16_t type = (uint16_t)le_get(h + 4, 2), flags = (uint16_t)le_get(h + 6, 2);
        uint32_t len = (uint32_t)le_get(h + 8, 4);
        if (memcmp(h, "\x9eSR\n", 4) || len > n - off - 20) goto out;
        off += 20 + (size_t)len;
        if (type == 1 && flags == 0 && len >= 7) { /* u32 flags, str arch, u32 nregs, ... */
            size_t old = le_get(pl + 4, 2), rest = 4 + 2 + old + 1;
            if (rest + 4 > len) goto out;
            uint8_t *np = malloc(len + alen + 8);
            if (!np) goto out;
            memcpy(np, pl, 4);
            le_put(np + 4, alen, 2);
            memcpy(np + 6, arch, alen + 1);
            memcpy(np + 6 + alen + 1, pl + rest, len - rest);
            if (nregs) le_put(np + 6 + alen + 1, nregs, 4);
            at = put_rec(o, at, type, flags, np, (uint32_t)(len - rest + 6 + alen + 1));
            free(np);
        } else if (type == 7 && flags == 0 && len >= 56) { /* trailer: its own offset at 48 */
            uint8_t *np = malloc(len);
            if (!np) goto out;
            memcpy(np, pl, len);
            le_put(np + 48, at, 8);
            at = put_rec(o, at, type, flags, np, len);
            free(np);
        } else {
            at = put_rec(o, at, type, flags, pl, len);
        }
    }
    rc = cli_store(out, o, at);
out:
    free(b);
    free(o);
    return rc;
}

int cli_copy(const char *from, const char *to, mode_t mode)
{
    size_t len;
    char *b = cli_load(from, &len);
    if (!b) return -errno;
    unlink(to);
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    int rc = fd < 0 ? -errno : (write(fd, b, len) == (ssize_t)len ? 0 : -EIO);
    if (fd >= 0) close(fd);
    free(b);
    return rc;
}

static const char *line_at(const char *s, size_t off, size_t *len)
{
    while (off && s[off - 1] != '\n')
        off--;
    const char *e = strchr(s + off, '\n');
    *len = e ? (size_t)(e - (s + off)) : strlen(s + off);
    return s + off;
}

char *cli_diff(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = cli_load(a, &la), *y = cli_load(b, &lb), *msg = NULL;
    if (!x || !y) {
        if (asprintf(&msg, "cannot read %s", !x ? a : b) < 0) msg = NULL;
    } else if (la != lb || memcmp(x, y, la)) {
        size_t i = 0;
        while (i < la && i < lb && x[i] == y[i])
            i++;
        size_t nx, ny;
        const char *px = line_at(x, i, &nx), *py = line_at(y, i, &ny);
        if (asprintf(&msg, "%s (%zu bytes) and %s (%zu bytes) differ at byte %zu:\n  %.*s\n  %.*s",
                     a, la, b, lb, i, (int)(nx > 300 ? 300 : nx), px, (int)(ny > 300 ? 300 : ny),
                     py) < 0)
            msg = NULL;
    }
    free(x);
    free(y);
    return msg;
}

const char *cli_ss(void)
{
    return SS_BINARY_DIR "/stacksnap";
}

char *cli_built(const char *name)
{
    return cli_path(SS_BINARY_DIR, name);
}

char *cli_src(const char *rel)
{
    return cli_path(SS_SOURCE_DIR, rel);
}

char *cli_which(const char *prog)
{
    const char *path = getenv("PATH");
    char *dup = strdup(path ? path : "/usr/bin:/bin"), *save = NULL, *found = NULL;
    for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *p = cli_path(d, prog);
        if (p && access(p, X_OK) == 0) found = realpath(p, NULL);
        free(p);
    }
    free(dup);
    return found;
}

long long cli_folded_check(const char *text, char *why, size_t whylen)
{
    long long total = 0;
    int lineno = 0;
    for (const char *s = text; *s;) {
        const char *e = strchr(s, '\n');
        lineno++;
        if (!e) {
            snprintf(why, whylen, "line %d has no newline", lineno);
            return -1;
        }
        const char *sp = e;
        while (sp > s && sp[-1] != ' ')
            sp--;
        char *end;
        long long n = sp > s + 1 ? strtoll(sp, &end, 10) : 0;
        if (sp <= s + 1 || end != e || n < 1) {
            snprintf(why, whylen, "line %d is not 'STACK COUNT': %.*s", lineno,
                     (int)(e - s > 200 ? 200 : e - s), s);
            return -1;
        }
        total += n;
        s = e + 1;
    }
    return total;
}

int cli_count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *s = text; s && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (memmem(s, len, needle, strlen(needle))) n++;
        s = e ? e + 1 : s + len;
    }
    return n;
}

long long cli_leaf_count(const char *text, const char *leaf)
{
    long long n = 0;
    size_t k = strlen(leaf);
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n'), *sp = NULL;
        for (const char *q = l; q < (e ? e : l + strlen(l)); q++)
            if (*q == ' ') sp = q;
        const char *semi = NULL;
        for (const char *q = l; sp && q < sp; q++)
            if (*q == ';') semi = q;
        if (sp && semi && (size_t)(sp - semi - 1) == k && !strncmp(semi + 1, leaf, k))
            n += atoll(sp + 1);
        if (!e) break;
        l = e + 1;
    }
    return n;
}

struct Perftools__Profiles__Profile *cli_load_pprof(const char *path)
{
    gzFile g = gzopen(path, "rb");
    if (!g) return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    int k = 0;
    while (buf && (k = gzread(g, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)k;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    gzclose(g);
    if (!buf || k < 0) {
        free(buf);
        return NULL;
    }
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, n, buf);
    free(buf);
    return p;
}

int cli_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || getsockname(fd, (void *)&a, &l)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

bool cli_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

pid_t cli_first_child(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    int c = 0;
    if (!f) return 0;
    if (fscanf(f, "%d", &c) != 1) c = 0;
    fclose(f);
    return (pid_t)c;
}
