/* test/native/perf_test.c: our chains against perf's on the same process
 * at the same time. `perf record --call-graph dwarf,16384` and our BPF
 * capture sample a PIE workload together; perf's chains come from
 * `perf script`, ours from live unwinding. For every chain perf reports for
 * the spinning leaf (qsort callback, signal handler, four threads) we must
 * report the same chain: same length, and frame by frame the same module
 * and either the same symbol or the same address (perf names the signal
 * trampoline "[unknown]" and keeps version suffixes, e.g.
 * __libc_start_main@@GLIBC_2.34; inline expansion is off). perf prints caller addresses as ip - 1
 * except for the leaf and frames below a signal frame; addresses may differ by that one byte. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "stacksnap/unwind.h"

extern char **environ;

#define MAXF 64

struct pframe {
    uint64_t addr;
    char sym[128], dso[128];
};

struct pchain {
    struct pframe f[MAXF];
    int n;
    long count;
};

struct chains {
    struct pchain *v;
    int n, cap;
    long total;
};

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool same_chain(const struct pchain *a, const struct pchain *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->f[i].addr != b->f[i].addr || strcmp(a->f[i].dso, b->f[i].dso)) return false;
    return true;
}

static void add(struct chains *cs, const struct pchain *c)
{
    cs->total++;
    for (int i = 0; i < cs->n; i++)
        if (same_chain(&cs->v[i], c)) {
            cs->v[i].count++;
            return;
        }
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 8;
        cs->v = realloc(cs->v, cs->cap * sizeof(*cs->v));
    }
    cs->v[cs->n] = *c;
    cs->v[cs->n++].count = 1;
}

/* ---- ours ---- */
static void each(void *ctx, const struct ss_sample *s, const struct ss_stack *st)
{
    (void)s;
    struct chains *cs = ctx;
    if (!st->nframes || !st->frames[0].name || strcmp(st->frames[0].name, "nw_spin") ||
        st->nframes > MAXF)
        return;
    struct pchain c = {.n = (int)st->nframes};
    for (uint32_t i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        /* offset == vaddr for these PIE files; perf shows ip - 1 for callers */
        c.f[i].addr = f->offset - (i > 0);
        snprintf(c.f[i].sym, sizeof(c.f[i].sym), "%s", f->name ? f->name : "[unknown]");
        snprintf(c.f[i].dso, sizeof(c.f[i].dso), "%s", f->module ? base(f->module) : "?");
    }
    add(cs, &c);
}

/* ---- perf's ---- */
static void parse_perf(const char *data, struct chains *cs)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "perf script --no-inline -i %s -F tid,ip,sym,dso 2>/dev/null", data);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    char line[1024];
    struct pchain c = {0};
    bool in = false;
    for (;;) {
        char *l = fgets(line, sizeof(line), f);
        if (!l || line[0] != '\t') { /* a header, a blank line or the end: flush */
            if (in && c.n > 0 && !strcmp(c.f[0].sym, "nw_spin")) add(cs, &c);
            memset(&c, 0, sizeof(c));
            in = l && line[0] != '\n';
            if (!l) break;
            continue;
        }
        if (c.n == MAXF) continue;
        struct pframe *pf = &c.f[c.n];
        char *p = line;
        pf->addr = strtoull(p, &p, 16);
        while (*p == ' ')
            p++;
        char *paren = strrchr(p, '(');
        char *close = paren ? strrchr(paren, ')') : NULL;
        if (!paren || !close) continue;
        char dso[512];
        snprintf(dso, sizeof(dso), "%.*s", (int)(close - paren - 1), paren + 1);
        snprintf(pf->dso, sizeof(pf->dso), "%.127s", base(dso));
        while (paren > p && paren[-1] == ' ')
            paren--;
        snprintf(pf->sym, sizeof(pf->sym), "%.*s", (int)(paren - p), p);
        c.n++;
    }
    pclose(f);
}

static bool frames_agree(const struct pframe *ours, const struct pframe *perf)
{
    bool dso = !strcmp(ours->dso, perf->dso);
    bool name = !strcmp(ours->sym, perf->sym);
    bool addr = ours->addr + 1 >= perf->addr && ours->addr <= perf->addr + 1;
    return dso && (name || addr);
}

static const struct pchain *find_match(const struct chains *ours, const struct pchain *p)
{
    for (int i = 0; i < ours->n; i++) {
        const struct pchain *o = &ours->v[i];
        if (o->n != p->n) continue;
        int k = 0;
        while (k < o->n && frames_agree(&o->f[k], &p->f[k]))
            k++;
        if (k == o->n) return o;
    }
    return NULL;
}

static void log_chain(const char *who, const struct pchain *c)
{
    char buf[8192];
    size_t len = 0;
    for (int i = 0; i < c->n && len + 300 < sizeof(buf); i++)
        len += snprintf(buf + len, sizeof(buf) - len, "%s%s@%s+%lx", i ? ";" : "", c->f[i].sym,
                        c->f[i].dso, (unsigned long)c->f[i].addr);
    cr_log_info("%s %6ld %s", who, c->count, buf);
}

static void compare(const char *mode)
{
    struct nw_proc p;
    cr_assert_eq(nw_start(&p, "native_workload_pie", mode), 0);
    char dir[] = "/tmp/ss-perf-test-XXXXXX";
    cr_assert(mkdtemp(dir));
    char data[256], pid[32];
    snprintf(data, sizeof(data), "%s/perf.data", dir);
    snprintf(pid, sizeof(pid), "%d", (int)p.pid);
    char *argv[] = {"/usr/bin/perf", "record", "-q", "-F", "499", "--call-graph",
                    "dwarf,16384",   "-p",     pid,  "-o", data,  "--",
                    "sleep",         "2",      NULL};
    pid_t perf;
    cr_assert_eq(posix_spawn(&perf, argv[0], NULL, NULL, argv, environ), 0);
    struct chains ours = {0}, theirs = {0};
    struct nw_tally t = {0};
    struct nw_opts o = {
        .leaf = "nw_spin", .seconds = 2, .freq = 499, .each = each, .each_ctx = &ours};
    cr_assert_eq(nw_sample(p.pid, &o, NULL, &t), 0);
    int st;
    waitpid(perf, &st, 0);
    nw_stop(&p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "perf record failed");
    parse_perf(data, &theirs);
    char rm[300];
    snprintf(rm, sizeof(rm), "rm -rf %s", dir);
    cr_assert_eq(system(rm), 0);

    cr_log_info("%s: perf %ld leaf samples in %d chains, stacksnap %ld in %d chains", mode,
                theirs.total, theirs.n, ours.total, ours.n);
    cr_assert_geq(theirs.total, 50, "perf saw only %ld samples in nw_spin", theirs.total);
    cr_assert_geq(ours.total, 50, "stacksnap saw only %ld samples in nw_spin", ours.total);
    long covered = 0;
    for (int i = 0; i < theirs.n; i++) {
        const struct pchain *m = find_match(&ours, &theirs.v[i]);
        if (m) covered += theirs.v[i].count;
        if (!m || theirs.v[i].count * 20 >= theirs.total) { /* log the main ones */
            log_chain(m ? "perf      " : "perf ONLY ", &theirs.v[i]);
            if (m) log_chain("stacksnap ", m);
        }
    }
    /* perf's main chains (>= 5% of its samples each) all appear on our side */
    for (int i = 0; i < theirs.n; i++)
        if (theirs.v[i].count * 20 >= theirs.total)
            cr_expect(find_match(&ours, &theirs.v[i]), "%s: a chain of perf's is missing", mode);
    cr_expect_geq(covered * 100, theirs.total * 95, "%s: %ld of perf's %ld samples matched", mode,
                  covered, theirs.total);
    free(ours.v);
    free(theirs.v);
    nw_tally_free(&t);
}

Test(perf, qsort)
{
    compare("qsort");
}

Test(perf, signal)
{
    compare("signal");
}

Test(perf, threads)
{
    compare("threads");
}
