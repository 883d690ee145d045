/* cli/cmd_replay.c: `stacksnap replay` (outputs from a capture), `report` (top
 * table) and `info` (what a capture holds). Bad input exits 2. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/outputs.h"
#include "stacksnap/replay.h"

static int add_stack(void *ctx, const struct ss_stack *st)
{
    return ss_outputs_add(ctx, st) < 0;
}

static int on_debug(void *ctx, struct ss_unwinder *u, const uint8_t *id, size_t len)
{
    return ss_outputs_rename(ctx, u, id, len);
}

static int on_proc(void *ctx, const struct ss_snap_process *p)
{
    return ss_outputs_process(ctx, p);
}

static void on_msg(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "stacksnap: %s\n", msg);
}

static int open_capture(const struct ss_cli *c, struct ss_replay **r)
{
    struct ss_err err = {0};
    struct ss_replay_opts o = {.symfs = c->symfs};
    /* STACKSNAP_PAC_MASK: strip another mask than the recording did (tests:
     * 0 shows the same samples walked without stripping) */
    const char *pac = getenv("STACKSNAP_PAC_MASK");
    if (pac && *pac) {
        o.pac_set = true;
        o.pac_mask = strtoull(pac, NULL, 0);
    }
    /* STACKSNAP_CHECK_RULES: every sample walked (no memo), every native
     * step by a cached rule checked against the slow path's step from the
     * same frame, the counts said at the end (tests) */
    const char *chk = getenv("STACKSNAP_CHECK_RULES");
    if (chk && *chk && strcmp(chk, "0")) o.no_memo = o.check_rules = true;
    int rc = ss_replay_open(r, c->capture, &o, &err);
    if (rc < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        /* not a capture / newer version / unreadable file: bad input */
        return rc == -ENOMEM || rc == -EIO ? 1 : 2;
    }
    return 0;
}

int ss_cmd_replay(const struct ss_cli *c)
{
    struct ss_replay *r;
    int rc = open_capture(c, &r);
    if (rc) return rc;
    const struct ss_snap_header *h = ss_replay_header(r);
    struct ss_outputs out;
    struct ss_cli local = *c;
    int top = !strcmp(c->cmd, "report");
    if (top) local.nout = 0; /* report prints the top table only */
    local.off_cpu = h && (h->flags & SS_SNAP_HDR_OFFCPU);
    rc = ss_outputs_open(&out, &local, h ? h->freq_hz : 99);
    if (!rc && h) rc = ss_outputs_set_clock(&out, h);
    if (rc) {
        ss_replay_close(r);
        return rc;
    }
    struct ss_err err = {0};
    ss_replay_set_debug_fn(r, on_debug);
    ss_replay_set_proc_fn(r, on_proc);
    int run = ss_replay_run(r, add_stack, on_msg, &out, &err);
    if (run < 0) {
        fprintf(stderr, "stacksnap: %s: %s\n", c->capture, err.msg[0] ? err.msg : strerror(-run));
        rc = 1;
    } else if (run > 0) {
        rc = 1; /* an output failed; already said */
    }
    if (run >= 0 && !ss_replay_header(r))
        fprintf(stderr,
                "stacksnap: %s: no valid header record (the recording was cut short "
                "before its first record, or the header is damaged)\n",
                c->capture);
    if (top && ss_report_write_top(out.rep, stdout, (unsigned)c->top, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        rc = 1;
    }
    if (ss_outputs_close(&out)) rc = 1;
    fputs("stacksnap: ", stderr);
    ss_outputs_summary(&out, stderr);
    fprintf(stderr, ", %llu drops while recording\n",
            (unsigned long long)ss_replay_counter(r, "capture.dropped"));
    if (local.off_cpu)
        ss_outputs_offcpu_summary(stderr, ss_replay_counter(r, "capture.off_blocks"),
                                  ss_replay_counter(r, "capture.off_short"),
                                  ss_replay_counter(r, "capture.off_unmatched"), 0);
    const char *chk = getenv("STACKSNAP_CHECK_RULES");
    if (chk && *chk && strcmp(chk, "0")) {
        struct ss_unwinder_stats st;
        ss_unwinder_stats(ss_replay_unwinder(r), &st);
        ss_outputs_native_steps(stderr, &st, true);
    }
    ss_outputs_free(&out);
    ss_replay_close(r);
    return rc;
}
