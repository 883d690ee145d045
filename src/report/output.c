/* report/output: formats by extension or name, writing a report to a path,
 * and output sinks (one per `-o FILE`). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report_int.h"
#include "util/outfile.h"

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

enum ss_report_format ss_report_format_of_path(const char *path)
{
    if (!path || !*path) return SS_REPORT_NONE;
    if (!strcmp(path, "-")) return SS_REPORT_FOLDED;
    if (ends_with(path, ".folded")) return SS_REPORT_FOLDED;
    if (ends_with(path, ".pb.gz")) return SS_REPORT_PPROF;
    if (ends_with(path, ".svg")) return SS_REPORT_SVG;
    if (ends_with(path, ".txt")) return SS_REPORT_PERF;
    if (ends_with(path, ".snap")) return SS_REPORT_SNAP;
    if (ends_with(path, ".otlp")) return SS_REPORT_OTLP;
    return SS_REPORT_NONE;
}

static const char *const names[] = {
    [SS_REPORT_NONE] = NULL,   [SS_REPORT_FOLDED] = "folded", [SS_REPORT_PPROF] = "pprof",
    [SS_REPORT_SVG] = "svg",   [SS_REPORT_PERF] = "txt",      [SS_REPORT_SNAP] = "snap",
    [SS_REPORT_OTLP] = "otlp",
};

enum ss_report_format ss_report_format_of_name(const char *name)
{
    for (size_t i = 1; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i])) return (enum ss_report_format)i;
    return SS_REPORT_NONE;
}

const char *ss_report_format_name(enum ss_report_format f)
{
    return (unsigned)f < sizeof(names) / sizeof(names[0]) && names[f] ? names[f] : "unknown";
}

int ss_report_write(const struct ss_report *r, enum ss_report_format fmt, FILE *f,
                    struct ss_err *err)
{
    switch (fmt) {
    case SS_REPORT_FOLDED:
        return ss_report_write_folded(r, f, err);
    case SS_REPORT_PPROF:
        return ss_report_write_pprof(r, f, err);
    case SS_REPORT_SVG:
        return ss_report_write_svg(r, f, err);
    case SS_REPORT_OTLP:
        return ss_report_write_otlp(r, f, err);
    default:
        ss_err_set(err, -EINVAL, "cannot write a %s file from an aggregated report",
                   ss_report_format_name(fmt));
        return -EINVAL;
    }
}

struct ss_report_sink {
    char *path;
    FILE *f;
    enum ss_report_format fmt;
    struct ss_perf_writer *perf;
};

/* Prefix a writer error with the path (the writers do not know it). */
static int named(int rc, const struct ss_err *inner, const char *path, struct ss_err *err)
{
    if (rc) ss_err_set(err, rc, "%s: %s", path, inner->msg);
    return rc;
}

struct ss_report_sink *ss_report_sink_open(const char *path, enum ss_report_format fmt,
                                           uint32_t freq_hz, struct ss_err *err)
{
    if (fmt == SS_REPORT_NONE) fmt = ss_report_format_of_path(path);
    if (fmt == SS_REPORT_NONE || fmt == SS_REPORT_SNAP || !path) {
        ss_err_set(err, -EINVAL,
                   "%s: not a report format (use .folded, .pb.gz, .svg, .txt, .otlp or -)",
                   path ? path : "(null)");
        return NULL;
    }
    if (fmt == SS_REPORT_OTLP && !ss_report_otlp_built()) {
        ss_err_set(err, -ENOTSUP,
                   "%s: this stacksnap was built without OTLP (no opentelemetry-proto 1.11.0 "
                   ".proto files at build time; see docs/otlp.md)",
                   path);
        return NULL;
    }
    struct ss_report_sink *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(path))) {
        free(s);
        ss_err_set(err, -ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    s->fmt = fmt;
    if (!strcmp(path, "-")) {
        s->f = stdout;
    } else {
        /* 0600, never through a symlink (util/outfile.h); /dev/null is fine */
        int fd = ss_open_output(path, "output", true, err);
        if (fd >= 0 && !(s->f = fdopen(fd, "w"))) {
            int e = errno;
            close(fd);
            ss_err_set(err, -e, "%s: cannot open for writing: %s", path, strerror(e));
        }
        if (!s->f) {
            free(s->path);
            free(s);
            return NULL;
        }
    }
    if (fmt == SS_REPORT_PERF) {
        struct ss_err inner = {0};
        if (!(s->perf = ss_perf_writer_new(s->f, freq_hz, &inner))) {
            named(inner.code, &inner, path, err);
            ss_report_sink_close(s, NULL, NULL);
            return NULL;
        }
    }
    return s;
}

enum ss_report_format ss_report_sink_format(const struct ss_report_sink *s)
{
    return s->fmt;
}

int ss_report_sink_add(struct ss_report_sink *s, const struct ss_stack *st, struct ss_err *err)
{
    if (!s->perf) return 0;
    struct ss_err inner = {0};
    return named(ss_perf_writer_add(s->perf, st, &inner), &inner, s->path, err);
}

int ss_report_sink_close(struct ss_report_sink *s, const struct ss_report *r, struct ss_err *err)
{
    if (!s) return 0;
    struct ss_err inner = {0};
    int rc = 0;
    if (s->perf)
        rc = ss_perf_writer_finish(s->perf, &inner);
    else if (r)
        rc = ss_report_write(r, s->fmt, s->f, &inner);
    named(rc, &inner, s->path, err);
    if (s->f == stdout) {
        if (fflush(stdout) && !rc) {
            rc = -EIO;
            ss_err_set(err, rc, "%s: write error: %s", s->path, strerror(errno));
        }
    } else if (fclose(s->f) && !rc) {
        rc = -EIO;
        ss_err_set(err, rc, "%s: write error: %s", s->path, strerror(errno));
    }
    free(s->path);
    free(s);
    return rc;
}

int ss_report_save(const struct ss_report *r, const char *path, struct ss_err *err)
{
    enum ss_report_format fmt = ss_report_format_of_path(path);
    if (fmt == SS_REPORT_PERF) {
        ss_err_set(err, -EINVAL,
                   "%s: perf-script text is written per sample while recording, not from a "
                   "report",
                   path);
        return -EINVAL;
    }
    struct ss_report_sink *s = ss_report_sink_open(path, fmt, r->freq_hz, err);
    if (!s) return err && err->code ? err->code : -EINVAL;
    return ss_report_sink_close(s, r, err);
}
