/* test/otlp/collector_test.c: the OpenTelemetry Collector's own code reads
 * our requests (issue 30): `record -o x.otlp` unmarshalled by pdata's
 * pprofileotlp (collector_reader.go, built by collector.sh in a Debian sid
 * root against golang-opentelemetry-collector-dev) gives the run's folded
 * stacks, count for count and frame for frame. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "otlp_util.h"

static void read_back(const struct run *ru, const char *div)
{
    char *reader = cli_built("otlp_collector_reader");
    char *argv[] = {reader, ru->otlp, (char *)div, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0, "cannot run %s", reader);
    cr_assert(r.status == 0, "the Collector's pdata could not read %s (exit %d):\n%s", ru->otlp,
              r.status, r.err);
    char *mine = folded_sorted(r.out);
    same_text_as_folded(mine, ru->folded);
    free(mine);
    cli_res_free(&r);
    free(reader);
}

Test(otlp_collector, luajit_cpu)
{
    struct run ru = run_new("otlp-col");
    char *lua = cli_src("test/cli/spin.lua");
    char *extra[] = {"-F", "499", NULL};
    char *target[] = {"--", "luajit", lua, "1.0"};
    otlp_record(&ru, extra, target, 4);
    read_back(&ru, NULL);
    free(lua);
    run_free(&ru);
}

Test(otlp_collector, offcpu_kernel)
{
    struct run ru = run_new("otlp-coloff");
    char *lua = cli_src("test/cli/offcpu_sleep.lua");
    char *extra[] = {"--off-cpu", "--kernel", NULL};
    char *target[] = {"--", "luajit", "-joff", lua, "usleep"};
    otlp_record(&ru, extra, target, 5);
    read_back(&ru, "1000");
    free(lua);
    run_free(&ru);
}
