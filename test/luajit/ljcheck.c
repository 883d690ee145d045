/* test/luajit/ljcheck.c: see ljcheck.h. */
#include "ljcheck.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ljc_frame(const struct ss_stack *st, unsigned i, char *buf, size_t cap)
{
    struct ss_stack one = *st;
    one.frames = &st->frames[i];
    one.nframes = 1;
    ljr_fold(&one, buf, cap);
}

/* Name of the last frame of a chain ("...;NAME (CHUNK:LINE)"). */
static void leaf_of(const char *chain, char *buf, size_t cap)
{
    const char *p = strrchr(chain, ';');
    p = p ? p + 1 : chain;
    const char *q = strstr(p, " (");
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n >= cap) n = cap - 1;
    memcpy(buf, p, n);
    buf[n] = 0;
}

/* Lua-only text of frames [lo, hi) (leaf first), root first. */
static void lua_part(const struct ss_stack *st, unsigned lo, unsigned hi, char *buf, size_t cap)
{
    struct ss_stack part = *st;
    part.frames = &st->frames[lo];
    part.nframes = hi - lo;
    ljr_lua_only(&part, buf, cap);
}

/* Is the native frame right below the outermost Lua frame the expected one? */
static bool below_ok(const struct ljc *c, const struct ss_stack *st, int outer)
{
    if (!c->below) return true;
    char b[256] = "";
    if ((unsigned)outer + 1 < st->nframes) ljc_frame(st, (unsigned)outer + 1, b, sizeof(b));
    return !strcmp(b, c->below);
}

/* A sample cut in the middle (ljcheck.h): one [truncated] frame among its
 * Lua frames; the Lua frames above it the end of an expected chain, those
 * below it its start, at least one frame of it left out between. Native
 * frames may sit between the cut and the root part (the VM frame that was
 * not walked); elsewhere only where the case allows gaps. The expected
 * chain's index, or -1. */
static int cut_of(const struct ljc *c, const struct ss_stack *st, int inner, int outer)
{
    int x = -1, r = -1;
    for (int i = inner + 1; i < outer; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind == SS_FRAME_LUA) {
            if (x >= 0 && r < 0) r = i;
        } else if (f->kind == SS_FRAME_PSEUDO && f->name && !strcmp(f->name, "[truncated]")) {
            if (x >= 0) return -1;
            x = i;
        } else if (!c->gaps && (x < 0 || r >= 0)) {
            return -1;
        }
    }
    if (x < 0) return -1;
    char leaf[2048], root[2048];
    lua_part(st, 0, (unsigned)x, leaf, sizeof(leaf));
    lua_part(st, (unsigned)x + 1, st->nframes, root, sizeof(root));
    size_t ll = strlen(leaf), lr = strlen(root);
    for (unsigned k = 0; k < LJC_MAXWANT && c->want[k]; k++) {
        const char *w = c->want[k];
        size_t lw = strlen(w);
        if (ll && lr && lr + ll + 2 < lw && !strncmp(w, root, lr) && w[lr] == ';' &&
            !strcmp(w + lw - ll, leaf) && w[lw - ll - 1] == ';')
            return (int)k;
    }
    return -1;
}

void ljc_on(void *ctx, const struct ss_stack *st, const char *folded)
{
    struct ljc *c = ctx;
    c->samples++;
    int inner = -1, outer = -1;
    for (unsigned i = 0; i < st->nframes; i++)
        if (st->frames[i].kind == SS_FRAME_LUA) {
            if (inner < 0) inner = (int)i;
            outer = (int)i;
        }
    if (inner < 0) return;
    c->lua++;
    const char *lname = st->frames[inner].name ? st->frames[inner].name : "?";
    bool judged = false;
    for (unsigned k = 0; k < LJC_MAXWANT && c->want[k] && !judged; k++) {
        char l[128];
        leaf_of(c->want[k], l, sizeof(l));
        judged = !strcmp(l, lname);
    }
    if (!judged) return;
    c->judged++;
    char lua[4096];
    ljr_lua_only(st, lua, sizeof(lua));
    int hit = -1;
    for (unsigned k = 0; k < LJC_MAXWANT && c->want[k]; k++)
        if (!strcmp(lua, c->want[k])) hit = (int)k;
    bool ok = hit >= 0;
    if (ok && !c->gaps)
        for (int i = inner; i <= outer; i++)
            if (st->frames[i].kind != SS_FRAME_LUA) ok = false;
    if (ok) ok = below_ok(c, st, outer);
    if (ok && c->extra) ok = c->extra(st, folded);
    int cut = ok || hit >= 0 ? -1 : cut_of(c, st, inner, outer);
    if (ok) {
        c->exact++;
        c->hits[hit]++;
    } else if (cut >= 0 && below_ok(c, st, outer)) {
        c->cut++;
        c->cuts[cut]++;
    } else if (!c->bad[0]) {
        snprintf(c->bad, sizeof(c->bad), "%.2000s", folded);
    }
    if (c->after) c->after(c, st, ok ? hit : -1);
}

void ljc_run(const char *label, char *const argv[], const char *ldp, double seconds, struct ljc *c)
{
    char msg[256];
    unsigned min_judged = c->min_judged ? c->min_judged : 60;
    unsigned exact_pct = c->exact_pct ? c->exact_pct : 98;
    unsigned cut_pct = c->cut_pct ? c->cut_pct : 10;
    unsigned cov_pct = c->coverage_pct ? c->coverage_pct : 85;
    unsigned each_pct = c->each_pct ? c->each_pct : 5;
    int rc = c->root ? ljr_run_root(c->root, argv, 300, 499, seconds, ljc_on, c, &c->st, msg,
                                    sizeof(msg))
                     : ljr_run(argv, ldp, 300, 499, seconds, ljc_on, c, &c->st, msg, sizeof(msg));
    cr_assert_eq(rc, 0, "%s: recording failed: %s", label, msg);
    double us = c->st.samples ? c->st.unwind_ns / c->st.samples / 1000 : 0;
    unsigned wrong = c->judged - c->exact - c->cut;
    cr_log_info("%s: %u samples, %u with Lua frames (%.1f%%), %u judged, %u exact (%.1f%%), "
                "%u cut, %u wrong; %.1f us/sample, %.2f reads/sample; layout %s%s%s%s",
                label, c->samples, c->lua, c->samples ? 100.0 * c->lua / c->samples : 0, c->judged,
                c->exact, c->judged ? 100.0 * c->exact / c->judged : 0, c->cut, wrong, us,
                c->st.samples ? (double)c->st.target_reads / c->st.samples : 0,
                c->st.layout[0] ? c->st.layout : "-", c->st.derived ? " (derived)" : " (table)",
                c->st.diag[0] ? "; diag " : "", c->st.diag);
    if (c->derived)
        cr_expect(c->st.derived, "%s: layout %s was not derived from the binary's code", label,
                  c->st.layout);
    if (c->layout)
        cr_expect_str_eq(c->st.layout, c->layout, "%s: layout %s, want %s (diag '%s')", label,
                         c->st.layout, c->layout, c->st.diag);
    cr_expect(c->judged >= min_judged, "%s: only %u judged samples (%u samples, %u with Lua)",
              label, c->judged, c->samples, c->lua);
    /* a cut is no wrong frame, but cuts stay rare (a walker that cut every
     * nested resumer would pass the first bar) */
    cr_expect((c->exact + c->cut) * 100 >= c->judged * exact_pct,
              "%s: %u of %u judged samples exact, %u cut; first wrong:\n%s", label, c->exact,
              c->judged, c->cut, c->bad);
    cr_expect(c->cut * 100 <= c->judged * cut_pct, "%s: %u of %u judged samples cut (%u%% at most)",
              label, c->cut, c->judged, cut_pct);
    cr_expect(c->lua * 100 >= c->samples * cov_pct, "%s: %u of %u samples have Lua frames", label,
              c->lua, c->samples);
    for (unsigned k = 0; k < LJC_MAXWANT && c->want[k]; k++)
        cr_expect(c->hits[k] * 100 >= c->judged * each_pct, "%s: chain %u seen %u/%u times: %s",
                  label, k, c->hits[k], c->judged, c->want[k]);
}

static const char *wset(struct ljc *c, unsigned k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static const char *wset(struct ljc *c, unsigned k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->wbuf[k], sizeof(c->wbuf[k]), fmt, ap);
    va_end(ap);
    c->want[k] = c->wbuf[k];
    return c->want[k];
}

void ljc_case_chain(struct ljc *c, const char *s, bool tarantool)
{
    int d = tarantool ? 1 : 0;
    wset(c, 0, "main (%s:%d);a (%s:%d);b (%s:%d);c (%s:%d);leaf (%s:%d)", s, 6 + d, s, 4 + d, s,
         3 + d, s, 2 + d, s, 1 + d);
    c->below = "lua_pcall";
    c->exact_pct = 99;
}

void ljc_case_names(struct ljc *c, const char *s)
{
    wset(c, 0, "main (%s:9);obj:method (%s:5);M.run (%s:3)", s, s, s);
    wset(c, 1, "main (%s:9);reps (%s:7);string.rep ([builtin]:0)", s, s);
    c->below = "lua_pcall";
    c->gaps = false;
}

void ljc_case_coro(struct ljc *c, const char *s)
{
    wset(c, 0, "main (%s:33);consume (%s:27);spin (%s:2)", s, s, s);
    wset(c, 1,
         "main (%s:33);consume (%s:24);coroutine.resume ([builtin]:0);anonymous (%s:6);"
         "spin (%s:2)",
         s, s, s, s);
    wset(c, 2,
         "main (%s:33);consume (%s:25);coroutine.wrap ([builtin]:0);anonymous (%s:6);"
         "spin (%s:2)",
         s, s, s, s);
    wset(c, 3,
         "main (%s:33);consume (%s:26);coroutine.wrap ([builtin]:0);anonymous (%s:13);"
         "spin (%s:2)",
         s, s, s, s);
    wset(c, 4,
         "main (%s:33);consume (%s:26);coroutine.wrap ([builtin]:0);anonymous (%s:12);"
         "coroutine.resume ([builtin]:0);anonymous (%s:6);spin (%s:2)",
         s, s, s, s, s);
    c->below = "lua_pcall";
}

/* Between the caller's builtin frame and the callback's first Lua frame:
 * only native frames, one of them libc's qsort, and the callback sits right
 * on a libc sort frame (the frame that called the comparator; by symbol, or
 * by module where libc has no local symbols). */
static bool ffi_extra(const struct ss_stack *st, const char *folded)
{
    (void)folded;
    int cb = -1, call = -1;
    for (unsigned i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind != SS_FRAME_LUA) continue;
        if (cb < 0 && f->name && !strcmp(f->name, "anonymous")) cb = (int)i;
        if (f->name && !strcmp(f->name, "ffi.meta.__call")) call = (int)i;
    }
    if (cb < 0 || call <= cb + 1) return false;
    bool qsort = false;
    for (int i = cb + 1; i < call; i++) {
        char b[256];
        if (st->frames[i].kind == SS_FRAME_LUA) return false;
        ljc_frame(st, (unsigned)i, b, sizeof(b));
        if (strstr(b, "qsort")) qsort = true;
    }
    char b[256];
    ljc_frame(st, (unsigned)cb + 1, b, sizeof(b));
    /* a libc without its local symbols (a container's, no libc6-dbg there)
     * names the sort frame only by module */
    return qsort && (strstr(b, "msort") || strstr(b, "qsort") || !strncmp(b, "libc.so.6+", 10));
}

void ljc_case_ffi(struct ljc *c, const char *s)
{
    wset(c, 0,
         "main (%s:18);sortit (%s:14);ffi.meta.__call ([builtin]:0);anonymous (%s:7);"
         "slow (%s:4)",
         s, s, s, s);
    c->below = "lua_pcall";
    c->gaps = true;
    c->extra = ffi_extra;
}
