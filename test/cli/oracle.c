/* test/cli/oracle.c: the differential oracle's folded-text parsing and
 * sample-by-sample verdicts (oracle.h), shared by jitoracle.c and
 * ngxoracle.c; the busy processes of their runs under load. */
#include "oracle.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool is_lua(const char *f, size_t len)
{
    return len > 3 && f[len - 1] == ')' && memchr(f, '(', len) != NULL &&
           memchr(f, ':', len) != NULL;
}

static bool starts(const char *f, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && !strncmp(f, p, n);
}

static bool machinery(const char *f, size_t len)
{
    return (len > 6 && starts(f, len, "lj_cf_")) || starts(f, len, "lj_vm_ffi_call") ||
           (len > 9 && starts(f, len, "[unknown]")) || (len > 9 && starts(f, len, "luajit+0x")) ||
           starts(f, len, "libluajit");
}

/* Builtins that traces compile into their code: with the JIT on they leave
 * no frame of their own, so they are not part of the key. */
static bool inlined_builtin(const char *f, size_t len)
{
    static const char *const k[] = {"ffi.meta.__call", "string.rep", "table.concat",
                                    "string.format", NULL};
    for (int i = 0; k[i]; i++)
        if (strlen(k[i]) + 14 == len && !strncmp(f, k[i], strlen(k[i]))) return true;
    return false;
}

/* The string.format helpers traces call as IR CALLLs (lj_ffrecord.c
 * recff_format): lj_strfmt_putf* and lj_strfmt_putquoted. */
static bool strfmt_helper(const char *f, size_t len)
{
    return starts(f, len, "lj_strfmt_putf") || (len == 19 && starts(f, len, "lj_strfmt_putquoted"));
}
static void add(struct orc_dist *d, const char *key, const char *chain, long long n)
{
    struct orc_key *k = NULL;
    for (unsigned i = 0; i < d->n && !k; i++)
        if (!strcmp(d->k[i].name, key)) k = &d->k[i];
    if (!k && d->n < ORC_KEYS) {
        k = &d->k[d->n++];
        snprintf(k->name, sizeof(k->name), "%s", key);
    }
    if (!k) return;
    k->total += n;
    for (unsigned i = 0; i < k->nc; i++)
        if (!strcmp(k->c[i].chain, chain)) {
            k->c[i].n += n;
            return;
        }
    if (k->nc == ORC_CHAINS) {
        k->other += n;
        return;
    }
    snprintf(k->c[k->nc].chain, sizeof(k->c[0].chain), "%s", chain);
    k->c[k->nc++].n = n;
}

/* One folded line (comm;...;leaf COUNT) into d. */
static void line(struct orc_dist *d, const char *s, const char *e)
{
    const char *sp = e;
    while (sp > s && sp[-1] != ' ')
        sp--;
    long long n = atoll(sp);
    e = sp - 1;
    char chain[1024] = "", key[256] = "";
    const char *f = strchr(s, ';');
    if (!f || f > e) return;
    f++;
    while (f < e) {
        const char *x = memchr(f, ';', (size_t)(e - f));
        if (!x) x = e;
        size_t len = (size_t)(x - f);
        if (is_lua(f, len) || (len == 9 && !strncmp(f, "lua_pcall", 9))) {
            key[0] = 0; /* the C function starts above the last Lua frame */
            bool builtin = len > 14 && !memcmp(f + len - 13, "([builtin]:0)", 13);
            /* a builtin that traces do not compile (string.gsub) stays a
             * builtin frame with the JIT on: part of the key (its own
             * calls of strlen are not the FFI's) */
            if (builtin && !inlined_builtin(f, len))
                snprintf(key, sizeof(key), "builtin %.*s;", (int)(len - 14), f);
            /* string.format: its own key on both sides (the interpreter's
             * lj_cf_string_format calls unnamed code; traces call the
             * helpers of strfmt_helper) */
            if (builtin && len == 27 && !strncmp(f, "string.format", 13))
                snprintf(key, sizeof(key), "string.format");
            if (is_lua(f, len) && !builtin) {
                const char *paren = memchr(f, '(', len), *colon = x - 1;
                while (colon > paren && *colon != ':')
                    colon--;
                size_t cl = strlen(chain);
                snprintf(chain + cl, sizeof(chain) - cl, "%s%.*s)", cl ? ";" : "", (int)(colon - f),
                         f);
            }
        } else if (!machinery(f, len) && (!key[0] || key[strlen(key) - 1] == ';')) {
            /* the C function the Lua code called: the outermost one (after
             * a builtin's name: the one the builtin called) */
            size_t kl = strlen(key);
            snprintf(key + kl, sizeof(key) - kl, "%.*s", (int)(strfmt_helper(f, len) ? 13 : len),
                     strfmt_helper(f, len) ? "string.format" : f);
        }
        f = x + 1;
    }
    d->samples += n;
    if (key[0]) add(d, key, chain, n);
}

void orc_parse(struct orc_dist *d, const char *text)
{
    memset(d, 0, sizeof(*d));
    d->text = text;
    for (const char *s = text; s && *s;) {
        const char *e = strchr(s, '\n');
        if (!e) break;
        line(d, s, e);
        s = e + 1;
    }
}

long long orc_unproven(const char *err)
{
    const char *p = strstr(err, " Lua frames unproven");
    while (p && p > err && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p ? atoll(p) : -1;
}

/* Is a (';'-joined chain) a proper prefix of b? */
static bool prefix(const char *a, const char *b)
{
    size_t la = strlen(a);
    return la < strlen(b) && !strncmp(a, b, la) && (la == 0 || b[la] == ';');
}

/* The interpreter's samples in C function name whose walks kept no Lua
 * frame (folded lines without one that pass through the function). */
static long long lost_in(const struct orc_dist *d, const char *name)
{
    long long n = 0;
    size_t nl = strlen(name);
    for (const char *s = d->text; s && *s;) {
        const char *e = strchr(s, '\n');
        if (!e) break;
        const char *sp = e;
        while (sp > s && sp[-1] != ' ')
            sp--;
        bool lua = false, in = false;
        for (const char *f = s; f < sp;) {
            const char *x = memchr(f, ';', (size_t)(sp - 1 - f));
            if (!x) x = sp - 1;
            size_t len = (size_t)(x - f);
            lua |= is_lua(f, len) || (len == 9 && !strncmp(f, "lua_pcall", 9));
            in |= f > s && len == nl && !strncmp(f, name, nl);
            f = x + 1;
        }
        if (in && !lua) n += atoll(sp);
        s = e + 1;
    }
    return n;
}

/* The interpreter's chains above C function name: its own key's and (not
 * single) those of the keys of builtins that called it ("builtin X;name":
 * traces compile string.sub, ffi.string, ... into their code, which then
 * calls name itself). */
static unsigned chains_of(const struct orc_dist *off, const struct orc_key *ko, bool single,
                          unsigned best, const char **out, unsigned cap, long long *via)
{
    unsigned n = 0;
    *via = 0;
    for (unsigned m = 0; m < ko->nc && n < cap; m++)
        if (single ? m == best : ko->c[m].chain[0] != 0) out[n++] = ko->c[m].chain;
    if (single) return n;
    size_t nl = strlen(ko->name);
    for (unsigned i = 0; i < off->n; i++) {
        const struct orc_key *kb = &off->k[i];
        const char *semi = strncmp(kb->name, "builtin ", 8) ? NULL : strchr(kb->name, ';');
        if (!semi || strlen(semi + 1) != nl || strcmp(semi + 1, ko->name)) continue;
        *via += kb->total;
        for (unsigned m = 0; m < kb->nc && n < cap; m++)
            if (kb->c[m].chain[0]) out[n++] = kb->c[m].chain;
    }
    return n;
}

unsigned orc_compare(const struct orc_dist *off, const struct orc_dist *on, long long min,
                     bool single, struct orc_row *rows, unsigned cap)
{
    unsigned nr = 0;
    static const char *want[ORC_KEYS * ORC_CHAINS];
    for (unsigned i = 0; i < off->n && nr < cap; i++) {
        const struct orc_key *ko = &off->k[i];
        /* under a builtin traces do not compile, both runs walk the
         * interpreter: such keys say nothing about traces; nor do VM
         * states ([GC]: traces step the collector at other points than the
         * interpreter does) */
        if (!strncmp(ko->name, "builtin ", 8) || ko->name[0] == '[') continue;
        /* the interpreter's walks that kept Lua frames (the others gave up:
         * they prove nothing) */
        long long covered = 0, walked = 0;
        unsigned nmain = 0, best = 0;
        for (unsigned c = 0; c < ko->nc; c++) {
            if (!ko->c[c].chain[0]) continue;
            walked += ko->c[c].n;
            if (!ko->c[best].chain[0] || ko->c[c].n > ko->c[best].n) best = c;
        }
        for (unsigned c = 0; c < ko->nc; c++)
            if (ko->c[c].chain[0] && ko->c[c].n * 50 >= walked) covered += ko->c[c].n, nmain++;
        if (walked < min || (single && (nmain != 1 || covered * 100 < walked * 97))) continue;
        const struct orc_key *kn = NULL;
        for (unsigned j = 0; j < on->n && !kn; j++)
            if (!strcmp(on->k[j].name, ko->name)) kn = &on->k[j];
        if (!kn || kn->total < min) continue;
        struct orc_row *r = &rows[nr++];
        memset(r, 0, sizeof(*r));
        snprintf(r->name, sizeof(r->name), "%s", ko->name);
        snprintf(r->want, sizeof(r->want), "%s", ko->c[best].chain);
        r->off = walked;
        r->off_main = covered;
        r->chains = nmain;
        r->on = kn->total;
        r->wrong = kn->other;
        r->lost = lost_in(off, ko->name);
        long long via = 0;
        unsigned nw = chains_of(off, ko, single, best, want, ORC_KEYS * ORC_CHAINS, &via);
        /* all of the interpreter's samples in the function */
        long long all = ko->total + via + r->lost;
        for (unsigned c = 0; c < kn->nc; c++) {
            const char *ch = kn->c[c].chain;
            bool same = false, pre = false;
            for (unsigned m = 0; m < nw; m++) {
                same |= !strcmp(ch, want[m]);
                pre |= prefix(ch, want[m]);
            }
            /* a chain the interpreter never showed is wrong only where its
             * view was complete enough to have shown it: at this chain's
             * share of the JIT's samples, the interpreter's samples in the
             * function would hold >= ORC_SEEN more of it than all of its
             * samples that lost their Lua frames (had every lost one been
             * this chain, ORC_SEEN would still be expected in view: P(none)
             * < 1%); else it is open (the truth side cannot tell) */
            double expect = (double)all * (double)kn->c[c].n / (double)kn->total;
            if (same)
                r->same += kn->c[c].n;
            else if (!ch[0])
                r->none += kn->c[c].n; /* no Lua frame at all (a cut walk) */
            else if (pre)
                r->pre += kn->c[c].n;
            else if (expect - (double)r->lost < ORC_SEEN) {
                r->open += kn->c[c].n;
                if (!r->unseen[0]) snprintf(r->unseen, sizeof(r->unseen), "%s", ch);
            } else {
                r->wrong += kn->c[c].n;
                if (!r->bad[0]) snprintf(r->bad, sizeof(r->bad), "%s", ch);
            }
        }
    }
    return nr;
}

void orc_table(const struct orc_row *rows, unsigned n, char *buf, size_t cap)
{
    size_t l = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < n && l < cap; i++) {
        const struct orc_row *r = &rows[i];
        double t = r->on ? (double)r->on : 1;
        l += (size_t)snprintf(buf + l, cap - l,
                              "  %-40.40s -joff %5lld (%u chain%s %.1f%%; %lld lost)  jit %5lld: "
                              "same %5.1f%% prefix %5.1f%% none %5.1f%% wrong %5.1f%% open "
                              "%5.1f%%%s%s%s%s\n",
                              r->name, r->off, r->chains, r->chains == 1 ? "," : "s,",
                              100.0 * r->off_main / r->off, r->lost, r->on, 100.0 * r->same / t,
                              100.0 * r->pre / t, 100.0 * r->none / t, 100.0 * r->wrong / t,
                              100.0 * r->open / t, r->bad[0] ? "\n    wrong: " : "", r->bad,
                              r->unseen[0] ? "\n    open: " : "", r->unseen);
    }
    if (l >= cap) buf[cap - 1] = 0;
}

int orc_busy_start(pid_t *pid, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            orc_busy_stop(pid, i);
            return -1;
        }
        if (pid[i] == 0) {
            volatile unsigned long x = 0;
            time_t end = time(NULL) + 60;
            while (time(NULL) < end)
                for (unsigned k = 0; k < 1000000; k++)
                    x++;
            _exit(0);
        }
    }
    return 0;
}

void orc_busy_stop(const pid_t *pid, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        kill(pid[i], SIGKILL);
        waitpid(pid[i], NULL, 0);
    }
}
