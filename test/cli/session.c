/* test/cli/session.c: a recording session as a user sees it (issue 7).
 * SIGINT/SIGTERM during record → exit 0 and every output complete and valid
 * (folded parses, SVG is XML per xmllint, pprof is a whole gzip stream, the
 * .snap replays to the same folded), the command stopped (even one that
 * ignores SIGTERM), a -p target left running; SIGKILL of record → the capture
 * still replays what was flushed. The progress line appears only on a
 * terminal (a pty here), the final summary always: samples per process, %
 * with Lua frames, % truncated, drops. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"

struct sess {
    char *dir, *snap, *folded, *svg, *txt, *pb, *errpath;
    pid_t rec, target;
    int out;
};

static void sess_paths(struct sess *s, const char *tag)
{
    s->dir = cli_tmpdir(tag);
    cr_assert(s->dir);
    s->snap = cli_path(s->dir, "a.snap");
    s->folded = cli_path(s->dir, "a.folded");
    s->svg = cli_path(s->dir, "a.svg");
    s->txt = cli_path(s->dir, "a.txt");
    s->pb = cli_path(s->dir, "a.pb.gz");
    s->errpath = cli_path(s->dir, "stderr");
}

static void sess_free(struct sess *s)
{
    cli_rmtree(s->dir);
    free(s->dir), free(s->snap), free(s->folded), free(s->svg), free(s->txt), free(s->pb);
    free(s->errpath);
}

/* Start record with every output; extra = the target part of the command line.
 * With a command, its "ready PID" line (it inherits record's stdout) gives
 * its pid. */
static void start_record(struct sess *s, char *const extra[], int nextra, bool command)
{
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    argv[n++] = "record";
    argv[n++] = "-F";
    argv[n++] = "499";
    const char *outs[] = {s->snap, s->folded, s->svg, s->txt, s->pb};
    for (int i = 0; i < 5; i++) {
        argv[n++] = "-o";
        argv[n++] = (char *)outs[i];
    }
    for (int i = 0; i < nextra; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    s->rec = cli_start(argv, &s->out, s->errpath);
    cr_assert(s->rec > 0);
    if (command) {
        char line[128] = "";
        if (cli_wait_line(s->out, 20, line, sizeof(line)) < 0 || strncmp(line, "ready", 5)) {
            kill(s->rec, SIGKILL);
            cli_wait(s->rec, 5);
            cr_assert_fail("the command did not start: '%s'", line);
        }
        s->target = (pid_t)atoi(line + 6);
        if (!s->target) s->target = -1; /* a Lua workload prints "ready" only */
    }
}

static char *stderr_of(struct sess *s)
{
    char *e = cli_load(s->errpath, NULL);
    return e ? e : strdup("");
}

/* Every output is complete and valid, and the capture replays to the same
 * folded stacks. */
static void check_outputs(struct sess *s)
{
    char why[300], *text = cli_load(s->folded, NULL);
    cr_assert(text, "no folded output");
    long long n = cli_folded_check(text, why, sizeof(why));
    cr_assert(n > 0, "folded: %s", n < 0 ? why : "no samples");
    free(text);

    char *x[] = {"xmllint", "--noout", s->svg, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 30, x) == 0);
    cr_assert(r.status == 0, "xmllint %s: %d\n%s", s->svg, r.status, r.err);
    cli_res_free(&r);

    gzFile gz = gzopen(s->pb, "rb");
    cr_assert(gz, "open %s", s->pb);
    char buf[65536];
    int got, total = 0;
    while ((got = gzread(gz, buf, sizeof(buf))) > 0)
        total += got;
    int gerr;
    gzerror(gz, &gerr);
    cr_assert(got == 0 && gerr == Z_OK && total > 0, "pprof is not a complete gzip stream");
    gzclose(gz);

    size_t tl;
    char *t = cli_load(s->txt, &tl);
    cr_assert(t && strstr(t, "cpu-clock:") && tl > 1 && t[tl - 1] == '\n', "perf text incomplete");
    free(t);

    char *rep = cli_path(s->dir, "replay.folded");
    char *argv[] = {(char *)cli_ss(), "replay", s->snap, "-o", rep, NULL};
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0 && !strstr(r.err, "truncated at") && !strstr(r.err, "corrupt"),
              "replay: %d\n%s", r.status, r.err);
    cli_res_free(&r);
    char *d = cli_diff(s->folded, rep);
    cr_assert(!d, "%s", d);
    free(rep);
}

static void signal_command(int sig)
{
    struct sess s = {0};
    sess_paths(&s, sig == SIGINT ? "sess-int" : "sess-term");
    char *bin = cli_built("cli_native");
    char *extra[] = {"--", bin, "0"};
    start_record(&s, extra, 3, true);
    cli_sleep(0.8);
    cr_assert(kill(s.rec, sig) == 0);
    int st = cli_wait(s.rec, 20);
    char *err = stderr_of(&s);
    cr_assert(st == 0, "record exited %d after signal %d:\n%s", st, sig, err);
    cr_assert(strstr(err, " samples ("), "no summary:\n%s", err);
    cr_assert(kill(s.target, 0) < 0 && errno == ESRCH, "the command %d still runs", s.target);
    check_outputs(&s);
    free(err);
    close(s.out);
    sess_free(&s);
    free(bin);
}

Test(cli_session, sigint_completes_outputs)
{
    signal_command(SIGINT);
}

Test(cli_session, sigterm_completes_outputs)
{
    signal_command(SIGTERM);
}

/* -p: record stops, the target keeps running. */
Test(cli_session, sigint_with_pid_leaves_the_target_running)
{
    char *bin = cli_built("cli_native");
    char *prog[] = {bin, "0", NULL};
    int out;
    pid_t target = cli_start(prog, &out, NULL);
    char line[64];
    cr_assert(cli_wait_line(out, 20, line, sizeof(line)) == 0);
    char p[16];
    snprintf(p, sizeof(p), "%d", (int)target);
    struct sess s = {0};
    sess_paths(&s, "sess-pid");
    char *extra[] = {"-p", p};
    start_record(&s, extra, 2, false);
    cli_sleep(1.0);
    cr_assert(kill(s.rec, SIGINT) == 0);
    int st = cli_wait(s.rec, 20);
    char *err = stderr_of(&s);
    cr_assert(st == 0, "record exited %d:\n%s", st, err);
    cr_assert(kill(target, 0) == 0, "record killed the -p target");
    kill(target, SIGKILL);
    cli_wait(target, 5);
    check_outputs(&s);
    free(err);
    close(out);
    close(s.out);
    sess_free(&s);
    free(bin);
}

/* Tarantool ignores SIGTERM while its fiber spins: record must still end
 * (SIGKILL after a grace period) and complete the outputs. */
Test(cli_session, sigterm_with_a_command_that_ignores_sigterm)
{
    struct sess s = {0};
    sess_paths(&s, "sess-tt");
    char *script = cli_src("test/cli/fiber.lua");
    char *extra[] = {"--", "tarantool", script};
    start_record(&s, extra, 3, true);
    cli_sleep(0.8);
    double t0 = cli_now();
    cr_assert(kill(s.rec, SIGTERM) == 0);
    int st = cli_wait(s.rec, 20);
    char *err = stderr_of(&s);
    cr_assert(st == 0, "record exited %d after %.1f s:\n%s", st, cli_now() - t0, err);
    cr_assert(strstr(err, "SIGKILL"), "no word about the SIGKILL:\n%s", err);
    check_outputs(&s);
    free(err);
    free(script);
    close(s.out);
    sess_free(&s);
}

/* SIGKILL of record itself: what was flushed (about every second) replays. */
Test(cli_session, sigkill_keeps_the_flushed_capture)
{
    struct sess s = {0};
    sess_paths(&s, "sess-kill");
    char *bin = cli_built("cli_native");
    char *extra[] = {"--", bin, "0"};
    start_record(&s, extra, 3, true);
    cli_sleep(2.5);
    cr_assert(kill(s.rec, SIGKILL) == 0);
    cli_wait(s.rec, 10);
    kill(s.target, SIGKILL); /* orphaned: nobody else stops it */
    char *rep = cli_path(s.dir, "replay.folded");
    char *argv[] = {(char *)cli_ss(), "replay", s.snap, "-o", rep, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "replay: %d\n%s", r.status, r.err);
    char why[300], *text = cli_load(rep, NULL);
    cr_assert(text && cli_folded_check(text, why, sizeof(why)) >= 10,
              "nothing flushed survived:\n%s", r.err);
    free(text);
    cli_res_free(&r);
    free(rep);
    close(s.out);
    sess_free(&s);
    free(bin);
}

/* ---- terminal or not ---- */

/* Run argv on a new pty; everything it writes (stdout and stderr). */
static char *run_on_pty(char *const argv[], int *status)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    cr_assert(pid >= 0, "forkpty: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    double end = cli_now() + 30;
    for (;;) {
        if (len + 4096 > cap) buf = realloc(buf, cap *= 2);
        ssize_t k = read(master, buf + len, cap - len - 1);
        if (k <= 0 || cli_now() > end) break; /* EIO once the child is gone */
        len += (size_t)k;
    }
    buf[len] = 0;
    close(master);
    *status = cli_wait(pid, 10);
    return buf;
}

static void check_summary(const char *err, const char *comm)
{
    cr_assert(strstr(err, " samples (") && strstr(err, comm) && strstr(err, "% with Lua frames") &&
                  strstr(err, "% truncated") && strstr(err, " drops"),
              "summary must give samples per process, %% with Lua frames, %% truncated and "
              "drops:\n%s",
              err);
}

Test(cli_session, progress_only_on_a_terminal)
{
    char *bin = cli_built("cli_native"), *dir = cli_tmpdir("sess-tty");
    char *out = cli_path(dir, "x.folded");
    char *argv[] = {
        (char *)cli_ss(), "record", "-F", "199", "-d", "1.7", "-o", out, "--", bin, "0", NULL};
    int st;
    char *tty = run_on_pty(argv, &st);
    cr_assert(st == 0, "exit %d:\n%s", st, tty);
    int updates = 0;
    for (const char *p = tty; (p = strstr(p, "\r\033[K[stacksnap] ")); p++)
        updates++;
    cr_assert(updates >= 2, "%d progress updates on a terminal:\n%s", updates, tty);
    cr_assert(strstr(tty, " samples/s") || strstr(tty, "/s "), "progress without a rate:\n%s", tty);
    cr_assert(strstr(tty, "drops") && strstr(tty, "unwind errors"), "%s", tty);
    check_summary(tty, "cli_native ");
    free(tty);

    struct cli_res r;
    cr_assert(cli_run(&r, 30, argv) == 0);
    cr_assert(r.status == 0, "exit %d:\n%s", r.status, r.err);
    cr_assert(!strstr(r.err, "[stacksnap]") && !strchr(r.err, '\r') && !strchr(r.err, '\033'),
              "progress written to a file:\n%s", r.err);
    check_summary(r.err, "cli_native ");
    cli_res_free(&r);
    cli_rmtree(dir);
    free(dir), free(out), free(bin);
}

Test(cli_session, summary_counts_lua_frames)
{
    char *lua = cli_src("test/cli/spin.lua"), *dir = cli_tmpdir("sess-sum");
    char *out = cli_path(dir, "x.folded");
    char *argv[] = {(char *)cli_ss(), "record", "-F", "499", "-o", out, "--",
                    "luajit",         "-joff",  lua,  "0.6", NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 30, argv) == 0);
    cr_assert(r.status == 0, "exit %d:\n%s", r.status, r.err);
    check_summary(r.err, "luajit ");
    const char *p = strstr(r.err, "% with Lua frames");
    cr_assert(p);
    while (p > r.err && p[-1] != ' ')
        p--;
    double lua_pct = atof(p);
    cr_assert(lua_pct > 10, "%.1f%% with Lua frames for a Lua workload:\n%s", lua_pct, r.err);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(dir), free(out), free(lua);
}
