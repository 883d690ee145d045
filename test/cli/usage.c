/* test/cli/usage.c: the command-line contract of DESIGN.md (issue 7) —
 * usage errors exit 2 with a message naming the cause (unknown flag, missing
 * pid, unwritable output, no mode, bad values), --help shows examples and
 * exits 0, record returns the command's exit status, and captures are
 * private: mode 0600, never written through a symlink (issue 6). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Run stacksnap with the given arguments (NULL-terminated). */
static void ss(struct cli_res *r, double timeout, ...)
{
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli_ss();
    va_list ap;
    va_start(ap, timeout);
    for (char *a; n < 39 && (a = va_arg(ap, char *));)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cr_assert(cli_run(r, timeout, argv) == 0);
    cr_assert(r->status >= 0, "stacksnap %s %s hung", argv[1], n > 2 ? argv[2] : "");
}

static void expect_usage(struct cli_res *r, const char *what, const char *needle)
{
    cr_assert(r->status == 2, "%s: exit %d, want 2:\n%s", what, r->status, r->err);
    cr_assert(strstr(r->err, "stacksnap: "), "%s: no 'stacksnap: ' message:\n%s", what, r->err);
    cr_assert(strstr(r->err, needle), "%s: message must name '%s':\n%s", what, needle, r->err);
    cli_res_free(r);
}

Test(cli_usage, unknown_flag_and_command)
{
    struct cli_res r;
    ss(&r, 10, "record", "--bogus", "--", "true", NULL);
    expect_usage(&r, "record --bogus", "--bogus");
    ss(&r, 10, "replay", "x.snap", "--frobnicate", NULL);
    expect_usage(&r, "replay --frobnicate", "--frobnicate");
    ss(&r, 10, "frobnicate", NULL);
    expect_usage(&r, "unknown command", "frobnicate");
    ss(&r, 10, NULL);
    expect_usage(&r, "no command", "missing command");
    ss(&r, 10, "record", "-p", NULL);
    expect_usage(&r, "-p without a value", "-p");
}

Test(cli_usage, missing_pid)
{
    cr_assert(kill(999999, 0) < 0 && errno == ESRCH, "pid 999999 exists here");
    char *dir = cli_tmpdir("use-pid"), *out = cli_path(dir, "x.folded"),
         *snap = cli_path(dir, "x.snap");
    struct cli_res r;
    ss(&r, 20, "record", "-p", "999999", "-o", out, "-o", snap, NULL);
    expect_usage(&r, "-p 999999", "999999");
    cr_assert(access(out, F_OK) < 0 && access(snap, F_OK) < 0,
              "outputs created for a pid that does not exist");
    ss(&r, 20, "record", "-p", "1,999999", "-o", out, NULL);
    expect_usage(&r, "-p 1,999999", "999999");
    ss(&r, 20, "record", "-p", "12ab", NULL);
    expect_usage(&r, "-p 12ab", "12ab");
    cli_rmtree(dir);
    free(dir), free(out), free(snap);
}

Test(cli_usage, unwritable_output)
{
    char *bin = cli_built("cli_native");
    const char *paths[] = {"/nonexistent/x.svg", "/nonexistent/x.folded", "/nonexistent/x.snap",
                           "/proc/version.txt"};
    for (int i = 0; i < 4; i++) {
        struct cli_res r;
        ss(&r, 20, "record", "-o", paths[i], "--", bin, "30", NULL);
        cr_assert(r.secs < 10, "%s: took %.1f s (the command should not run)", paths[i], r.secs);
        cr_assert(!strstr(r.out, "ready"), "%s: the command ran", paths[i]);
        expect_usage(&r, paths[i], paths[i]);
    }
    /* replay too, and the cause is named */
    struct cli_res r;
    ss(&r, 20, "replay", "/nonexistent/in.snap", NULL);
    expect_usage(&r, "missing capture", "/nonexistent/in.snap");
    char *dir = cli_tmpdir("use-out"), *snap = cli_path(dir, "a.snap");
    ss(&r, 30, "record", "-F", "99", "-o", snap, "--", bin, "0.2", NULL);
    cr_assert(r.status == 0, "%s", r.err);
    cli_res_free(&r);
    ss(&r, 20, "replay", snap, "-o", "/nonexistent/x.svg", NULL);
    cr_assert(strstr(r.err, "No such file or directory"), "%s", r.err);
    expect_usage(&r, "replay -o /nonexistent/x.svg", "/nonexistent/x.svg");
    cli_rmtree(dir);
    free(dir), free(snap), free(bin);
}

Test(cli_usage, no_mode_and_bad_values)
{
    struct cli_res r;
    ss(&r, 10, "record", NULL);
    expect_usage(&r, "record", "-p PID, -a or -- COMMAND");
    ss(&r, 10, "record", "-o", "x.folded", NULL);
    expect_usage(&r, "record -o x.folded", "-p PID, -a or -- COMMAND");
    ss(&r, 10, "record", "-p", "1", "-a", NULL);
    expect_usage(&r, "-p and -a", "choose one");
    ss(&r, 10, "record", "-F", "0", "--", "true", NULL);
    expect_usage(&r, "-F 0", "'0'");
    ss(&r, 10, "record", "-F", "fast", "--", "true", NULL);
    expect_usage(&r, "-F fast", "'fast'");
    ss(&r, 10, "record", "-d", "-1", "--", "true", NULL);
    expect_usage(&r, "-d -1", "'-1'");
    ss(&r, 10, "record", "--stack-size", "10", "--", "true", NULL);
    expect_usage(&r, "--stack-size 10", "'10'");
    ss(&r, 10, "record", "-o", "out.xyz", "--", "true", NULL);
    expect_usage(&r, "-o out.xyz", "out.xyz");
    ss(&r, 10, "record", "--format", "gif", "--", "true", NULL);
    expect_usage(&r, "--format gif", "gif");
    ss(&r, 10, "replay", NULL);
    expect_usage(&r, "replay", "capture file");
    ss(&r, 10, "replay", "a.snap", "-o", "b.snap", NULL);
    expect_usage(&r, "replay -o b.snap", "b.snap");
    ss(&r, 10, "report", "a.snap", "--top", "0", NULL);
    expect_usage(&r, "--top 0", "'0'");
    ss(&r, 10, "record", "-o", "a.snap", "-o", "b.snap", "--", "true", NULL);
    expect_usage(&r, "two captures", "b.snap");
    ss(&r, 10, "record", "-o", "x.folded", "-o", "x.folded", "--", "true", NULL);
    expect_usage(&r, "an output twice", "x.folded");
}

Test(cli_usage, help)
{
    const char *forms[][2] = {
        {"--help", NULL}, {"-h", NULL}, {"record", "--help"}, {"replay", "-h"}};
    for (int i = 0; i < 4; i++) {
        struct cli_res r;
        ss(&r, 10, forms[i][0], forms[i][1], NULL);
        cr_assert(r.status == 0, "%s: exit %d", forms[i][0], r.status);
        cr_assert(strstr(r.out, "Examples:") && strstr(r.out, "stacksnap record -") &&
                      strstr(r.out, "stacksnap replay ") && strstr(r.out, "Exit status"),
                  "%s:\n%s", forms[i][0], r.out);
        cr_assert(r.err_len == 0, "help wrote to stderr:\n%s", r.err);
        cli_res_free(&r);
    }
}

Test(cli_usage, record_returns_the_command_status)
{
    char *bin = cli_built("cli_native"), *dir = cli_tmpdir("use-st");
    char *out = cli_path(dir, "x.folded");
    struct cli_res r;
    ss(&r, 30, "record", "-F", "99", "-o", out, "--", bin, "0.2", "7", NULL);
    cr_assert(r.status == 7, "exit %d, want 7:\n%s", r.status, r.err);
    cli_res_free(&r);
    ss(&r, 30, "record", "-F", "99", "-o", out, "--", "sh", "-c", "kill -KILL $$", NULL);
    cr_assert(r.status == 128 + SIGKILL, "exit %d, want %d:\n%s", r.status, 128 + SIGKILL, r.err);
    cli_res_free(&r);
    ss(&r, 30, "record", "-F", "99", "-o", out, "--", "/nonexistent/program", NULL);
    cr_assert(r.status == 127 && strstr(r.err, "/nonexistent/program"), "exit %d:\n%s", r.status,
              r.err);
    cli_res_free(&r);
    /* -d stops a command that would run forever; record then succeeds */
    ss(&r, 30, "record", "-F", "99", "-d", "0.5", "-o", out, "--", bin, "0", NULL);
    cr_assert(r.status == 0 && r.secs < 5, "exit %d after %.1f s:\n%s", r.status, r.secs, r.err);
    char *text = cli_load(out, NULL), why[300];
    cr_assert(cli_folded_check(text, why, sizeof(why)) > 0, "%s", why);
    free(text);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(dir), free(out), free(bin);
}

Test(cli_usage, default_output_is_folded_on_stdout)
{
    char *bin = cli_built("cli_native"), *dir = cli_tmpdir("use-stdout");
    char *snap = cli_path(dir, "a.snap"), *cmd;
    cr_assert(asprintf(&cmd, "%s 0.3 >/dev/null", bin) > 0);
    struct cli_res r;
    ss(&r, 30, "record", "-F", "199", "--", "sh", "-c", cmd, NULL);
    char why[300];
    cr_assert(r.status == 0 && cli_folded_check(r.out, why, sizeof(why)) > 0, "%d %s\n%s", r.status,
              why, r.out);
    cli_res_free(&r);
    ss(&r, 30, "record", "-F", "199", "-o", snap, "-o", "-", "--", "sh", "-c", cmd, NULL);
    cr_assert(r.status == 0);
    char *live = r.out;
    free(r.err);
    ss(&r, 30, "replay", snap, NULL);
    cr_assert(r.status == 0 && !strcmp(live, r.out), "replay to stdout differs:\n%s\n--\n%s", live,
              r.out);
    cli_res_free(&r);
    /* --format overrides the extension */
    char *data = cli_path(dir, "stacks.data");
    ss(&r, 30, "replay", snap, "--format", "txt", "-o", data, NULL);
    cr_assert(r.status == 0, "%s", r.err);
    cli_res_free(&r);
    char *txt = cli_load(data, NULL);
    cr_assert(txt && strstr(txt, " cpu-clock:"), "--format txt did not write perf text");
    free(txt);
    free(data);
    free(live);
    cli_rmtree(dir);
    free(dir), free(snap), free(cmd), free(bin);
}

Test(cli_usage, system_wide)
{
    char *dir = cli_tmpdir("use-a"), *out = cli_path(dir, "all.folded");
    struct cli_res r;
    ss(&r, 30, "record", "-a", "-F", "99", "-d", "0.5", "-o", out, NULL);
    cr_assert(r.status == 0, "exit %d:\n%s", r.status, r.err);
    char *text = cli_load(out, NULL), why[300];
    cr_assert(text && cli_folded_check(text, why, sizeof(why)) >= 0, "%s", why);
    free(text);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(dir), free(out);
}

/* ---- captures are private ---- */

static void record_to(const char *snap, struct cli_res *r)
{
    char *bin = cli_built("cli_native");
    ss(r, 30, "record", "-F", "99", "-o", snap, "--", bin, "0.2", NULL);
    free(bin);
}

Test(cli_usage, capture_mode_0600)
{
    char *dir = cli_tmpdir("use-0600"), *snap = cli_path(dir, "a.snap");
    mode_t old = umask(0);
    struct cli_res r;
    record_to(snap, &r);
    cr_assert(r.status == 0, "%s", r.err);
    cli_res_free(&r);
    struct stat st;
    cr_assert(stat(snap, &st) == 0 && (st.st_mode & 07777) == 0600, "mode %o", st.st_mode & 07777);
    /* an existing world-readable file is taken over as 0600 */
    cr_assert(chmod(snap, 0644) == 0);
    record_to(snap, &r);
    cr_assert(r.status == 0, "%s", r.err);
    cli_res_free(&r);
    cr_assert(stat(snap, &st) == 0 && (st.st_mode & 07777) == 0600, "mode %o after overwrite",
              st.st_mode & 07777);
    umask(old);
    cli_rmtree(dir);
    free(dir), free(snap);
}

Test(cli_usage, capture_never_through_a_symlink)
{
    char *dir = cli_tmpdir("use-link"), *link = cli_path(dir, "link.snap"),
         *target = cli_path(dir, "target.snap"), *victim = cli_path(dir, "victim");
    struct cli_res r;
    /* dangling: the target must not be created */
    cr_assert(symlink(target, link) == 0);
    record_to(link, &r);
    cr_assert(strstr(r.err, "symbolic link"), "%s", r.err);
    expect_usage(&r, "dangling symlink", link);
    cr_assert(access(target, F_OK) < 0, "the symlink was followed");
    /* to an existing file: it must stay as it was */
    cr_assert(unlink(link) == 0 && cli_store(victim, "keep me\n", 8) == 0);
    cr_assert(symlink(victim, link) == 0);
    record_to(link, &r);
    expect_usage(&r, "symlink to a file", link);
    size_t len;
    char *b = cli_load(victim, &len);
    cr_assert(b && len == 8 && !memcmp(b, "keep me\n", 8), "the file behind the link changed");
    free(b);
    cli_rmtree(dir);
    free(dir), free(link), free(target), free(victim);
}
