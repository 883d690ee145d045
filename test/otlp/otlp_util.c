/* test/otlp/otlp_util.c: see otlp_util.h. */
#include "otlp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"

struct run run_new(const char *tag)
{
    struct run r = {.dir = cli_tmpdir(tag)};
    cr_assert(r.dir);
    r.snap = cli_path(r.dir, "x.snap");
    r.folded = cli_path(r.dir, "live.folded");
    r.otlp = cli_path(r.dir, "live.otlp");
    return r;
}

void run_free(struct run *r)
{
    cli_rmtree(r->dir);
    free(r->dir);
    free(r->snap);
    free(r->folded);
    free(r->otlp);
}

struct pbt *otlp_decode(const char *otlp)
{
    char why[1024] = "";
    struct pbt *t = otlp_decode_file(SS_OTLP_PROTO_DIR, otlp, why, sizeof(why));
    cr_assert(t, "%s", why);
    return t;
}

void same_as_folded(const struct pbt *req, const char *folded_path, long long div)
{
    char why[512] = "";
    char *mine = otlp_folded(req, div, why, sizeof(why));
    cr_assert(mine, "OTLP request breaks a rule: %s", why);
    same_text_as_folded(mine, folded_path);
    free(mine);
}

void same_text_as_folded(const char *mine, const char *folded_path)
{
    char why[512] = "";
    char *text = cli_load(folded_path, NULL);
    cr_assert(text, "%s", folded_path);
    char *want = folded_sorted(text);
    cr_assert(cli_folded_check(want, why, sizeof(why)) > 0, "%s: %s", folded_path, why);
    cr_assert(!strcmp(mine, want),
              "OTLP samples differ from the folded output:\n--- otlp\n%s--- folded\n%s", mine,
              want);
    free(want);
    free(text);
}

void otlp_record(const struct run *ru, char *const extra[], char *const target[], int ntarget)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n++] = "-o";
    argv[n++] = ru->snap;
    argv[n++] = "-o";
    argv[n++] = ru->folded;
    argv[n++] = "-o";
    argv[n++] = ru->otlp;
    for (int i = 0; i < ntarget; i++)
        argv[n++] = target[i];
    argv[n] = NULL;
    struct cli_res r;
    cr_assert(cli_run(&r, 120, argv) == 0);
    cr_assert(r.status == 0, "record exited %d:\n%s", r.status, r.err);
    cli_res_free(&r);
}

void replay_same(const struct run *ru)
{
    char *rep = cli_path(ru->dir, "replay.otlp");
    char *argv[] = {(char *)cli_ss(), "replay", ru->snap, "-o", rep, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 120, argv) == 0);
    cr_assert(r.status == 0, "replay exited %d:\n%s", r.status, r.err);
    cli_res_free(&r);
    char *d = cli_diff(ru->otlp, rep);
    cr_assert(!d, "replay's .otlp differs from live's: %s", d);
    free(rep);
}
