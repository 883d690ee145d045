/* test/report/output: formats by extension and name, sinks (one per -o):
 * early failure on bad paths, .txt streaming, "-" to stdout, write errors
 * naming the file. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

Test(report_output, formats)
{
    const struct {
        const char *path;
        enum ss_report_format f;
    } t[] = {
        {"-", SS_REPORT_FOLDED},        {"out.folded", SS_REPORT_FOLDED},
        {"a/b.pb.gz", SS_REPORT_PPROF}, {"flame.svg", SS_REPORT_SVG},
        {"perf.txt", SS_REPORT_PERF},   {"cap.snap", SS_REPORT_SNAP},
        {"x.gz", SS_REPORT_NONE},       {"x", SS_REPORT_NONE},
        {"", SS_REPORT_NONE},           {".svg", SS_REPORT_NONE},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        cr_expect_eq(ss_report_format_of_path(t[i].path), t[i].f, "%s", t[i].path);
    cr_expect_eq(ss_report_format_of_path(NULL), SS_REPORT_NONE);
    const char *names[] = {"folded", "pprof", "svg", "txt", "snap"};
    for (size_t i = 0; i < 5; i++) {
        enum ss_report_format f = ss_report_format_of_name(names[i]);
        cr_expect_neq(f, SS_REPORT_NONE);
        cr_expect_str_eq(ss_report_format_name(f), names[i]);
    }
    cr_expect_eq(ss_report_format_of_name("html"), SS_REPORT_NONE);
}

Test(report_output, bad_paths_fail_at_open)
{
    struct ss_err err = {0};
    cr_expect_null(ss_report_sink_open("/nonexistent-dir/out.svg", 0, 99, &err));
    cr_expect_eq(err.code, -ENOENT);
    cr_expect(strstr(err.msg, "/nonexistent-dir/out.svg") && strstr(err.msg, "cannot open"), "%s",
              err.msg);
    err = (struct ss_err){0};
    cr_expect_null(ss_report_sink_open("cap.snap", 0, 99, &err));
    cr_expect_eq(err.code, -EINVAL);
    cr_expect(strstr(err.msg, "cap.snap"), "%s", err.msg);
    err = (struct ss_err){0};
    cr_expect_null(ss_report_sink_open("out.html", 0, 99, &err));
    cr_expect(strstr(err.msg, "not a report format"), "%s", err.msg);
}

static char *capture_stdout_of(const struct ss_report *r, int *rc, struct ss_err *err)
{
    char *dir = fx_tmpdir(), *path = fx_path(dir, "stdout");
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
    struct ss_report_sink *s = ss_report_sink_open("-", SS_REPORT_NONE, 99, err);
    cr_assert(s);
    cr_expect_eq(ss_report_sink_format(s), SS_REPORT_FOLDED);
    *rc = ss_report_sink_close(s, r, err);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char *out = fx_read(path, NULL);
    free(path);
    fx_rmdir(dir);
    return out;
}

Test(report_output, sinks)
{
    struct fx fx;
    fx_build(&fx);
    struct ss_report *r = fx_report(&fx, 99);
    struct ss_err err = {0};
    char *dir = fx_tmpdir();

    /* "-" is folded on stdout, identical to the folded writer */
    char *want, *got;
    size_t wl;
    FILE *mf = open_memstream(&want, &wl);
    cr_assert_eq(ss_report_write_folded(r, mf, &err), 0);
    fclose(mf);
    int rc;
    got = capture_stdout_of(r, &rc, &err);
    cr_expect_eq(rc, 0, "%s", err.msg);
    cr_expect_str_eq(got, want);
    free(got);

    /* .txt streams: the samples are in the file before the sink is closed */
    char *txt = fx_path(dir, "perf.txt");
    struct ss_report_sink *s = ss_report_sink_open(txt, SS_REPORT_NONE, 99, &err);
    cr_assert(s, "%s", err.msg);
    size_t samples = 0;
    for (size_t i = 0; i < fx.n; i++)
        for (uint64_t k = 0; k < fx.s[i].count; k++, samples++)
            cr_assert_eq(ss_report_sink_add(s, &fx.s[i].st, &err), 0, "%s", err.msg);
    cr_assert_eq(ss_report_sink_close(s, NULL, &err), 0, "%s", err.msg);
    char *t = fx_read(txt, NULL);
    size_t events = 0;
    for (char *p = t; (p = strstr(p, " cpu-clock:\n")); p++)
        events++;
    cr_expect_eq(events, samples);
    cr_expect_eq(samples, fx.total);
    free(t);
    free(txt);

    /* aggregated formats ignore add() and write at close */
    char *fo = fx_path(dir, "x.folded");
    s = ss_report_sink_open(fo, SS_REPORT_NONE, 99, &err);
    cr_assert(s);
    cr_expect_eq(ss_report_sink_add(s, &fx.s[0].st, &err), 0);
    cr_assert_eq(ss_report_sink_close(s, r, &err), 0, "%s", err.msg);
    got = fx_read(fo, NULL);
    cr_expect_str_eq(got, want);
    free(got);
    free(fo);

    /* --format overrides the extension */
    char *odd = fx_path(dir, "flame.out");
    s = ss_report_sink_open(odd, SS_REPORT_SVG, 99, &err);
    cr_assert(s, "%s", err.msg);
    cr_assert_eq(ss_report_sink_close(s, r, &err), 0);
    got = fx_read(odd, NULL);
    cr_expect(!strncmp(got, "<?xml", 5));
    free(got);
    free(odd);

    /* write errors name the file */
    const enum ss_report_format fmts[] = {SS_REPORT_FOLDED, SS_REPORT_PPROF, SS_REPORT_SVG};
    for (size_t i = 0; i < 3; i++) {
        err = (struct ss_err){0};
        s = ss_report_sink_open("/dev/full", fmts[i], 99, &err);
        cr_assert(s);
        cr_expect_eq(ss_report_sink_close(s, r, &err), -EIO, "format %d", fmts[i]);
        cr_expect(strstr(err.msg, "/dev/full") && strstr(err.msg, "write error"), "%s", err.msg);
    }
    /* perf text cannot come from an aggregated report */
    err = (struct ss_err){0};
    cr_expect_eq(ss_report_save(r, "x.txt", &err), -EINVAL);
    cr_expect_eq(ss_report_write(r, SS_REPORT_PERF, stdout, &err), -EINVAL);
    free(want);
    fx_rmdir(dir);
    ss_report_free(r);
    fx_free(&fx);
}
