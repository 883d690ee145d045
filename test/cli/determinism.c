/* test/cli/determinism.c: `stacksnap record -o x.snap -o live.*` then
 * `stacksnap replay x.snap -o replay.*` must give byte-identical folded,
 * perf-script text, SVG and pprof output (issue 6). Real BPF, real
 * workloads: a native -O2 -fomit-frame-pointer program, luajit -joff,
 * luajit with its JIT, Tarantool (JIT off and on, recorded with -p), and a
 * shell that runs several of them in turn (new processes, exec). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *outs[] = {"folded", "txt", "svg", "pb.gz"};
#define NOUT (sizeof(outs) / sizeof(outs[0]))

struct det {
    const char *tag;
    char *dir;
    char *folded; /* live folded text */
    long long samples;
    long long memo_hits;   /* samples replay's memo of walks answered (in-process run) */
    long long native_hits; /* native walks its memo of native walks answered */
};

/* record (extra args + target), replay, compare. */
static void record_replay(struct det *d, char *const target[], int ntarget)
{
    d->dir = cli_tmpdir(d->tag);
    cr_assert(d->dir);
    char *snap = cli_path(d->dir, "x.snap");
    char *argv[64];
    char *live[NOUT], *rep[NOUT];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    argv[n++] = "-F";
    argv[n++] = "999";
    argv[n++] = "-o";
    argv[n++] = snap;
    for (size_t i = 0; i < NOUT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "live.%s", outs[i]);
        live[i] = cli_path(d->dir, name);
        snprintf(name, sizeof(name), "replay.%s", outs[i]);
        rep[i] = cli_path(d->dir, name);
        argv[n++] = "-o";
        argv[n++] = live[i];
    }
    for (int i = 0; i < ntarget; i++)
        argv[n++] = target[i];
    argv[n] = NULL;

    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "%s: record exited %d:\n%s", d->tag, r.status, r.err);
    cr_assert(strstr(r.err, " samples ("), "%s: no summary:\n%s", d->tag, r.err);
    cli_res_free(&r);

    d->folded = cli_load(live[0], NULL);
    cr_assert(d->folded);
    char why[300];
    d->samples = cli_folded_check(d->folded, why, sizeof(why));
    cr_assert(d->samples > 0, "%s: live folded: %s", d->tag, d->samples < 0 ? why : "empty");

    n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "replay";
    argv[n++] = snap;
    for (size_t i = 0; i < NOUT; i++) {
        argv[n++] = "-o";
        argv[n++] = rep[i];
    }
    argv[n] = NULL;
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "%s: replay exited %d:\n%s", d->tag, r.status, r.err);
    cr_assert(!strstr(r.err, "corrupt") && !strstr(r.err, "truncated at") &&
                  !strstr(r.err, "build-id differs"),
              "%s: replay complained:\n%s", d->tag, r.err);
    cli_res_free(&r);
    for (size_t i = 0; i < NOUT; i++) {
        char *diff = cli_diff(live[i], rep[i]);
        cr_assert(diff == NULL, "%s: live and replay differ (kept in %s): %s", d->tag, d->dir,
                  diff);
    }
    /* in this process, three runs of one ss_replay: the later runs reuse the
     * files (symbol tables, rule rows) the first opened, and give the same
     * bytes as live */
    char msgs[4096];
    cr_assert(cli_replay_runs(snap, NULL, 3, d->dir, msgs, sizeof(msgs)) == 0, "%s: %s", d->tag,
              msgs);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < 2; i++) {
            char name[32];
            snprintf(name, sizeof(name), "run%d.%s", k, outs[i]);
            char *got = cli_path(d->dir, name), *diff = cli_diff(live[i], got);
            cr_assert(diff == NULL, "%s: live and in-process run %d differ (kept in %s): %s",
                      d->tag, k, d->dir, diff);
            free(got);
        }
    /* replay's memo of walks (unwind/memo.h) on and off: both the live bytes */
    for (int memo = 0; memo < 2; memo++) {
        char name[2][32];
        char *got[2];
        long long hits = 0, nhits = 0;
        for (int i = 0; i < 2; i++) {
            snprintf(name[i], sizeof(name[i]), "memo%d.%s", memo, outs[i]);
            got[i] = cli_path(d->dir, name[i]);
        }
        cr_assert(cli_replay_memo(snap, memo, got[0], got[1], &hits, &nhits, msgs, sizeof(msgs)) ==
                      0,
                  "%s: %s", d->tag, msgs);
        for (int i = 0; i < 2; i++) {
            char *diff = cli_diff(live[i], got[i]);
            cr_assert(diff == NULL, "%s: live and in-process run with the memo %s differ (%s): %s",
                      d->tag, memo ? "on" : "off", d->dir, diff);
            free(got[i]);
        }
        cr_assert(memo || (hits == 0 && nhits == 0),
                  "%s: %lld memo answers, %lld native, with the memo off", d->tag, hits, nhits);
        if (memo) d->memo_hits = hits, d->native_hits = nhits;
    }
    for (size_t i = 0; i < NOUT; i++) {
        free(live[i]);
        free(rep[i]);
    }
    free(snap);
}

static void done(struct det *d)
{
    cli_rmtree(d->dir);
    free(d->dir);
    free(d->folded);
}

static char *lua_script(void)
{
    return cli_src("test/cli/spin.lua");
}

Test(cli_determinism, native)
{
    struct det d = {.tag = "det-native"};
    char *bin = cli_built("cli_native");
    char *target[] = {"--", bin, "1.0"};
    record_replay(&d, target, 3);
    cr_assert(d.samples >= 100, "only %lld samples", d.samples);
    cr_assert(cli_count_lines(d.folded, ";cli_outer;cli_mid;cli_leaf ") > 0, "%s", d.folded);
    cr_assert(cli_count_lines(d.folded, "qsort") > 0, "no qsort chain:\n%s", d.folded);
    /* above the leaf the frames repeat: the memo of native walks answers most walks (the
     * bench workload: all but a few); a quarter leaves room for loaded machines */
    cr_assert(d.native_hits * 4 > d.samples, "the native memo answered %lld of %lld samples",
              d.native_hits, d.samples);
    done(&d);
    free(bin);
}

Test(cli_determinism, luajit_interpreter)
{
    struct det d = {.tag = "det-joff"};
    char *lua = lua_script();
    char *target[] = {"--", "luajit", "-joff", lua, "1.0"};
    record_replay(&d, target, 5);
    cr_assert(d.samples >= 100, "only %lld samples", d.samples);
    cr_assert(cli_count_lines(d.folded, "spin.lua:10);leaf (/") > 0, "no Lua frames:\n%s",
              d.folded);
    /* the interpreter's loop: most samples repeat an earlier one's walk (96% on the bench
     * workload; a quarter here leaves room for loaded machines and sanitizers) */
    cr_assert(d.memo_hits * 4 > d.samples, "the memo answered %lld of %lld samples", d.memo_hits,
              d.samples);
    done(&d);
    free(lua);
}

Test(cli_determinism, luajit_jit)
{
    struct det d = {.tag = "det-jit"};
    char *lua = lua_script();
    char *target[] = {"--", "luajit", lua, "1.0"};
    record_replay(&d, target, 4);
    cr_assert(d.samples >= 100, "only %lld samples", d.samples);
    done(&d);
    free(lua);
}

/* Tarantool ignores SIGTERM while a fiber spins: start it ourselves, record
 * it with -p for a fixed time, then SIGKILL it. */
static void tarantool_case(const char *tag, const char *mode)
{
    char *script = cli_src("test/cli/fiber.lua");
    char *tt[] = {"tarantool", script, (char *)mode, NULL};
    int out;
    pid_t pid = cli_start(tt, &out, NULL);
    cr_assert(pid > 0);
    char line[64];
    int ok = cli_wait_line(out, 20, line, sizeof(line));
    if (ok < 0 || strcmp(line, "ready")) {
        kill(pid, SIGKILL);
        cli_wait(pid, 5);
        cr_assert_fail("tarantool did not start: '%s'", line);
    }
    cli_sleep(0.2); /* inside the fiber */
    char p[16];
    snprintf(p, sizeof(p), "%d", (int)pid);
    struct det d = {.tag = tag};
    char *target[] = {"-d", "1", "-p", p};
    record_replay(&d, target, 4);
    kill(pid, SIGKILL);
    cli_wait(pid, 5);
    close(out);
    cr_assert(d.samples >= 50, "only %lld samples", d.samples);
    if (!strcmp(mode, "joff"))
        cr_assert(cli_count_lines(d.folded, "fiber.lua:12);leaf (/") > 0, "no Lua frames:\n%s",
                  d.folded);
    done(&d);
    free(script);
}

Test(cli_determinism, tarantool_interpreter)
{
    tarantool_case("det-tt-joff", "joff");
}

Test(cli_determinism, tarantool_jit)
{
    tarantool_case("det-tt-jit", "jit");
}

/* Several processes in one recording: the shell, then each program it
 * starts (fork + exec: new process records, pid changes, exec). */
Test(cli_determinism, processes_started_by_a_shell)
{
    struct det d = {.tag = "det-multi"};
    char *bin = cli_built("cli_native"), *lua = lua_script(), *cmd;
    cr_assert(asprintf(&cmd, "%s 0.4; luajit -joff %s 0.4; %s 0.3 & luajit -joff %s 0.3; wait", bin,
                       lua, bin, lua) > 0);
    char *target[] = {"--", "sh", "-c", cmd};
    record_replay(&d, target, 4);
    cr_assert(cli_count_lines(d.folded, "cli_native;") > 0, "%s", d.folded);
    cr_assert(cli_count_lines(d.folded, "spin.lua:") > 0, "%s", d.folded);
    done(&d);
    free(cmd);
    free(bin);
    free(lua);
}

/* Many short-lived processes: samples of a process that exited before record
 * looked at it (files not openable any more, no build-ids recorded) must
 * replay the same as they were unwound live. */
Test(cli_determinism, short_lived_processes)
{
    struct det d = {.tag = "det-short"};
    char *bin = cli_built("cli_native"), *cmd;
    cr_assert(asprintf(&cmd, "for i in $(seq 40); do %s 0.03 >/dev/null; done", bin) > 0);
    char *target[] = {"--", "sh", "-c", cmd};
    record_replay(&d, target, 4);
    cr_assert(cli_count_lines(d.folded, "cli_native;") > 0, "%s", d.folded);
    done(&d);
    free(cmd);
    free(bin);
}
