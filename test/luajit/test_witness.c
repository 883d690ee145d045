/* test/luajit/test_witness.c: stacksnap against LuaJIT's own profiler in
 * the same process (JIT off). witness.lua (Lua functions of different cost
 * on different paths, a builtin, a coroutine) runs under `-jp=fri1m0,FILE`
 * (raw sample counts per function) while we record it with real BPF. Each
 * of our samples counts for the innermost Lua function that is not part of
 * LuaJIT's profiler modules (jit/p.lua runs its callback on the sampled
 * stack) and not a builtin (jit.p charges time in C functions to the Lua
 * function that called them). Per-function shares must agree within 5
 * percentage points. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljcheck.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"
#define MAXF 32

struct share {
    char key[128];
    double ours, theirs;
};

struct wit {
    struct share f[MAXF];
    unsigned nf;
    unsigned total, unattributed;
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

/* jit.p's key for a function: its name, else MODULE:FIRSTLINE. */
static void key_of(const struct ss_frame *f, char *buf, size_t cap)
{
    if (f->name && strcmp(f->name, "anonymous") && strcmp(f->name, "main")) {
        snprintf(buf, cap, "%s", f->name);
        return;
    }
    const char *m = f->module ? strrchr(f->module, '/') : NULL;
    snprintf(buf, cap, "%s:%u",
             m           ? m + 1
             : f->module ? f->module
                         : "?",
             strcmp(f->name ? f->name : "", "main") ? f->first_line : 0);
}

static void on_stack(void *ctx, const struct ss_stack *st, const char *folded)
{
    (void)folded;
    struct wit *w = ctx;
    w->total++;
    for (unsigned i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->kind != SS_FRAME_LUA || !f->module || !strcmp(f->module, "[builtin]") ||
            strstr(f->module, "/jit/"))
            continue;
        char k[128];
        key_of(f, k, sizeof(k));
        struct share *s = slot(w, k);
        if (s) s->ours++;
        return;
    }
    w->unattributed++;
}

static void witness(const char *label, const char *bin, double cpu_seconds)
{
    char out[600], secs[32];
    snprintf(out, sizeof(out), "%s/witness-%d.txt", SS_BINARY_DIR, (int)getpid());
    char jp[700];
    snprintf(jp, sizeof(jp), "-jp=fri1m0,%s", out);
    snprintf(secs, sizeof(secs), "%g", cpu_seconds);
    char *argv[] = {(char *)bin, "-joff", jp, DIR "witness.lua", secs, NULL};
    static struct wit w;
    memset(&w, 0, sizeof(w));
    struct ljr_stats st;
    char msg[256];
    /* no settle time: record from the start, until the script ends */
    int rc =
        ljr_run(argv, NULL, 0, 499, 10 * cpu_seconds + 20, on_stack, &w, &st, msg, sizeof(msg));
    cr_assert_eq(rc, 0, "%s: recording failed: %s", label, msg);
    cr_assert(st.exited && WIFEXITED(st.status) && WEXITSTATUS(st.status) == 0,
              "%s: witness.lua did not finish cleanly (status 0x%x)", label, st.status);
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f, "%s: no jit.p output %s", label, out);
    char line[512];
    double theirs_total = 0, ours_total = 0;
    while (fgets(line, sizeof(line), f)) {
        double n;
        char k[128];
        if (sscanf(line, " %lf %127s", &n, k) != 2) continue;
        struct share *s = slot(&w, k);
        if (s) s->theirs += n;
        theirs_total += n;
    }
    fclose(f);
    unlink(out);
    for (unsigned i = 0; i < w.nf; i++)
        ours_total += w.f[i].ours;
    cr_assert(ours_total >= 500 && theirs_total >= 300,
              "%s: too few samples (ours %g of %u, jit.p %g)", label, ours_total, w.total,
              theirs_total);
    double worst = 0;
    for (unsigned i = 0; i < w.nf; i++) {
        struct share *s = &w.f[i];
        double a = 100 * s->ours / ours_total, b = 100 * s->theirs / theirs_total;
        cr_log_info("%s: %-20s stacksnap %5.1f%%  jit.p %5.1f%%  (%+.1f)", label, s->key, a, b,
                    a - b);
        if (a - b > worst) worst = a - b;
        if (b - a > worst) worst = b - a;
        cr_expect(a - b <= 5 && b - a <= 5,
                  "%s: %s: stacksnap %.1f%% vs jit.p %.1f%% (more than 5 points apart)", label,
                  s->key, a, b);
    }
    cr_log_info("%s: %g of our %u samples attributed (%u without a Lua function), jit.p %g; "
                "largest difference %.1f points",
                label, ours_total, w.total, w.unattributed, theirs_total, worst);
}

Test(luajit_witness, debian_luajit_jit_off)
{
    witness("debian luajit", "/usr/bin/luajit", 4);
}
