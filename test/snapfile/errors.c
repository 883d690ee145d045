/* test/snapfile/errors.c: bad input and output-file safety. Files that are
 * not captures, newer format versions and missing files give the documented
 * messages; captures are created 0600 and never written through a symlink;
 * a full disk (a tiny tmpfs) fails the writer with ENOSPC and leaves a file
 * whose complete records all read back; records of unknown type or flags are
 * skipped and fields appended to known records are ignored; bundling a file
 * that is not ELF or has no build-id fails with a message naming it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "helpers.h"

static int open_err(const char *path, char *msg)
{
    struct ss_err err = {0};
    struct ss_snap_reader *r = NULL;
    int rc = ss_snap_open(&r, path, &err);
    strcpy(msg, err.msg);
    if (!rc) ss_snap_close_reader(r);
    return rc;
}

Test(snapfile_errors, not_a_capture)
{
    char *dir = th_tmpdir(), msg[300], want[300];
    char *text = th_path(dir, "notes.txt"), *empty = th_path(dir, "empty.snap");
    th_store(text, "hello, this is not a capture\n", 29);
    th_store(empty, "", 0);
    const char *paths[] = {text, empty, "/proc/self/exe", "/etc/passwd"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(open_err(paths[i], msg), -EINVAL, "%s", paths[i]);
        snprintf(want, sizeof(want), "not a stacksnap capture: %s", paths[i]);
        cr_assert_str_eq(msg, want);
    }
    /* missing file: the open error names it */
    char *missing = th_path(dir, "missing.snap");
    cr_assert_eq(open_err(missing, msg), -ENOENT);
    cr_assert(strstr(msg, missing) && strstr(msg, "No such file"), "%s", msg);
    th_rmtree(dir);
    free(text), free(empty), free(missing), free(dir);
}

Test(snapfile_errors, newer_version_names_both_versions)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "new.snap"), msg[300];
    size_t n = th_write_small(path, 1, 64);
    uint8_t *b = th_load(path, &n);
    b[8] = 7; /* version 7 */
    th_store(path, b, n);
    cr_assert_eq(open_err(path, msg), -EPROTONOSUPPORT);
    char want[400];
    snprintf(want, sizeof(want),
             "%s: capture format version 7 is newer than this stacksnap supports (version %u)",
             path, SS_SNAP_VERSION);
    cr_assert_str_eq(msg, want);
    b[8] = 1;
    b[12] = 0xff; /* reserved preamble bytes are ignored */
    th_store(path, b, n);
    cr_assert_eq(open_err(path, msg), 0, "%s", msg);
    free(b);
    th_rmtree(dir);
    free(path), free(dir);
}

static int create(const char *path, char *msg)
{
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    struct ss_snap_writer *w = NULL;
    int rc = ss_snap_create(&w, path, &h, &err);
    strcpy(msg, err.msg);
    if (!rc) cr_assert_eq(ss_snap_close(w, &err), 0, "%s", err.msg);
    return rc;
}

Test(snapfile_errors, created_0600_even_over_an_existing_file)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "cap.snap"), msg[300];
    mode_t old = umask(0);
    cr_assert_eq(create(path, msg), 0, "%s", msg);
    struct stat st;
    cr_assert(stat(path, &st) == 0);
    cr_assert_eq(st.st_mode & 07777, 0600);
    /* an existing world-readable file owned by someone else is taken over */
    th_store(path, "old contents that are longer than the new capture........", 58);
    cr_assert(chmod(path, 0644) == 0);
    cr_assert(chown(path, 1234, 1234) == 0);
    cr_assert_eq(create(path, msg), 0, "%s", msg);
    cr_assert(stat(path, &st) == 0);
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert_eq(st.st_uid, geteuid());
    cr_assert_eq(open_err(path, msg), 0, "%s", msg);
    umask(old);
    th_rmtree(dir);
    free(path), free(dir);
}

Test(snapfile_errors, never_follows_a_symlink)
{
    char *dir = th_tmpdir(), msg[300];
    char *target = th_path(dir, "precious"), *slink = th_path(dir, "cap.snap");
    th_store(target, "precious data", 13);
    cr_assert(symlink(target, slink) == 0);
    cr_assert_eq(create(slink, msg), -ELOOP);
    char want[400];
    snprintf(want, sizeof(want), "refusing to write capture %s: it is a symbolic link", slink);
    cr_assert_str_eq(msg, want);
    size_t n;
    uint8_t *b = th_load(target, &n);
    cr_assert(n == 13 && memcmp(b, "precious data", 13) == 0, "symlink target modified");
    free(b);
    /* a dangling symlink must not create its target */
    char *nowhere = th_path(dir, "nowhere"), *dangling = th_path(dir, "dangling.snap");
    cr_assert(symlink(nowhere, dangling) == 0);
    cr_assert_eq(create(dangling, msg), -ELOOP);
    cr_assert(access(nowhere, F_OK) != 0, "dangling symlink target created");
    /* nor write over a hard link (another name for someone's file) or a folder */
    char *hard = th_path(dir, "hard.snap");
    cr_assert(link(target, hard) == 0);
    cr_assert_eq(create(hard, msg), -EMLINK, "%s", msg);
    cr_assert(strstr(msg, hard), "%s", msg);
    cr_assert_eq(create(dir, msg), -EINVAL);
    cr_assert(strstr(msg, "not a regular file"), "%s", msg);
    th_rmtree(dir);
    free(target), free(slink), free(nowhere), free(dangling), free(hard), free(dir);
}

/* A private mount namespace with a 64 KiB tmpfs: a real full disk. */
Test(snapfile_errors, full_disk)
{
    char *dir = th_tmpdir(), msg[300];
    cr_assert(unshare(CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
    cr_assert(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    cr_assert(mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0, "mount: %s", strerror(errno));
    char *path = th_path(dir, "full.snap");
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    cr_assert_eq(ss_snap_create(&w, path, &h, &err), 0, "%s", err.msg);
    uint64_t x = 88172645463325252ull;
    uint8_t stack[4096];
    int rc = 0, written = 0;
    for (int i = 0; i < 1000 && !rc; i++) {
        for (size_t k = 0; k < sizeof(stack); k++) { /* incompressible */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            stack[k] = (uint8_t)x;
        }
        struct ss_sample s = {
            .pid = 1, .tid = 1, .stack_len = 4096, .stack_req = 4096, .stack = stack};
        rc = ss_snap_write_sample(w, &s, NULL, &err);
        if (!rc) rc = ss_snap_flush(w, &err);
        written += !rc;
    }
    cr_assert_eq(rc, -ENOSPC, "%s", err.msg);
    char want[300];
    snprintf(want, sizeof(want), "write capture %s: No space left on device", path);
    cr_assert_str_eq(err.msg, want);
    struct ss_err e2 = {0};
    struct ss_sample s = {.pid = 1};
    cr_assert_eq(ss_snap_write_sample(w, &s, NULL, &e2), -ENOSPC, "error not sticky");
    cr_assert_eq(ss_snap_close(w, &e2), -ENOSPC);
    cr_assert_str_eq(e2.msg, want);

    struct th_list l;
    cr_assert_eq(th_read_path(path, &l, msg, sizeof(msg)), 0, "%s", msg);
    cr_assert_eq(l.st.corrupt, 0);
    cr_assert_eq(l.st.records[SS_SNAP_SAMPLE], (uint64_t)written,
                 "%d samples flushed, %llu read back", written,
                 (unsigned long long)l.st.records[SS_SNAP_SAMPLE]);
    cr_log_info("full disk after %d samples, %llu trailing bytes ignored", written,
                (unsigned long long)l.st.trailing_bytes);
    th_list_free(&l);
    umount2(dir, MNT_DETACH);
    th_rmtree(dir);
    free(path), free(dir);
}

Test(snapfile_errors, unknown_records_and_appended_fields_are_skipped)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "cap.snap"), msg[300];
    size_t n = th_write_small(path, 2, 200);
    uint8_t *b = th_load(path, &n);
    struct th_list before;
    cr_assert_eq(th_read_path(path, &before, msg, sizeof(msg)), 0);
    struct th_frame fr[64];
    size_t nfr = th_frames(b, n, fr, 64);
    /* after the header: a future record type, a record with an unknown flag,
     * and a counters record carrying a field this reader does not know */
    uint8_t *out = malloc(n + 4096);
    size_t o = fr[0].end;
    memcpy(out, b, o);
    o += th_frame_record(out + o, 42, 0, "future", 6);
    o += th_frame_record(out + o, SS_SNAP_COUNTERS, 0x8, "zstd!", 5);
    uint8_t ctr[64] = {0};
    size_t cl = 0;
    uint64_t t = 5;
    memcpy(ctr, &t, 8), cl = 8;
    uint32_t one = 1;
    memcpy(ctr + cl, &one, 4), cl += 4;
    memcpy(ctr + cl,
           "\x03\x00"
           "abc\0",
           6),
        cl += 6;
    uint64_t v = 99;
    memcpy(ctr + cl, &v, 8), cl += 8;
    memcpy(ctr + cl, "NEWFIELD", 8), cl += 8;
    o += th_frame_record(out + o, SS_SNAP_COUNTERS, 0, ctr, (uint32_t)cl);
    memcpy(out + o, b + fr[0].end, n - fr[0].end);
    o += n - fr[0].end;
    th_store(path, out, o);

    struct ss_err err = {0};
    struct ss_snap_reader *r;
    cr_assert_eq(ss_snap_open(&r, path, &err), 0, "%s", err.msg);
    struct ss_snap_record rec;
    size_t i = 0;
    bool extra = false;
    while (ss_snap_next(r, &rec, &err) == 1) {
        cr_assert(rec.type < SS_SNAP_NTYPES);
        if (rec.type == SS_SNAP_COUNTERS && rec.counters.time_ns == 5) {
            cr_assert_eq(rec.counters.n, 1);
            cr_assert_str_eq(rec.counters.items[0].name, "abc");
            cr_assert_eq(rec.counters.items[0].value, 99);
            extra = true;
            continue;
        }
        cr_assert_eq(th_digest(&rec), before.v[i].digest);
        i += 1 + (rec.type == SS_SNAP_SAMPLE && rec.sample.has_reads);
    }
    cr_assert(extra);
    cr_assert_eq(i, nfr);
    struct ss_snap_stats st;
    ss_snap_reader_stats(r, &st);
    cr_assert_eq(st.unknown, 2);
    cr_assert_eq(st.corrupt, 0);
    ss_snap_close_reader(r);
    th_list_free(&before);
    free(out);
    free(b);
    th_rmtree(dir);
    free(path), free(dir);
}

Test(snapfile_errors, bundle_needs_an_elf_file_with_a_build_id)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "cap.snap");
    char *noid = th_path(dir, "noid"), cmd[1024];
    snprintf(cmd, sizeof(cmd), "objcopy --remove-section .note.gnu.build-id /proc/%d/exe %s",
             getpid(), noid);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    cr_assert_eq(ss_snap_create(&w, path, &h, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_snap_write_bundle(w, "/etc/passwd", NULL, 0, NULL, 0, &err), -ENOEXEC);
    cr_assert_str_eq(err.msg, "bundle /etc/passwd: not an ELF file");
    err = (struct ss_err){0};
    cr_assert_eq(ss_snap_write_bundle(w, noid, NULL, 0, NULL, 0, &err), -ENODATA);
    cr_assert(strstr(err.msg, noid) && strstr(err.msg, "build-id"), "%s", err.msg);
    err = (struct ss_err){0};
    char *missing = th_path(dir, "missing.so");
    cr_assert_eq(ss_snap_write_bundle(w, missing, NULL, 0, NULL, 0, &err), -ENOENT);
    cr_assert(strstr(err.msg, missing), "%s", err.msg);
    err = (struct ss_err){0};
    /* failed bundles do not poison the writer */
    cr_assert_eq(ss_snap_close(w, &err), 0, "%s", err.msg);
    th_rmtree(dir);
    free(path), free(noid), free(missing), free(dir);
}

Test(snapfile_errors, event_text_names_file_and_offset)
{
    char *dir = th_tmpdir(), *path = th_path(dir, "ev.snap");
    size_t n = th_write_small(path, 2, 100);
    uint8_t *b = th_load(path, &n);
    struct th_frame fr[32];
    th_frames(b, n, fr, 32);
    b[fr[1].off + 25] ^= 0x40; /* damage the process record's payload */
    th_store(path, b, n - 3);  /* and cut the trailer short */
    struct ss_err err = {0};
    struct ss_snap_reader *r;
    cr_assert_eq(ss_snap_open(&r, path, &err), 0, "%s", err.msg);
    struct ss_snap_record rec;
    char line[512], want[512];
    int events = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        if (rec.type == SS_SNAP_CORRUPT) {
            snprintf(want, sizeof(want),
                     "%s: corrupted record at offset %llu skipped (payload checksum mismatch, "
                     "%llu bytes)",
                     path, (unsigned long long)fr[1].off,
                     (unsigned long long)(fr[1].end - fr[1].off));
            cr_assert_str_eq(ss_snap_event_str(r, &rec, line, sizeof(line)), want);
            events++;
        } else if (rec.type == SS_SNAP_TRUNCATED) {
            snprintf(want, sizeof(want), "%s: truncated at offset %llu, ignored %zu trailing bytes",
                     path, (unsigned long long)rec.truncated.offset, (size_t)(n - 3 - rec.offset));
            cr_assert_str_eq(ss_snap_event_str(r, &rec, line, sizeof(line)), want);
            events++;
        }
    }
    cr_assert_eq(events, 2);
    ss_snap_close_reader(r);
    free(b);
    th_rmtree(dir);
    free(path), free(dir);
}
