/* test/reliability/torn_test.c: torn state. torn.lua keeps growing and
 * shrinking its Lua stack, creating and collecting functions (one fresh
 * generation of load()ed chains per round, chunk names "=mGdK"/"=cGdK") and
 * coroutines; `stacksnap record -F 999` samples it, interpreter and JIT.
 * Every walk must end (record finishes in time, no crash), and every sample
 * must be legal: its Lua frames, root first, may only be a sequence the
 * program can be in (pairs of caller/callee listed below), all generated
 * frames of one generation, chain depths consecutive. A stale cache or a
 * read torn between two states would name a function that was not there.
 * A frame whose chunk name could not be read ("?") claims nothing: it only
 * breaks the caller/callee chain, as does the "[truncated]" root of a chain
 * the walk cut (a thread's stack read past its window that changed since the
 * sample, the frame cap). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl.h"

enum kind { K_FILE, K_BUILTIN, K_GEN, K_UNKNOWN, K_OTHER };

struct lf {
    enum kind k;
    char name[64];
    char prefix; /* K_GEN: 'm' or 'c' */
    long gen, depth;
    long line;
};

/* "NAME (CHUNK:LINE)" -> lf; false for native frames */
static bool parse_frame(const char *s, size_t n, struct lf *f)
{
    if (n < 5 || s[n - 1] != ')') return false;
    const char *open = NULL;
    for (const char *p = s + n - 1; p > s; p--)
        if (p[0] == '(' && p[-1] == ' ') {
            open = p;
            break;
        }
    if (!open) return false;
    const char *colon = NULL;
    for (const char *p = s + n - 1; p > open; p--)
        if (*p == ':') {
            colon = p;
            break;
        }
    if (!colon) return false;
    size_t nl = (size_t)(open - 1 - s);
    snprintf(f->name, sizeof(f->name), "%.*s", (int)nl, s);
    char chunk[256];
    snprintf(chunk, sizeof(chunk), "%.*s", (int)(colon - open - 1), open + 1);
    f->line = strtol(colon + 1, NULL, 10);
    char pre;
    long g, d;
    int used = 0;
    if (sscanf(chunk, "%c%ldd%ld%n", &pre, &g, &d, &used) == 3 && !chunk[used] &&
        (pre == 'm' || pre == 'c')) {
        f->k = K_GEN;
        f->prefix = pre;
        f->gen = g;
        f->depth = d;
    } else if (!strcmp(chunk, "?")) { /* chunk name unreadable: names nothing */
        f->k = K_UNKNOWN;
    } else if (!strcmp(chunk, "[builtin]")) {
        f->k = K_BUILTIN;
    } else if (strstr(chunk, "torn.lua")) {
        f->k = K_FILE;
    } else {
        f->k = K_OTHER;
    }
    return true;
}

/* Functions of torn.lua by line range ("local function NAME" up to the
 * next "end" in column 0); every other line belongs to the main chunk. A
 * frame of the file is identified by its line, not by its NAME (which the
 * caller's bytecode decides: mainleaf runs as "leafwork"). */
struct fn_range {
    char name[32];
    long lo, hi;
};
static struct fn_range g_fns[16];
static unsigned g_nfns;
static long g_file_lines;

static void load_ranges(void)
{
    char *src = rl_slurp(RL_TORN_LUA, NULL);
    cr_assert_not_null(src);
    long ln = 1;
    char *p = src;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        char nm[32];
        if (sscanf(p, "local function %31[A-Za-z_](", nm) == 1 && g_nfns < 16) {
            snprintf(g_fns[g_nfns].name, sizeof(g_fns[0].name), "%s", nm);
            g_fns[g_nfns].lo = ln;
            g_fns[g_nfns].hi = 0;
        } else if (!strcmp(p, "end") && g_nfns < 16 && g_fns[g_nfns].lo && !g_fns[g_nfns].hi) {
            g_fns[g_nfns++].hi = ln;
        }
        if (!nl) break;
        p = nl + 1;
        ln++;
    }
    g_file_lines = ln;
    free(src);
    cr_assert_geq(g_nfns, 4, "torn.lua: functions not found");
}

/* Identity of a frame of torn.lua: the function whose lines hold it. */
static const char *file_fn(const struct lf *f)
{
    for (unsigned i = 0; i < g_nfns; i++)
        if (f->line >= g_fns[i].lo && f->line <= g_fns[i].hi) return g_fns[i].name;
    return "main";
}

static bool is(const struct lf *f, enum kind k, const char *name)
{
    if (f->k != k) return false;
    return !strcmp(k == K_FILE ? file_fn(f) : f->name, name);
}

/* May callee b directly follow caller a (Lua frames only, root first)? */
static bool legal_pair(const struct lf *a, const struct lf *b)
{
    static const char *const main_calls[] = {"chain",          "coroutine.create", "math.random",
                                             "collectgarbage", "os.time",          "print",
                                             "tonumber"};
    if (is(a, K_FILE, "main")) {
        for (size_t i = 0; i < sizeof(main_calls) / sizeof(*main_calls); i++)
            if (!strcmp(b->name, main_calls[i]) && b->k != K_GEN) return true;
        return b->k == K_GEN && b->prefix == 'm' && b->depth == 1 && strcmp(b->name, "main");
    }
    if (is(a, K_FILE, "chain"))
        return is(b, K_BUILTIN, "load") || is(b, K_BUILTIN, "assert") ||
               (b->k == K_GEN && !strcmp(b->name, "main")); /* the chunk's main function */
    if (a->k == K_GEN) {
        if (!strcmp(a->name, "main")) return false; /* a chunk main calls nothing */
        if (b->k == K_GEN)
            return b->prefix == a->prefix && b->gen == a->gen && b->depth == a->depth + 1 &&
                   strcmp(b->name, "main");
        return a->prefix == 'm' ? is(b, K_FILE, "mainleaf") : is(b, K_FILE, "coleaf");
    }
    if (is(a, K_FILE, "mainleaf"))
        return is(b, K_FILE, "spin") || is(b, K_BUILTIN, "coroutine.resume");
    if (is(a, K_FILE, "coleaf"))
        return is(b, K_FILE, "spin") || is(b, K_BUILTIN, "coroutine.yield");
    if (is(a, K_BUILTIN, "coroutine.resume"))
        return b->k == K_GEN && b->prefix == 'c' && b->depth == 1;
    return false;
}

/* what makes a sample illegal (check_line's `why`), counted per kind */
static const char *const g_kinds[] = {"frames of two generations", "illegal caller/callee pair",
                                      "frame of an unknown chunk", "line outside torn.lua"};
#define NKINDS (sizeof(g_kinds) / sizeof(g_kinds[0]))

struct tally {
    unsigned samples, lua, bad, bad_lines, deepest, stale_native;
    unsigned per_kind[NKINDS];
    char first_bad[2048];
};

static void check_line(char *line, struct tally *t)
{
    char *sp = strrchr(line, ' ');
    if (!sp) return;
    unsigned cnt = (unsigned)strtoul(sp + 1, NULL, 10);
    *sp = 0;
    t->samples += cnt;
    struct lf prev = {0}, cur;
    bool have_prev = false, lua = false;
    long gen = -1;
    unsigned nlua = 0;
    const char *why = NULL;
    const char *last_lua_name = NULL;
    char last_name[64] = "";
    bool last_builtin = false;
    for (char *s = line, *e; s && !why; s = e ? e + 1 : NULL) {
        e = strchr(s, ';');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 11 && !memcmp(s, "[truncated]", 11)) { /* a cut chain's root: no caller */
            have_prev = false;
            continue;
        }
        if (!parse_frame(s, n, &cur)) {
            /* a native frame below a Lua frame: lua_loadx runs for load() only */
            if (last_lua_name && n == 9 && !memcmp(s, "lua_loadx", 9) && last_builtin &&
                strcmp(last_name, "load"))
                t->stale_native += cnt;
            continue;
        }
        lua = true;
        nlua++;
        snprintf(last_name, sizeof(last_name), "%s", cur.name);
        last_lua_name = last_name;
        last_builtin = cur.k == K_BUILTIN;
        if (cur.k == K_OTHER) why = g_kinds[2];
        if (cur.k == K_FILE && (cur.line < 0 || cur.line > g_file_lines)) why = g_kinds[3];
        if (cur.k == K_GEN) {
            if (gen >= 0 && cur.gen != gen) why = g_kinds[0];
            gen = cur.gen;
        }
        if (cur.k == K_UNKNOWN) { /* a frame that claims nothing: no pair across it */
            have_prev = false;
            continue;
        }
        if (!why && have_prev && !legal_pair(&prev, &cur)) why = g_kinds[1];
        prev = cur;
        have_prev = true;
    }
    if (lua) t->lua += cnt;
    if (nlua > t->deepest) t->deepest = nlua;
    if (why) {
        const char *dump = getenv("RL_TORN_BAD"); /* every illegal line, for debugging */
        FILE *df = dump ? fopen(dump, "a") : NULL;
        if (df) {
            fprintf(df, "%s at %s: %s\n", why, cur.name, line);
            fclose(df);
        }
        t->bad += cnt;
        for (size_t k = 0; k < NKINDS; k++)
            if (why == g_kinds[k]) t->per_kind[k] += cnt;
        size_t n = strlen(line);
        if (!t->bad_lines++) /* the leaf end says most */
            snprintf(t->first_bad, sizeof(t->first_bad), "%s at %s: ...%s", why, cur.name,
                     line + (n > 1500 ? n - 1500 : 0));
    }
}

static void run_mode(const char *mode, bool jit, unsigned min_lua)
{
    if (!g_nfns) load_ranges();
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "torn");
    char folded[512], snap[512];
    snprintf(folded, sizeof(folded), "%s/torn.folded", dir);
    snprintf(snap, sizeof(snap), "%s/torn.snap", dir);
    const char *secs = getenv("RL_TORN_SECONDS") ? getenv("RL_TORN_SECONDS") : "8";
    char *argv_jit[] = {RL_STACKSNAP, "record", "-F",     "999",       "-o",         folded, "-o",
                        snap,         "--",     "luajit", RL_TORN_LUA, (char *)secs, NULL};
    char *argv_joff[] = {RL_STACKSNAP, "record",    "-F",         "999", "-o",
                         folded,       "-o",        snap,         "--",  "luajit",
                         "-joff",      RL_TORN_LUA, (char *)secs, NULL};
    double t0 = rl_now();
    int rc = rl_run(dir, "record", jit ? argv_jit : argv_joff, atof(secs) + 60);
    double el = rl_now() - t0;
    char errp[600];
    snprintf(errp, sizeof(errp), "%s/record.err", dir);
    char *err = rl_slurp(errp, NULL);
    cr_assert_eq(rc, 0, "%s: record exit %d after %.1fs (-1: did not finish): %s", mode, rc, el,
                 err ? err : "");
    size_t len;
    char *text = rl_slurp(folded, &len);
    cr_assert_not_null(text);
    struct tally t = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        check_line(line, &t);
    cr_log_info("torn %s: %u samples, %u with Lua frames (deepest %u), %u illegal (%u %s, %u %s, "
                "%u %s, %u %s); %u samples whose native leaf (lua_loadx) runs under another "
                "builtin's Lua frame; %s",
                mode, t.samples, t.lua, t.deepest, t.bad, t.per_kind[0], g_kinds[0], t.per_kind[1],
                g_kinds[1], t.per_kind[2], g_kinds[2], t.per_kind[3], g_kinds[3], t.stale_native,
                err ? err : "");
    cr_expect_eq(t.bad, 0, "%s: %u illegal samples (%u lines), first: %s", mode, t.bad, t.bad_lines,
                 t.first_bad);
    /* load() calls lua_loadx; another builtin's frame over it is a Lua
     * stack read after the thread moved on (frames.c checks KBASE = the
     * called lua_CFunction; 171-294 such samples per run before that) */
    cr_expect_eq(t.stale_native, 0, "%s: %u samples name another builtin over lua_loadx", mode,
                 t.stale_native);
    cr_expect_geq(t.lua, min_lua, "%s: only %u of %u samples have Lua frames", mode, t.lua,
                  t.samples);
    free(text);
    free(err);
    rl_rmtree(dir);
}

Test(torn, interpreter_stacks_in_flux, .timeout = 240)
{
    run_mode("interpreter", false, 20);
}

Test(torn, jit_stacks_in_flux, .timeout = 240)
{
    run_mode("jit", true, 0);
}
