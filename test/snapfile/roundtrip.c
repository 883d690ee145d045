/* test/snapfile/roundtrip.c: every record type written with real inputs
 * (this process's maps, stack, memory, ELF files) reads back field for field;
 * reads attach to their sample; bundles are byte-identical to the file,
 * carry the build-id readelf reports, and are deduplicated; the replay
 * target serves recorded reads; unknown records/fields are skipped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "snapfile/target.h"

/* Build-id of an ELF file as printed by readelf -n (the oracle). */
static size_t readelf_build_id(const char *path, uint8_t *id)
{
    char cmd[512], line[512];
    snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "Build ID: ");
        if (!p) continue;
        p += 10;
        unsigned v;
        while (n < SS_SNAP_BUILD_ID_MAX && sscanf(p, "%2x", &v) == 1 && p[0] != '\n') {
            id[n++] = (uint8_t)v;
            p += 2;
        }
        break;
    }
    pclose(f);
    return n;
}

/* The file as a bundle must hold it: non-loadable .debug_* sections other
 * than .debug_frame zeroed, per readelf -SW (the oracle). Returns how many
 * bytes were zeroed. */
static size_t expect_stripped(const char *path, uint8_t *file, size_t len)
{
    char cmd[512], line[512];
    snprintf(cmd, sizeof(cmd), "readelf -SW '%s'", path);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    size_t zeroed = 0;
    while (fgets(line, sizeof(line), f)) {
        char name[64], type[32], flags[16] = "";
        unsigned long off, size;
        char *b = strchr(line, ']');
        if (!b ||
            sscanf(b + 1, "%63s %31s %*s %lx %lx %*s %15s", name, type, &off, &size, flags) < 4)
            continue;
        if (strncmp(name, ".debug_", 7) || !strcmp(name, ".debug_frame") || strchr(flags, 'A') ||
            !strcmp(type, "NOBITS"))
            continue;
        cr_assert(off + size <= len);
        memset(file + off, 0, size);
        zeroed += size;
    }
    pclose(f);
    return zeroed;
}

static const char *libc_path(const struct th_maps *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (strstr(m->m[i].path, "/libc.so")) return m->m[i].path;
    cr_assert_fail("libc not mapped");
    return NULL;
}

Test(snapfile, every_record_type_round_trips)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "cap.snap");
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    cr_assert(k > 0);
    exe[k] = 0;
    struct ss_err err = {0};

    struct ss_snap_header h;
    ss_snap_header_init(&h);
    h.flags = SS_SNAP_HDR_BUNDLE;
    h.stack_size = 16384;
    h.freq_hz = 997;
    strcpy(h.tool_version, "0.1-test");
    h.command = "stacksnap record -F 997 --bundle -- ./workload";
    cr_assert_str_eq(h.arch, "x86_64");
    cr_assert_eq(h.pac_mask, 0, "x86-64 has no pointer authentication");
    h.pac_mask = 0x007f000000000000ull; /* an arm64 kernel's with 48-bit VA: kept as is */

    struct th_maps maps;
    th_self_maps(&maps);
    struct ss_snap_process p = {.pid = (uint32_t)getpid(),
                                .ppid = (uint32_t)getppid(),
                                .reason = SS_SNAP_PROC_EXEC,
                                .time_ns = 42,
                                .comm = "roundtrip",
                                .exe = exe,
                                .nmaps = maps.n,
                                .maps = maps.m};
    struct ss_sample s1, s2;
    th_self_sample(&s1, 16384);
    th_self_sample(&s2, 0); /* no stack bytes (copy failed): stored uncompressed */
    free((void *)s2.stack);
    s2.stack = NULL;
    s2.flags |= SS_SAMPLE_KERNEL;

    struct ss_snap_writer *w;
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    cr_assert(ss_snap_write_process(w, &p, &err) == 0, "%s", err.msg);
    /* reads made while "unwinding" s1 are written after it */
    uint8_t want[4][64];
    struct ss_snap_read reads_in[4];
    {
        memcpy(want[0], th_text, sizeof(th_text));
        reads_in[0] =
            (struct ss_snap_read){(uint64_t)(uintptr_t)th_text, sizeof(th_text), 0, want[0]};
        memcpy(want[1], (const void *)&th_record_self_reads, 64);
        reads_in[1] =
            (struct ss_snap_read){(uint64_t)(uintptr_t)&th_record_self_reads, 64, 0, want[1]};
        memcpy(want[2], w, 48);
        reads_in[2] = (struct ss_snap_read){(uint64_t)(uintptr_t)w, 48, 0, want[2]};
        reads_in[3] = (struct ss_snap_read){8, 16, -EFAULT, NULL};
    }
    cr_assert_eq(th_record_self_reads(w), 4);
    uint64_t seq = 99;
    cr_assert(ss_snap_write_sample(w, &s1, &seq, &err) == 0, "%s", err.msg);
    cr_assert_eq(seq, 0);
    cr_assert(ss_snap_write_sample(w, &s2, &seq, &err) == 0, "%s", err.msg);
    cr_assert_eq(seq, 1);
    /* a discarded sample's reads never reach the file */
    ss_snap_record_read(w, 0x1000, "xx", 2, 0);
    ss_snap_discard_reads(w);

    struct ss_capture_stats cs = {.seen = 1000,
                                  .emitted = 990,
                                  .dropped = 10,
                                  .copy_failed = 3,
                                  .copy_partial = 7,
                                  .skipped = 1};
    struct ss_snap_counter ctr[8];
    uint32_t nctr = ss_snap_capture_counters(&cs, ctr);
    cr_assert_eq(nctr, 6);
    ctr[nctr++] = (struct ss_snap_counter){"unwind.repeated frame", 5};

    cr_assert(ss_snap_write_counters(w, 777, ctr, nctr, &err) == 0, "%s", err.msg);

    /* bundles: the test binary and libc, build-ids from readelf */
    uint8_t id_exe[32], id_libc[32];
    size_t n_exe = readelf_build_id(exe, id_exe),
           n_libc = readelf_build_id(libc_path(&maps), id_libc);
    cr_assert(n_exe >= 16 && n_libc >= 16, "readelf found no build-id");
    cr_assert_eq(
        ss_snap_write_bundle(w, exe, "/opt/app/test-binary", SS_SNAP_BUNDLE_MAPPED, NULL, 0, &err),
        1, "%s", err.msg);
    cr_assert(ss_snap_has_bundle(w, id_exe, n_exe, SS_SNAP_BUNDLE_MAPPED));
    cr_assert_eq(ss_snap_write_bundle(w, exe, NULL, SS_SNAP_BUNDLE_MAPPED, NULL, 0, &err), 0,
                 "duplicate not detected");
    cr_assert_eq(ss_snap_write_bundle(w, libc_path(&maps), NULL, SS_SNAP_BUNDLE_MAPPED, id_libc,
                                      n_libc, &err),
                 1, "%s", err.msg);
    cr_assert_eq(ss_snap_write_bundle(w, libc_path(&maps), NULL, SS_SNAP_BUNDLE_MAPPED, id_libc,
                                      n_libc, &err),
                 0);
    struct ss_err e2 = {0};
    cr_assert_eq(ss_snap_write_bundle(w, exe, NULL, SS_SNAP_BUNDLE_DEBUG, id_libc, n_libc, &e2),
                 -ESTALE, "build-id mismatch not detected");
    cr_assert(strstr(e2.msg, exe));
    struct ss_snap_debugfile df = {.time_ns = 77,
                                   .build_id_len = (uint8_t)n_libc,
                                   .path = "/root/.cache/debuginfod_client/x/debuginfo"};
    memcpy(df.build_id, id_libc, n_libc);
    cr_assert_eq(ss_snap_write_debugfile(w, &df, &err), 0, "%s", err.msg);
    struct ss_proc_event pev = {
        .kind = SS_PROC_EXEC, .pid = 4242, .tid = 4243, .cpu = 1, .time_ns = 0x123456789abcull};
    cr_assert_eq(ss_snap_write_procevent(w, &pev, &err), 0, "%s", err.msg);

    struct ss_snap_stats wst;
    ss_snap_writer_stats(w, &wst);
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);

    struct stat st;
    cr_assert(stat(path, &st) == 0);
    cr_assert_eq(st.st_mode & 07777, 0600);

    struct ss_snap_reader *r;
    cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
    const struct ss_snap_header *rh = ss_snap_get_header(r);
    cr_assert(rh);
    cr_assert_eq(rh->version, SS_SNAP_VERSION_SAMPLES);
    cr_assert_str_eq(rh->command, h.command);
    struct ss_snap_record rec;
    int seen[SS_SNAP_NTYPES] = {0}, nbundle = 0;
    uint64_t last_off = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        cr_assert(rec.type < SS_SNAP_NTYPES, "event %s at %llu", ss_snap_type_str(rec.type),
                  (unsigned long long)rec.offset);
        cr_assert(rec.offset > last_off);
        last_off = rec.offset;
        seen[rec.type]++;
        switch (rec.type) {
        case SS_SNAP_HEADER:
            cr_assert_eq(rec.offset, 16);
            cr_assert_eq(rec.header.flags, h.flags);
            cr_assert_str_eq(rec.header.arch, "x86_64");
            cr_assert_eq(rec.header.nregs, SS_NREGS);
            cr_assert_eq(rec.header.stack_size, 16384);
            cr_assert_eq(rec.header.freq_hz, 997);
            cr_assert_eq(rec.header.start_real_ns, h.start_real_ns);
            cr_assert_eq(rec.header.start_mono_ns, h.start_mono_ns);
            cr_assert_str_eq(rec.header.hostname, h.hostname);
            cr_assert_str_eq(rec.header.kernel_release, h.kernel_release);
            cr_assert_str_eq(rec.header.tool_version, "0.1-test");
            cr_assert_str_eq(rec.header.command, h.command);
            cr_assert_eq(rec.header.pac_mask, h.pac_mask);
            break;
        case SS_SNAP_PROCESS:
            cr_assert_eq(rec.process.pid, p.pid);
            cr_assert_eq(rec.process.ppid, p.ppid);
            cr_assert_eq(rec.process.reason, SS_SNAP_PROC_EXEC);
            cr_assert_eq(rec.process.time_ns, 42);
            cr_assert_str_eq(rec.process.comm, "roundtrip");
            cr_assert_str_eq(rec.process.exe, exe);
            cr_assert_eq(rec.process.nmaps, maps.n);
            cr_assert(rec.compressed, "a full maps list should compress");
            for (uint32_t i = 0; i < maps.n; i++) {
                const struct ss_snap_mapping *a = &rec.process.maps[i], *b = &maps.m[i];
                cr_assert_eq(a->start, b->start);
                cr_assert_eq(a->end, b->end);
                cr_assert_eq(a->offset, b->offset);
                cr_assert_eq(a->prot, b->prot);
                cr_assert_eq(a->dev_major, b->dev_major);
                cr_assert_eq(a->dev_minor, b->dev_minor);
                cr_assert_eq(a->inode, b->inode);
                cr_assert_eq(a->build_id_len, b->build_id_len);
                cr_assert_arr_eq(a->build_id, b->build_id, b->build_id_len);
                cr_assert_str_eq(a->path, b->path);
            }
            break;
        case SS_SNAP_SAMPLE: {
            const struct ss_snap_sample *x = &rec.sample;
            const struct ss_sample *o = x->seq == 0 ? &s1 : &s2;
            cr_assert(x->seq <= 1);
            cr_assert_eq(x->s.pid, o->pid);
            cr_assert_eq(x->s.tid, o->tid);
            cr_assert_eq(x->s.cpu, o->cpu);
            cr_assert_eq(x->s.flags, o->flags);
            cr_assert_eq(x->s.time_ns, o->time_ns);
            cr_assert_arr_eq(x->s.regs, o->regs, sizeof(o->regs));
            cr_assert_eq(x->s.stack_req, o->stack_req);
            cr_assert_eq(x->s.stack_len, o->stack_len);
            if (o->stack_len) cr_assert_arr_eq(x->s.stack, o->stack, o->stack_len);
            if (x->seq == 0) {
                /* key samples are stored as is: inflating stack bytes
                 * cost more than the rest of their replay */
                cr_assert(!rec.compressed, "a key sample is stored as is");
                /* (the copy of our own stack may end early: its top) */
                cr_assert(rec.size > o->stack_len && rec.size < 20 + o->stack_len + 400,
                          "%zu for %u stack bytes", (size_t)rec.size, o->stack_len);
                cr_assert(x->has_reads);
                cr_assert_eq(x->nreads, 4);
                for (int i = 0; i < 4; i++) {
                    cr_assert_eq(x->reads[i].addr, reads_in[i].addr);
                    cr_assert_eq(x->reads[i].len, reads_in[i].len);
                    cr_assert_eq(x->reads[i].err, reads_in[i].err);
                    if (!reads_in[i].err)
                        cr_assert_arr_eq(x->reads[i].data, reads_in[i].data, reads_in[i].len);
                    else
                        cr_assert_null(x->reads[i].data);
                }
                /* the replay target serves exactly these reads */
                struct ss_snap_replay rp = {0};
                ss_snap_replay_set(&rp, x);
                uint8_t b0[64], b1[64], b3[16], b4[8];
                struct ss_iov iov[4] = {
                    {reads_in[0].addr, b0, reads_in[0].len, 1, false, false},
                    {reads_in[1].addr + 8, b1, 16, 1, false, false}, /* inside read 1 */
                    {8, b3, 16, 1, false, false},
                    {0x1234, b4, 8, 1, false, false}}; /* never read live */
                cr_assert_eq(ss_snap_target_replay.readv(&rp, iov, 4), 0);
                cr_assert_eq(iov[0].err, 0);
                cr_assert_arr_eq(b0, want[0], reads_in[0].len);
                cr_assert_eq(iov[1].err, 0);
                cr_assert_arr_eq(b1, want[1] + 8, 16);
                cr_assert_eq(iov[2].err, -EFAULT);
                cr_assert_eq(iov[3].err, -EFAULT);
                cr_assert_eq(rp.hits, 3);
                cr_assert_eq(rp.misses, 1);
            } else {
                cr_assert(!rec.compressed);
                cr_assert(!x->has_reads);
                cr_assert_eq(x->nreads, 0);
            }
            break;
        }
        case SS_SNAP_MEMREADS:
            cr_assert_fail("reads were not attached to their sample");
            break;
        case SS_SNAP_COUNTERS:
            cr_assert(!rec.compressed);
            cr_assert_eq(rec.counters.time_ns, 777);
            cr_assert_eq(rec.counters.n, nctr);
            for (uint32_t i = 0; i < nctr; i++) {
                cr_assert_str_eq(rec.counters.items[i].name, ctr[i].name);
                cr_assert_eq(rec.counters.items[i].value, ctr[i].value);
            }
            cr_assert_str_eq(rec.counters.items[2].name, "capture.dropped");
            cr_assert_eq(rec.counters.items[2].value, 10);
            break;
        case SS_SNAP_PROCEVENT:
            cr_assert_eq(rec.procevent.kind, SS_PROC_EXEC);
            cr_assert_eq(rec.procevent.pid, 4242);
            cr_assert_eq(rec.procevent.tid, 4243);
            cr_assert_eq(rec.procevent.ppid, 0);
            cr_assert_eq(rec.procevent.cpu, 1);
            cr_assert_eq(rec.procevent.time_ns, 0x123456789abcull);
            break;
        case SS_SNAP_DEBUGFILE:
            cr_assert_eq(rec.debugfile.time_ns, 77);
            cr_assert_eq(rec.debugfile.build_id_len, n_libc);
            cr_assert_arr_eq(rec.debugfile.build_id, id_libc, n_libc);
            cr_assert_str_eq(rec.debugfile.path, df.path);
            break;
        case SS_SNAP_BUNDLE: {
            const char *src = nbundle == 0 ? exe : libc_path(&maps);
            const uint8_t *id = nbundle == 0 ? id_exe : id_libc;
            size_t idn = nbundle == 0 ? n_exe : n_libc;
            cr_assert_str_eq(rec.bundle.path, nbundle == 0 ? "/opt/app/test-binary" : src);
            cr_assert_eq(rec.bundle.kind, SS_SNAP_BUNDLE_MAPPED);
            cr_assert_eq(rec.bundle.build_id_len, idn);
            cr_assert_arr_eq(rec.bundle.build_id, id, idn);
            size_t flen;
            uint8_t *file = th_load(src, &flen);
            size_t zeroed = expect_stripped(src, file, flen);
            if (nbundle == 0) /* this test binary is built with -g */
                cr_assert(zeroed > 0, "no debug sections zeroed in %s", src);
            cr_log_info("bundle %s: %zu bytes, %zu zeroed, %u stored", src, flen, zeroed, rec.size);
            cr_assert_eq(rec.bundle.size, flen);
            cr_assert_arr_eq(rec.bundle.data, file, flen);
            cr_assert(rec.compressed && rec.size < flen, "bundle not compressed");
            if (nbundle == 1) { /* take ownership of libc's bytes */
                size_t tl = 0;
                uint8_t *t = ss_snap_take_bundle(r, &tl);
                cr_assert(t && tl == flen);
                cr_assert_arr_eq(t, file, flen);
                free(t);
                cr_assert_null(ss_snap_take_bundle(r, &tl));
            }
            free(file);
            nbundle++;
            break;
        }
        case SS_SNAP_TRAILER:
            /* header, process, 2 samples, their reads, counters, 2 bundles,
             * a debug file, a process marker */
            cr_assert_eq(rec.trailer.records, 10);
            cr_assert_eq(rec.trailer.samples, 2);
            cr_assert_eq(rec.trailer.processes, 1);
            cr_assert_eq(rec.trailer.bundles, 2);
            cr_assert_eq(rec.trailer.offset, rec.offset);
            cr_assert(rec.trailer.end_real_ns >= h.start_real_ns);
            cr_assert(rec.trailer.end_mono_ns >= h.start_mono_ns);
            break;
        }
    }
    cr_assert_eq(seen[SS_SNAP_HEADER], 1);
    cr_assert_eq(seen[SS_SNAP_PROCESS], 1);
    cr_assert_eq(seen[SS_SNAP_SAMPLE], 2);
    cr_assert_eq(seen[SS_SNAP_COUNTERS], 1);
    cr_assert_eq(seen[SS_SNAP_BUNDLE], 2);
    cr_assert_eq(seen[SS_SNAP_DEBUGFILE], 1);
    cr_assert_eq(seen[SS_SNAP_PROCEVENT], 1);
    cr_assert_eq(seen[SS_SNAP_TRAILER], 1);
    struct ss_snap_stats rst;
    ss_snap_reader_stats(r, &rst);
    cr_assert_eq(rst.records[SS_SNAP_MEMREADS], 1);
    cr_assert_eq(rst.corrupt + rst.unknown + rst.trailing_bytes, 0);
    cr_assert_eq(rst.file_bytes, (uint64_t)st.st_size);
    for (int t = 1; t < SS_SNAP_TRAILER; t++) /* writer and reader agree on sizes */
        cr_assert_eq(rst.bytes[t], wst.bytes[t], "type %d", t);
    cr_assert_eq(rst.bytes[SS_SNAP_PROCEVENT], wst.bytes[SS_SNAP_PROCEVENT]);

    /* rewind: same records again */
    cr_assert(ss_snap_rewind(r, &err) == 0, "%s", err.msg);
    int again = 0;
    while (ss_snap_next(r, &rec, &err) == 1)
        again++;
    cr_assert_eq(again, 10);
    ss_snap_close_reader(r);

    th_free_maps(&maps);
    free((void *)s1.stack);
    free((void *)s2.stack);
    th_rmtree(dir);
    free(path);
    free(dir);
}

/* --kernel and --off-cpu (issue 17): a kernel symbols record and samples
 * with a kernel stack and a weight (a key and a delta-coded one of the same
 * thread) come back as written; a sample with neither reads as before.
 * The stack copy's holes (appended after the weight) too, alone or not. */
Test(snapfile, kernel_stack_weight_and_symbols_round_trip)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "k.snap");
    struct ss_err err = {0};
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    h.flags = SS_SNAP_HDR_KERNEL | SS_SNAP_HDR_OFFCPU;
    struct ss_snap_writer *w;
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    struct ss_ksym syms[2] = {{0xffffffff81000000ull, 0xffffffff81000100ull, "read_zero", NULL},
                              {0xffffffffc0001000ull, 0xffffffffc0001040ull, "ext4_read", "ext4"}};
    struct ss_snap_ksyms ks = {.n = 2, .syms = syms};
    cr_assert_eq(ss_snap_write_ksyms(w, &ks, &err), 0, "%s", err.msg);
    uint64_t kips[3] = {0xffffffff81000010ull, 0xffffffffc0001008ull, 0xffffffff81000020ull};
    struct ss_sample s[3];
    for (int i = 0; i < 3; i++) {
        th_self_sample(&s[i], 4096);
        s[i].nkernel = i == 2 ? 0 : 3 - (uint32_t)i;
        s[i].kernel = kips;
        s[i].weight = i == 2 ? 0 : 1000000ull * (uint64_t)(i + 1);
        s[i].flags |= i == 2 ? 0 : SS_SAMPLE_OFFCPU;
        s[i].holes = i == 1 ? 0 : 0x6u >> i; /* 0x6, none, 0x1 (without kernel and weight) */
        cr_assert(ss_snap_write_sample(w, &s[i], NULL, &err) == 0, "%s", err.msg);
    }
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);

    struct ss_snap_reader *r;
    cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
    cr_assert_eq(ss_snap_get_header(r)->flags, h.flags);
    struct ss_snap_record rec;
    int nsym = 0, n = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        if (rec.type == SS_SNAP_KSYMS) {
            cr_assert_eq(rec.ksyms.n, 2);
            for (int i = 0; i < 2; i++) {
                cr_expect_eq(rec.ksyms.syms[i].start, syms[i].start);
                cr_expect_eq(rec.ksyms.syms[i].end, syms[i].end);
                cr_expect_str_eq(rec.ksyms.syms[i].name, syms[i].name);
            }
            cr_expect_null(rec.ksyms.syms[0].module);
            cr_expect_str_eq(rec.ksyms.syms[1].module, "ext4");
            nsym++;
        } else if (rec.type == SS_SNAP_SAMPLE) {
            const struct ss_sample *g = &rec.sample.s;
            cr_assert(n < 3);
            cr_expect_eq(g->nkernel, s[n].nkernel, "sample %d", n);
            for (uint32_t i = 0; i < g->nkernel && i < s[n].nkernel; i++)
                cr_expect_eq(g->kernel[i], kips[i]);
            cr_expect_eq(g->weight, s[n].weight, "sample %d", n);
            cr_expect_eq(g->holes, s[n].holes, "sample %d", n);
            cr_expect_eq(g->flags, s[n].flags);
            cr_expect_eq(g->stack_len, s[n].stack_len);
            cr_expect(!memcmp(g->stack, s[n].stack, g->stack_len), "sample %d stack", n);
            n++;
        }
    }
    cr_expect_eq(nsym, 1);
    cr_expect_eq(n, 3);
    ss_snap_close_reader(r);
    for (int i = 0; i < 3; i++)
        free((void *)s[i].stack);
    th_rmtree(dir);
    free(path);
    free(dir);
}
