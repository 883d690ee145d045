/* snapfile/replay.c: drive an offline unwinder from a capture file
 * (include/stacksnap/replay.h). Owns the bundle store and the file resolver:
 * bundle → --symfs → recorded path, each accepted only on a build-id match. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"
#include "process/process.h"
#include "snapfile/replay_reads.h"
#include "snapfile/target.h"
#include "snapfile/writer.h"
#include "stacksnap/replay.h"
#include "unwind/unwinder.h"
#include "util/pac.h"
#include "util/safeopen.h"

struct bundle {
    uint8_t id[SS_SNAP_BUILD_ID_MAX];
    uint8_t id_len;
    int fd; /* memfd with the file's bytes */
};

struct counter {
    char *name;
    uint64_t value;
};

struct ss_replay {
    struct ss_replay_opts o;
    char *symfs;
    struct ss_snap_reader *rd;
    struct ss_unwinder *u;
    ss_replay_debug_fn on_debug; /* debugfile records: the consumer renames */
    ss_replay_proc_fn on_proc;   /* process records: the consumer labels */
    struct ss_lj_detcache *ljc;  /* LuaJIT detection, shared by the runs' unwinders */
    struct ss_elf_cache *files;  /* opened files, shared by the runs' unwinders (files_ok) */
    bool files_ok;               /* the run left files as a fresh one would start: no debug
                                    file added, no bundle (its debug root is per run) */
    struct ss_snap_replay target;
    struct ss_replay_reads reads; /* the target the unwinder reads: target, then history */
    struct bundle *bundles;
    size_t nbundles;
    struct counter *counters;
    size_t ncounters;
    struct ss_map_desc *maps; /* scratch for process records */
    size_t mcap;
    ss_replay_msg_fn msg;
    void *ctx;
    char *dbgroot; /* bundled captures: ROOT/usr/lib/debug/.build-id/ holds the
                      bundled debug files, the unwinder's debug_root */
    char **said;   /* files already named in a message (one message per file) */
    size_t nsaid;
    bool nostack; /* a capture of stacks (--no-stack-bytes): nothing is unwound */
    bool foreign; /* samples of another architecture (ss_unwind_foreign) */
};

int ss_replay_open(struct ss_replay **out, const char *path, const struct ss_replay_opts *o,
                   struct ss_err *err)
{
    struct ss_replay *r = calloc(1, sizeof(*r));
    if (!r) return -ENOMEM;
    if (o) r->o = *o;
    r->reads.target = &r->target;
    int rc = ss_snap_open(&r->rd, path, err);
    if (rc < 0) {
        free(r);
        return rc;
    }
    /* samples hold registers and stack bytes of the recording's architecture:
     * a build of that architecture unwinds them, an x86-64 build also
     * arm64 ones (unwind/foreign.c: native and LuaJIT frames) (stack records,
     * --no-stack-bytes, are unwound already) */
    const struct ss_snap_header *h = ss_snap_get_header(r->rd);
    const char *arch = ss_snap_arch(h);
    r->foreign = h && !(h->flags & SS_SNAP_HDR_NOSTACK) && strcmp(arch, SS_ARCH) != 0;
    if (r->foreign && !ss_unwind_foreign_arch(arch)) {
        ss_err_set(err, -ENOEXEC,
                   "%s: a capture of %s samples: this stacksnap (%s) cannot unwind %s; replay it "
                   "with a stacksnap built for %s",
                   path, arch, SS_ARCH, arch, arch);
        ss_replay_close(r);
        return -ENOEXEC;
    }
    if (r->o.symfs && !(r->symfs = strdup(r->o.symfs))) {
        ss_replay_close(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

const struct ss_snap_header *ss_replay_header(const struct ss_replay *r)
{
    return ss_snap_get_header(r->rd);
}

struct ss_unwinder *ss_replay_unwinder(struct ss_replay *r)
{
    return r->u;
}

static void say(struct ss_replay *r, const char *fmt, const char *a, const char *b)
{
    if (!r->msg) return;
    char line[512];
    snprintf(line, sizeof(line), fmt, a, b);
    r->msg(r->ctx, line);
}

/* 1 when fd holds the recorded file: an ELF file whose build-id is id. With
 * no recorded id, a file that has none: record writes the build-id of every
 * ELF file the live walk could open, so an id-less mapping of a file that has
 * one means the live walk had no file there (e.g. the process exited before
 * it was opened), and replay must not have one either. */
static int id_matches(int fd, const uint8_t *id, uint8_t id_len)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return !id_len;
    void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (img == MAP_FAILED) return 0;
    uint8_t got[SS_SNAP_BUILD_ID_MAX], got_len = 0;
    int found = snap_elf_build_id(img, (size_t)st.st_size, got, &got_len) == 1;
    int ok = id_len ? found && got_len == id_len && !memcmp(got, id, id_len) : !found;
    munmap(img, (size_t)st.st_size);
    return ok;
}

static int try_path(const char *path, const struct ss_map_desc *m)
{
    int fd = ss_open_regular(path); /* the capture names it: no FIFO, no device */
    if (fd < 0) return fd;
    if (id_matches(fd, m->build_id, m->build_id_len)) return fd;
    close(fd);
    return m->build_id_len ? -ESTALE : -ENODATA; /* ENODATA: see id_matches, not worth a word */
}

/* One message per file name: a file is resolved for every mapping of every
 * process record that maps it. */
static void say_once(struct ss_replay *r, const char *fmt, const char *path)
{
    /* a capture of stacks holds its frames: files matter only to the names
     * a debugfile record changes, not worth a word per file */
    if (r->nostack) return;
    for (size_t i = 0; i < r->nsaid; i++)
        if (!strcmp(r->said[i], path)) return;
    char **n = realloc(r->said, (r->nsaid + 1) * sizeof(*n));
    if (n) {
        r->said = n;
        if ((n[r->nsaid] = strdup(path))) r->nsaid++;
    }
    say(r, fmt, path, "");
}

/* ss_proc_resolve_fn: bundle, then --symfs, then the recorded path. */
static int resolve(void *ctx, const struct ss_map_desc *m)
{
    struct ss_replay *r = ctx;
    for (size_t i = 0; m->build_id_len && i < r->nbundles; i++)
        if (r->bundles[i].id_len == m->build_id_len &&
            !memcmp(r->bundles[i].id, m->build_id, m->build_id_len)) {
            int fd = fcntl(r->bundles[i].fd, F_DUPFD_CLOEXEC, 0);
            if (fd >= 0) lseek(fd, 0, SEEK_SET);
            return fd >= 0 ? fd : -errno;
        }
    if (m->path[0] != '/') return -ENOENT;
    int fd = -ENOENT;
    if (r->symfs) {
        char p[4096];
        snprintf(p, sizeof(p), "%s%s", r->symfs, m->path);
        if ((fd = try_path(p, m)) == -ESTALE)
            say_once(r, "%s: build-id differs from the recorded one, not used%s", p);
    }
    if (fd < 0) {
        fd = try_path(m->path, m);
        if (fd == -ESTALE)
            say_once(r, "%s: build-id differs from the recorded one, not used%s", m->path);
        else if (fd < 0 && m->build_id_len) /* an ELF file we cannot find */
            say_once(r,
                     "%s: not found (not bundled, not under --symfs, not at its recorded "
                     "path%s); frames in it cannot be unwound",
                     m->path);
    }
    return fd;
}

static void rewalk(void *ctx)
{
    ss_snap_replay_rewalk(ctx);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* A bundled capture is symbolized with the debug files it carries and no
 * others (those of this machine were not there when it was recorded): they
 * go to a private folder laid out like /usr/lib/debug/.build-id/. */
static int make_dbgroot(struct ss_replay *r)
{
    const char *tmp = getenv("TMPDIR");
    char *d;
    if (asprintf(&d, "%s/stacksnap-replay-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0) return -ENOMEM;
    if (!mkdtemp(d)) {
        int e = -errno;
        free(d);
        return e;
    }
    r->dbgroot = d;
    return 0;
}

static void hex_of(const uint8_t *id, unsigned len, char *hex)
{
    for (unsigned i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

/* Where a bundled debug file goes: ROOT/usr/lib/debug/.build-id/xx/rest.debug
 * (found like the recording machine's), or for a fetched one
 * ROOT/fetched/HEX.debug (installed by its debugfile record). */
static void debug_path(const struct ss_replay *r, uint32_t kind, const uint8_t *id, unsigned len,
                       char *p, size_t cap)
{
    char hex[2 * SS_SNAP_BUILD_ID_MAX + 1];
    hex_of(id, len, hex);
    if (kind == SS_SNAP_BUNDLE_FETCHED)
        snprintf(p, cap, "%s/fetched/%s.debug", r->dbgroot, hex);
    else
        snprintf(p, cap, "%s/usr/lib/debug/.build-id/%.2s/%s.debug", r->dbgroot, hex, hex + 2);
}

static int write_debug_file(struct ss_replay *r, const struct ss_snap_bundle *b,
                            const uint8_t *data, size_t len)
{
    if (!r->dbgroot || !b->build_id_len) return 0;
    char hex[2 * SS_SNAP_BUILD_ID_MAX + 1], p[4096];
    hex_of(b->build_id, b->build_id_len, hex);
    const char *dirs[] = {"/usr", "/usr/lib", "/usr/lib/debug", "/usr/lib/debug/.build-id"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s%s", r->dbgroot, dirs[i]);
        mkdir(p, 0700);
    }
    snprintf(p, sizeof(p), "%s/usr/lib/debug/.build-id/%.2s", r->dbgroot, hex);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/fetched", r->dbgroot);
    mkdir(p, 0700);
    debug_path(r, b->kind, b->build_id, b->build_id_len, p, sizeof(p));
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -errno;
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w <= 0)
            rc = w < 0 ? -errno : -EIO;
        else
            off += (size_t)w;
    }
    close(fd);
    return rc;
}

/* A debug file arrived live here: install it (bundled copy for a bundled
 * capture, else the recorded path) and let the consumer rename. */
static int add_debugfile(struct ss_replay *r, const struct ss_snap_debugfile *d, void *ctx)
{
    char p[4096];
    const char *path = d->path;
    if (r->dbgroot) {
        debug_path(r, SS_SNAP_BUNDLE_FETCHED, d->build_id, d->build_id_len, p, sizeof(p));
        if (access(p, R_OK) == 0) path = p; /* else it could not be bundled */
    }
    struct ss_err e = {0};
    r->files_ok = false; /* symbol tables changed: the next run starts afresh */
    if (ss_unwinder_add_debug(r->u, d->build_id, d->build_id_len, path, &e) < 0) {
        say(r, "%.400s%s", e.msg, " (its frames stay unnamed)");
        return 0;
    }
    return r->on_debug ? r->on_debug(ctx, r->u, d->build_id, d->build_id_len) : 0;
}

static int add_bundle(struct ss_replay *r, const struct ss_snap_bundle *b)
{
    if (b->kind > SS_SNAP_BUNDLE_FETCHED) return 0;
    size_t len;
    uint8_t *data = ss_snap_take_bundle(r->rd, &len);
    if (!data) return -ENOMEM;
    if (b->kind != SS_SNAP_BUNDLE_MAPPED) {
        int rc = write_debug_file(r, b, data, len);
        free(data);
        return rc;
    }
    int fd = memfd_create("stacksnap-bundle", MFD_CLOEXEC);
    int rc = fd < 0 ? -errno : 0;
    for (size_t off = 0; rc == 0 && off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w <= 0)
            rc = -errno;
        else
            off += (size_t)w;
    }
    free(data);
    struct bundle *nb = rc ? NULL : realloc(r->bundles, (r->nbundles + 1) * sizeof(*nb));
    if (!nb) {
        if (fd >= 0) close(fd);
        return rc ? rc : -ENOMEM;
    }
    r->bundles = nb;
    struct bundle *e = &nb[r->nbundles++];
    memcpy(e->id, b->build_id, b->build_id_len);
    e->id_len = b->build_id_len;
    e->fd = fd;
    return 0;
}

static int add_process(struct ss_replay *r, const struct ss_snap_process *p, struct ss_err *err)
{
    if (p->nmaps > r->mcap) {
        struct ss_map_desc *n = realloc(r->maps, p->nmaps * sizeof(*n));
        if (!n) return -ENOMEM;
        r->maps = n;
        r->mcap = p->nmaps;
    }
    for (uint32_t i = 0; i < p->nmaps; i++) {
        const struct ss_snap_mapping *s = &p->maps[i];
        struct ss_map_desc *d = &r->maps[i];
        memset(d, 0, sizeof(*d));
        d->start = s->start;
        d->end = s->end;
        d->offset = s->offset;
        d->inode = s->inode;
        d->dev_major = s->dev_major;
        d->dev_minor = s->dev_minor;
        d->prot = ((s->prot & SS_SNAP_PROT_READ) ? SS_MAP_R : 0) |
                  ((s->prot & SS_SNAP_PROT_WRITE) ? SS_MAP_W : 0) |
                  ((s->prot & SS_SNAP_PROT_EXEC) ? SS_MAP_X : 0) |
                  ((s->prot & SS_SNAP_MAP_SHARED) ? SS_MAP_SHARED : 0);
        d->path = s->path;
        d->build_id_len = s->build_id_len <= sizeof(d->build_id) ? s->build_id_len : 0;
        memcpy(d->build_id, s->build_id, d->build_id_len);
    }
    return ss_unwinder_add_process(r->u, p->pid, p->comm, r->maps, p->nmaps, resolve, r, err);
}

static void set_counters(struct ss_replay *r, const struct ss_snap_counters *k)
{
    for (uint32_t i = 0; i < k->n; i++) {
        size_t j = 0;
        while (j < r->ncounters && strcmp(r->counters[j].name, k->items[i].name))
            j++;
        if (j == r->ncounters) {
            struct counter *n = realloc(r->counters, (j + 1) * sizeof(*n));
            if (!n || !(n[j].name = strdup(k->items[i].name))) {
                if (n) r->counters = n;
                return;
            }
            r->counters = n;
            r->ncounters++;
        }
        r->counters[j].value = k->items[i].value;
    }
}

void ss_replay_set_proc_fn(struct ss_replay *r, ss_replay_proc_fn fn)
{
    r->on_proc = fn;
}

void ss_replay_set_debug_fn(struct ss_replay *r, ss_replay_debug_fn fn)
{
    r->on_debug = fn;
}

uint64_t ss_replay_counter(const struct ss_replay *r, const char *name)
{
    for (size_t j = 0; j < r->ncounters; j++)
        if (!strcmp(r->counters[j].name, name)) return r->counters[j].value;
    return 0;
}

static void reset(struct ss_replay *r)
{
    ss_replay_reads_free(&r->reads);
    ss_unwinder_free(r->u);
    r->u = NULL;
    if (!r->files_ok) {
        ss_elf_cache_free(r->files);
        r->files = NULL;
    }
    for (size_t i = 0; i < r->nbundles; i++)
        close(r->bundles[i].fd);
    free(r->bundles);
    r->bundles = NULL;
    r->nbundles = 0;
    for (size_t j = 0; j < r->ncounters; j++)
        free(r->counters[j].name);
    free(r->counters);
    r->counters = NULL;
    r->ncounters = 0;
    if (r->dbgroot) nftw(r->dbgroot, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    free(r->dbgroot);
    r->dbgroot = NULL;
    for (size_t i = 0; i < r->nsaid; i++)
        free(r->said[i]);
    free(r->said);
    r->said = NULL;
    r->nsaid = 0;
}

int ss_replay_run(struct ss_replay *r, ss_replay_stack_fn fn, ss_replay_msg_fn msg, void *ctx,
                  struct ss_err *err)
{
    if (r->u) { /* a second run starts from a clean unwinder */
        reset(r);
        int rc = ss_snap_rewind(r->rd, err);
        if (rc < 0) return rc;
    }
    r->msg = msg;
    r->ctx = ctx;
    struct ss_unwinder_opts uo = {.offline = true,
                                  .max_frames = r->o.max_frames,
                                  .native_mode = r->o.native_mode,
                                  .memo = !r->o.no_memo,
                                  .check_rules = r->o.check_rules};
    /* a file's LuaJIT verdict is the same for every run: computed once (the
     * files are identified by build-id, or device/inode/size/mtime) */
    if (!r->ljc && ss_lj_detcache_new(&r->ljc) < 0) {
        ss_err_set(err, -ENOMEM, "replay: out of memory");
        return -ENOMEM;
    }
    uo.lj_cache = r->ljc;
    /* aarch64: strip the return addresses as the recording did */
    const struct ss_snap_header *h = ss_snap_get_header(r->rd);
    uo.pac_mask = h ? h->pac_mask : 0;
    if (!uo.pac_mask && h && !strcmp(ss_snap_arch(h), "aarch64"))
        uo.pac_mask = SS_PAC_DEFAULT; /* the capture does not say (util/pac.h) */
    if (r->o.pac_set) uo.pac_mask = r->o.pac_mask;
    /* debug files: the bundled ones for a bundled capture, else this machine's
     * /usr/lib/debug (as for the mapped files, replay of an unbundled capture
     * is meant for the machine that recorded it) */
    int rc = 0;
    r->nostack = h && (h->flags & SS_SNAP_HDR_NOSTACK);
    if (h && (h->flags & SS_SNAP_HDR_BUNDLE) && (rc = make_dbgroot(r)) < 0)
        ss_err_set(err, rc, "replay: cannot create a folder for bundled debug files in %s: %s",
                   getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", strerror(-rc));
    uo.debug_root = r->dbgroot;
    /* the files a run opened serve the next one (same files by build-id, or
     * device/inode/size/mtime, as within a run): symbol tables, FDE indexes
     * and rule rows are built once. Not for a bundled capture (its debug
     * root is made per run) or after a debug file changed names. */
    if (rc == 0 && !r->files && !r->dbgroot && (rc = ss_elf_cache_new(&r->files, NULL)) < 0)
        ss_err_set(err, rc, "replay: %s", strerror(-rc));
    r->files_ok = r->files != NULL;
    if (rc == 0) rc = ss_unwinder_new_files(&r->u, &uo, r->files, err);
    struct ss_snap_record rec;
    char line[512];
    while (rc == 0 && (rc = ss_snap_next(r->rd, &rec, err)) == 1) {
        rc = 0;
        struct ss_err perr = {0};
        switch (rec.type) {
        case SS_SNAP_PROCESS:
            if (add_process(r, &rec.process, &perr) < 0)
                say(r, "%s%s", perr.msg[0] ? perr.msg : "process record: out of memory", "");
            if (r->on_proc && r->on_proc(ctx, &rec.process)) rc = 1;
            break;
        case SS_SNAP_BUNDLE:
            if (add_bundle(r, &rec.bundle) < 0)
                say(r, "bundle %s: cannot keep it in memory%s", rec.bundle.path, "");
            break;
        case SS_SNAP_COUNTERS:
            set_counters(r, &rec.counters);
            break;
        case SS_SNAP_DEBUGFILE:
            rc = add_debugfile(r, &rec.debugfile, ctx);
            break;
        case SS_SNAP_KSYMS:
            for (uint32_t i = 0; i < rec.ksyms.n; i++)
                if (ss_unwinder_add_ksym(r->u, &rec.ksyms.syms[i]) < 0) {
                    say(r, "kernel symbols: %s%s", "out of memory", "");
                    break;
                }
            break;
        case SS_SNAP_LJDET: /* live's result: not derived again (else it is, the same) */
            if (rec.ljdet.detver == SS_LJ_DETECT_VERSION)
                ss_lj_detcache_put(r->ljc, rec.ljdet.build_id, rec.ljdet.build_id_len,
                                   rec.ljdet.fsize, &rec.ljdet.info);
            break;
        case SS_SNAP_PROCEVENT: /* as live: an exec or an exit drops the view */
            ss_unwinder_proc_event(r->u, &rec.procevent);
            break;
        case SS_SNAP_PERFMAP:
            if (ss_unwinder_set_perfmap(r->u, rec.perfmap.pid, rec.perfmap.text,
                                        (size_t)rec.perfmap.len) == -ENOMEM)
                say(r, "perf map of a process: %s%s", "out of memory", "");
            break;
        case SS_SNAP_SAMPLE: {
            struct ss_stack st;
            ss_snap_replay_set(&r->target, &rec.sample);
            r->reads.pid = rec.sample.s.pid;
            ss_unwinder_set_target(r->u, rec.sample.s.pid, &ss_replay_reads_target, &r->reads);
            if (!r->foreign) ss_unwinder_intake(r->u, &rec.sample.s); /* foreign: its own */
            int urc = r->foreign ? ss_unwind_foreign(r->u, &rec.sample.s, rec.sample.fregs,
                                                     rec.sample.nregs, &st)
                      : r->target.mark
                          ? ss_unwind_twice(r->u, &rec.sample.s, &st, rewalk, &r->target)
                          : ss_unwind(r->u, &rec.sample.s, &st);
            if (urc == 0 && fn) rc = fn(ctx, &st);
            ss_replay_reads_add(&r->reads, rec.sample.s.pid, &rec.sample);
            break;
        }
        case SS_SNAP_STACK: /* --no-stack-bytes: the stack as live walked it */
            if (fn) rc = fn(ctx, &rec.stack.st);
            break;
        case SS_SNAP_CORRUPT:
        case SS_SNAP_TRUNCATED:
            say(r, "%s%s", ss_snap_event_str(r->rd, &rec, line, sizeof(line)), "");
            break;
        default:
            break;
        }
    }
    return rc;
}

void ss_replay_stats(const struct ss_replay *r, struct ss_snap_stats *st)
{
    ss_snap_reader_stats(r->rd, st);
}

void ss_replay_close(struct ss_replay *r)
{
    if (!r) return;
    reset(r);
    ss_elf_cache_free(r->files);
    ss_lj_detcache_free(r->ljc);
    ss_snap_close_reader(r->rd);
    free(r->maps);
    free(r->symfs);
    free(r);
}
