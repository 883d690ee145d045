/* process/process.c: the per-process mapping list (see process.h): building
 * it live or from explicit descriptions, resolving mappings to ELF files,
 * address lookup, refresh on miss and exec detection. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "elf/elf.h"
#include "process/process.h"
#include "util/safeopen.h"

struct ss_proc {
    pid_t pid;
    bool live, gone;
    struct ss_elf_cache *cache;
    struct ss_mapping *maps;
    size_t n;
    size_t last;
    uint64_t gen;
    char comm[16];
    /* live */
    unsigned refresh_min_ms, exec_check_ms;
    uint64_t last_refresh_ns, last_exec_check_ns;
    uint64_t exe_dev, exe_ino;
    uint64_t start_time;      /* /proc/PID/stat field 22: tells a reused pid apart */
    uint64_t frozen_until_ns; /* a forked child's copy of its parent's view: no
                                 re-read before then (its exec may already have
                                 replaced what /proc shows) */
    /* explicit */
    ss_proc_resolve_fn fn;
    void *ctx;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void free_maps(struct ss_mapping *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ss_elf_put(v[i].elf);
        free((char *)v[i].d.path);
    }
    free(v);
}

void ss_proc_free(struct ss_proc *p)
{
    if (!p) return;
    free_maps(p->maps, p->n);
    free(p);
}

/* ---- opening the file behind a live mapping ---- */
static bool is_elf_fd(int fd)
{
    unsigned char mag[4];
    return pread(fd, mag, 4, 0) == 4 && !memcmp(mag, "\177ELF", 4);
}

static int open_in_root(pid_t pid, const struct ss_map_desc *m)
{
    char root[64];
    snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
    int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -errno;
    /* O_PATH: the target may have put a FIFO or a device at the path */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dfd, m->path, &how, sizeof(how));
    int e = errno;
    close(dfd);
    if (fd < 0) return -e;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_ino != m->inode) { /* not the mapped file */
        close(fd);
        return -ESTALE;
    }
    return fd;
}

static int vdso_memfd(pid_t pid, const struct ss_map_desc *m)
{
    size_t len = m->end - m->start;
    if (len > (16u << 20)) return -E2BIG;
    void *buf = malloc(len);
    if (!buf) return -ENOMEM;
    struct iovec l = {buf, len}, r = {(void *)(uintptr_t)m->start, len};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got != (ssize_t)len) {
        free(buf);
        return got < 0 ? -errno : -EIO;
    }
    int fd = memfd_create("ss-vdso", MFD_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return -errno;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, (char *)buf + off, len - off);
        if (w <= 0) {
            free(buf);
            close(fd);
            return -EIO;
        }
        off += w;
    }
    free(buf);
    return fd;
}

/* The mapped file of a live process, opened for reading; or, when the
 * cache has the same file (device, inode, size, mtime) open, *hit and
 * -EEXIST; -ENOEXEC for a file already seen not to be ELF. The O_PATH fd's
 * identity is checked first: a new process maps a few dozen files that are
 * nearly all known already, and each skipped one saves its reopen and
 * magic read. */
static int live_open(struct ss_proc *p, const struct ss_map_desc *m, struct ss_elf **hit)
{
    if (!strcmp(m->path, "[vdso]")) return vdso_memfd(p->pid, m);
    if (m->path[0] != '/') return -ENOENT;
    char mf[96];
    snprintf(mf, sizeof(mf), "/proc/%d/map_files/%llx-%llx", (int)p->pid,
             (unsigned long long)m->start, (unsigned long long)m->end);
    /* O_PATH first: a mapped device (a GPU, /dev/mem) is never opened */
    int fd = open(mf, O_PATH | O_CLOEXEC);
    if (fd < 0) fd = open_in_root(p->pid, m);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        int r = (*hit = ss_elf_cache_lookup_stat(p->cache, &st)) ? -EEXIST
                : ss_elf_cache_is_other(p->cache, &st)           ? -ENOEXEC
                                                                 : 0;
        if (r) {
            close(fd);
            return r;
        }
    }
    return ss_reopen_regular(fd);
}

/* A file that is not ELF: closed, and remembered by its identity. */
static void not_elf(struct ss_proc *p, int fd)
{
    struct stat st;
    if (p->live && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        ss_elf_cache_note_other(p->cache, &st);
    close(fd);
}

/* ---- resolution ---- */
static bool same_file(const struct ss_map_desc *a, const struct ss_map_desc *b)
{
    return a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
           !strcmp(a->path, b->path);
}

/* Does bias b place the mapping's file bytes where a segment wants them? */
static bool bias_fits(const struct ss_elf *e, const struct ss_map_desc *d, int64_t b)
{
    uint64_t v = d->start - (uint64_t)b;
    for (unsigned i = 0; i < e->nload; i++) {
        const struct ss_elf_seg *s = &e->load[i];
        if (v >= (s->vaddr & ~0xfffull) && v < s->vaddr + s->memsz &&
            v - s->vaddr == d->offset - s->offset)
            return true;
    }
    return false;
}

/* prev_bias: the bias of an earlier mapping of the same file (a file page
 * shared by two segments is mapped twice, once per segment: the earlier
 * mapping says which segment this one is), or INT64_MIN. */
static void set_ranges(struct ss_mapping *mp, int64_t prev_bias)
{
    struct ss_elf *e = mp->elf;
    const struct ss_map_desc *d = &mp->d;
    uint64_t len = d->end - d->start;
    if (prev_bias != INT64_MIN && bias_fits(e, d, prev_bias)) {
        mp->bias = prev_bias;
    } else {
        const struct ss_elf_seg *seg = ss_elf_seg_for_offset(e, d->offset, len);
        if (!seg && e->nload) seg = &e->load[0];
        mp->bias = seg ? (int64_t)(d->start - d->offset + seg->offset - seg->vaddr)
                       : (int64_t)(d->start - d->offset);
    }
    if ((d->prot & SS_MAP_W) || d->offset >= e->size) return;
    uint64_t lo = d->start, hi = d->start + (len < e->size - d->offset ? len : e->size - d->offset);
    if (e->relro_memsz) { /* RELRO pages were written before mprotect */
        uint64_t rlo = e->relro_vaddr + mp->bias, rhi = rlo + e->relro_memsz;
        rhi = (rhi + 4095) & ~4095ull;
        if (rlo <= lo && rhi > lo) lo = rhi;
        if (rhi >= hi && rlo < hi) hi = rlo;
        if (rlo > lo && rhi < hi) hi = lo; /* RELRO in the middle: serve nothing */
    }
    if (lo < hi) {
        mp->file_lo = lo;
        mp->file_hi = hi;
        mp->file_base = e->image + d->offset + (lo - d->start);
    }
}

/* Fill maps[i].elf for every mapping; reuse files of old (previous list) and
 * of earlier mappings of the same file. */
static void resolve_all(struct ss_proc *p, struct ss_mapping *v, size_t n,
                        const struct ss_mapping *old, size_t nold)
{
    for (size_t i = 0; i < n; i++) {
        struct ss_mapping *mp = &v[i];
        const char *path = mp->d.path;
        if (!path[0] || (path[0] == '[' && strcmp(path, "[vdso]"))) continue;
        struct ss_elf *e = NULL;
        for (size_t j = 0; j < i && !e; j++) /* earlier mapping, same file */
            if (v[j].elf && same_file(&v[j].d, &mp->d)) e = ss_elf_ref(v[j].elf);
        for (size_t j = 0; j < nold && !e; j++)
            if (old[j].elf && same_file(&old[j].d, &mp->d) &&
                (strcmp(path, "[vdso]") || old[j].d.start == mp->d.start))
                e = ss_elf_ref(old[j].elf);
        if (!e) {
            int fd = p->live ? live_open(p, &mp->d, &e) : p->fn(p->ctx, &mp->d);
            if (fd >= 0 && !is_elf_fd(fd)) {
                not_elf(p, fd);
                fd = -ENOEXEC;
            }
            if (fd >= 0 && ss_elf_open_fd(p->cache, fd, path, &e, NULL) < 0) e = NULL;
        }
        if (!e) continue;
        if (mp->d.build_id_len && (mp->d.build_id_len != e->build_id_len ||
                                   memcmp(mp->d.build_id, e->build_id, e->build_id_len))) {
            ss_elf_put(e); /* a different build than the one recorded */
            continue;
        }
        mp->elf = e;
        if (!mp->d.build_id_len && e->build_id_len) {
            mp->d.build_id_len = e->build_id_len;
            memcpy(mp->d.build_id, e->build_id, e->build_id_len);
        }
        int64_t prev_bias = INT64_MIN;
        for (size_t j = i; j-- > 0;)
            if (v[j].elf == e && same_file(&v[j].d, &mp->d)) {
                prev_bias = v[j].bias;
                break;
            }
        set_ranges(mp, prev_bias);
    }
}

static int desc_cmp(const void *a, const void *b)
{
    const struct ss_mapping *x = a, *y = b;
    return x->d.start < y->d.start ? -1 : x->d.start > y->d.start;
}

static int build(struct ss_proc *p, const struct ss_map_desc *d, size_t n)
{
    struct ss_mapping *v = calloc(n ? n : 1, sizeof(*v));
    if (!v) return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i].end <= d[i].start) continue; /* explicit lists are untrusted */
        v[k].d = d[i];
        v[k].d.path = strdup(d[i].path ? d[i].path : "");
        if (!v[k].d.path) {
            free_maps(v, k);
            return -ENOMEM;
        }
        k++;
    }
    qsort(v, k, sizeof(*v), desc_cmp);
    for (size_t i = 1; i < k; i++) /* overlaps: keep the lower mapping whole */
        if (v[i].d.start < v[i - 1].d.end) {
            uint64_t cut = v[i - 1].d.end - v[i].d.start;
            v[i].d.start += cut < v[i].d.end - v[i].d.start ? cut : v[i].d.end - v[i].d.start;
            v[i].d.offset += cut;
        }
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        if (v[i].d.end > v[i].d.start) {
            v[w++] = v[i];
        } else {
            free((char *)v[i].d.path);
        }
    }
    n = w;
    resolve_all(p, v, n, p->maps, p->n);
    bool changed = n != p->n;
    for (size_t i = 0; !changed && i < n; i++)
        changed = v[i].d.start != p->maps[i].d.start || v[i].d.end != p->maps[i].d.end ||
                  v[i].d.offset != p->maps[i].d.offset || v[i].d.prot != p->maps[i].d.prot ||
                  v[i].elf != p->maps[i].elf || !same_file(&v[i].d, &p->maps[i].d);
    free_maps(p->maps, p->n);
    p->maps = v;
    p->n = n;
    p->last = 0;
    if (changed) p->gen++;
    return 0;
}

static void read_comm(struct ss_proc *p)
{
    char path[64], *buf = NULL;
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)p->pid);
    if (ss_read_proc_file(path, &buf, NULL) == 0) {
        buf[strcspn(buf, "\n")] = 0;
        ss_proc_set_comm(p, buf);
        free(buf);
    }
}

/* Start time of pid in clock ticks since boot, 0 when it is gone. */
static uint64_t start_time(pid_t pid)
{
    char path[64], *buf = NULL;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (ss_read_proc_file(path, &buf, NULL) < 0) return 0;
    uint64_t t = 0;
    char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    for (int field = 2; p && *p && field < 22; p++)
        if (*p == ' ') field++;
    if (p) t = strtoull(p, NULL, 10);
    free(buf);
    return t;
}

bool ss_proc_alive(struct ss_proc *p)
{
    if (!p->live) return true;
    if (p->gone) return false;
    uint64_t t = start_time(p->pid);
    if (!t || t != p->start_time) p->gone = true;
    return !p->gone;
}

static void stat_exe(struct ss_proc *p, uint64_t *dev, uint64_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
    if (stat(path, &st) == 0) {
        *dev = st.st_dev;
        *ino = st.st_ino;
    } else {
        *dev = *ino = 0;
    }
}

int ss_proc_refresh(struct ss_proc *p, struct ss_err *err)
{
    if (!p->live) return 0;
    if (p->gone) return -ESRCH;
    char path[64], *text = NULL;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
    p->last_refresh_ns = now_ns();
    int r = ss_read_proc_file(path, &text, NULL);
    if (r < 0 || !text[0]) {
        free(text);
        if (r == -ENOENT || r == -ESRCH || r == 0) {
            p->gone = true;
            r = -ESRCH;
        }
        ss_err_set(err, r, "pid %d: reading %s: %s", (int)p->pid, path, strerror(-r));
        return r;
    }
    struct ss_map_desc *d = NULL;
    size_t n = 0;
    r = ss_maps_parse(text, &d, &n);
    if (r == 0) r = build(p, d, n);
    free(d);
    free(text);
    if (r < 0) ss_err_set(err, r, "pid %d: mappings: %s", (int)p->pid, strerror(-r));
    return r;
}

int ss_proc_new_live(struct ss_proc **out, pid_t pid, struct ss_elf_cache *cache,
                     const struct ss_proc_opts *o, struct ss_err *err)
{
    struct ss_proc *p = calloc(1, sizeof(*p));
    if (!p) return -ENOMEM;
    p->pid = pid;
    p->live = true;
    p->cache = cache;
    p->refresh_min_ms = o && o->refresh_min_ms ? o->refresh_min_ms : 10;
    p->exec_check_ms = o && o->exec_check_ms ? o->exec_check_ms : 100;
    stat_exe(p, &p->exe_dev, &p->exe_ino);
    p->start_time = start_time(pid);
    int r = ss_proc_refresh(p, err);
    if (r < 0) {
        ss_proc_free(p);
        return r;
    }
    read_comm(p);
    p->last_exec_check_ns = now_ns();
    *out = p;
    return 0;
}

int ss_proc_new(struct ss_proc **out, pid_t pid, const struct ss_map_desc *maps, size_t n,
                ss_proc_resolve_fn fn, void *ctx, struct ss_elf_cache *cache, struct ss_err *err)
{
    struct ss_proc *p = calloc(1, sizeof(*p));
    if (!p) return -ENOMEM;
    p->pid = pid;
    p->cache = cache;
    p->fn = fn;
    p->ctx = ctx;
    int r = fn ? build(p, maps, n) : -EINVAL;
    if (r < 0) {
        ss_err_set(err, r, "pid %d: building the mapping list: %s", (int)pid, strerror(-r));
        ss_proc_free(p);
        return r;
    }
    *out = p;
    return 0;
}

/* A copy of parent's mappings (same files, new references) for child. */
int ss_proc_fork(struct ss_proc **out, const struct ss_proc *parent, pid_t child,
                 unsigned frozen_ms, struct ss_err *err)
{
    struct ss_proc *p = calloc(1, sizeof(*p));
    struct ss_mapping *v = calloc(parent->n ? parent->n : 1, sizeof(*v));
    if (!p || !v) goto nomem;
    *p = *parent;
    p->pid = child;
    p->gone = false;
    p->maps = v;
    p->n = 0;
    p->last = 0;
    for (size_t i = 0; i < parent->n; i++) {
        v[i] = parent->maps[i];
        if (!(v[i].d.path = strdup(parent->maps[i].d.path))) goto nomem;
        if (v[i].elf) ss_elf_ref(v[i].elf);
        p->n++;
    }
    uint64_t t = now_ns();
    p->start_time = start_time(child);
    if (!p->start_time) p->start_time = 1; /* gone already: ss_proc_alive says so */
    p->frozen_until_ns = t + frozen_ms * 1000000ull;
    p->last_refresh_ns = p->last_exec_check_ns = t;
    *out = p;
    return 0;
nomem:
    if (p && p->maps == v) {
        free_maps(v, p->n);
        v = NULL;
    }
    free(v);
    free(p);
    ss_err_set(err, -ENOMEM, "pid %d: out of memory", (int)child);
    return -ENOMEM;
}

void ss_proc_thaw(struct ss_proc *p)
{
    p->frozen_until_ns = 0;
}

static bool frozen(struct ss_proc *p, uint64_t now)
{
    if (!p->frozen_until_ns) return false;
    if (now < p->frozen_until_ns) return true;
    p->frozen_until_ns = 0;
    return false;
}

int ss_proc_check_exec(struct ss_proc *p, uint64_t now)
{
    if (!p->live) return 0;
    if (p->gone) return -ESRCH;
    if (frozen(p, now)) return 0;
    if (now - p->last_exec_check_ns < p->exec_check_ms * 1000000ull) return 0;
    p->last_exec_check_ns = now;
    uint64_t dev, ino;
    stat_exe(p, &dev, &ino);
    if (!dev && !ino) {
        char path[32];
        snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
        if (access(path, F_OK) < 0) {
            p->gone = true;
            return -ESRCH;
        }
        return 0;
    }
    if (dev == p->exe_dev && ino == p->exe_ino) return 0;
    p->exe_dev = dev;
    p->exe_ino = ino;
    int r = ss_proc_refresh(p, NULL);
    read_comm(p);
    return r < 0 ? r : 1;
}

bool ss_proc_in_file(struct ss_proc *p, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find(p, ip);
    return mp && mp->elf;
}

bool ss_proc_anon_code(struct ss_proc *p, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find(p, ip);
    return ip > 4096 && (!mp || (!mp->elf && !mp->d.path[0]));
}

const struct ss_mapping *ss_proc_find_cached(struct ss_proc *p, uint64_t addr)
{
    if (p->last < p->n && addr >= p->maps[p->last].d.start && addr < p->maps[p->last].d.end)
        return &p->maps[p->last];
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->maps[mid].d.end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->n && addr >= p->maps[lo].d.start) {
        p->last = lo;
        return &p->maps[lo];
    }
    return NULL;
}

const struct ss_mapping *ss_proc_find(struct ss_proc *p, uint64_t addr)
{
    const struct ss_mapping *m = ss_proc_find_cached(p, addr);
    /* code found in a mapping that cannot hold code: the view is older than
     * the process's (an anonymous JIT mapping where a file was mapped
     * before), as good as a miss */
    bool stale = m && !(m->d.prot & SS_MAP_X);
    if ((m && !stale) || !p->live || p->gone || addr < 4096 || addr >= SS_USER_VA_END) return m;
    uint64_t t = now_ns();
    if (t - p->last_refresh_ns < p->refresh_min_ms * 1000000ull || frozen(p, t)) return m;
    if (ss_proc_refresh(p, NULL) < 0) return NULL;
    return ss_proc_find_cached(p, addr);
}

const uint8_t *ss_mapping_file_bytes(const struct ss_mapping *mp, uint64_t addr, size_t len)
{
    if (!mp->elf || addr < mp->d.start || addr > mp->d.end || len > mp->d.end - addr) return NULL;
    uint64_t off = addr - mp->d.start + mp->d.offset; /* explicit maps are untrusted */
    if (off < mp->d.offset || off > mp->elf->size || len > mp->elf->size - off) return NULL;
    return mp->elf->image + off;
}

const struct ss_mapping *ss_proc_mappings(const struct ss_proc *p, size_t *n)
{
    *n = p->n;
    return p->maps;
}

uint64_t ss_proc_generation(const struct ss_proc *p)
{
    return p->gen;
}

pid_t ss_proc_pid(const struct ss_proc *p)
{
    return p->pid;
}

bool ss_proc_is_live(const struct ss_proc *p)
{
    return p->live;
}

bool ss_proc_gone(const struct ss_proc *p)
{
    return p->gone;
}

const char *ss_proc_comm(const struct ss_proc *p)
{
    return p->comm;
}

void ss_proc_set_comm(struct ss_proc *p, const char *comm)
{
    snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
}
