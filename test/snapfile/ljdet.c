/* test/snapfile/ljdet.c: the LuaJIT detection record (type 12): the result
 * of detecting the system's luajit reads back field for field; a record of
 * another detector version gives its key and nothing else; the detection
 * cache takes a plausible result and refuses implausible ones (a capture is
 * untrusted input). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

static void same_info(const struct ss_lj_elfinfo *a, const struct ss_lj_elfinfo *b)
{
    cr_expect_eq(a->is_luajit, b->is_luajit);
    cr_expect_eq(a->vm_found, b->vm_found);
    cr_expect_eq(a->gc64, b->gc64);
    cr_expect_eq(a->vm_lo, b->vm_lo);
    cr_expect_eq(a->vm_hi, b->vm_hi);
    cr_expect_eq(a->vm_cfa_off, b->vm_cfa_off);
    cr_expect_eq(a->hints, b->hints);
    cr_expect_eq(a->checks, b->checks);
    cr_expect_str_eq(a->version, b->version);
    cr_assert_eq(a->nstfn, b->nstfn);
    for (uint32_t i = 0; i < a->nstfn; i++) {
        cr_expect_eq(a->stfn[i].lo, b->stfn[i].lo);
        cr_expect_eq(a->stfn[i].hi, b->stfn[i].hi);
        cr_expect_eq(a->stfn[i].state, b->stfn[i].state);
    }
    cr_expect_eq(a->exit_ret, b->exit_ret);
    cr_expect_eq(a->exit_lo, b->exit_lo);
    cr_expect_eq(a->exit_body, b->exit_body);
    cr_expect(!memcmp(&a->derived, &b->derived, sizeof(a->derived)), "derived facts");
    cr_expect_str_eq(a->derive_why, b->derive_why);
}

static void luajit_info(struct ss_lj_elfinfo *info)
{
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file("/usr/bin/luajit", info, &err), 0, "%s", err.msg);
    cr_assert(info->is_luajit && info->vm_found, "/usr/bin/luajit: no LuaJIT VM found");
    cr_assert(info->derived.have & SS_LJ_D_ENTRY, "/usr/bin/luajit: no layout derived");
}

Test(snapfile, luajit_detection_round_trips)
{
    struct ss_lj_elfinfo info;
    luajit_info(&info);
    /* the reason field travels too (Debian's luajit derives everything) */
    snprintf(info.derive_why, sizeof(info.derive_why), "BC_JLOOP: not found");
    char *dir = th_tmpdir(), *path = th_path(dir, "lj.snap");
    struct ss_err err = {0};
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    struct ss_snap_writer *w;
    cr_assert(ss_snap_create(&w, path, &h, &err) == 0, "%s", err.msg);
    struct ss_snap_ljdet d = {
        .detver = SS_LJ_DETECT_VERSION, .build_id_len = 20, .fsize = 123456, .info = info};
    for (int i = 0; i < 20; i++)
        d.build_id[i] = (uint8_t)(i * 7 + 1);
    cr_assert_eq(ss_snap_write_ljdet(w, &d, &err), 0, "%s", err.msg);
    struct ss_snap_ljdet other = d;
    other.detver = SS_LJ_DETECT_VERSION + 1;
    cr_assert_eq(ss_snap_write_ljdet(w, &other, &err), 0, "%s", err.msg);
    cr_assert(ss_snap_close(w, &err) == 0, "%s", err.msg);

    struct ss_snap_reader *r;
    cr_assert(ss_snap_open(&r, path, &err) == 0, "%s", err.msg);
    struct ss_snap_record rec;
    int n = 0;
    while (ss_snap_next(r, &rec, &err) == 1) {
        if (rec.type != SS_SNAP_LJDET) {
            cr_expect(rec.type == SS_SNAP_HEADER || rec.type == SS_SNAP_TRAILER, "type %u",
                      rec.type);
            continue;
        }
        const struct ss_snap_ljdet *g = &rec.ljdet;
        cr_expect_eq(g->build_id_len, 20);
        cr_expect(!memcmp(g->build_id, d.build_id, 20));
        cr_expect_eq(g->fsize, d.fsize);
        if (n++ == 0) {
            cr_expect_eq(g->detver, SS_LJ_DETECT_VERSION);
            same_info(&g->info, &info);
        } else { /* another version's fields are not decoded */
            cr_expect_eq(g->detver, SS_LJ_DETECT_VERSION + 1);
            cr_expect_not(g->info.is_luajit);
            cr_expect_eq(g->info.derived.have, 0);
        }
    }
    cr_expect_eq(n, 2);
    cr_expect_str_eq(ss_snap_type_str(SS_SNAP_LJDET), "luajit detection");
    ss_snap_close_reader(r);
    th_rmtree(dir);
    free(path);
    free(dir);
}

static void count(void *ctx, const uint8_t *id, size_t id_len, uint64_t fsize,
                  const struct ss_lj_elfinfo *info)
{
    (void)id, (void)info;
    cr_expect_eq(id_len, 20);
    cr_expect_eq(fsize, 1000);
    (*(int *)ctx)++;
}

Test(snapfile, luajit_detection_from_a_capture_is_checked)
{
    struct ss_lj_elfinfo info;
    luajit_info(&info);
    cr_expect(ss_lj_elfinfo_plausible(&info), "a real detection result");
    struct ss_lj_detcache *c;
    cr_assert_eq(ss_lj_detcache_new(&c), 0);
    const uint8_t id[20] = {1, 2, 3};
    cr_expect_eq(ss_lj_detcache_put(c, id, 20, 1000, &info), 0);
    cr_expect_eq(ss_lj_detcache_put(c, id, 0, 1000, &info), -EINVAL, "no build-id");
    cr_expect_eq(ss_lj_detcache_put(c, id, 21, 1000, &info), -EINVAL, "id too long");
    struct ss_lj_elfinfo bad[7];
    for (int i = 0; i < 7; i++)
        bad[i] = info;
    bad[0].nstfn = SS_LJ_STFN_MAX + 1;
    memset(bad[1].version, 'x', sizeof(bad[1].version)); /* no NUL */
    bad[2].derived.cf_L = 3;                             /* misaligned slot */
    bad[3].derived.g2disp = 1 << 20;                     /* out of range */
    bad[4].derived.have |= 0x100;                        /* unknown group */
    bad[5].vm_found = false;                             /* facts without a VM */
    bad[6].derived.cf_size = info.derived.cf_size + 16;  /* not the VM's CFA */
    for (int i = 0; i < 7; i++) {
        cr_expect_not(ss_lj_elfinfo_plausible(&bad[i]), "bad %d taken", i);
        cr_expect_eq(ss_lj_detcache_put(c, id, 20, 2000 + (uint64_t)i, &bad[i]), -EINVAL, "bad %d",
                     i);
    }
    /* the results a cache holds come out again (what a capture records) */
    int seen = 0;
    cr_expect_eq(ss_lj_detcache_each(c, 0, count, &seen), 1);
    cr_expect_eq(seen, 1);
    cr_expect_eq(ss_lj_detcache_each(c, 1, count, &seen), 1);
    cr_expect_eq(seen, 1, "nothing new");
    ss_lj_detcache_free(c);
}
