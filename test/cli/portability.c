/* test/cli/portability.c: captures replayed where the recorded files are
 * gone (issue 6). A copy of luajit / of the native workload runs from a
 * temporary folder under `record --bundle`; the copy is deleted; replay must
 * give the live output byte for byte. Controls: the same without --bundle
 * differs. --symfs DIR finds the file under DIR; a file with another
 * build-id (at the recorded path or under --symfs) is not used, and replay
 * says so. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

struct run {
    char *dir, *bin; /* temp folder, the copied program in it */
    char *snap, *live_folded, *live_txt;
};

/* Copy prog into DIR/sub/NAME, record it (with --bundle if asked). */
static void record_copy(struct run *r, const char *tag, const char *prog, const char *name,
                        bool bundle, char *const args[], int nargs)
{
    r->dir = cli_tmpdir(tag);
    cr_assert(r->dir);
    char *sub = cli_path(r->dir, "sub");
    cr_assert(mkdir(sub, 0755) == 0);
    r->bin = cli_path(sub, name);
    cr_assert(cli_copy(prog, r->bin, 0755) == 0, "copy %s", prog);
    r->snap = cli_path(r->dir, "cap.snap");
    r->live_folded = cli_path(r->dir, "live.folded");
    r->live_txt = cli_path(r->dir, "live.txt");
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    argv[n++] = "-F";
    argv[n++] = "499";
    if (bundle) argv[n++] = "--bundle";
    argv[n++] = "-o";
    argv[n++] = r->snap;
    argv[n++] = "-o";
    argv[n++] = r->live_folded;
    argv[n++] = "-o";
    argv[n++] = r->live_txt;
    argv[n++] = "--";
    argv[n++] = r->bin;
    for (int i = 0; i < nargs; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    struct cli_res res;
    cr_assert(cli_run(&res, 60, argv) == 0);
    cr_assert(res.status == 0, "record exited %d:\n%s", res.status, res.err);
    cli_res_free(&res);
    char why[300], *text = cli_load(r->live_folded, NULL);
    long long n_samples = cli_folded_check(text, why, sizeof(why));
    cr_assert(n_samples >= 50, "live folded: %s (%lld samples)", why, n_samples);
    free(text);
    free(sub);
}

/* Replay r->snap into DIR/TAG.folded/.txt; returns stderr (malloc'd). */
static char *replay(struct run *r, const char *tag, const char *symfs, char **folded, char **txt)
{
    char name[64];
    snprintf(name, sizeof(name), "%s.folded", tag);
    *folded = cli_path(r->dir, name);
    snprintf(name, sizeof(name), "%s.txt", tag);
    *txt = cli_path(r->dir, name);
    char *argv[] = {(char *)cli_ss(),         "replay",      r->snap, "-o", *folded, "-o", *txt,
                    symfs ? "--symfs" : NULL, (char *)symfs, NULL};
    struct cli_res res;
    cr_assert(cli_run(&res, 60, argv) == 0);
    cr_assert(res.status == 0, "replay exited %d:\n%s", res.status, res.err);
    char *err = res.err;
    free(res.out);
    return err;
}

static void same(struct run *r, const char *folded, const char *txt)
{
    char *d = cli_diff(r->live_folded, folded);
    cr_assert(!d, "%s", d);
    d = cli_diff(r->live_txt, txt);
    cr_assert(!d, "%s", d);
}

static void differs(struct run *r, const char *folded)
{
    char *d = cli_diff(r->live_folded, folded);
    cr_assert(d, "replay without the file gave the live output: the check cannot fail");
    free(d);
}

static void run_free(struct run *r)
{
    cli_rmtree(r->dir);
    free(r->dir);
    free(r->bin);
    free(r->snap);
    free(r->live_folded);
    free(r->live_txt);
}

static void bundle_case(const char *tag, const char *prog, const char *name, char *const args[],
                        int nargs)
{
    /* with --bundle: identical after the copy is gone */
    struct run r = {0};
    record_copy(&r, tag, prog, name, true, args, nargs);
    cr_assert(unlink(r.bin) == 0);
    char *f, *t, *err = replay(&r, "replay", NULL, &f, &t);
    cr_assert(!strstr(err, "not found") && !strstr(err, "differs"), "%s", err);
    same(&r, f, t);
    free(err), free(f), free(t);
    run_free(&r);

    /* control: without --bundle the same replay cannot see the program */
    struct run c = {0};
    record_copy(&c, tag, prog, name, false, args, nargs);
    cr_assert(unlink(c.bin) == 0);
    err = replay(&c, "replay", NULL, &f, &t);
    cr_assert(strstr(err, c.bin) && strstr(err, "not found"), "no message naming %s:\n%s", c.bin,
              err);
    differs(&c, f);
    free(err), free(f), free(t);
    run_free(&c);
}

Test(cli_portability, luajit_copy_bundled_then_deleted)
{
    char *luajit = cli_which("luajit"), *lua = cli_src("test/cli/spin.lua");
    cr_assert(luajit, "luajit not installed");
    char *args[] = {"-joff", lua, "0.6"};
    bundle_case("port-lj", luajit, "luajit", args, 3);
    free(luajit);
    free(lua);
}

Test(cli_portability, native_copy_bundled_then_deleted)
{
    char *bin = cli_built("cli_native");
    char *args[] = {"0.6"};
    bundle_case("port-native", bin, "cli_native", args, 1);
    free(bin);
}

Test(cli_portability, symfs_and_build_id_check)
{
    char *bin = cli_built("cli_native"), *alt = cli_built("cli_native_alt");
    char *args[] = {"0.6"};
    struct run r = {0};
    record_copy(&r, "port-symfs", bin, "cli_native", false, args, 1);

    /* move the program to SYMFS/<recorded path> */
    char *symfs = cli_path(r.dir, "symfs"), *moved, *cmd;
    cr_assert(asprintf(&moved, "%s%s", symfs, r.bin) > 0);
    cr_assert(asprintf(&cmd, "mkdir -p \"$(dirname '%s')\" && mv '%s' '%s'", moved, r.bin, moved) >
              0);
    cr_assert(system(cmd) == 0, "%s", cmd);

    char *f, *t, *err = replay(&r, "symfs", symfs, &f, &t);
    cr_assert(!strstr(err, "not found") && !strstr(err, "differs"), "%s", err);
    same(&r, f, t);
    free(err), free(f), free(t);

    /* another build of the same program under --symfs: named, not used */
    cr_assert(unlink(moved) == 0);
    cr_assert(cli_copy(alt, moved, 0755) == 0);
    err = replay(&r, "alt-symfs", symfs, &f, &t);
    cr_assert(strstr(err, moved) && strstr(err, "build-id differs"), "%s", err);
    differs(&r, f);
    free(err), free(f), free(t);

    /* ... and at the recorded path */
    cr_assert(cli_copy(alt, r.bin, 0755) == 0);
    err = replay(&r, "alt-path", NULL, &f, &t);
    cr_assert(strstr(err, r.bin) && strstr(err, "build-id differs"), "%s", err);
    differs(&r, f);
    free(err), free(f), free(t);

    /* the right build at the recorded path, the wrong one under --symfs:
     * the recorded path is used */
    cr_assert(cli_copy(bin, r.bin, 0755) == 0);
    err = replay(&r, "right-path", symfs, &f, &t);
    same(&r, f, t);
    free(err), free(f), free(t);

    free(moved);
    free(cmd);
    free(symfs);
    run_free(&r);
    free(bin);
    free(alt);
}
