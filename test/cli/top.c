/* test/cli/top.c: `stacksnap top` (issue 18) as a user sees it, in a real
 * terminal: a tmux session (its own server socket) runs top on spin.lua,
 * whose hot function is leaf(); capture-pane reads the screen and
 * send-keys presses keys. The hot function is the first row; s, l, p and
 * space change the sort, the Lua granularity, the process and pause; q and
 * ^C end top with the terminal as it was (main screen back, echo and
 * canonical mode on). With stdout not a terminal, top exits 2 saying so. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static char sock[64];

static void tmux_setup(void)
{
    snprintf(sock, sizeof(sock), "ss-top-test-%d", (int)getpid());
}

static void tmux_teardown(void)
{
    char *argv[] = {"tmux", "-L", sock, "kill-server", NULL};
    struct cli_res r;
    if (cli_run(&r, 10, argv) == 0) cli_res_free(&r);
}

/* tmux -L SOCK ARGS...; returns stdout (malloc'd). */
static char *tmux(const char *first, ...)
{
    char *argv[16] = {"tmux", "-L", sock, (char *)first};
    int n = 4;
    va_list ap;
    va_start(ap, first);
    for (char *a; n < 15 && (a = va_arg(ap, char *));)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    struct cli_res r;
    cr_assert(cli_run(&r, 20, argv) == 0, "cannot run tmux");
    cr_assert_eq(r.status, 0, "tmux %s: %s", first, r.err);
    char *out = r.out;
    r.out = NULL;
    cli_res_free(&r);
    return out;
}

static char *screen(void)
{
    return tmux("capture-pane", "-p", "-t", "top", NULL);
}

/* Wait until the screen contains needle (or time runs out); the screen. */
static char *wait_for(const char *needle, double timeout)
{
    double end = cli_now() + timeout;
    for (;;) {
        char *s = screen();
        if (strstr(s, needle) || cli_now() > end) return s;
        free(s);
        cli_sleep(0.2);
    }
}

/* The first table row (after the FUNCTION header). */
static void first_row(const char *scr, double *self, double *total, char *name, size_t len)
{
    const char *h = strstr(scr, "FUNCTION\n");
    cr_assert(h, "no table header:\n%s", scr);
    double a, b;
    int off = 0;
    char kind[16];
    cr_assert(sscanf(h + 9, "%lf%% %lf%% %lf%% %lf%% %15s %n", self, total, &a, &b, kind, &off) ==
                      5 &&
                  off,
              "no first row:\n%s", scr);
    const char *e = strchr(h + 9 + off, '\n');
    snprintf(name, len, "%.*s", e ? (int)(e - (h + 9 + off)) : (int)strlen(h + 9 + off),
             h + 9 + off);
}

/* Start top on spin.lua in a 160x40 terminal; after top ends the shell
 * prints its exit status and the terminal modes, then waits. The shell
 * ignores SIGINT (^C is for top and its command, not for the shell). */
static void start(void)
{
    char *tm = cli_which("tmux");
    cr_assert(tm, "tmux not installed (Debian tmux; scripts/dev installs it)");
    free(tm);
    char *lua = cli_src("test/cli/spin.lua"), *cmd;
    cr_assert(asprintf(&cmd,
                       "trap '' INT; %s top -F 199 -- luajit -joff %s 0; echo EXIT=$?; "
                       "stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo "
                       "| tr '\\n' ' '; echo; echo MODES-DONE; sleep 60",
                       cli_ss(), lua) > 0);
    free(tmux("new-session", "-d", "-s", "top", "-x", "160", "-y", "40", cmd, NULL));
    free(cmd);
    free(lua);
}

/* After top ended: status, modes restored, main screen back. */
static void expect_clean(const char *how)
{
    char *s = wait_for("MODES-DONE", 15);
    cr_assert(strstr(s, "EXIT="), "%s: top did not end:\n%s", how, s);
    int st = atoi(strstr(s, "EXIT=") + 5);
    cr_expect_eq(st, 0, "%s: exit %d", how, st);
    cr_expect(strstr(s, " icanon ") || strstr(s, "\nicanon "), "%s: canonical mode off:\n%s", how,
              s);
    cr_expect(strstr(s, " echo") && !strstr(s, "-echo "), "%s: echo off:\n%s", how, s);
    cr_expect(!strstr(s, "q quit"), "%s: the top screen is still shown:\n%s", how, s);
    cr_expect(strstr(s, "stacksnap: ") && strstr(s, " samples ("), "%s: no summary:\n%s", how, s);
    free(s);
}

Test(cli_top, keys_and_quit, .init = tmux_setup, .fini = tmux_teardown)
{
    start();
    char *s = wait_for("last 3 s", 20);
    double self, total;
    char name[128];
    first_row(s, &self, &total, name, sizeof(name));
    cr_expect(!strncmp(name, "leaf (", 6) && strstr(name, "spin.lua:5)"),
              "hot function first (by function: first line 5): '%s'\n%s", name, s);
    cr_expect_gt(self, 70, "leaf self %.2f%%", self);
    cr_expect(strstr(s, "sort: self") && strstr(s, "Lua: functions") && strstr(s, "process: all"));
    free(s);

    free(tmux("send-keys", "-t", "top", "s", NULL));
    s = wait_for("sort: total", 5);
    first_row(s, &self, &total, name, sizeof(name));
    /* the root-most functions are in (nearly) every stack; a truncated
     * stack or two may miss them */
    cr_expect(total > 95, "sort by total: first row %.2f%% '%s'\n%s", total, name, s);
    const char *row2 = strchr(strstr(s, "FUNCTION\n") + 9, '\n');
    double self2, total2;
    cr_assert(row2 && sscanf(row2 + 1, "%lf%% %lf%%", &self2, &total2) == 2, "%s", s);
    cr_expect_geq(total, total2, "sorted by total:\n%s", s);
    free(s);

    free(tmux("send-keys", "-t", "top", "s", "l", NULL));
    s = wait_for("Lua: lines", 5);
    first_row(s, &self, &total, name, sizeof(name));
    cr_expect(!strncmp(name, "leaf (", 6) && strstr(name, "spin.lua:7)"),
              "by line: the loop's line 7: '%s'\n%s", name, s);
    free(s);

    free(tmux("send-keys", "-t", "top", "p", NULL));
    s = wait_for("process: luajit (pid ", 5);
    cr_expect(strstr(s, "process: luajit (pid "), "p selects the process:\n%s", s);
    free(s);
    free(tmux("send-keys", "-t", "top", "a", " ", NULL));
    s = wait_for("PAUSED", 5);
    cr_expect(strstr(s, "process: all") && strstr(s, "PAUSED"), "a, space:\n%s", s);
    /* paused: the screen does not change */
    cli_sleep(2.2);
    char *s2 = screen();
    cr_expect_str_eq(s, s2, "paused screen changed");
    free(s2);
    free(s);
    free(tmux("send-keys", "-t", "top", " ", NULL));
    s = wait_for("samples/s", 5);
    free(s);

    free(tmux("send-keys", "-t", "top", "q", NULL));
    expect_clean("q");
}

Test(cli_top, ctrl_c, .init = tmux_setup, .fini = tmux_teardown)
{
    start();
    free(wait_for("last 2 s", 20));
    free(tmux("send-keys", "-t", "top", "C-c", NULL));
    expect_clean("^C");
}

Test(cli_top, not_a_terminal)
{
    char *argv[] = {(char *)cli_ss(), "top", "--", "true", NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 20, argv) == 0);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "not a terminal"), "%s", r.err);
    cli_res_free(&r);
}
