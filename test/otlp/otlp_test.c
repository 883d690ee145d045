/* test/otlp/otlp_test.c: `record -o x.otlp` (issue 30), decoded by protoc
 * (Debian's protobuf-compiler) with the official v1.11.0 schema, gives the
 * stacks of the same run's folded output, count for count and frame for
 * frame; the dictionary rules hold; `replay -o x.otlp` of the capture is the
 * same bytes. Real BPF, real luajit and native workloads. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "otlp_util.h"

static const char *rattr(const struct pbt *req, const char *key)
{
    const char *v = otlp_resource_attr(req, 0, key);
    cr_assert(v, "resource attribute %s missing", key);
    return v;
}

Test(otlp, luajit_record_replay)
{
    struct run ru = run_new("otlp-lj");
    char *lua = cli_src("test/cli/spin.lua");
    char *target[] = {"--", "luajit", lua, "1.5"};
    char *extra[] = {"-F", "499", NULL};
    otlp_record(&ru, extra, target, 4);
    struct pbt *req = otlp_decode(ru.otlp);
    cr_assert_eq(pbt_count(req, "resource_profiles"), 1, "one process, one ResourceProfiles");
    same_as_folded(req, ru.folded, 0);
    /* resource and profile fields */
    cr_assert_str_eq(rattr(req, "service.name"), "luajit");
    /* the exe as /proc/PID/exe names it, and its base name */
    char *lj = cli_which("luajit"), *real = realpath(lj, NULL);
    cr_assert(real, "luajit's path");
    cr_assert_str_eq(rattr(req, "process.executable.path"), real);
    cr_assert_str_eq(rattr(req, "process.executable.name"), strrchr(real, '/') + 1);
    cr_assert(!otlp_resource_attr(req, 0, "container.id"), "container.id outside a container");
    free(real);
    free(lj);
    cr_assert(atoi(rattr(req, "process.pid")) > 1);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    cr_assert_str_eq(rattr(req, "host.name"), host);
    const struct pbt *prof =
        pbt_get(pbt_get(pbt_get(req, "resource_profiles", 0), "scope_profiles", 0), "profiles", 0);
    const struct pbt *d = pbt_get(req, "dictionary", 0);
    const struct pbt *st = pbt_get(prof, "sample_type", 0), *pt = pbt_get(prof, "period_type", 0);
    const char *s_type = pbt_get(d, "string_table", (size_t)pbt_int(st, "type_strindex", 0))->val;
    const char *s_unit = pbt_get(d, "string_table", (size_t)pbt_int(st, "unit_strindex", 0))->val;
    const char *p_type = pbt_get(d, "string_table", (size_t)pbt_int(pt, "type_strindex", 0))->val;
    const char *p_unit = pbt_get(d, "string_table", (size_t)pbt_int(pt, "unit_strindex", 0))->val;
    cr_assert(!strcmp(s_type, "samples") && !strcmp(s_unit, "count"), "%s/%s", s_type, s_unit);
    cr_assert(!strcmp(p_type, "cpu") && !strcmp(p_unit, "nanoseconds"), "%s/%s", p_type, p_unit);
    cr_assert_eq(pbt_int(prof, "period", 0), 1000000000 / 499);
    long long t0 = pbt_int(prof, "time_unix_nano", 0), dur = pbt_int(prof, "duration_nano", 0);
    long long now = (long long)time(NULL) * 1000000000ll;
    cr_assert(t0 > now - 600000000000ll && t0 < now && dur > 0 && dur < 120000000000ll,
              "time_unix_nano %lld, duration_nano %lld", t0, dur);
    /* every timestamp within [time, time + duration) */
    for (size_t s = 0; s < pbt_count(prof, "samples"); s++) {
        const struct pbt *smp = pbt_get(prof, "samples", s);
        cr_assert(pbt_count(smp, "timestamps_unix_nano") > 0, "sample %zu has no timestamps", s);
        for (size_t k = 0; k < pbt_count(smp, "timestamps_unix_nano"); k++) {
            long long t = strtoll(pbt_get(smp, "timestamps_unix_nano", k)->val, NULL, 10);
            cr_assert(t >= t0 && t < t0 + dur, "timestamp %lld outside [%lld, +%lld)", t, t0, dur);
        }
    }
    /* Lua frames as Functions with the chunk, typed luajit */
    char *text = cli_load(ru.folded, NULL);
    cr_assert(strstr(text, "leaf (/"), "no Lua frames in the run:\n%s", text);
    free(text);
    pbt_free(req);
    replay_same(&ru);
    free(lua);
    run_free(&ru);
}

Test(otlp, native_processes)
{
    struct run ru = run_new("otlp-nat");
    char *bin = cli_built("cli_native"), *cmd;
    /* two processes: two ResourceProfiles */
    cr_assert(asprintf(&cmd, "%s 0.6 & %s 0.6; wait", bin, bin) > 0);
    char *target[] = {"--", "sh", "-c", cmd};
    char *extra[] = {"-F", "499", NULL};
    otlp_record(&ru, extra, target, 4);
    struct pbt *req = otlp_decode(ru.otlp);
    size_t n = pbt_count(req, "resource_profiles");
    cr_assert(n >= 2, "%zu ResourceProfiles for two cli_native processes", n);
    int natives = 0;
    for (size_t i = 0; i < n; i++) {
        const char *svc = otlp_resource_attr(req, i, "service.name");
        natives += svc && !strcmp(svc, "cli_native");
    }
    cr_assert(natives >= 2, "%d resources of cli_native", natives);
    same_as_folded(req, ru.folded, 0);
    pbt_free(req);
    replay_same(&ru);
    free(cmd);
    free(bin);
    run_free(&ru);
}

/* The string a ValueType field names. */
static const char *vt_str(const struct pbt *req, const struct pbt *vt, const char *field)
{
    const struct pbt *d = pbt_get(req, "dictionary", 0);
    const struct pbt *s = pbt_get(d, "string_table", (size_t)pbt_int(vt, field, 0));
    cr_assert(s, "%s dangles", field);
    return s->val;
}

Test(otlp, offcpu_kernel_frames)
{
    struct run ru = run_new("otlp-off");
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *extra[] = {"--off-cpu", "--kernel", NULL};
    char *target[] = {"--", "luajit", "-joff", lua, "usleep"};
    otlp_record(&ru, extra, target, 5);
    struct pbt *req = otlp_decode(ru.otlp);
    /* values in nanoseconds: folded's microseconds x 1000, one per wait */
    same_as_folded(req, ru.folded, 1000);
    const struct pbt *prof =
        pbt_get(pbt_get(pbt_get(req, "resource_profiles", 0), "scope_profiles", 0), "profiles", 0);
    const struct pbt *st = pbt_get(prof, "sample_type", 0);
    cr_assert_str_eq(vt_str(req, st, "type_strindex"), "off_cpu");
    cr_assert_str_eq(vt_str(req, st, "unit_strindex"), "nanoseconds");
    size_t waits = 0;
    for (size_t s = 0; s < pbt_count(prof, "samples"); s++) {
        const struct pbt *smp = pbt_get(prof, "samples", s);
        cr_assert_eq(pbt_count(smp, "values"), pbt_count(smp, "timestamps_unix_nano"));
        waits += pbt_count(smp, "values");
    }
    cr_assert(waits > 10, "%zu waits", waits);
    char *text = cli_load(ru.folded, NULL);
    cr_assert(strstr(text, "_[k]"), "no kernel frames in the run:\n%.2000s", text);
    free(text);
    pbt_free(req);
    replay_same(&ru);
    free(lua);
    run_free(&ru);
}

/* Where cgroup v2 is mounted (a temporary mount of it when no mount is). */
static char *cgroup2_root(char **mounted)
{
    *mounted = NULL;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    cr_assert(f);
    char line[4096], *root = NULL;
    while (!root && fgets(line, sizeof(line), f)) {
        char mnt[PATH_MAX];
        const char *sep = strstr(line, " - ");
        if (sep && !strncmp(sep, " - cgroup2 ", 11) &&
            sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1)
            root = strdup(mnt);
    }
    fclose(f);
    if (root) return root;
    char *dir = cli_tmpdir("cg2");
    cr_assert(dir);
    char *argv[] = {"mount", "-t", "cgroup2", "none", dir, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 30, argv) == 0 && r.status == 0, "mount cgroup2: %s", r.err);
    cli_res_free(&r);
    *mounted = dir;
    return strdup(dir);
}

/* A process in a docker-like cgroup (DIR/docker-ID.scope) gets container.id
 * ID on its resource, and the capture keeps it for replay. */
Test(otlp, container_id)
{
    struct run ru = run_new("otlp-cg");
    char *mounted, *cg2 = cgroup2_root(&mounted);
    char id[65];
    FILE *rnd = fopen("/dev/urandom", "re");
    cr_assert(rnd);
    for (int i = 0; i < 32; i++)
        snprintf(id + 2 * i, 3, "%02x", (unsigned)fgetc(rnd) & 0xff);
    fclose(rnd);
    char *slice, *scope, *cmd;
    cr_assert(asprintf(&slice, "%s/stacksnap-test-%d.slice", cg2, (int)getpid()) > 0);
    cr_assert(asprintf(&scope, "%s/docker-%s.scope", slice, id) > 0);
    cr_assert(mkdir(slice, 0755) == 0 && mkdir(scope, 0755) == 0, "mkdir %s: %m", scope);
    char *bin = cli_built("cli_native");
    cr_assert(asprintf(&cmd, "echo $$ > %s/cgroup.procs && exec %s 0.6", scope, bin) > 0);
    char *target[] = {"--", "sh", "-c", cmd};
    char *extra[] = {"-F", "499", NULL};
    otlp_record(&ru, extra, target, 4);
    rmdir(scope); /* empty again: the target exited */
    rmdir(slice);
    if (mounted) {
        char *argv[] = {"umount", mounted, NULL};
        struct cli_res r;
        if (cli_run(&r, 30, argv) == 0) cli_res_free(&r);
        rmdir(mounted);
        free(mounted);
    }
    struct pbt *req = otlp_decode(ru.otlp);
    size_t n = pbt_count(req, "resource_profiles"), found = 0;
    for (size_t i = 0; i < n; i++) {
        const char *svc = otlp_resource_attr(req, i, "service.name");
        if (!svc || strcmp(svc, "cli_native")) continue;
        const char *cid = otlp_resource_attr(req, i, "container.id");
        cr_assert(cid, "cli_native in %s has no container.id", scope);
        cr_assert_str_eq(cid, id);
        char *real = realpath(bin, NULL);
        cr_assert_str_eq(otlp_resource_attr(req, i, "process.executable.path"), real);
        free(real);
        found++;
    }
    cr_assert_eq(found, 1, "%zu resources of cli_native", found);
    same_as_folded(req, ru.folded, 0);
    pbt_free(req);
    replay_same(&ru);
    free(cmd);
    free(bin);
    free(scope);
    free(slice);
    free(cg2);
    run_free(&ru);
}
