/* test/snapfile/mapped.c: the reader maps a regular file whole at open;
 * a capture that grows after that (still being written) reads on past
 * the mapped bytes with read(2), records cut at the mapping's end
 * included, and rewinding a mapped capture reads it again. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

#define NSAMPLES 40

static int count_samples(struct ss_snap_reader *r)
{
    struct ss_snap_record rec;
    struct ss_err err = {0};
    int n = 0, rc;
    while ((rc = ss_snap_next(r, &rec, &err)) == 1) {
        cr_expect(rec.type != SS_SNAP_CORRUPT && rec.type != SS_SNAP_TRUNCATED, "%s",
                  ss_snap_type_str(rec.type));
        if (rec.type == SS_SNAP_SAMPLE) n++;
    }
    cr_expect_eq(rc, 0, "%s", err.msg);
    return n;
}

Test(snapfile, a_capture_growing_after_open_reads_on)
{
    char *dir = th_tmpdir(), *full = th_path(dir, "full.snap"), *part = th_path(dir, "part.snap");
    struct ss_err err = {0};
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_snap_writer *w;
    cr_assert(ss_snap_create(&w, full, &h, &err) == 0, "%s", err.msg);
    for (int i = 0; i < NSAMPLES; i++) {
        struct ss_sample s;
        th_self_sample(&s, 2048);
        s.tid += (uint32_t)(i % 3);
        cr_assert(ss_snap_write_sample(w, &s, NULL, &err) == 0, "%s", err.msg);
        free((void *)s.stack);
    }
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);
    size_t len;
    uint8_t *bytes = th_load(full, &len);
    cr_assert(bytes && len > 4096);

    /* the first part, cut in the middle of a record; opened (and mapped) so */
    size_t cut = len / 2 + 7;
    FILE *f = fopen(part, "wb");
    cr_assert(f && fwrite(bytes, 1, cut, f) == cut && fflush(f) == 0);
    struct ss_snap_reader *r;
    cr_assert(ss_snap_open(&r, part, &err) == 0, "%s", err.msg);
    /* the rest arrives before the reader gets there */
    cr_assert(fwrite(bytes + cut, 1, len - cut, f) == len - cut && fclose(f) == 0);
    cr_expect_eq(count_samples(r), NSAMPLES);
    cr_assert(ss_snap_rewind(r, &err) == 0, "%s", err.msg);
    cr_expect_eq(count_samples(r), NSAMPLES, "after a rewind");
    ss_snap_close_reader(r);

    /* mapped whole: read twice through a rewind */
    cr_assert(ss_snap_open(&r, full, &err) == 0, "%s", err.msg);
    cr_expect_eq(count_samples(r), NSAMPLES);
    cr_assert(ss_snap_rewind(r, &err) == 0, "%s", err.msg);
    cr_expect_eq(count_samples(r), NSAMPLES, "after a rewind");
    ss_snap_close_reader(r);
    free(bytes);
    th_rmtree(dir);
    free(full);
    free(part);
    free(dir);
}
