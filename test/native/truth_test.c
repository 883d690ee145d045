/* scratch */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include "harness.h"
#include "stacksnap/unwind.h"

static void run(const char *bin, const char *mode)
{
    struct nw_proc p;
    cr_assert_eq(nw_start(&p, bin, mode), 0);
    struct nw_tally t = {0};
    struct nw_opts o = {.leaf = "nw_spin", .seconds = 1.5, .freq = 999, .compare_modes = true};
    int rc = nw_sample(p.pid, &o, NULL, &t);
    nw_stop(&p);
    cr_assert_eq(rc, 0);
    nw_dump(&t, 5);
    cr_log_info("compared %ld mismatched %ld", t.compared_modes, t.mismatch_modes);
    nw_tally_free(&t);
}

Test(native, explore)
{
    run("native_workload_pie", getenv("NW_MODE") ? getenv("NW_MODE") : "recurse");
}
