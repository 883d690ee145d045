/* snapfile/snapout.c: write what a live unwinder saw into a capture file. */
#include "snapfile/snapout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf.h"
#include "process/procid.h"
#include "process/process.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "stacksnap/version.h"
#include "util/safeopen.h"

struct pgen {
    uint32_t pid;
    uint64_t serial, generation; /* of the view last written for pid */
    char comm[16];               /* and its name: exec renames a process after its maps
                                    change (the name is re-read at the next exec check) */
    uint32_t pm_version;         /* perf map version last written */
};

struct ss_snapout {
    struct ss_snap_writer *w;
    const char *path;
    int bundle;
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
    void (*on_process)(void *ctx, const struct ss_snap_process *p);
    void *process_ctx;
    struct pgen *known;
    size_t nknown, cap;
    /* mappings gathered for one process record */
    struct ss_snap_mapping *maps;
    size_t nmaps, mcap;
    uint32_t pid;
    int failed;
    struct ss_ksym *ksyms; /* kernel symbols to record before the sample */
    size_t nksyms, ksyms_cap;
    struct ss_elf_cache *elfs; /* to find separate debug files like the symbolizer */
    size_t ljdet_next;         /* the unwinder's LuaJIT detection results recorded so far */
    bool nostack;              /* --no-stack-bytes: stack records only */
};

static void rec_read(void *ctx, uint32_t pid, uint64_t addr, const void *data, size_t len, int err)
{
    (void)pid;
    struct ss_snapout *so = ctx;
    ss_snap_record_read(so->w, addr, data, len, err);
}

int ss_snapout_open(struct ss_snapout **out, const struct ss_snapout_opts *o, struct ss_err *err)
{
    if (o->no_stack_bytes && o->bundle) {
        ss_err_set(err, -EINVAL, "%s: a capture without stack bytes bundles no files", o->path);
        return -EINVAL;
    }
    struct ss_snapout *so = calloc(1, sizeof(*so));
    if (!so) {
        ss_err_set(err, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    if (o->clock) {
        h.start_real_ns = o->clock->start_real_ns;
        h.start_mono_ns = o->clock->start_mono_ns;
        memcpy(h.hostname, o->clock->hostname, sizeof(h.hostname));
        h.pac_mask = o->clock->pac_mask; /* the mask the live walk strips with */
    }
    snprintf(h.tool_version, sizeof(h.tool_version), "%s", SS_VERSION);
    h.stack_size = o->stack_size;
    h.freq_hz = o->freq_hz;
    h.flags = (o->bundle ? SS_SNAP_HDR_BUNDLE : 0) | (o->kernel ? SS_SNAP_HDR_KERNEL : 0) |
              (o->off_cpu ? SS_SNAP_HDR_OFFCPU : 0) | (o->no_stack_bytes ? SS_SNAP_HDR_NOSTACK : 0);
    h.command = o->command ? o->command : "";
    int rc = ss_snap_create(&so->w, o->path, &h, err);
    if (rc < 0) {
        free(so);
        return rc;
    }
    so->path = o->path;
    so->bundle = o->bundle;
    so->nostack = o->no_stack_bytes;
    so->warn = o->warn;
    so->warn_ctx = o->warn_ctx;
    so->on_process = o->on_process;
    so->process_ctx = o->process_ctx;
    *out = so;
    return 0;
}

static void warn(struct ss_snapout *so, const char *what, const char *msg)
{
    if (!so->warn) return;
    char b[1024];
    snprintf(b, sizeof(b), "bundle %s: %s", what, msg);
    so->warn(so->warn_ctx, b);
}

void ss_snapout_hook(struct ss_snapout *so, struct ss_unwinder_opts *uo)
{
    if (so->nostack) return; /* no target memory in the capture */
    uo->record = rec_read;
    uo->record_ctx = so;
}

static void add_map(void *ctx, const struct ss_map_desc *m)
{
    struct ss_snapout *so = ctx;
    if (so->nmaps == so->mcap) {
        size_t cap = so->mcap ? so->mcap * 2 : 64;
        struct ss_snap_mapping *n = realloc(so->maps, cap * sizeof(*n));
        if (!n) {
            so->failed = 1;
            return;
        }
        so->maps = n;
        so->mcap = cap;
    }
    struct ss_snap_mapping *o = &so->maps[so->nmaps++];
    memset(o, 0, sizeof(*o));
    o->start = m->start;
    o->end = m->end;
    o->offset = m->offset;
    o->prot = ((m->prot & SS_MAP_R) ? SS_SNAP_PROT_READ : 0) |
              ((m->prot & SS_MAP_W) ? SS_SNAP_PROT_WRITE : 0) |
              ((m->prot & SS_MAP_X) ? SS_SNAP_PROT_EXEC : 0) |
              ((m->prot & SS_MAP_SHARED) ? SS_SNAP_MAP_SHARED : 0);
    o->dev_major = m->dev_major;
    o->dev_minor = m->dev_minor;
    o->inode = m->inode;
    o->build_id_len = m->build_id_len;
    memcpy(o->build_id, m->build_id, m->build_id_len);
    o->path = m->path;
}

/* The vdso has no file: copy its image out of the target into a memfd. */
static int vdso_image(uint32_t pid, const struct ss_snap_mapping *m)
{
    size_t len = (size_t)(m->end - m->start);
    if (len > (1u << 20)) return -EFBIG;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/mem", pid);
    int mem = open(path, O_RDONLY | O_CLOEXEC);
    if (mem < 0) return -errno;
    uint8_t *buf = malloc(len);
    int fd = -ENOMEM;
    if (buf && pread(mem, buf, len, (off_t)m->start) == (ssize_t)len) {
        fd = memfd_create("vdso", MFD_CLOEXEC);
        if (fd >= 0 && write(fd, buf, len) != (ssize_t)len) {
            close(fd);
            fd = -EIO;
        }
    } else if (buf) {
        fd = -EIO;
    }
    free(buf);
    close(mem);
    return fd;
}

/* Our own vdso: the same image as the target's (the kernel has one), used when
 * the target exited before its first sample was written. */
static int own_vdso_image(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return -errno;
    char line[512];
    struct ss_snap_mapping m = {0};
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "[vdso]") && sscanf(line, "%" SCNx64 "-%" SCNx64, &m.start, &m.end) == 2)
            break;
    fclose(f);
    return m.end > m.start ? vdso_image((uint32_t)getpid(), &m) : -ENOENT;
}

/* The separate debug file the symbolizer reads for this file (elf/'s own
 * lookup: build-id path, then .gnu_debuglink), bundled next to it so that
 * replay elsewhere names the same symbols. */
static void bundle_debug(struct ss_snapout *so, const struct ss_snap_mapping *m,
                         const char *open_path)
{
    if (ss_snap_has_bundle(so->w, m->build_id, m->build_id_len, SS_SNAP_BUNDLE_DEBUG)) return;
    struct ss_err err = {0};
    if (!so->elfs && ss_elf_cache_new(&so->elfs, NULL) < 0) return;
    int fd = ss_open_regular(open_path);       /* target paths: no FIFO, no device */
    if (fd < 0) fd = ss_open_regular(m->path); /* the process exited */
    struct ss_elf *e = NULL;
    if (fd < 0 || ss_elf_open_fd(so->elfs, fd, m->path, &e, &err) < 0) return;
    struct ss_elf *d = ss_elf_debug(e);
    if (d && d->path &&
        ss_snap_write_bundle(so->w, d->path, d->path, SS_SNAP_BUNDLE_DEBUG, m->build_id,
                             m->build_id_len, &err) < 0)
        warn(so, d->path, err.msg);
    ss_elf_put(e);
    ss_elf_cache_gc(so->elfs);
}

int ss_snapout_ljrt(struct ss_snapout *so, uint32_t pid, const struct ss_lj_status *st,
                    struct ss_err *err)
{
    char found[512], lay[512] = "";
    ss_lj_found_text(st->info, found, sizeof(found));
    uint32_t flags = 0;
    if (st->rt) {
        ss_lj_layout_text(st->rt, lay, sizeof(lay));
        flags |= SS_SNAP_LJRT_VM;
        if (ss_lj_runtime_layout(st->rt)) flags |= SS_SNAP_LJRT_LAYOUT;
        if (ss_lj_runtime_layout_derived(st->rt)) flags |= SS_SNAP_LJRT_DERIVED;
        if (ss_lj_runtime_diag(st->rt)[0]) flags |= SS_SNAP_LJRT_OFF;
    }
    struct ss_snap_ljrt x = {.pid = pid,
                             .flags = flags,
                             .bias = st->bias,
                             .path = st->path,
                             .found = found,
                             .layout = lay};
    if (st->build_id_len && st->build_id_len <= sizeof(x.build_id)) {
        x.build_id_len = (uint8_t)st->build_id_len;
        memcpy(x.build_id, st->build_id, st->build_id_len);
    }
    return ss_snap_write_ljrt(so->w, &x, err);
}

int ss_snapout_debugfile(struct ss_snapout *so, const uint8_t *id, size_t len, const char *path,
                         uint64_t time_ns, struct ss_err *err)
{
    struct ss_snap_debugfile d = {.time_ns = time_ns, .path = path};
    if (!len || len > sizeof(d.build_id)) return 0;
    d.build_id_len = (uint8_t)len;
    memcpy(d.build_id, id, len);
    struct ss_err berr = {0};
    if (so->bundle &&
        ss_snap_write_bundle(so->w, path, path, SS_SNAP_BUNDLE_FETCHED, id, len, &berr) < 0)
        warn(so, path, berr.msg);
    return ss_snap_write_debugfile(so->w, &d, err);
}

static bool seen_before(const struct ss_snapout *so, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (so->maps[j].build_id_len == so->maps[i].build_id_len &&
            !memcmp(so->maps[j].build_id, so->maps[i].build_id, so->maps[i].build_id_len))
            return true;
    return false;
}

/* Bundle the file behind every mapping that has a build-id (once each); with
 * all = false only the vdso, which replay cannot find anywhere else. The file
 * is read through /proc/PID/map_files (what the process really maps), or from
 * its path when the process is already gone (the writer checks the build-id). */
static void bundle_files(struct ss_snapout *so, uint32_t pid, bool all)
{
    for (size_t i = 0; i < so->nmaps; i++) {
        const struct ss_snap_mapping *m = &so->maps[i];
        bool vdso = !strcmp(m->path, "[vdso]");
        if (!m->build_id_len || (!vdso && (!all || m->path[0] != '/')) || seen_before(so, i) ||
            ss_snap_has_bundle(so->w, m->build_id, m->build_id_len, SS_SNAP_BUNDLE_MAPPED))
            continue;
        char open_path[96];
        int fd = -1;
        if (vdso) {
            if ((fd = vdso_image(pid, m)) < 0 && (fd = own_vdso_image()) < 0) continue;
            snprintf(open_path, sizeof(open_path), "/proc/self/fd/%d", fd);
        } else {
            snprintf(open_path, sizeof(open_path), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid,
                     m->start, m->end);
        }
        const char *from = open_path;
        struct ss_err err = {0};
        int rc = ss_snap_write_bundle(so->w, from, m->path, SS_SNAP_BUNDLE_MAPPED, m->build_id,
                                      m->build_id_len, &err);
        if (rc < 0 && !vdso && (rc == -ENOENT || rc == -ESRCH)) { /* the process exited */
            from = m->path;
            err = (struct ss_err){0};
            rc = ss_snap_write_bundle(so->w, from, m->path, SS_SNAP_BUNDLE_MAPPED, m->build_id,
                                      m->build_id_len, &err);
        }
        if (rc < 0)
            warn(so, m->path, err.msg);
        else if (!vdso)
            bundle_debug(so, m, from);
        if (fd >= 0) close(fd);
    }
}

static struct pgen *known(struct ss_snapout *so, uint32_t pid)
{
    for (size_t i = 0; i < so->nknown; i++)
        if (so->known[i].pid == pid) return &so->known[i];
    if (so->nknown == so->cap) {
        size_t cap = so->cap ? so->cap * 2 : 16;
        struct pgen *n = realloc(so->known, cap * sizeof(*n));
        if (!n) return NULL;
        so->known = n;
        so->cap = cap;
    }
    struct pgen *g = &so->known[so->nknown++];
    g->pid = pid;
    g->serial = g->generation = UINT64_MAX;
    g->comm[0] = 0;
    return g;
}

static void take_ksym(void *ctx, const struct ss_ksym *k)
{
    struct ss_snapout *so = ctx;
    if (so->nksyms == so->ksyms_cap) {
        size_t cap = so->ksyms_cap ? so->ksyms_cap * 2 : 64;
        struct ss_ksym *nv = realloc(so->ksyms, cap * sizeof(*nv));
        if (!nv) {
            so->failed = 1;
            return;
        }
        so->ksyms = nv;
        so->ksyms_cap = cap;
    }
    so->ksyms[so->nksyms++] = *k;
}

struct ljtake {
    struct ss_snapout *so;
    struct ss_err *err;
    int rc;
};

/* A file's LuaJIT detection result, recorded so replay need not derive it. */
static void take_ljdet(void *ctx, const uint8_t *id, size_t id_len, uint64_t fsize,
                       const struct ss_lj_elfinfo *info)
{
    struct ljtake *t = ctx;
    if (t->rc < 0 || !id_len || id_len > SS_SNAP_BUILD_ID_MAX) return;
    struct ss_snap_ljdet d = {.detver = SS_LJ_DETECT_VERSION,
                              .build_id_len = (uint8_t)id_len,
                              .fsize = fsize,
                              .info = *info};
    memcpy(d.build_id, id, id_len);
    t->rc = ss_snap_write_ljdet(t->so->w, &d, t->err);
}

static void drop_ksym(void *ctx, const struct ss_ksym *k)
{
    (void)ctx, (void)k;
}

int ss_snapout_sample(struct ss_snapout *so, struct ss_unwinder *u, const struct ss_sample *s,
                      struct ss_err *err)
{
    return ss_snapout_walked(so, u, s, NULL, err);
}

int ss_snapout_walked(struct ss_snapout *so, struct ss_unwinder *u, const struct ss_sample *s,
                      const struct ss_stack *st, struct ss_err *err)
{
    if (so->nostack && !st) {
        ss_err_set(err, -EINVAL, "%s: a capture without stack bytes needs the walked stack",
                   so->path);
        return -EINVAL;
    }
    struct ss_unwinder_pdesc pd;
    struct pgen *g = known(so, s->pid);
    if (!g) goto nomem;
    if (ss_unwinder_describe(u, s->pid, &pd, NULL, NULL) == 0 &&
        (pd.serial != g->serial || pd.generation != g->generation ||
         strncmp(pd.comm, g->comm, sizeof(g->comm)))) {
        so->nmaps = 0;
        ss_unwinder_describe(u, s->pid, &pd, add_map, so);
        char exe[4096], cgroup[4096];
        ss_proc_exe(s->pid, exe, sizeof(exe));
        ss_proc_cgroup(s->pid, cgroup, sizeof(cgroup));
        struct ss_snap_process p = {
            .pid = s->pid,
            .reason = g->serial != pd.serial ? SS_SNAP_PROC_NEW : SS_SNAP_PROC_MAPS,
            .time_ns = s->time_ns,
            .comm = pd.comm,
            .exe = exe,
            .nmaps = (uint32_t)so->nmaps,
            .maps = so->maps,
            .cgroup = cgroup,
        };
        /* files first: replay resolves them when the process arrives (not
         * the vdso either in a capture without target memory: its frames
         * are named already) */
        if (!so->nostack) bundle_files(so, s->pid, so->bundle);
        if (so->failed) goto nomem;
        if (ss_snap_write_process(so->w, &p, err) < 0) goto fail;
        if (so->on_process) so->on_process(so->process_ctx, &p);
        g->serial = pd.serial;
        g->generation = pd.generation;
        snprintf(g->comm, sizeof(g->comm), "%s", pd.comm);
        g->pm_version = 0; /* replay's new view has none: write it again */
    }
    if (so->nostack) { /* the frames as named: no perf map, symbols or detection needed */
        ss_unwinder_take_ksyms(u, drop_ksym, NULL);
        if (ss_snap_write_stack(so->w, st, s->flags, err) < 0) goto fail;
        return 0;
    }
    /* the perf map this sample was named with, before the sample */
    uint32_t ver;
    const char *txt;
    size_t len;
    if (ss_unwinder_perfmap(u, s->pid, &ver, &txt, &len) == 0 && ver && ver != g->pm_version) {
        struct ss_snap_perfmap m = {.pid = s->pid, .time_ns = s->time_ns, .len = len, .text = txt};
        if (ss_snap_write_perfmap(so->w, &m, err) < 0) goto fail;
        g->pm_version = ver;
    }
    /* the kernel symbols this sample's frames were first named with */
    so->nksyms = 0;
    ss_unwinder_take_ksyms(u, take_ksym, so);
    if (so->failed) goto nomem;
    struct ss_snap_ksyms ks = {.n = (uint32_t)so->nksyms, .syms = so->ksyms};
    if (ks.n && ss_snap_write_ksyms(so->w, &ks, err) < 0) goto fail;
    /* the LuaJIT detection results computed since the previous sample */
    struct ljtake lt = {.so = so, .err = err};
    so->ljdet_next = ss_unwinder_lj_detections(u, so->ljdet_next, take_ljdet, &lt);
    if (lt.rc < 0) goto fail;
    if (ss_snap_write_sample(so->w, s, NULL, err) < 0) goto fail;
    return 0;
nomem:
    ss_err_set(err, -ENOMEM, "%s: out of memory", so->path);
    return -ENOMEM;
fail:; /* the writer's message, prefixed with the path */
    struct ss_err e = *err;
    ss_err_set(err, e.code ? e.code : -EIO, "%s: %s", so->path, e.msg);
    return err->code;
}

int ss_snapout_proc_event(struct ss_snapout *so, const struct ss_proc_event *ev, struct ss_err *err)
{
    size_t i = 0;
    while (i < so->nknown && so->known[i].pid != ev->pid)
        i++;
    if (i == so->nknown) return 0; /* not in the capture: replay has nothing to drop */
    so->known[i] = so->known[--so->nknown];
    if (ss_snap_write_procevent(so->w, ev, err) < 0) {
        struct ss_err e = *err;
        ss_err_set(err, e.code ? e.code : -EIO, "%s: %s", so->path, e.msg);
        return err->code;
    }
    return 0;
}

void ss_snapout_skip(struct ss_snapout *so)
{
    ss_snap_discard_reads(so->w);
}

int ss_snapout_flush(struct ss_snapout *so, struct ss_err *err)
{
    int rc = ss_snap_flush(so->w, err);
    if (rc < 0) {
        struct ss_err e = *err;
        ss_err_set(err, rc, "%s: %s", so->path, e.msg);
    }
    return rc < 0 ? rc : 0;
}

uint64_t ss_snapout_bytes(const struct ss_snapout *so)
{
    struct ss_snap_stats st;
    ss_snap_writer_stats(so->w, &st);
    return st.file_bytes;
}

int ss_snapout_close(struct ss_snapout *so, struct ss_capture *cap, struct ss_unwinder *u,
                     struct ss_err *err)
{
    struct ss_snap_counter c[SS_SNAP_CAPTURE_COUNTERS + SS_TRUNC_ERROR + 9];
    uint32_t n = 0;
    if (cap) {
        struct ss_capture_stats cs;
        ss_capture_stats(cap, &cs);
        n = ss_snap_capture_counters(&cs, c);
    }
    char names[SS_TRUNC_ERROR + 1][48];
    if (u) {
        struct ss_unwinder_stats us;
        ss_unwinder_stats(u, &us);
        c[n++] = (struct ss_snap_counter){"unwind.errors", us.errors};
        for (int t = 0; t <= SS_TRUNC_ERROR; t++) {
            snprintf(names[t], sizeof(names[t]), "unwind.%s", ss_trunc_str(t));
            c[n++] = (struct ss_snap_counter){names[t], us.trunc[t]};
        }
        c[n++] = (struct ss_snap_counter){"lua.frames_unproven", us.lua_unproven};
        c[n++] = (struct ss_snap_counter){"lua.samples_unproven", us.lua_unproven_samples};
        /* samples by what their walk cut or stepped over (ss_stack_facts) */
        c[n++] = (struct ss_snap_counter){"unwind.truncated", us.truncated};
        c[n++] = (struct ss_snap_counter){"unwind.trace_cut", us.trace_cut};
        c[n++] = (struct ss_snap_counter){"unwind.scan_stale", us.scan_stale};
        c[n++] = (struct ss_snap_counter){"unwind.nocfi", us.nocfi};
        c[n++] = (struct ss_snap_counter){"unwind.nocfi_root", us.nocfi_root};
    }
    int rc = ss_snap_write_counters(so->w, 0, c, n, err);
    int crc = ss_snap_close(so->w, err);
    if (rc >= 0) rc = crc;
    ss_elf_cache_free(so->elfs);
    free(so->known);
    free(so->maps);
    free(so->ksyms);
    free(so);
    return rc;
}
