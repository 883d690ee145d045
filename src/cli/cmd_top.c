/* cli/cmd_top.c: `stacksnap top` — the live view (topview.h) over record's
 * sampling loop; stdout must be a terminal. */
#include <curses.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/topview.h"
#include "stacksnap/top.h"

struct ss_topview {
    const struct ss_cli *c;
    SCREEN *scr;
    struct ss_top *top;
    struct ss_top_view view;
    struct ss_top_query q;
    double last;
    int paused, oom, dirty;
    uint64_t last_samples;
    double rate;
};

int ss_cmd_top(const struct ss_cli *c)
{
    if (!isatty(STDOUT_FILENO)) {
        fprintf(stderr, "stacksnap: top: stdout is not a terminal (top is a full-screen view; "
                        "use 'stacksnap record -o FILE' for files or pipes)\n");
        return 2;
    }
    return ss_cmd_record(c); /* record sees cmd "top" and feeds the view */
}

struct ss_topview *ss_topview_open(const struct ss_cli *c)
{
    struct ss_err err = {0};
    struct ss_topview *v = calloc(1, sizeof(*v));
    if (!v || !(v->top = ss_top_new(&err))) {
        fprintf(stderr, "stacksnap: top: out of memory\n");
        free(v);
        return NULL;
    }
    v->c = c;
    setlocale(LC_CTYPE, ""); /* names may be UTF-8 */
    v->scr = newterm(NULL, stdout, stdin);
    if (!v->scr) {
        fprintf(stderr, "stacksnap: top: cannot use the terminal (TERM=%s)\n",
                getenv("TERM") ? getenv("TERM") : "");
        ss_top_free(v->top);
        free(v);
        return NULL;
    }
    cbreak();
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    curs_set(0);
    v->dirty = 1;
    return v;
}

void ss_topview_add(struct ss_topview *v, const struct ss_stack *st)
{
    if (ss_top_add(v->top, st) < 0) v->oom = 1;
}

static double pct(uint64_t v, uint64_t total)
{
    return total ? 100.0 * (double)v / (double)total : 0.0;
}

/* The next process after the selected one (0 = all, then each pid). */
static void next_process(struct ss_topview *v)
{
    uint32_t pid;
    const char *comm;
    for (size_t i = 0; ss_top_process(v->top, i, &pid, &comm); i++)
        if (pid > v->q.pid) {
            v->q.pid = pid;
            return;
        }
    v->q.pid = 0;
}

static const char *target(const struct ss_topview *v, char *buf, size_t len)
{
    const struct ss_cli *c = v->c;
    if (c->all) return "all processes";
    if (c->command) {
        snprintf(buf, len, "%s", c->command[0]);
        return buf;
    }
    snprintf(buf, len, "pid %d%s", c->pids[0], c->npids > 1 ? " ..." : "");
    return buf;
}

static void draw(struct ss_topview *v, struct ss_capture *cap, unsigned long long errors)
{
    struct ss_capture_stats cs;
    ss_capture_stats(cap, &cs);
    if (ss_top_query(v->top, &v->q, &v->view) < 0) v->oom = 1;
    const struct ss_top_view *w = &v->view;
    char tb[64], pb[64] = "all";
    if (v->q.pid) {
        uint32_t pid;
        const char *comm = "?";
        for (size_t i = 0; ss_top_process(v->top, i, &pid, &comm); i++)
            if (pid == v->q.pid) break;
        snprintf(pb, sizeof(pb), "%s (pid %u)", comm, v->q.pid);
    }
    erase();
    int rows = LINES, cols = COLS;
    attron(A_BOLD);
    mvprintw(0, 0,
             "stacksnap top | %s | %u Hz | %.0f samples/s | %llu drops "
             "| %llu unwind errors%s",
             target(v, tb, sizeof(tb)), v->c->freq, v->rate, (unsigned long long)cs.dropped, errors,
             v->oom ? " | OUT OF MEMORY" : "");
    attroff(A_BOLD);
    mvprintw(1, 0,
             "last %u s: %llu samples | all: %llu samples | sort: %s | Lua: %s "
             "| process: %s%s",
             w->window_s, (unsigned long long)w->samples_win, (unsigned long long)w->samples_all,
             v->q.sort == SS_TOP_SORT_SELF ? "self" : "total",
             v->q.lua_lines ? "lines" : "functions", pb, v->paused ? " | PAUSED" : "");
    mvprintw(2, 0,
             "q quit  s sort self/total  l Lua function/line  p next process  a all  "
             "space pause");
    attron(A_REVERSE);
    mvprintw(4, 0, "%-*s", cols > 0 ? cols : 1, "");
    mvprintw(4, 0, "%7s %7s %7s %7s  %-6s  %s", "SELF%", "TOTAL%", "SELF%", "TOTAL%", "KIND",
             "FUNCTION");
    attroff(A_REVERSE);
    mvprintw(3, 0, "%-15s %-15s", "  last seconds", "  cumulative");
    for (size_t i = 0; i < w->nrows && (int)i + 5 < rows; i++) {
        const struct ss_top_row *r = &w->rows[i];
        mvprintw((int)i + 5, 0, "%6.2f%% %6.2f%% %6.2f%% %6.2f%%  %-6s  %.*s",
                 pct(r->self_win, w->samples_win), pct(r->total_win, w->samples_win),
                 pct(r->self_all, w->samples_all), pct(r->total_all, w->samples_all),
                 ss_frame_kind_str(r->kind), cols > 48 ? cols - 48 : 0, r->name);
    }
    refresh();
}

int ss_topview_tick(struct ss_topview *v, double now, struct ss_capture *cap,
                    unsigned long long unwind_errors)
{
    int ch;
    while ((ch = getch()) != ERR) {
        switch (ch) {
        case 'q':
        case 'Q':
            return 1;
        case 's':
            v->q.sort = v->q.sort == SS_TOP_SORT_SELF ? SS_TOP_SORT_TOTAL : SS_TOP_SORT_SELF;
            break;
        case 'l':
            v->q.lua_lines = !v->q.lua_lines;
            break;
        case 'p':
            next_process(v);
            break;
        case 'a':
            v->q.pid = 0;
            break;
        case ' ':
            v->paused = !v->paused;
            break;
        case KEY_RESIZE:
            break;
        default:
            continue;
        }
        v->dirty = 1;
    }
    if (!v->last) v->last = now;
    if (now - v->last >= 1.0) {
        struct ss_top_view all = {0};
        struct ss_top_query q = {0};
        if (ss_top_query(v->top, &q, &all) == 0) {
            v->rate = (double)(all.samples_all - v->last_samples) / (now - v->last);
            v->last_samples = all.samples_all;
        }
        ss_top_view_free(&all);
        ss_top_tick(v->top);
        v->last = now;
        v->dirty = !v->paused; /* paused: the screen stays as it was */
    }
    if (v->dirty) draw(v, cap, unwind_errors);
    v->dirty = 0;
    return 0;
}

void ss_topview_close(struct ss_topview *v)
{
    if (!v) return;
    endwin();
    delscreen(v->scr);
    ss_top_view_free(&v->view);
    ss_top_free(v->top);
    free(v);
}
