/* test/cli/nostack.c: `record --no-stack-bytes` (issue 31) with real BPF and
 * real targets that keep a random secret on their stack (test/cli/secret.c:
 * native C, and a libluajit host running spin.lua). A normal capture of the
 * target holds the secret (so the check below can fail); the capture made
 * with --no-stack-bytes holds it nowhere, says so in `info`, and replays to
 * the live outputs byte for byte (folded, perf-script text, SVG, pprof), in
 * `diff` and `report` too; cut short, it still replays up to its last
 * complete record. Usage errors: --no-stack-bytes without a .snap output,
 * with --bundle, or on another command than record. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "stacksnap/snapfile.h"

static const char *outs[] = {"folded", "txt", "svg", "pb.gz"};
#define NOUT (sizeof(outs) / sizeof(outs[0]))

struct run {
    char *dir;
    unsigned char secret[32];
    char hex[65];
    long long samples;
    long long size_normal, size_nostack;
};

static char *at(const struct run *t, const char *name)
{
    return cli_path(t->dir, name);
}

/* The secret the target printed ("secret HEX"). */
static void take_secret(struct run *t, const char *out)
{
    const char *p = strstr(out, "secret ");
    cr_assert(p, "the target printed no secret:\n%s", out);
    p += 7;
    for (int i = 0; i < 32; i++) {
        unsigned v;
        cr_assert(sscanf(p + 2 * i, "%2x", &v) == 1, "bad secret line: %s", p);
        t->secret[i] = (unsigned char)v;
    }
    memcpy(t->hex, p, 64);
    t->hex[64] = 0;
}

static bool holds(const char *path, const void *needle, size_t n)
{
    size_t len;
    char *b = cli_load(path, &len);
    cr_assert(b, "cannot read %s", path);
    bool found = memmem(b, len, needle, n) != NULL;
    free(b);
    return found;
}

static long long file_size(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s", path);
    return (long long)st.st_size;
}

/* stacksnap record [--no-stack-bytes] -F 999 -o SNAP [-o live.*] -- target */
static void record(struct run *t, bool nostack, const char *snap, char *const target[], int nt)
{
    char *argv[32];
    char *live[NOUT] = {0};
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    argv[n++] = "-F";
    argv[n++] = "999";
    if (nostack) argv[n++] = "--no-stack-bytes";
    argv[n++] = "-o";
    argv[n++] = (char *)snap;
    for (size_t i = 0; nostack && i < NOUT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "live.%s", outs[i]);
        argv[n++] = "-o";
        argv[n++] = live[i] = at(t, name);
    }
    argv[n++] = "--";
    for (int i = 0; i < nt; i++)
        argv[n++] = target[i];
    argv[n] = NULL;
    struct cli_res r;
    cr_assert(cli_run(&r, 120, argv) == 0);
    cr_assert(r.status == 0, "record exited %d:\n%s", r.status, r.err);
    take_secret(t, r.out);
    cli_res_free(&r);
    for (size_t i = 0; i < NOUT; i++)
        free(live[i]);
}

static char *run_ss(int expect, const char *a, const char *b, const char *c, const char *d,
                    const char *e)
{
    char *argv[] = {(char *)cli_ss(), (char *)a, (char *)b, (char *)c, (char *)d, (char *)e, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 120, argv) == 0);
    cr_assert(r.status == expect, "stacksnap %s %s: exit %d (want %d):\n%s%s", a, b, r.status,
              expect, r.out, r.err);
    size_t n = strlen(r.out) + strlen(r.err) + 2;
    char *both = malloc(n);
    snprintf(both, n, "%s\n%s", r.out, r.err);
    cli_res_free(&r);
    return both;
}

/* The count of STACK in folded text (-1: no such line). */
static long long count_of(const char *folded, const char *stack, size_t len)
{
    for (const char *p = folded; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l > len && !memcmp(p, stack, len) && p[len] == ' ') return atoll(p + len + 1);
        p = nl ? nl + 1 : NULL;
    }
    return -1;
}

static void check(struct run *t, char *const target[], int nt, const char *want_frame,
                  const char *want_top)
{
    t->dir = cli_tmpdir("nostack");
    cr_assert(t->dir);
    char *normal = at(t, "normal.snap"), *snap = at(t, "x.snap");

    /* the check can fail: a normal capture of the target holds the secret */
    record(t, false, normal, target, nt);
    cr_assert(holds(normal, t->secret, sizeof(t->secret)),
              "a normal capture does not hold the target's secret: the test proves nothing "
              "(kept in %s)",
              t->dir);
    t->size_normal = file_size(normal);

    record(t, true, snap, target, nt);
    cr_assert(!holds(snap, t->secret, sizeof(t->secret)),
              "the --no-stack-bytes capture holds the target's secret (kept in %s)", t->dir);
    cr_assert(!holds(snap, t->hex, 64), "the capture holds the secret in hex (kept in %s)", t->dir);
    t->size_nostack = file_size(snap);

    char *live_folded = at(t, "live.folded");
    char *folded = cli_load(live_folded, NULL);
    char why[300];
    t->samples = cli_folded_check(folded, why, sizeof(why));
    cr_assert(t->samples >= 100, "live folded: %s (%lld samples)", t->samples < 0 ? why : "few",
              t->samples);
    cr_assert(cli_count_lines(folded, want_frame) > 0, "no '%s' in the live folded:\n%s",
              want_frame, folded);

    /* replay: every format byte for byte as live */
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "replay";
    argv[n++] = snap;
    char *rep[NOUT];
    for (size_t i = 0; i < NOUT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "replay.%s", outs[i]);
        argv[n++] = "-o";
        argv[n++] = rep[i] = at(t, name);
    }
    argv[n] = NULL;
    struct cli_res r;
    cr_assert(cli_run(&r, 120, argv) == 0);
    cr_assert(r.status == 0, "replay exited %d:\n%s", r.status, r.err);
    cr_assert(!strstr(r.err, "corrupt") && !strstr(r.err, "truncated at") &&
                  !strstr(r.err, "not found"),
              "replay complained:\n%s", r.err);
    cli_res_free(&r);
    for (size_t i = 0; i < NOUT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "live.%s", outs[i]);
        char *live = at(t, name), *diff = cli_diff(live, rep[i]);
        cr_assert(diff == NULL, "live and replayed %s differ (kept in %s): %s", outs[i], t->dir,
                  diff);
        free(live);
        free(rep[i]);
    }

    /* in this process, two runs of one ss_replay (the second after a
     * rewind: the frame table is read again): the live bytes */
    char rmsgs[4096];
    cr_assert(cli_replay_runs(snap, NULL, 2, t->dir, rmsgs, sizeof(rmsgs)) == 0, "%s", rmsgs);
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < 2; i++) {
            char name[32], lname[32];
            snprintf(name, sizeof(name), "run%d.%s", k, outs[i]);
            snprintf(lname, sizeof(lname), "live.%s", outs[i]);
            char *got = at(t, name), *live = at(t, lname), *diff = cli_diff(live, got);
            cr_assert(diff == NULL, "in-process run %d differs from live (%s): %s", k, t->dir,
                      diff);
            free(got);
            free(live);
        }

    /* info says what it holds; a normal capture says it holds target memory */
    char *info = run_ss(0, "info", snap, NULL, NULL, NULL);
    cr_assert(strstr(info, "no target memory") && strstr(info, "format version 5") &&
                  strstr(info, "stack records"),
              "%s", info);
    free(info);
    info = run_ss(0, "info", normal, NULL, NULL, NULL);
    cr_assert(strstr(info, "can hold secrets") && strstr(info, "format version 4"), "%s", info);
    free(info);

    /* report names the workload's frames; diff against the live profile: no change */
    char *rep_out = run_ss(0, "report", snap, NULL, NULL, NULL);
    cr_assert(strstr(rep_out, want_top), "no %s in the report:\n%s", want_top, rep_out);
    free(rep_out);
    char *dfold = at(t, "diff.folded");
    free(run_ss(0, "diff", snap, live_folded, "-o", dfold));
    char *d = cli_load(dfold, NULL);
    cr_assert(d);
    int lines = 0;
    for (char *line = strtok(d, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char *b = strrchr(line, ' ');
        cr_assert(b && b > line);
        *b = 0;
        char *a = strrchr(line, ' ');
        cr_assert(a && !strcmp(a + 1, b + 1), "diff of the replay and live differs: %s %s", line,
                  b + 1);
    }
    cr_assert(lines == cli_count_lines(folded, " "), "%d diff lines", lines);
    free(d);

    /* cut short: readable up to the last complete record */
    size_t len;
    char *bytes = cli_load(snap, &len);
    char *cut = at(t, "cut.snap"), *cutf = at(t, "cut.folded");
    /* inside the first stack record past 3/5 of the file (a cut between
     * two records would be a complete file) */
    struct ss_snap_reader *rd;
    struct ss_err err = {0};
    cr_assert(ss_snap_open(&rd, snap, &err) == 0, "%s", err.msg);
    struct ss_snap_record rec;
    uint64_t cut_at = 0;
    while (!cut_at && ss_snap_next(rd, &rec, &err) == 1)
        if (rec.type == SS_SNAP_STACK && rec.offset > len * 3 / 5)
            cut_at = rec.offset + rec.size / 2;
    ss_snap_close_reader(rd);
    cr_assert(cut_at > 0 && cut_at < len);
    cr_assert(cli_store(cut, bytes, (size_t)cut_at) == 0);
    free(bytes);
    char *msgs = run_ss(0, "replay", cut, "-o", cutf, NULL);
    cr_assert(strstr(msgs, "truncated at offset"), "%s", msgs);
    free(msgs);
    char *cf = cli_load(cutf, NULL);
    long long cut_samples = cli_folded_check(cf, why, sizeof(why));
    cr_assert(cut_samples > t->samples / 4 && cut_samples < t->samples,
              "%lld of %lld samples from 3/5 of the capture", cut_samples, t->samples);
    for (char *line = strtok(cf, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strrchr(line, ' ');
        long long live_n = count_of(folded, line, (size_t)(sp - line));
        cr_assert(live_n >= atoll(sp + 1), "cut replay line not in live (%lld): %s", live_n, line);
    }
    free(cf);
    fprintf(stderr,
            "nostack %s: %lld samples; normal capture %lld bytes (%.0f per sample), "
            "--no-stack-bytes %lld bytes (%.0f per sample)\n",
            target[0], t->samples, t->size_normal, (double)t->size_normal / (double)t->samples,
            t->size_nostack, (double)t->size_nostack / (double)t->samples);
    free(cut);
    free(cutf);
    free(dfold);
    free(folded);
    free(live_folded);
    free(normal);
    free(snap);
    cli_rmtree(t->dir);
    free(t->dir);
}

Test(cli_nostack, native)
{
    struct run t = {0};
    char *bin = cli_built("cli_secret");
    char *target[] = {bin, "1.0"};
    check(&t, target, 2, ";secret_outer;secret_mid;secret_leaf ", "secret_leaf");
    free(bin);
}

Test(cli_nostack, luajit)
{
    struct run t = {0};
    char *bin = cli_built("cli_secret_lj"), *lua = cli_src("test/cli/spin.lua");
    char *target[] = {bin, "1.0", lua};
    check(&t, target, 3, "spin.lua:10);leaf (/", "spin.lua");
    free(bin);
    free(lua);
}

/* Usage errors (exit 2, before any file is made): no capture to apply it
 * to, with --bundle, on another command. */
Test(cli_nostack, usage)
{
    char *dir = cli_tmpdir("nostack-usage");
    char *snap = cli_path(dir, "x.snap"), *folded = cli_path(dir, "x.folded");
    char *ss = (char *)cli_ss();
    char *a0[] = {ss, "record", "--no-stack-bytes", "-o", folded, "--", "true", NULL};
    char *a1[] = {ss, "record", "--no-stack-bytes", "--bundle", "-o", snap, "--", "true", NULL};
    char *a2[] = {ss, "replay", snap, "--no-stack-bytes", NULL};
    char **argv[3] = {a0, a1, a2};
    const char *why[3] = {"give -o FILE.snap", "not with --bundle", "only valid for record"};
    for (int i = 0; i < 3; i++) {
        struct cli_res r;
        cr_assert(cli_run(&r, 30, argv[i]) == 0);
        cr_assert(r.status == 2 && strstr(r.err, why[i]), "exit %d, want '%s':\n%s", r.status,
                  why[i], r.err);
        cli_res_free(&r);
    }
    cr_assert(access(snap, F_OK) < 0 && access(folded, F_OK) < 0, "an output was created");
    free(snap);
    free(folded);
    cli_rmtree(dir);
    free(dir);
}
