/* test/native/elf_test.c: elf/, process/ and memory/ on real files and
 * processes: build-ids against readelf, .eh_frame_hdr, symbols against nm
 * (own .symtab, libc's separate debug file by build-id, .gnu_debuglink,
 * MiniDebugInfo made with objcopy + xz), the .debug_frame index, live and
 * explicit process views, /proc/PID/maps parsing, the vdso, refresh on miss, and the layered reader
 * (snapshot, file bytes, RELRO exclusion, batched target reads, record hook). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/native_rules.h"

#define WL_NOPIE SS_BINARY_DIR "/native_workload_nopie"
#define WL_PIE SS_BINARY_DIR "/native_workload_pie"

static char *run(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen %s", cmd);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    pclose(f);
    return buf;
}

static void sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    cr_assert_eq(system(cmd), 0, "command failed: %s", cmd);
}

/* Address of symbol name in file per nm (0 if absent). */
static uint64_t nm_addr(const char *file, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "nm %s 2>/dev/null | awk '$3 == \"%s\" {print $1; exit}'", file,
             name);
    return strtoull(run(cmd), NULL, 16);
}

static const char *libc_path(void)
{
    return "/lib/x86_64-linux-gnu/libc.so.6";
}

static struct ss_elf_cache *cache;

static void setup(void)
{
    cr_assert_eq(ss_elf_cache_new(&cache, NULL), 0);
}
static void teardown(void)
{
    ss_elf_cache_free(cache);
}

TestSuite(elf, .init = setup, .fini = teardown);
TestSuite(process, .init = setup, .fini = teardown);
TestSuite(memory, .init = setup, .fini = teardown);

Test(elf, build_id_and_eh_frame_hdr)
{
    const char *files[] = {libc_path(), WL_PIE, WL_NOPIE};
    for (int i = 0; i < 3; i++) {
        struct ss_elf *e;
        struct ss_err err = {0};
        cr_assert_eq(ss_elf_open_path(cache, files[i], &e, &err), 0, "%s", err.msg);
        char hex[41], cmd[512];
        ss_elf_build_id_hex(e, hex);
        snprintf(cmd, sizeof(cmd), "readelf -n %s | awk '/Build ID/ {print $3}'", files[i]);
        char *want = run(cmd);
        want[strcspn(want, "\n")] = 0;
        cr_assert_str_eq(hex, want, "%s", files[i]);
        size_t size;
        uint64_t vaddr;
        cr_assert(ss_elf_section(e, ".eh_frame_hdr", &size, &vaddr));
        cr_assert_eq(e->eh_hdr_vaddr, vaddr);
        cr_assert(e->eh_hdr_ok);
        cr_assert_eq(e->fde_count, (size - 12) / 8);
        /* same file again: the cached object */
        struct ss_elf *e2;
        cr_assert_eq(ss_elf_open_path(cache, files[i], &e2, &err), 0);
        cr_assert_eq(e, e2);
        ss_elf_put(e2);
        ss_elf_put(e);
    }
    cr_assert_eq(ss_elf_cache_count(cache), 3);
}

Test(elf, own_symtab_matches_nm)
{
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, WL_NOPIE, &e, NULL), 0);
    const char *names[] = {"nw_spin",   "rec",       "run_qsort", "nw_cmp",
                           "sig_inner", "df_middle", "main",      "_start"};
    for (int i = 0; i < 8; i++) {
        uint64_t a = nm_addr(WL_NOPIE, names[i]);
        cr_assert(a, "nm has no %s", names[i]);
        const struct ss_sym *s = ss_elf_symbol(e, a);
        cr_assert(s && !strcmp(s->name, names[i]), "%s at %lx: got %s", names[i], (unsigned long)a,
                  s ? s->name : "(none)");
        s = ss_elf_symbol(e, a + 1);
        cr_assert(s && !strcmp(s->name, names[i]));
    }
    cr_assert_null(ss_elf_symbol(e, 0x1000)); /* before any function */
    ss_elf_put(e);
}

/* Pages of [p, p + len) present in this process's page tables. */
static size_t resident_pages(const void *p, size_t len)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0, "/proc/self/pagemap: %s", strerror(errno));
    uintptr_t lo = (uintptr_t)p & ~4095ul, hi = ((uintptr_t)p + len + 4095) & ~4095ul;
    size_t n = 0;
    for (uintptr_t a = lo; a < hi; a += 4096) {
        uint64_t ent = 0;
        cr_assert_eq(pread(fd, &ent, 8, (off_t)(a / 4096 * 8)), 8);
        n += ent >> 63;
    }
    close(fd);
    return n;
}

/* The symbol table build reads libstdc++'s whole .dynsym and .dynstr and
 * gives their pages back (ss_elf_release_tables); lookups still name, by
 * faulting in the page of the name they return. */
Test(elf, symbol_tables_released_after_build)
{
    const char *lib = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, lib, &e, NULL), 0, "%s (Debian libstdc++6)", lib);
    size_t dsz = 0, ssz = 0;
    const void *dynsym = ss_elf_section(e, ".dynsym", &dsz, NULL);
    const void *dynstr = ss_elf_section(e, ".dynstr", &ssz, NULL);
    cr_assert(dynsym && dynstr && dsz > 64 * 1024 && ssz > 64 * 1024);
    cr_assert_gt(ss_elf_symbol_count(e), 1000);
    size_t rs = resident_pages(dynsym, dsz), rt = resident_pages(dynstr, ssz);
    cr_expect_leq(rs, 2, ".dynsym: %zu of %zu pages still mapped in", rs, dsz / 4096);
    cr_expect_leq(rt, 2, ".dynstr: %zu of %zu pages still mapped in", rt, ssz / 4096);
    uint64_t a = nm_addr("-D --without-symbol-versions /usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                         "_ZSt9terminatev");
    cr_assert(a, "nm -D has no std::terminate");
    const struct ss_sym *sym = ss_elf_symbol(e, a);
    cr_assert(sym && !strcmp(sym->name, "_ZSt9terminatev"), "got %s", sym ? sym->name : "(none)");
    ss_elf_put(e);
}

Test(elf, libc_debug_file_by_build_id)
{
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, libc_path(), &e, NULL), 0);
    char hex[41], path[256];
    ss_elf_build_id_hex(e, hex);
    snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
    cr_assert_eq(access(path, R_OK), 0, "%s missing: install libc6-dbg (scripts/dev)", path);
    cr_assert(ss_elf_debug(e));
    uint64_t a = nm_addr(path, "__libc_start_call_main");
    cr_assert(a);
    const struct ss_sym *s = ss_elf_symbol(e, a + 4);
    cr_assert(s && !strcmp(s->name, "__libc_start_call_main"), "got %s", s ? s->name : "-");
    /* aliases: the global, unversioned name wins, as in perf */
    a = nm_addr(path, "__libc_start_main_impl");
    s = ss_elf_symbol(e, a + 4);
    cr_assert(s && !strcmp(s->name, "__libc_start_main"), "got %s", s ? s->name : "-");
    ss_elf_put(e);
}

Test(elf, debuglink_and_debug_frame)
{
    char dir[] = "/tmp/ss-elf-test-XXXXXX";
    cr_assert(mkdtemp(dir));
    sh("cp %s %s/wl && cd %s && objcopy --only-keep-debug wl wl.debug && strip -s wl && "
       "objcopy --add-gnu-debuglink=wl.debug wl",
       WL_NOPIE, dir, dir);
    char path[512], dbg[512];
    snprintf(path, sizeof(path), "%s/wl", dir);
    snprintf(dbg, sizeof(dbg), "%s/wl.debug", dir);
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, path, &e, NULL), 0);
    cr_assert_null(ss_elf_section(e, ".symtab", NULL, NULL));
    cr_assert_null(ss_elf_section(e, ".debug_frame", NULL, NULL));
    struct ss_elf *d = ss_elf_debug(e);
    cr_assert(d, "debug file not found through .gnu_debuglink");
    cr_assert_str_eq(d->path, dbg);
    uint64_t a = nm_addr(WL_NOPIE, "df_middle");
    const struct ss_sym *s = ss_elf_symbol(e, a + 2);
    cr_assert(s && !strcmp(s->name, "df_middle"));
    /* df_middle's CFI exists only in .debug_frame, now in the debug file */
    const struct ss_dframe *df = ss_elf_debug_frame(e);
    cr_assert(df);
    cr_assert(a >= df->lo && a < df->hi);
    bool found = false;
    for (size_t i = 0; i < df->n; i++)
        found |= (uint64_t)df->index[i].start == a;
    cr_assert(found, "no FDE starts at df_middle");
    for (size_t i = 1; i < df->n; i++)
        cr_assert_leq(df->index[i - 1].start, df->index[i].start);
    /* a wrong CRC is refused */
    sh("cd %s && printf x >> wl.debug", dir);
    struct ss_elf_cache *c2;
    cr_assert_eq(ss_elf_cache_new(&c2, NULL), 0);
    struct ss_elf *e2;
    cr_assert_eq(ss_elf_open_path(c2, path, &e2, NULL), 0);
    cr_assert_null(ss_elf_debug(e2));
    ss_elf_put(e2);
    ss_elf_cache_free(c2);
    ss_elf_put(e);
    sh("rm -rf %s", dir);
}

Test(elf, minidebuginfo)
{
    char dir[] = "/tmp/ss-elf-test-XXXXXX";
    cr_assert(mkdtemp(dir));
    sh("cp %s %s/wl && cd %s && objcopy --only-keep-debug wl mini && strip --strip-debug mini && "
       "xz mini && strip -s wl && objcopy --add-section .gnu_debugdata=mini.xz wl",
       WL_PIE, dir, dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/wl", dir);
    struct ss_elf *e;
    cr_assert_eq(ss_elf_open_path(cache, path, &e, NULL), 0);
    cr_assert_null(ss_elf_section(e, ".symtab", NULL, NULL));
    cr_assert_null(ss_elf_debug(e));
    const char *names[] = {"rec", "nw_spin", "t3_c"};
    for (int i = 0; i < 3; i++) {
        uint64_t a = nm_addr(WL_PIE, names[i]);
        const struct ss_sym *s = ss_elf_symbol(e, a + 1);
        cr_assert(s && !strcmp(s->name, names[i]), "%s: got %s", names[i], s ? s->name : "-");
    }
    ss_elf_put(e);
    sh("rm -rf %s", dir);
}

/* ---- process views ---- */
__attribute__((noinline)) int elf_test_marker(int x)
{
    return x * 3 + 1;
}
static const char rodata_text[] = "stacksnap rodata marker";
static const char *const relro_table[] = {rodata_text, "x"};
static char data_buf[64] = "writable";

static void check_self_view(struct ss_proc *p)
{
    const struct ss_mapping *m = ss_proc_find(p, (uint64_t)(uintptr_t)elf_test_marker);
    cr_assert(m && m->elf);
    cr_assert(m->d.prot & SS_MAP_X);
    const struct ss_sym *s = ss_elf_symbol(m->elf, (uint64_t)(uintptr_t)elf_test_marker - m->bias);
    cr_assert(s && !strcmp(s->name, "elf_test_marker"), "got %s", s ? s->name : "-");
    m = ss_proc_find(p, (uint64_t)(uintptr_t)gnu_get_libc_version); /* not intercepted by ASan */
    cr_assert(m && m->elf && strstr(m->d.path, "libc.so.6"));
    cr_assert_eq(m->d.build_id_len, 20);
}

Test(process, live_self)
{
    struct ss_proc *p;
    struct ss_err err = {0};
    cr_assert_eq(ss_proc_new_live(&p, getpid(), cache, NULL, &err), 0, "%s", err.msg);
    check_self_view(p);
    /* the vdso is read from the process and parsed like a file */
    size_t n;
    const struct ss_mapping *v = ss_proc_mappings(p, &n);
    const struct ss_mapping *vdso = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].d.path, "[vdso]")) vdso = &v[i];
    cr_assert(vdso && vdso->elf && vdso->elf->build_id_len);
    cr_assert(vdso->elf->eh_hdr_ok);
    uint64_t cg = 0;
    for (size_t i = 0; i < 4096 && !cg; i++) { /* find __vdso_clock_gettime by name */
        const struct ss_sym *s = ss_elf_symbol(vdso->elf, i * 16);
        if (s && strstr(s->name, "clock_gettime")) cg = s->addr;
    }
    cr_assert(cg, "no clock_gettime in the vdso's symbols");
    /* a new mapping is found after a refresh on miss */
    uint64_t gen = ss_proc_generation(p);
    int fd = open(SS_BINARY_DIR "/native_workload_nopie", O_RDONLY);
    void *mm = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    close(fd);
    cr_assert(mm != MAP_FAILED);
    usleep(60000); /* past the refresh rate limit */
    const struct ss_mapping *m = ss_proc_find(p, (uint64_t)(uintptr_t)mm + 100);
    cr_assert(m && strstr(m->d.path, "native_workload_nopie"));
    cr_assert_neq(ss_proc_generation(p), gen);
    munmap(mm, 8192);
    ss_proc_free(p);
}

static int open_by_path(void *ctx, const struct ss_map_desc *m)
{
    (*(int *)ctx)++;
    if (!strcmp(m->path, "[vdso]") || m->path[0] != '/') return -ENOENT;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

Test(process, explicit_from_maps)
{
    char *text = NULL;
    cr_assert_eq(ss_read_proc_file("/proc/self/maps", &text, NULL), 0);
    struct ss_map_desc *d;
    size_t n;
    cr_assert_eq(ss_maps_parse(text, &d, &n), 0);
    cr_assert_gt(n, 5);
    struct ss_proc *p;
    int calls = 0;
    cr_assert_eq(ss_proc_new(&p, 1234, d, n, open_by_path, &calls, cache, NULL), 0);
    cr_assert_gt(calls, 0);
    check_self_view(p);
    cr_assert(!ss_proc_is_live(p));
    ss_proc_free(p);
    free(d);
    free(text);
}

/* The maps parser against sscanf of the same lines (the format the parser
 * once used), on the maps of every process of this machine. */
Test(process, maps_parse_every_process)
{
    DIR *d = opendir("/proc");
    cr_assert(d);
    size_t procs = 0, lines = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
        char path[300], *text = NULL, *copy;
        snprintf(path, sizeof(path), "/proc/%s/maps", de->d_name);
        if (ss_read_proc_file(path, &text, NULL) < 0 || !text[0]) {
            free(text);
            continue;
        }
        cr_assert((copy = strdup(text)));
        struct ss_map_desc *v;
        size_t n, k = 0;
        cr_assert_eq(ss_maps_parse(text, &v, &n), 0);
        char *save = NULL;
        for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save), k++) {
            unsigned long long start, end, off, ino;
            unsigned maj, min;
            char perms[8] = {0};
            int pos = 0;
            cr_assert_eq(sscanf(l, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off,
                                &maj, &min, &ino, &pos),
                         7, "%s: %s", path, l);
            cr_assert_lt(k, n, "%s: line %zu not parsed: %s", path, k, l);
            const struct ss_map_desc *m = &v[k];
            cr_assert(m->start == start && m->end == end && m->offset == off &&
                          m->dev_major == maj && m->dev_minor == min && m->inode == ino,
                      "%s: %s", path, l);
            cr_assert_eq(!!(m->prot & SS_MAP_X), perms[2] == 'x', "%s: %s", path, l);
            cr_assert_eq(!!(m->prot & SS_MAP_SHARED), perms[3] == 's', "%s: %s", path, l);
            cr_assert_str_eq(m->path, l + pos, "%s: %s", path, l);
        }
        cr_assert_eq(k, n, "%s", path);
        procs++;
        lines += n;
        free(v);
        free(copy);
        free(text);
    }
    closedir(d);
    cr_log_info("maps of %zu processes, %zu lines", procs, lines);
    cr_assert_gt(procs, 2);
}

/* ---- memory ---- */
struct rec {
    int n;
    uint64_t addr[16];
    int err[16];
};
static void record(void *ctx, uint64_t addr, const void *data, size_t len, int err)
{
    struct rec *r = ctx;
    (void)data, (void)len;
    if (r->n < 16) {
        r->addr[r->n] = addr;
        r->err[r->n] = err;
    }
    r->n++;
}

Test(memory, layers)
{
    struct ss_proc *p;
    cr_assert_eq(ss_proc_new_live(&p, getpid(), cache, NULL, NULL), 0);
    struct ss_target_live tl = {getpid()};
    struct ss_mem m;
    ss_mem_init(&m, p, &ss_target_live, &tl);
    struct rec rc = {0};
    m.record = record;
    m.record_ctx = &rc;

    uint8_t snap[64];
    for (int i = 0; i < 64; i++)
        snap[i] = (uint8_t)i;
    ss_mem_set_snapshot(&m, 0x7000, snap, sizeof(snap), 0);
    const uint8_t *q = ss_mem_peek(&m, 0x7010, 8);
    cr_assert(q == snap + 16);
    cr_assert_null(ss_mem_peek_snap(&m, 0x7000 + 60, 8)); /* crosses the end */

    /* layer 2: read-only file bytes, without a syscall */
    const char *t = ss_mem_peek(&m, (uint64_t)(uintptr_t)rodata_text, sizeof(rodata_text));
    cr_assert(t && t != rodata_text && !strcmp(t, rodata_text));
    cr_assert(ss_mem_peek(&m, (uint64_t)(uintptr_t)elf_test_marker, 16));
    /* not served from the file: RELRO (relocated pointers) and writable data */
    cr_assert_null(ss_mem_peek(&m, (uint64_t)(uintptr_t)&relro_table[0], 8));
    cr_assert_null(ss_mem_peek(&m, (uint64_t)(uintptr_t)data_buf, 8));
    cr_assert_eq(m.n_target_calls, 0);

    /* layer 3: one batch, per-element status, every target read recorded */
    char a[8], b[8], c[16], dd[8];
    uint64_t heap = (uint64_t)(uintptr_t)strdup("heapdata");
    struct ss_iov iov[4] = {
        {.addr = (uint64_t)(uintptr_t)&relro_table[0], .dst = a, .len = 8},
        {.addr = 16, .dst = b, .len = 8},                                /* unmapped */
        {.addr = (uint64_t)(uintptr_t)rodata_text, .dst = c, .len = 16}, /* file layer */
        {.addr = heap, .dst = dd, .len = 8},
    };
    cr_assert_eq(ss_mem_readv(&m, iov, 4), 0);
    cr_assert_eq(iov[0].err, 0);
    cr_assert_eq(memcmp(a, &relro_table[0], 8), 0);
    cr_assert_eq(iov[1].err, -EFAULT);
    cr_assert_eq(iov[2].err, 0);
    cr_assert_eq(memcmp(c, rodata_text, 16), 0);
    cr_assert_eq(iov[3].err, 0);
    cr_assert_eq(memcmp(dd, "heapdata", 8), 0);
    cr_assert_eq(m.n_target_calls, 1);
    cr_assert_eq(m.n_target_reads, 3);
    cr_assert_eq(rc.n, 3);
    cr_assert_eq(rc.err[1], -EFAULT);
    uint64_t v;
    cr_assert_eq(ss_mem_read(&m, heap, &v, 8), 0);
    cr_assert_eq(memcmp(&v, "heapdata", 8), 0);
    cr_assert_eq(ss_mem_read(&m, 8, &v, 8), -EFAULT);
    cr_assert_eq(rc.n, 5);
    free((void *)(uintptr_t)heap);
    ss_mem_free(&m);
    ss_proc_free(p);
}

/* A stack copy with holes (bpf/pages.h): reads that touch a hole page fail
 * (the zeros there are not stack bytes), the fault is the snapshot's end,
 * and the snapshot ends at the end of sp's mapping (the process view's), or
 * at the first hole without a view. */
Test(memory, snapshot_holes)
{
    /* PROT_NONE around it: not merged with a neighbour */
    uint8_t *res = mmap(NULL, 6 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(res, MAP_FAILED);
    uint8_t *map = res + 4096;
    cr_assert_eq(mprotect(map, 4 * 4096, PROT_READ | PROT_WRITE), 0);
    struct ss_proc *p;
    cr_assert_eq(ss_proc_new_live(&p, getpid(), cache, NULL, NULL), 0);
    static uint8_t snap[6 * 4096];
    uint64_t sp = (uint64_t)(uintptr_t)map + 100;
    struct ss_mem m;
    ss_mem_init(&m, p, NULL, NULL);
    ss_mem_set_snapshot(&m, sp, snap, sizeof(snap), 1u << 2); /* page 2 not copied */
    cr_expect_eq(m.snap_len, 4 * 4096 - 100, "clipped at the mapping's end: %zu", m.snap_len);
    cr_expect(ss_mem_peek_snap(&m, sp, 8) == snap);
    cr_expect(ss_mem_peek_snap(&m, sp + 2 * 4096 - 100 - 8, 8) != NULL); /* page 1's last bytes */
    cr_expect_null(ss_mem_peek_snap(&m, sp + 2 * 4096 - 100 - 4, 8));    /* into page 2 */
    cr_expect_null(ss_mem_peek_snap(&m, sp + 2 * 4096 - 100, 8));
    cr_expect_null(ss_mem_peek_snap(&m, sp + 3 * 4096 - 100 - 8, 8));
    cr_expect(ss_mem_peek_snap(&m, sp + 3 * 4096 - 100, 8) != NULL); /* page 3 */
    uint64_t v;
    cr_expect_eq(ss_mem_read(&m, sp + 2 * 4096, &v, 8), -EFAULT); /* no target: no bytes */
    ss_mem_free(&m);
    ss_mem_init(&m, NULL, NULL, NULL); /* no view: the first hole ends it */
    ss_mem_set_snapshot(&m, sp, snap, sizeof(snap), 1u << 2);
    cr_expect_eq(m.snap_len, 2 * 4096 - 100);
    ss_mem_set_snapshot(&m, sp, snap, sizeof(snap), 1u << 0); /* sp's own page */
    cr_expect_eq(m.snap_len, 0);
    cr_expect_null(ss_mem_peek_snap(&m, sp, 8));
    ss_mem_set_snapshot(&m, sp, snap, sizeof(snap), 0); /* none: as copied */
    cr_expect_eq(m.snap_len, sizeof(snap));
    munmap(res, 6 * 4096);
    ss_proc_free(p);
}

/* The per-file rule rows: batches (the rows of one FDE: ascending, not
 * overlapping each other, some overlapping rows already there) give the
 * same table as inserting every row on its own, which keeps the first row
 * that covers an address. Random batches over a small range so that many
 * collide; every address of the range is looked up after each batch. */
Test(native_elf, rule_rows_batch_as_one_at_a_time)
{
    enum { RANGE = 4096 };
    static int ref[RANGE]; /* id of the row covering each address, 0 none */
    struct ss_elf *e = calloc(1, sizeof(*e));
    cr_assert(e);
    memset(ref, 0, sizeof(ref));
    srand(19);
    int id = 0;
    for (int batch = 0; batch < 400; batch++) {
        uint64_t lo[64], hi[64];
        struct ss_nrule r[64];
        size_t n = 1 + (size_t)(rand() % 64);
        uint64_t at = (uint64_t)(rand() % RANGE);
        size_t k = 0;
        for (; k < n && at < RANGE; k++) {
            lo[k] = at;
            hi[k] = at + (uint64_t)(rand() % 8); /* 0: an empty row, skipped */
            if (hi[k] > RANGE) hi[k] = RANGE;
            memset(&r[k], 0, sizeof(r[k]));
            r[k].cfa_off = ++id;
            at = hi[k] + (uint64_t)(rand() % 3);
            bool free_span = hi[k] > lo[k];
            for (uint64_t a = lo[k]; a < hi[k]; a++)
                free_span = free_span && !ref[a];
            for (uint64_t a = lo[k]; free_span && a < hi[k]; a++)
                ref[a] = r[k].cfa_off;
        }
        cr_assert_eq(ss_nrules_add(e, lo, hi, r, k), 0);
        for (uint64_t a = 0; a < RANGE; a++) {
            struct ss_nrule got;
            int has = ss_nrules_lookup(e, a, &got);
            cr_assert_eq(has ? got.cfa_off : 0, ref[a], "batch %d, address %llu", batch,
                         (unsigned long long)a);
        }
    }
    cr_assert_gt(ss_nrules_count(e), 100);
    e->unwind_priv_free(e->unwind_priv);
    free(e);
}
