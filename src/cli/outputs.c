/* cli/outputs.c: one report, many sinks, and the per-process summary. */
#include "cli/outputs.h"
#include "process/procid.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/unwind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ss_outputs_open(struct ss_outputs *o, const struct ss_cli *c, uint32_t freq)
{
    memset(o, 0, sizeof(*o));
    struct ss_err err = {0};
    struct ss_report_opts ro = {.freq_hz = freq, .off_cpu = c->off_cpu};
    for (int i = 0; i < c->nout; i++) /* OTLP samples carry every sample's time */
        if (c->out[i].fmt == SS_REPORT_OTLP) ro.timestamps = true;
    o->off_cpu = c->off_cpu;
    o->rep = ss_report_new(&ro, &err);
    if (!o->rep) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < c->nout; i++) {
        if (c->out[i].fmt == SS_REPORT_SNAP) continue;
        struct ss_report_sink *s = ss_report_sink_open(c->out[i].path, c->out[i].fmt, freq, &err);
        if (!s) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            ss_outputs_free(o);
            return ss_cli_open_status(err.code);
        }
        o->sinks[o->nsinks++] = s;
        if (ss_report_sink_format(s) != SS_REPORT_PERF) o->aggregate = true;
    }
    /* with only a capture or perf text no profile is kept in memory (it
     * grows with every distinct stack, e.g. of short-lived processes under
     * -a; and aggregating costs a replay to text more than the text); report
     * prints its table from the report */
    if (!c->cmd || !strcmp(c->cmd, "report")) o->aggregate = true;
    return 0;
}

int ss_outputs_set_clock(struct ss_outputs *o, const struct ss_snap_header *h)
{
    struct ss_err err = {0};
    const char *svc = getenv("OTEL_SERVICE_NAME");
    if (ss_report_set_clock(o->rep, (int64_t)(h->start_real_ns - h->start_mono_ns), h->hostname,
                            svc, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int ss_cli_open_status(int code)
{
    switch (code) {
    case -ENOMEM:
    case -EIO:
    case -ENOSPC:
    case -EDQUOT:
    case -EMFILE:
    case -ENFILE:
        return 1; /* the machine, not the user's path */
    default:
        return 2; /* missing folder, no permission, symlink, not a file... */
    }
}

int ss_outputs_process(struct ss_outputs *o, const struct ss_snap_process *p)
{
    struct ss_err err = {0};
    char id[SS_CONTAINER_ID_LEN + 1];
    const char *cg = p->cgroup && *p->cgroup ? ss_cgroup_label(p->cgroup, id) : NULL;
    if (o->aggregate && ss_report_set_labels(o->rep, p->pid, p->exe, cg, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    return 0;
}

bool ss_outputs_knows(const struct ss_outputs *o, uint32_t pid)
{
    for (size_t i = 0; i < o->nprocs; i++)
        if (o->procs[i].pid == pid) return true;
    return false;
}

static struct ss_pcount *pcount(struct ss_outputs *o, const struct ss_stack *st)
{
    for (size_t i = 0; i < o->nprocs; i++)
        if (o->procs[i].pid == st->pid) return &o->procs[i];
    if (o->nprocs == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        struct ss_pcount *p = realloc(o->procs, cap * sizeof(*p));
        if (!p) return NULL;
        o->procs = p;
        o->cap = cap;
    }
    struct ss_pcount *p = &o->procs[o->nprocs++];
    p->pid = st->pid;
    p->samples = 0;
    memcpy(p->comm, st->comm, sizeof(p->comm));
    return p;
}

int ss_outputs_add(struct ss_outputs *o, const struct ss_stack *st)
{
    struct ss_err err = {0};
    o->samples++;
    for (uint32_t i = 0; i < st->nframes; i++)
        if (st->frames[i].kind == SS_FRAME_LUA) {
            o->lua++;
            break;
        }
    o->lua_unproven += ss_stack_unproven(st);
    unsigned f = ss_stack_facts(st);
    o->truncated += (f & SS_SF_TRUNCATED) != 0;
    o->trace_cut += (f & SS_SF_TRACE_CUT) != 0;
    o->scan_stale += (f & SS_SF_STALE) != 0;
    o->nocfi += (f & SS_SF_NOCFI) != 0;
    o->nocfi_root += (f & SS_SF_NOCFI_ROOT) != 0;
    struct ss_pcount *p = pcount(o, st);
    if (p) p->samples++;
    uint64_t n = o->off_cpu ? ss_report_weight_us(st) : 1;
    int rc = o->aggregate ? ss_report_add(o->rep, st, n, &err) : 0;
    for (int i = 0; rc == 0 && i < o->nsinks; i++)
        rc = ss_report_sink_add(o->sinks[i], st, &err);
    if (rc) fprintf(stderr, "stacksnap: %s\n", err.msg);
    return rc;
}

int ss_outputs_rename(struct ss_outputs *o, struct ss_unwinder *u, const uint8_t *id, size_t len)
{
    struct ss_unwinder_renamer n = {u, id, len};
    struct ss_err err = {0};
    if (o->aggregate && ss_report_rename(o->rep, ss_unwinder_rename_fn, &n, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int ss_outputs_close(struct ss_outputs *o)
{
    int rc = 0;
    for (int i = 0; i < o->nsinks; i++) {
        struct ss_err err = {0};
        if (ss_report_sink_close(o->sinks[i], o->rep, &err)) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            rc = 1;
        }
    }
    o->nsinks = 0;
    ss_report_free(o->rep);
    o->rep = NULL;
    return rc;
}

void ss_outputs_free(struct ss_outputs *o)
{
    ss_outputs_close(o);
    free(o->procs);
    o->procs = NULL;
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

void ss_outputs_summary(const struct ss_outputs *o, FILE *f)
{
    fprintf(f, "%llu samples", (unsigned long long)o->samples);
    if (o->nprocs) {
        fputs(" (", f);
        size_t shown = o->nprocs < 8 ? o->nprocs : 8;
        for (size_t i = 0; i < shown; i++)
            fprintf(f, "%s%s %u: %llu", i ? ", " : "", o->procs[i].comm, o->procs[i].pid,
                    (unsigned long long)o->procs[i].samples);
        if (shown < o->nprocs) fprintf(f, ", +%zu more processes", o->nprocs - shown);
        fputc(')', f);
    }
    fprintf(f, ", %.1f%% with Lua frames, %.1f%% truncated (%llu samples)", pct(o->lua, o->samples),
            pct(o->truncated, o->samples), (unsigned long long)o->truncated);
    if (o->lua) fprintf(f, ", %llu Lua frames unproven", (unsigned long long)o->lua_unproven);
    if (o->lua || o->trace_cut)
        fprintf(f, ", %llu cut at trace code", (unsigned long long)o->trace_cut);
    if (o->nocfi)
        fprintf(f, ", %llu through code without CFI (%.1f%% of them reached the root)",
                (unsigned long long)o->nocfi, pct(o->nocfi_root, o->nocfi));
    if (o->nocfi)
        fprintf(f, ", %llu reached the root through code without CFI",
                (unsigned long long)o->nocfi_root);
    if (o->nocfi || o->scan_stale)
        fprintf(f, ", %llu with stale scan candidates", (unsigned long long)o->scan_stale);
}

void ss_outputs_offcpu_summary(FILE *f, uint64_t waits, uint64_t shorter, uint64_t unmatched,
                               unsigned min_us)
{
    char than[32] = "than the threshold";
    if (min_us) snprintf(than, sizeof(than), "than %u us", min_us);
    fprintf(f,
            "stacksnap: off-CPU: %llu waits, %llu shorter %s, %llu not in a system call (no "
            "sample)\n",
            (unsigned long long)waits, (unsigned long long)shorter, than,
            (unsigned long long)unmatched);
}

void ss_outputs_native_steps(FILE *f, const struct ss_unwinder_stats *st, bool checked)
{
    fprintf(f, "stacksnap: native steps: %llu by rules, %llu by the slow path",
            (unsigned long long)st->rule_steps, (unsigned long long)st->unw_steps);
    if (checked)
        fprintf(f, "; %llu rule steps checked, %llu differ", (unsigned long long)st->rule_checks,
                (unsigned long long)st->rule_check_diffs);
    fputc('\n', f);
}
