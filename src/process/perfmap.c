/* process/perfmap.c: perf map files (perf-PID.map) of live processes and
 * as captures record them. The file comes from the target, so it is read as
 * hostile input: opened inside the target's root (RESOLVE_IN_ROOT, no magic
 * links, O_PATH first, regular files only), owned by the target's user or
 * root as perf requires, at most SS_PERFMAP_MAX_BYTES, lines that do not
 * parse are skipped, names cut at 1023 bytes. Regions are kept sorted by
 * start; where they overlap the later line wins (a JIT reusing memory
 * appends the new region). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "process/perfmap.h"
#include "util/safeopen.h"

struct region {
    uint64_t start, end;
    uint32_t line; /* order in the file: the later wins */
    const char *name;
};

struct ss_perfmap {
    char *text; /* the contents; names point into names[] */
    size_t len;
    char *names;
    struct region *v;
    size_t n;
    uint32_t version;
    bool want; /* a lookup missed, or never tried */
    uint64_t last_ns;
    /* live: the target's pid in its namespace (0 = not read yet); the gap
     * between looks while the file does not exist (doubles up to
     * SS_PERFMAP_ABSENT_MAX_NS, 0 = the caller's); size and mtime of the
     * last read (a file that did not change is not read again) */
    long nspid;
    uint64_t absent_gap_ns;
    bool seen;
    int64_t fsize;
    uint64_t fmtime;
};

#define SS_PERFMAP_ABSENT_MAX_NS 640000000ull

struct ss_perfmap *ss_perfmap_new(void)
{
    struct ss_perfmap *m = calloc(1, sizeof(*m));
    if (m) m->want = true;
    return m;
}

void ss_perfmap_free(struct ss_perfmap *m)
{
    if (!m) return;
    free(m->text);
    free(m->names);
    free(m->v);
    free(m);
}

static int by_start(const void *a, const void *b)
{
    const struct region *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Parse text (len bytes) into regions; 0 or -ENOMEM. */
static int parse(struct ss_perfmap *m, const char *text, size_t len)
{
    char *t = malloc(len + 1), *names = malloc(len + 1);
    size_t cap = 0, n = 0, nl = 0;
    struct region *v = NULL;
    if (!t || !names) goto oom;
    memcpy(t, text, len);
    t[len] = 0;
    for (size_t i = 0, ln = 0; i < len; ln++) {
        const char *l = t + i, *e = memchr(l, '\n', len - i);
        size_t ll = e ? (size_t)(e - l) : len - i;
        i += ll + (e ? 1 : 0);
        char *q;
        uint64_t start = strtoull(l, &q, 16);
        if (q == l || *q != ' ') continue;
        const char *s2 = q + 1;
        uint64_t size = strtoull(s2, &q, 16);
        if (q == s2 || *q != ' ' || !size || start + size < start) continue;
        const char *nm = q + 1;
        size_t k = (size_t)(l + ll - nm);
        if (k > 1023) k = 1023;
        if (!k || (nm > l + ll)) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct region *nv = realloc(v, nc * sizeof(*nv));
            if (!nv) goto oom;
            v = nv;
            cap = nc;
        }
        memcpy(names + nl, nm, k);
        for (size_t j = 0; j < k; j++) /* no control bytes in frame names */
            if ((unsigned char)names[nl + j] < 0x20) names[nl + j] = '?';
        names[nl + k] = 0;
        v[n++] = (struct region){start, start + size, (uint32_t)ln, names + nl};
        nl += k + 1;
    }
    if (n) qsort(v, n, sizeof(*v), by_start);
    free(m->text);
    free(m->names);
    free(m->v);
    m->text = t;
    m->len = len;
    m->names = names;
    m->v = v;
    m->n = n;
    m->version++;
    return 0;
oom:
    free(t);
    free(names);
    free(v);
    return -ENOMEM;
}

const char *ss_perfmap_find(struct ss_perfmap *m, uint64_t addr, uint64_t *start)
{
    if (!m) return NULL;
    size_t lo = 0, hi = m->n; /* first region with start > addr */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct region *best = NULL; /* the latest line covering addr */
    for (size_t k = lo; k > 0 && lo - k < 64; k--) {
        const struct region *r = &m->v[k - 1];
        if (addr < r->end && (!best || r->line > best->line)) best = r;
    }
    if (!best) {
        m->want = true;
        return NULL;
    }
    *start = best->start;
    return best->name;
}

/* The pid as the target's pid namespace numbers it (NSpid's last field). */
static long ns_pid(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    long v = pid;
    if (!f) return v;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "NSpid:", 6)) {
            char *s = line + 6, *q;
            for (long x; (x = strtol(s, &q, 10)), q != s; s = q)
                v = x;
            break;
        }
    fclose(f);
    return v;
}

static int open_map(pid_t pid, long *nspid, uid_t *owner)
{
    char root[64], rel[64], proc[32];
    snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
    if (!*nspid) *nspid = ns_pid(pid); /* a process keeps its pid namespace */
    snprintf(rel, sizeof(rel), "tmp/perf-%ld.map", *nspid);
    snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
    struct stat pst;
    if (stat(proc, &pst) < 0) return -errno;
    *owner = pst.st_uid;
    int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -errno;
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
    int e = errno;
    close(dfd);
    return fd < 0 ? -e : ss_reopen_regular(fd);
}

bool ss_perfmap_sync(struct ss_perfmap *m, pid_t pid, uint64_t now_ns, uint64_t min_gap_ns)
{
    uint64_t gap = m && m->absent_gap_ns > min_gap_ns ? m->absent_gap_ns : min_gap_ns;
    if (!m || !m->want || (m->last_ns && now_ns - m->last_ns < gap)) return false;
    m->want = false;
    m->last_ns = now_ns;
    uid_t owner = 0;
    int fd = open_map(pid, &m->nspid, &owner);
    if (fd == -ENOENT) { /* most processes never write one: look less and less often */
        m->absent_gap_ns = 2 * gap < SS_PERFMAP_ABSENT_MAX_NS ? 2 * gap : SS_PERFMAP_ABSENT_MAX_NS;
        return false;
    }
    m->absent_gap_ns = 0;
    if (fd < 0) return false;
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    bool ok = fstat(fd, &st) == 0;
    uint64_t mt =
        ok ? (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec : 0;
    if (ok && m->seen && st.st_size == m->fsize && mt == m->fmtime) { /* unchanged */
        close(fd);
        return false;
    }
    if (ok && (st.st_uid == owner || st.st_uid == 0)) {
        m->seen = true;
        m->fsize = st.st_size;
        m->fmtime = mt;
        size_t cap = st.st_size > 0 && (uint64_t)st.st_size < SS_PERFMAP_MAX_BYTES
                         ? (size_t)st.st_size + 1
                         : SS_PERFMAP_MAX_BYTES;
        buf = malloc(cap);
        for (ssize_t k; buf && len < cap && (k = read(fd, buf + len, cap - len)) > 0;)
            len += (size_t)k;
    }
    close(fd);
    /* up to the last complete line: the JIT may be writing the next one */
    while (len && buf[len - 1] != '\n')
        len--;
    bool changed =
        buf && (len != m->len || (len && memcmp(buf, m->text, len))) && parse(m, buf, len) == 0;
    free(buf);
    return changed;
}

int ss_perfmap_set(struct ss_perfmap *m, const char *text, size_t len)
{
    m->want = false;
    return parse(m, text, len);
}

uint32_t ss_perfmap_version(const struct ss_perfmap *m)
{
    return m ? m->version : 0;
}

const char *ss_perfmap_text(const struct ss_perfmap *m, size_t *len)
{
    *len = m && m->text ? m->len : 0;
    return m ? m->text : NULL;
}
