/* test/cli/inproc_replay.c: the tests' in-process replays of a capture
 * (cli.h: cli_replay_inproc, cli_replay_runs, cli_replay_memo,
 * cli_replay_steps): the library's replay into report sinks, with the
 * unwinder's counters read afterwards, so a test can check a replay's
 * output and what it cost without running the binary. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "stacksnap/replay.h"
#include "stacksnap/report.h"

struct inproc {
    struct ss_report *rep;
    struct ss_report_sink *sinks[2];
    int nsinks;
    char *msgs;
    size_t msgslen;
};

static int inproc_stack(void *ctx, const struct ss_stack *st)
{
    struct inproc *p = ctx;
    struct ss_err err = {0};
    if (ss_report_add(p->rep, st, 1, &err) < 0) return 1;
    for (int i = 0; i < p->nsinks; i++)
        if (ss_report_sink_add(p->sinks[i], st, &err) < 0) return 1;
    return 0;
}

static void inproc_msg(void *ctx, const char *msg)
{
    struct inproc *p = ctx;
    if (!p->msgs) return;
    size_t used = strlen(p->msgs);
    snprintf(p->msgs + used, p->msgslen - used, "%s\n", msg);
}

/* One run of r into the folded and/or text file (NULL: none). */
static int inproc_run(struct ss_replay *r, const char *folded, const char *txt, struct inproc *p)
{
    struct ss_err err = {0};
    const struct ss_snap_header *h = ss_replay_header(r);
    uint32_t freq = h ? h->freq_hz : 99;
    struct ss_report_opts ro = {.freq_hz = freq};
    int rc = 0;
    p->nsinks = 0;
    p->rep = ss_report_new(&ro, &err);
    const char *paths[2] = {folded, txt};
    for (int i = 0; p->rep && i < 2; i++)
        if (paths[i]) {
            p->sinks[p->nsinks] = ss_report_sink_open(paths[i], SS_REPORT_NONE, freq, &err);
            if (!p->sinks[p->nsinks]) {
                rc = err.code ? err.code : -EINVAL;
                break;
            }
            p->nsinks++;
        }
    if (!p->rep) rc = -ENOMEM;
    if (rc == 0) {
        rc = ss_replay_run(r, inproc_stack, inproc_msg, p, &err);
        if (rc > 0) rc = -EIO;
    }
    for (int i = 0; i < p->nsinks; i++)
        if (ss_report_sink_close(p->sinks[i], p->rep, &err) < 0 && rc == 0) rc = -EIO;
    if (rc < 0 && err.msg[0]) inproc_msg(p, err.msg);
    ss_report_free(p->rep);
    p->rep = NULL;
    return rc;
}

/* Open snap for in-process runs; NULL with the reason in p's messages. */
static struct ss_replay *inproc_open_opts(const char *snap, const struct ss_replay_opts *o,
                                          struct inproc *p, int *rc)
{
    struct ss_err err = {0};
    struct ss_replay *r;
    if (p->msgs && p->msgslen) p->msgs[0] = 0;
    *rc = ss_replay_open(&r, snap, o, &err);
    if (*rc < 0) {
        inproc_msg(p, err.msg);
        return NULL;
    }
    return r;
}

static struct ss_replay *inproc_open(const char *snap, const char *symfs, struct inproc *p, int *rc)
{
    struct ss_replay_opts o = {.symfs = symfs};
    return inproc_open_opts(snap, &o, p, rc);
}

int cli_replay_memo(const char *snap, bool memo, const char *folded, const char *txt,
                    long long *hits, long long *native_hits, char *msgs, size_t msgslen)
{
    struct inproc p = {.msgs = msgs, .msgslen = msgslen};
    struct ss_replay_opts o = {.no_memo = !memo};
    int rc;
    struct ss_replay *r = inproc_open_opts(snap, &o, &p, &rc);
    if (!r) return rc;
    rc = inproc_run(r, folded, txt, &p);
    struct ss_unwinder_stats st;
    ss_unwinder_stats(ss_replay_unwinder(r), &st);
    *hits = (long long)st.memo_hits;
    *native_hits = (long long)st.native_memo_hits;
    ss_replay_close(r);
    return rc;
}

int cli_replay_steps(const char *snap, int mode, bool check, const char *txt, struct cli_steps *st,
                     char *msgs, size_t msgslen)
{
    struct inproc p = {.msgs = msgs, .msgslen = msgslen};
    struct ss_replay_opts o = {
        .no_memo = true, .native_mode = (enum ss_native_mode)mode, .check_rules = check};
    int rc;
    struct ss_replay *r = inproc_open_opts(snap, &o, &p, &rc);
    if (!r) return rc;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = inproc_run(r, NULL, txt, &p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    st->secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    struct ss_unwinder_stats us;
    ss_unwinder_stats(ss_replay_unwinder(r), &us);
    st->rule = (long long)us.rule_steps;
    st->slow = (long long)us.unw_steps;
    st->checks = (long long)us.rule_checks;
    st->diffs = (long long)us.rule_check_diffs;
    ss_replay_close(r);
    return rc;
}

int cli_replay_runs(const char *snap, const char *symfs, int runs, const char *dir, char *msgs,
                    size_t msgslen)
{
    struct inproc p = {.msgs = msgs, .msgslen = msgslen};
    int rc;
    struct ss_replay *r = inproc_open(snap, symfs, &p, &rc);
    if (!r) return rc;
    for (int k = 0; rc == 0 && k < runs; k++) {
        char folded[4096], txt[4096];
        snprintf(folded, sizeof(folded), "%s/run%d.folded", dir, k);
        snprintf(txt, sizeof(txt), "%s/run%d.txt", dir, k);
        rc = inproc_run(r, dir ? folded : NULL, dir ? txt : NULL, &p);
    }
    ss_replay_close(r);
    return rc;
}

int cli_replay_inproc(const char *snap, const char *symfs, const char *folded, const char *txt,
                      char *msgs, size_t msgslen)
{
    struct inproc p = {.msgs = msgs, .msgslen = msgslen};
    int rc;
    struct ss_replay *r = inproc_open(snap, symfs, &p, &rc);
    if (!r) return rc;
    rc = inproc_run(r, folded, txt, &p);
    ss_replay_close(r);
    return rc;
}
