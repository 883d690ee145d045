/* test/luajit/ljtest.c: see ljtest.h. */
#include "ljtest.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t ljt_spawn(char *const argv[], const char *ldp)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* dies with the test (a failed assertion ends the test's process
         * before it can kill its children; unshare --kill-child then takes
         * a container's process with it) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (ldp) setenv("LD_LIBRARY_PATH", ldp, 1);
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

const char *ljt_cache(const char *sub, char *buf, size_t cap)
{
    const char *c = getenv("SS_CACHE");
    snprintf(buf, cap, "%s/%s", c && c[0] ? c : "/var/cache/stacksnap", sub);
    return buf;
}

void ljt_trixie_root(char *buf, size_t cap)
{
    char cmd[1024], cache[400];
    ljt_cache("", cache, sizeof(cache));
    snprintf(cmd, sizeof(cmd), "SS_CACHE=%s %s/test/roots/mkroot.sh trixie %s >/dev/null", cache,
             SS_SOURCE_DIR, LJT_TRIXIE_PKGS);
    cr_assert_eq(system(cmd), 0, "could not make the Debian 13 root (%s)", cmd);
    ljt_cache("roots/trixie", buf, cap);
    cr_assert_eq(access(buf, F_OK), 0, "%s missing", buf);
}

/* The first child of pid (from /proc/PID/task/PID/children), or 0. */
static pid_t first_child(pid_t pid)
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

pid_t ljt_spawn_root(const char *root, const char *bind, char *const argv[], pid_t *outer)
{
    /* unshare forks pid 1 of the new pid namespace, which bind-mounts the
     * test folder at /mnt (private mount namespace: the host sees
     * nothing), chroots and execs argv; --kill-child ends it with unshare */
    static const char sh[] = "mount --bind \"$1\" \"$2/mnt\" && r=$2 && shift 2 && "
                             "exec chroot \"$r\" \"$@\"";
    char *av[64];
    unsigned n = 0;
    av[n++] = "/usr/bin/unshare";
    av[n++] = "--mount";
    av[n++] = "--pid";
    av[n++] = "--fork";
    av[n++] = "--kill-child";
    av[n++] = "--";
    av[n++] = "/bin/sh";
    av[n++] = "-c";
    av[n++] = (char *)sh;
    av[n++] = "sh";
    av[n++] = (char *)bind;
    av[n++] = (char *)root;
    for (unsigned i = 0; argv[i] && n < 63; i++)
        av[n++] = argv[i];
    av[n] = NULL;
    *outer = ljt_spawn(av, NULL);
    if (*outer <= 0) return -1;
    /* wait until the namespace's first process runs argv[0] inside root */
    for (int i = 0; i < 400; i++) {
        pid_t c = first_child(*outer);
        char lnk[128], tgt[600];
        if (c > 0) {
            snprintf(lnk, sizeof(lnk), "/proc/%d/root", (int)c);
            ssize_t k = readlink(lnk, tgt, sizeof(tgt) - 1);
            if (k > 0) {
                tgt[k] = 0;
                if (strcmp(tgt, "/")) return c;
            }
        }
        usleep(5000);
    }
    ljt_kill(*outer);
    return -1;
}

void ljt_kill(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static uint64_t first_load_vaddr(const char *path)
{
    uint64_t v = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t n = 0;
    if (e && !elf_getphdrnum(e, &n)) {
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
                v = (ph.p_vaddr - ph.p_offset) & ~0xfffull;
                break;
            }
        }
    }
    if (e) elf_end(e);
    close(fd);
    return v;
}

int ljt_find_module(pid_t pid, const char *needle, char *path, size_t cap, uint64_t *bias)
{
    char fn[64], line[1024];
    snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(fn, "r");
    if (!f) return -errno;
    int rc = -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi, off;
        char perm[8];
        int pos = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perm, &off, &pos) < 4) continue;
        char *p = line + pos;
        while (*p == ' ')
            p++;
        p[strcspn(p, "\n")] = 0;
        if (*p != '/' || !strstr(p, needle) || off != 0) continue;
        /* maps shows paths relative to the reader's root; where that path
         * is not there, under the process's root as seen from here */
        char rl[64], root[512];
        snprintf(rl, sizeof(rl), "/proc/%d/root", (int)pid);
        ssize_t k = readlink(rl, root, sizeof(root) - 1);
        root[k > 0 ? k : 0] = 0;
        if (!access(p, R_OK) || !strcmp(root, "/"))
            snprintf(path, cap, "%s", p);
        else
            snprintf(path, cap, "%s%s", root, p);
        *bias = lo - first_load_vaddr(path);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

int ljt_runtime(pid_t pid, const char *needle, struct ss_lj_runtime **rt,
                struct ss_lj_elfinfo *info)
{
    char path[512];
    uint64_t bias;
    struct ss_err err = {0};
    int rc = ljt_find_module(pid, needle, path, sizeof(path), &bias);
    if (rc) return rc;
    if ((rc = ss_lj_detect_file(path, info, &err))) return rc;
    return ss_lj_runtime_new(rt, info, bias, (uint32_t)pid, &err);
}

/* ---- perf_event_open sampler ---- */

#define NPAGES 64
/* perf x86-64 register mask: AX..SS and R8..R15 (DS/ES/FS/GS are invalid) */
#define REGMASK ((((1ull << 24) - 1) & ~(0xfull << 12)))

struct ljt_perf {
    int fd;
    void *map;
    size_t mlen, psz;
    uint8_t *tmp;
    size_t tmplen;
};

int ljt_perf_open(struct ljt_perf **out, pid_t pid, unsigned freq, unsigned stack_bytes)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = freq;
    a.sample_type =
        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a.sample_regs_user = REGMASK;
    a.sample_stack_user = stack_bytes;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.wakeup_events = 1;
    a.inherit = 0;
    int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return -errno;
    struct ljt_perf *p = calloc(1, sizeof(*p));
    p->fd = fd;
    p->psz = (size_t)sysconf(_SC_PAGESIZE);
    p->mlen = p->psz * (1 + NPAGES);
    p->map = mmap(NULL, p->mlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p->map == MAP_FAILED) {
        int rc = -errno;
        close(fd);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static void copy_ring(struct ljt_perf *p, uint64_t off, void *dst, size_t len)
{
    size_t dsz = p->psz * NPAGES;
    const uint8_t *data = (const uint8_t *)p->map + p->psz;
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)dst)[i] = data[(off + i) % dsz];
}

int ljt_perf_drain(struct ljt_perf *p, void (*fn)(void *ctx, const struct ljt_sample *s), void *ctx)
{
    struct perf_event_mmap_page *mp = p->map;
    uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = mp->data_tail;
    int n = 0;
    while (tail < head) {
        struct perf_event_header h;
        copy_ring(p, tail, &h, sizeof(h));
        if (h.size < sizeof(h)) break;
        if (p->tmplen < h.size) {
            p->tmp = realloc(p->tmp, h.size);
            p->tmplen = h.size;
        }
        copy_ring(p, tail, p->tmp, h.size);
        if (h.type == PERF_RECORD_SAMPLE) {
            const uint8_t *q = p->tmp + sizeof(h);
            struct ljt_sample s;
            memset(&s, 0, sizeof(s));
            uint64_t ip, abi;
            memcpy(&ip, q, 8), q += 8;
            memcpy(&s.pid, q, 4), memcpy(&s.tid, q + 4, 4), q += 8;
            memcpy(&abi, q, 8), q += 8;
            if (abi) {
                for (unsigned r = 0; r < 24; r++) {
                    if (!(REGMASK & (1ull << r))) continue;
                    memcpy(&s.regs[r], q, 8);
                    q += 8;
                }
                uint64_t size;
                memcpy(&size, q, 8), q += 8;
                const uint8_t *data = q;
                q += size;
                uint64_t dyn = 0;
                if (size) memcpy(&dyn, q, 8);
                s.stack = data;
                s.stack_len = (uint32_t)(dyn < size ? dyn : size);
                s.regs[SS_REG_IP] = ip;
                fn(ctx, &s);
                n++;
            }
        }
        tail += h.size;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    return n;
}

void ljt_perf_close(struct ljt_perf *p)
{
    if (!p) return;
    munmap(p->map, p->mlen);
    close(p->fd);
    free(p->tmp);
    free(p);
}

void ljt_folded(const struct ss_lj_out *out, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t k = out->n; k-- > 0;) {
        const struct ss_lj_item *it = &out->items[k];
        char one[300];
        if (it->native >= 0)
            snprintf(one, sizeof(one), "[native]");
        else
            snprintf(one, sizeof(one), "%s (%s:%u)", it->lua.name ? it->lua.name : "?",
                     it->lua.module ? it->lua.module : "?", it->lua.line);
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", len ? ";" : "", one);
        if (len >= cap) break;
    }
}

int ljt_perf_fd(const struct ljt_perf *p)
{
    return p->fd;
}
