/* test/cli/jitoracle.c: the differential oracle of issue 32, real BPF and
 * real luajit. jitoracle.lua runs once with -joff: the interpreter's Lua
 * frames above each C function are exactly the ones that made the call.
 * Then with the JIT on (traces inline the helpers, some of which return
 * before the call; lua-cjson's functions are called from the interpreter
 * after a stitched trace's exit): above the same C function the Lua chain (function and
 * chunk of every frame of the script, builtins left out) must be the
 * interpreter's on >= 99% of the samples, and no sample may show a chain
 * that is not a prefix of it (a frame that was not on the stack). Samples
 * that kept only a proven prefix are counted and printed.
 *
 * The C function of a sample and its chain: oracle.h (__strlen_evex for an
 * FFI call, lj_buf_putstr_rep for string.rep, string.format for its
 * helpers, lua-cjson's encoder
 * (liblua5.1-cjson+0x...) for cjson.encode). Only C functions the
 * interpreter reaches from one chain (>= 97% of its samples there) and with
 * enough samples on both sides are judged; the FFI calls must be among
 * them. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "counts.h"
#include "oracle.h"

static char *record(const char *dir, const char *tag, bool jit, const char *secs, char **err)
{
    char *lua = cli_src("test/cli/jitoracle.lua");
    char name[64];
    snprintf(name, sizeof(name), "%s.folded", tag);
    char *folded = cli_path(dir, name);
    snprintf(name, sizeof(name), "%s.snap", tag);
    char *snap = cli_path(dir, name);
    char *argv[] = {(char *)cli_ss(),
                    "record",
                    "-F",
                    "999",
                    "-o",
                    folded,
                    "-o",
                    snap,
                    "--",
                    "luajit",
                    jit ? "-jon" : "-joff",
                    lua,
                    (char *)secs,
                    NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 200, argv), 0);
    cr_assert_eq(res.status, 0, "record: %s", res.err);
    *err = strdup(res.err);
    cli_res_free(&res);
    char *text = cli_load(folded, NULL);
    cr_assert(text, "%s", folded);
    /* the capture's counter says what the summary said */
    char *iargv[] = {(char *)cli_ss(), "info", snap, NULL};
    cr_assert_eq(cli_run(&res, 60, iargv), 0);
    cr_assert_eq(res.status, 0, "info: %s", res.err);
    const char *c = strstr(res.out, "lua.frames_unproven");
    long long got = 0, said = orc_unproven(*err); /* (info leaves zero counters out) */
    if (c) sscanf(c + strlen("lua.frames_unproven"), " %lld", &got);
    cr_expect_eq(got, said, "info: lua.frames_unproven %lld, summary %lld:\n%s", got, said,
                 res.out);
    /* and the stacks cut at trace code the Lua walk could not claim */
    c = strstr(res.out, "unwind.trace_cut");
    got = 0, said = cnt_summary(*err, " cut at trace code");
    if (c) sscanf(c + strlen("unwind.trace_cut"), " %lld", &got);
    cr_expect_eq(got, said, "info: unwind.trace_cut %lld, summary %lld:\n%s", got, said, res.out);
    cli_res_free(&res);
    free(snap);
    free(folded);
    free(lua);
    return text;
}

struct verdict {
    long long judged, same, pre, none, wrong;
    long long mjudged, msame;            /* of them, calls of a C module (lua-cjson) */
    long long unproven_off, unproven_on; /* record's summary line */
    bool ffi_judged;
    long long xjudged, xsame; /* strlen: the FFI call whose next snapshot is its own */
    long long ljudged, lsame; /* strnlen: the same call made in a loop's copy */
    long long cjudged, csame; /* memchr, memcmp: compared right after the call */
    long long rjudged, rsame; /* string.rep, table.concat: CALLL helpers (trace_fwd.c) */
    long long fjudged, fsame; /* string.format's CALLL helpers (trace_fwdcalls.c) */
    char report[8192];
};

/* Record both runs and compare them (the -joff run is the oracle), with
 * busy processes spinning beside them. */
static void judge(struct verdict *v, unsigned busy)
{
    pid_t bp[8];
    memset(v, 0, sizeof(*v));
    cr_assert_eq(orc_busy_start(bp, busy), 0, "fork");
    char *dir = cli_tmpdir("jitorc"), *eoff, *eon;
    /* the workload runs for CPU seconds (os.clock): under load 1 s of it
     * takes several of the wall clock */
    const char *secs = busy ? "1" : "3";
    char *off = record(dir, "off", false, secs, &eoff), *on = record(dir, "on", true, secs, &eon);
    orc_busy_stop(bp, busy);
    static struct orc_dist doff, don;
    static struct orc_row rows[ORC_KEYS];
    orc_parse(&doff, off);
    orc_parse(&don, on);
    unsigned nr = orc_compare(&doff, &don, 20, true, rows, ORC_KEYS);
    bool strlen_seen = false, memcmp_seen = false, memchr_seen = false;
    for (unsigned i = 0; i < nr; i++) {
        const struct orc_row *r = &rows[i];
        if (r->bad[0])
            cr_log_info("%s: samples under %s, the interpreter's: %s", r->name, r->bad, r->want);
        v->judged += r->on;
        v->same += r->same;
        v->pre += r->pre;
        v->wrong += r->wrong;
        v->none += r->none;
        if (strstr(r->name, "cjson")) v->mjudged += r->on, v->msame += r->same;
        strlen_seen |= strstr(r->name, "strlen") != NULL;
        if (strstr(r->name, "strlen")) v->xjudged += r->on, v->xsame += r->same;
        if (strstr(r->name, "strnlen")) v->ljudged += r->on, v->lsame += r->same;
        memcmp_seen |= strstr(r->name, "memcmp") && !strstr(r->name, "lj_str_new");
        memchr_seen |= strstr(r->name, "memchr") != NULL;
        if (!strcmp(r->name, "string.format")) v->fjudged += r->on, v->fsame += r->same;
        if (strstr(r->name, "lj_buf_putstr_rep") || strstr(r->name, "lj_buf_puttab"))
            v->rjudged += r->on, v->rsame += r->same;
        if ((strstr(r->name, "memcmp") && !strstr(r->name, "lj_str_new")) ||
            strstr(r->name, "memchr"))
            v->cjudged += r->on, v->csame += r->same;
    }
    orc_table(rows, nr, v->report, sizeof(v->report));
    v->ffi_judged = strlen_seen && memcmp_seen && memchr_seen;
    v->unproven_off = orc_unproven(eoff);
    v->unproven_on = orc_unproven(eon);
    long long j = v->judged ? v->judged : 1;
    long long tj = v->judged - v->mjudged ? v->judged - v->mjudged : 1;
    cr_log_info("jit oracle: %lld samples judged, %.2f%% the interpreter's chain, %.2f%% a proven "
                "prefix, %.2f%% no Lua frame, %.2f%% wrong; calls from trace code (FFI, "
                "builtins): %lld, %.2f%% the interpreter's chain; lua-cjson: %lld, %.2f%%\n%s"
                "-joff: %s-jon: %s",
                v->judged, 100.0 * v->same / j, 100.0 * v->pre / j, 100.0 * v->none / j,
                100.0 * v->wrong / j, v->judged - v->mjudged, 100.0 * (v->same - v->msame) / tj,
                v->mjudged, 100.0 * v->msame / (v->mjudged ? v->mjudged : 1), v->report, eoff, eon);
    free(off);
    free(on);
    free(eoff);
    free(eon);
    cli_rmtree(dir);
    free(dir);
}

/* Never a frame that was not on the stack; what was left out is counted;
 * at least exact percent of all judged samples are the interpreter's chain,
 * and of each kind the rules prove (strlen, strnlen, memchr/memcmp,
 * string.rep/table.concat) 95% (20-100 samples a kind: a sample is 1-5%),
 * of string.format's helpers fexact percent. */
static void sound(unsigned busy, unsigned exact, unsigned fexact)
{
    static struct verdict v;
    judge(&v, busy);
    cr_expect_geq(v.same * 100, v.judged * exact,
                  "%lld of %lld samples the interpreter's chain:\n%s", v.same, v.judged, v.report);
    cr_expect(v.ffi_judged, "the FFI calls were not all judged:\n%s", v.report);
    /* (1 s of the workload under load: 600 judged when the machine is
     * otherwise quiet, under 300 once beside a paired test at a load of 6) */
    cr_expect_gt(v.judged, busy ? 150 : 300, "%lld samples judged", v.judged);
    cr_expect_eq(v.wrong, 0, "%lld of %lld samples show frames that were not on the stack:\n%s",
                 v.wrong, v.judged, v.report);
    /* the interpreter's walks are all proven (where traces kept a prefix,
     * the summary counts the snapshots' frames left out, if any: the
     * prefix at string.rep/table.concat is often a snapshot's whole) */
    cr_expect_eq(v.unproven_off, 0, "-joff: %lld Lua frames unproven", v.unproven_off);
    cr_expect_leq(v.none * 100, v.judged, "%lld of %lld samples without Lua frames:\n%s", v.none,
                  v.judged, v.report);
    /* measure's strlen: the snapshot right after the call is the call's own
     * (trace_load.c post_call), so its frames are exact: round > measure */
    cr_expect_geq(v.xsame * 100, v.xjudged * 95, "strlen: %lld of %lld samples exact:\n%s", v.xsame,
                  v.xjudged, v.report);
    /* width's strnlen, mostly from the loop's copy of span's trace: taken
     * as the pre-roll call it copies (trace_calls.c), exact the same way:
     * round > span > width (without that rule 15%: span alone) */
    cr_expect_gt(v.ljudged, 20, "strnlen not judged:\n%s", v.report);
    cr_expect_geq(v.lsame * 100, v.ljudged * 95, "strnlen: %lld of %lld samples exact:\n%s",
                  v.lsame, v.ljudged, v.report);
    /* memchr/memcmp, compared right after the call: the comparison's
     * snapshot is the call's, the CALL before it proven to call the FFI
     * function (trace_post.c ffi_callee): round > compare > same, round >
     * scan > find (without it 0%: a proven prefix) */
    cr_expect_geq(v.csame * 100, v.cjudged * 95, "memchr/memcmp: %lld of %lld samples exact:\n%s",
                  v.csame, v.cjudged, v.report);
    /* string.rep/table.concat's helpers (CALLL, no snapshot after them):
     * the forward replay from the snapshot before proves round > rep and
     * round > concat (trace_fwd.c; without it 0%: a proven prefix) */
    cr_expect_gt(v.rjudged, 20, "string.rep/table.concat not judged:\n%s", v.report);
    cr_expect_geq(v.rsame * 100, v.rjudged * 95,
                  "string.rep/table.concat: %lld of %lld samples exact:\n%s", v.rsame, v.rjudged,
                  v.report);
    /* string.format's helpers (lj_strfmt_putf*, _putquoted: CALLL, several
     * per snapshot, most from helpers that tail-call it): the k-th call of
     * the range placed at its string.format (trace_fwdcalls.c): round > fmt
     * (before: round alone, a proven prefix); as exact as the case asks
     * (under load, samples with no Lua frame at all are 1-2% of every kind) */
    cr_expect_geq(v.fjudged, 20, "string.format not judged:\n%s", v.report);
    cr_expect_geq(v.fsame * 100, v.fjudged * fexact,
                  "string.format: %lld of %lld samples exact:\n%s", v.fsame, v.fjudged, v.report);
}

/* The same with 4 busy processes beside the target (issue 32: the
 * differential holds under load: >= 99% of all judged samples), 1 s of the
 * workload's CPU time per run (string.format's helpers then have 28-51
 * samples: one is 2-4%). */
Test(jitoracle, under_load)
{
    sound(4, 99, 95);
}

/* The target of issue 32, with everything sound() asserts: the
 * interpreter's exact chain on >= 99% of the judged samples, over all
 * kinds. FFI calls by the snapshot after them or the CALL proven
 * (trace_post.c, trace_calls.c); string.rep/table.concat (CALLL: no
 * snapshot after them) by the forward replay of the bytecode from the
 * snapshot before (trace_fwd.c); lua-cjson from the interpreter. */
Test(jitoracle, the_interpreters_chain)
{
    sound(0, 99, 99);
}

/* The forward replay's refusals (trace_fwd.c): string.rep reached through
 * a metamethod, a table of functions, tail calls and a branch, and twice in
 * a row in a function the loop calls; strlen through a mutable upvalue
 * (base64.lua's shape) after a helper that returned past a comparison, and
 * from two frames on the two sides of a branch (Debian 12's and 13's
 * luajit prove these from the snapshot after the call, trace_post.c; the
 * replay's own case is nginx's, cli_ngxoracle); string.format after a CAT,
 * after a "%s" of "", twice the same (a CSE'd chain), on a branch, and
 * two in a row (proven). Above lj_buf_putstr_rep, strlen and
 * string.format's helpers every chain with the JIT on must be one the interpreter shows
 * there or a prefix of one (never a frame that was not on the stack), and
 * some must go past main (the replay proves `twice`). */
Test(jitoracle, fwd_never_a_frame_not_on_the_stack)
{
    char *dir = cli_tmpdir("fwdref"), *lua = cli_src("test/cli/fwdrefuse.lua");
    static struct orc_dist d[2];
    char *text[2];
    for (int jit = 0; jit < 2; jit++) {
        char *folded = cli_path(dir, jit ? "on.folded" : "off.folded");
        char *argv[] = {(char *)cli_ss(),       "record", "-F", "999", "-o", folded, "--", "luajit",
                        jit ? "-jon" : "-joff", lua,      "2",  NULL};
        struct cli_res res;
        cr_assert_eq(cli_run(&res, 60, argv), 0);
        cr_assert_eq(res.status, 0, "record: %s", res.err);
        cli_res_free(&res);
        cr_assert((text[jit] = cli_load(folded, NULL)), "%s", folded);
        orc_parse(&d[jit], text[jit]);
        free(folded);
    }
    /* string.rep's helper, strlen through a mutable upvalue, string.format's
     * helpers */
    static const char *const key[3] = {"lj_buf_putstr_rep", "strlen", "string.format"};
    long long bad = 0, past[3] = {0, 0, 0}, all[3] = {0, 0, 0};
    for (int h = 0; h < 3; h++) {
        const struct orc_key *k[2] = {NULL, NULL};
        for (int jit = 0; jit < 2; jit++)
            for (unsigned i = 0; i < d[jit].n; i++)
                if (h == 1 ? strstr(d[jit].k[i].name, "strlen") != NULL
                           : !strcmp(d[jit].k[i].name, key[h]))
                    k[jit] = &d[jit].k[i];
        cr_assert(k[0] && k[1], "%s not seen in both runs", key[h]);
        for (unsigned c = 0; c < k[1]->nc; c++) {
            const char *ch = k[1]->c[c].chain;
            bool ok = false;
            for (unsigned o = 0; o < k[0]->nc && !ok; o++) {
                const char *w = k[0]->c[o].chain;
                size_t l = strlen(ch);
                ok = !strncmp(ch, w, l) && (w[l] == 0 || w[l] == ';' || !l);
            }
            if (!ok) cr_log_error("not the interpreter's, nor a prefix: %s", ch);
            bad += ok ? 0 : k[1]->c[c].n;
            past[h] += strchr(ch, ';') ? k[1]->c[c].n : 0;
            all[h] += k[1]->c[c].n;
        }
    }
    cr_log_info("fwdrefuse: %lld samples above lj_buf_putstr_rep, %lld above strlen, %lld above "
                "string.format's helpers with the JIT on; %lld, %lld and %lld past main; %lld "
                "wrong",
                all[0], all[1], all[2], past[0], past[1], past[2], bad);
    cr_expect_eq(bad, 0, "%lld samples show a frame that was not on the stack", bad);
    cr_expect(past[0] > 0 && past[1] > 0 && past[2] > 0,
              "no chain past main: the replay proved nothing");
    free(text[0]);
    free(text[1]);
    free(lua);
    cli_rmtree(dir);
    free(dir);
}

/* A builtin frame right above its C function: the frame of a builtin called
 * through BC_FUNCC (ffi.*, os.clock: LJLIB_CF) is right below the native
 * frame of its lua_CFunction, which is named after the Lua frame's own
 * GCfuncC.f (lj_cf_NAME) when they match. Another lj_cf_ name, or an
 * unnamed luajit+0x... frame there, is a builtin that was not on the stack
 * (on main, 9-69 of 20000 samples: a walk made again from live memory
 * that took L->base, by then the frame of a newer ffi.meta.__index call).
 * Returns the samples with such a frame; *own: those with a builtin right
 * under its own lj_cf_ frame; the first bad line into bad. */
static long long false_builtins(const char *folded, long long *own, char *bad, size_t cap)
{
    long long n_bad = 0;
    *own = 0;
    for (const char *l = folded; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *sp = l + len;
        while (sp > l && sp[-1] != ' ')
            sp--;
        long long c = atoll(sp);
        bool wrong = false, mine = false;
        for (const char *b = strstr(l, " ([builtin]:0);"); b && b < sp;
             b = strstr(b + 1, " ([builtin]:0);")) {
            const char *name = b;
            while (name > l && name[-1] != ';')
                name--;
            const char *nx = b + 15, *ne = memchr(nx, ';', (size_t)(sp - nx));
            if (!ne) ne = sp - 1;
            size_t nl = (size_t)(ne - nx);
            if (memchr(nx, '(', nl)) continue; /* a Lua frame above it */
            char want[128] = "lj_cf_";
            size_t k = 6;
            for (const char *p = name; p < b && k + 1 < sizeof(want); p++)
                want[k++] = *p == '.' ? '_' : *p;
            want[k] = 0;
            bool cf = !strncmp(name, "ffi.", 4) || !strncmp(name, "os.", 3);
            if (nl == k && !strncmp(nx, want, k))
                mine = true;
            else if ((nl > 6 && !strncmp(nx, "lj_cf_", 6)) ||
                     (cf && nl > 9 && !strncmp(nx, "luajit+0x", 9)))
                wrong = true;
        }
        *own += mine ? c : 0;
        n_bad += wrong ? c : 0;
        if (wrong && !bad[0]) snprintf(bad, cap, "%.*s", (int)(len < 1500 ? len : 1500), l);
        if (!e) break;
        l = e + 1;
    }
    return n_bad;
}

Test(jitoracle, builtin_frames_of_their_own)
{
    char *dir = cli_tmpdir("ffib"), *folded = cli_path(dir, "b.folded");
    char *lua = cli_src("test/cli/ffibuiltin.lua");
    /* 9999 Hz: the recorder lags, and walks made again from live memory
     * are what showed the false frames */
    char *argv[] = {(char *)cli_ss(), "record", "-F", "9999", "-o", folded, "--",
                    "luajit",         "-joff",  lua,  "2",    NULL};
    struct cli_res res;
    cr_assert_eq(cli_run(&res, 60, argv), 0);
    cr_assert_eq(res.status, 0, "record: %s", res.err);
    char *text = cli_load(folded, NULL);
    cr_assert(text, "%s", folded);
    static char bad[1600];
    bad[0] = 0;
    long long own = 0, wrong = false_builtins(text, &own, bad, sizeof(bad));
    cr_log_info("builtins: %lld samples under their own C function, %lld under another's; %s", own,
                wrong, res.err);
    cr_expect_gt(own, 1000, "only %lld samples in a builtin's own C function", own);
    cr_expect_eq(wrong, 0, "%lld samples show a builtin that was not on the stack, e.g.\n%s", wrong,
                 bad);
    cli_res_free(&res);
    free(text);
    free(lua);
    free(folded);
    cli_rmtree(dir);
    free(dir);
}
