/* cli/cmd_diff.c: `stacksnap diff BEFORE AFTER [-o FILE]...`: each input by its
 * extension (.snap replayed, .folded, .pb.gz), then every output by its
 * extension (.svg, .txt, .folded; "-" the table on stdout). Bad input
 * exits 2, naming the file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/outputs.h"
#include "stacksnap/diff.h"
#include "stacksnap/replay.h"

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

static int add_stack(void *ctx, const struct ss_stack *st)
{
    struct ss_err err = {0};
    return ss_report_add(ctx, st, 1, &err) < 0;
}

static void on_msg(void *ctx, const char *msg)
{
    fprintf(stderr, "stacksnap: %s: %s\n", (const char *)ctx, msg);
}

/* A capture replayed into a report. Returns 0 or an exit status. */
static int load_snap(struct ss_diff *d, enum ss_diff_side side, const char *path)
{
    struct ss_err err = {0};
    struct ss_replay *r;
    struct ss_replay_opts o = {0};
    int rc = ss_replay_open(&r, path, &o, &err);
    if (rc < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return rc == -ENOMEM || rc == -EIO ? 1 : 2;
    }
    const struct ss_snap_header *h = ss_replay_header(r);
    struct ss_report_opts ro = {.freq_hz = h ? h->freq_hz : 99};
    struct ss_report *rep = ss_report_new(&ro, &err);
    int st = 0;
    if (!rep) {
        st = 1;
    } else if ((rc = ss_replay_run(r, add_stack, on_msg, rep, &err)) != 0) {
        fprintf(stderr, "stacksnap: %s: %s\n", path,
                rc < 0 && err.msg[0] ? err.msg : "replay failed");
        st = 1;
    } else if (!h && !ss_replay_header(r)) {
        fprintf(stderr, "stacksnap: %s: no valid header record (not a capture, or cut short)\n",
                path);
        st = 2;
    } else if (ss_diff_add_report(d, side, rep, &err)) {
        fprintf(stderr, "stacksnap: %s: %s\n", path, err.msg);
        st = 1;
    }
    ss_report_free(rep);
    ss_replay_close(r);
    return st;
}

static int load(struct ss_diff *d, enum ss_diff_side side, const char *path)
{
    int folded = ends_with(path, ".folded"), pprof = ends_with(path, ".pb.gz");
    if (ends_with(path, ".snap")) return load_snap(d, side, path);
    if (!folded && !pprof) {
        fprintf(stderr,
                "stacksnap: %s: cannot tell the input's format from its extension "
                "(.snap, .folded or .pb.gz)\n",
                path);
        return 2;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "stacksnap: %s: cannot open: %s\n", path, strerror(errno));
        return 2;
    }
    struct ss_err err = {0};
    int rc = folded ? ss_diff_add_folded(d, side, f, path, &err)
                    : ss_diff_add_pprof(d, side, f, path, &err);
    fclose(f);
    if (rc) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return rc == -EINVAL || rc == -EFBIG ? 2 : 1;
    }
    return 0;
}

int ss_cmd_diff(const struct ss_cli *c)
{
    struct ss_err err = {0};
    struct ss_diff *d = ss_diff_new(&err);
    if (!d) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    int rc = load(d, SS_DIFF_BEFORE, c->capture);
    if (!rc) rc = load(d, SS_DIFF_AFTER, c->after);
    if (!rc && (ss_diff_set_name(d, SS_DIFF_BEFORE, c->capture) ||
                ss_diff_set_name(d, SS_DIFF_AFTER, c->after)))
        rc = 1;
    for (int i = 0; !rc && i < c->nout; i++) {
        int e = ss_diff_save(d, c->out[i].path, &err);
        if (e) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            rc = e == -EINVAL ? 2 : ss_cli_open_status(e);
        }
    }
    if (!rc)
        fprintf(stderr, "stacksnap: diff: before %llu samples (%s), after %llu samples (%s)\n",
                (unsigned long long)ss_diff_samples(d, SS_DIFF_BEFORE), c->capture,
                (unsigned long long)ss_diff_samples(d, SS_DIFF_AFTER), c->after);
    ss_diff_free(d);
    return rc;
}
