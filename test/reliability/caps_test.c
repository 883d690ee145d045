/* test/reliability/caps_test.c: least privilege. `record -p` of a root
 * process (a LuaJIT workload) as user nobody holding exactly CAP_BPF,
 * CAP_PERFMON and CAP_SYS_PTRACE (ambient, bounding set reduced to them)
 * works: samples with symbols and Lua frames. Without any one of the three
 * it fails and the error names the missing capability. As root with only
 * those three in the bounding set it works as well. (docs/security.md) */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rl.h"

static const char *const all[3] = {"bpf", "perfmon", "sys_ptrace"};
static const char *const names[3] = {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE"};

static void die_with_parent(void *ctx)
{
    (void)ctx;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

struct env {
    char dir[256], outdir[300];
    struct rl_proc target;
    char pid[16];
};

static void setup_env(struct env *e)
{
    rl_tmpdir(e->dir, sizeof(e->dir), "caps");
    char *wargv[] = {"luajit", "-joff", RL_TORN_LUA, "60", NULL};
    cr_assert_eq(rl_start(&e->target, e->dir, "target", wargv, die_with_parent, NULL), 0);
    snprintf(e->pid, sizeof(e->pid), "%d", (int)e->target.pid);
    snprintf(e->outdir, sizeof(e->outdir), "%s/out", e->dir);
    cr_assert_eq(mkdir(e->outdir, 0700), 0);
    cr_assert_eq(chown(e->outdir, 65534, 65534), 0);
    usleep(300000);
}

static void teardown_env(struct env *e)
{
    kill(e->target.pid, SIGKILL);
    rl_wait(&e->target, 10);
    rl_rmtree(e->dir);
}

/* record with the capabilities of mask (bit i = all[i]); as nobody unless
 * as_root. Returns the exit code; *err gets stderr, *folded the output. */
static int record_with(struct env *e, unsigned mask, bool as_root, char **err, char **folded)
{
    char caps[128] = "-all";
    for (int i = 0; i < 3; i++)
        if (mask & (1u << i))
            snprintf(caps + strlen(caps), sizeof(caps) - strlen(caps), ",+%s", all[i]);
    char inh[160], amb[160], bnd[160], out[400], name[32];
    snprintf(inh, sizeof(inh), "--inh-caps=%s", caps);
    snprintf(amb, sizeof(amb), "--ambient-caps=%s", caps);
    snprintf(bnd, sizeof(bnd), "--bounding-set=%s", caps);
    snprintf(name, sizeof(name), "rec-%x-%d", mask, as_root);
    /* nobody writes into its own directory; root without CAP_DAC_OVERRIDE
     * into root's */
    const char *odir = as_root ? e->dir : e->outdir;
    snprintf(out, sizeof(out), "%s/%s.folded", odir, name);
    char *argv[24];
    int n = 0;
    argv[n++] = "setpriv";
    if (!as_root) {
        argv[n++] = "--reuid=65534";
        argv[n++] = "--regid=65534";
        argv[n++] = "--clear-groups";
        argv[n++] = inh;
        argv[n++] = amb;
    }
    argv[n++] = bnd;
    char *rest[] = {RL_STACKSNAP, "record", "-p", e->pid, "-F", "299", "-d", "2", "-o", out, NULL};
    for (int i = 0; rest[i]; i++)
        argv[n++] = rest[i];
    argv[n] = NULL;
    int rc = rl_run(odir, name, argv, 60);
    char ep[500];
    snprintf(ep, sizeof(ep), "%s/%s.err", odir, name);
    *err = rl_slurp(ep, NULL);
    *folded = rl_slurp(out, NULL);
    return rc;
}

Test(caps, exactly_three_capabilities_suffice, .timeout = 120)
{
    struct env e;
    setup_env(&e);
    char *err, *folded;
    int rc = record_with(&e, 7, false, &err, &folded);
    cr_log_info("caps: as nobody with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE: exit %d: %s", rc,
                err ? err : "");
    cr_assert_eq(rc, 0, "record as nobody with the three capabilities: %s", err ? err : "");
    cr_expect(folded && strstr(folded, "lua_pcall"), "no native symbols:\n%.1000s",
              folded ? folded : "");
    cr_expect(folded && strstr(folded, "torn.lua:"), "no Lua frames:\n%.1000s",
              folded ? folded : "");
    free(err);
    free(folded);
    rc = record_with(&e, 7, true, &err, &folded);
    cr_expect_eq(rc, 0, "record as root with a reduced bounding set: %s", err ? err : "");
    cr_expect(folded && strstr(folded, "torn.lua:"), "as root, bounded: no Lua frames");
    free(err);
    free(folded);
    teardown_env(&e);
}

Test(caps, each_missing_capability_is_named, .timeout = 120)
{
    struct env e;
    setup_env(&e);
    for (int drop = 0; drop < 3; drop++) {
        char *err, *folded;
        int rc = record_with(&e, 7u & ~(1u << drop), false, &err, &folded);
        cr_log_info("caps: without %s: exit %d: %s", names[drop], rc, err ? err : "");
        cr_expect_neq(rc, 0, "record without %s succeeded", names[drop]);
        cr_expect(err && strstr(err, names[drop]), "without %s the error does not name it: %s",
                  names[drop], err ? err : "");
        free(err);
        free(folded);
    }
    teardown_env(&e);
}
