/* test/fuzz/lj_mkseed.c: seed inputs for lj_fuzz from live LuaJIT processes.
 *
 *   lj_mkseed OUTDIR COUNT COMMAND [ARGS...]
 *
 * Runs COMMAND, samples it with the real capture (BPF) and unwinds every
 * sample with ss_unwind, exactly like `stacksnap record`. The program is
 * linked with -Wl,--wrap=ss_lj_splice,--wrap=ss_lj_trace_cfa: every
 * ss_lj_trace_cfa call the unwinder makes for a sample (frames in JIT trace
 * code) is noted with its arguments, and at the sample's splice the whole
 * sequence lj_fuzz replays (ss_lj_leaf_cfa, ss_lj_trace_cfa for each trace
 * frame in order, ss_lj_splice) runs again on fresh runtimes (as the fuzzer
 * has: layout chosen and verified, traces found and decoded from the
 * recorded bytes) over memory that records every read (snapshot, file
 * bytes, target). Samples whose splice produced Lua frames become lj_input.h
 * files OUTDIR/lj-NNN (at most COUNT, distinct frame counts preferred, at
 * most 64 KiB: the CI run's -max_len).
 *
 * Environment: LJ_MKSEED_TRACE=1 keeps only samples with a trace frame the
 * fresh runtime validated; LJ_MKSEED_CHECK_GUARDS=1 turns
 * ss_lj_runtime_check_guards on (guards.c on builds that have mcofs too).
 * The live unwinder's own calls are passed through unchanged. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lj_input.h"
#include "memory/memory.h"
#include "stacksnap/capture.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"

struct rd {
    uint64_t addr;
    uint32_t len;
    uint8_t *data;
};

struct recmem {
    struct ss_mem *inner;
    struct rd *v;
    size_t n, cap;
};

static const char *g_dir;
static unsigned g_want, g_have;
static unsigned g_seen_frames[2][LJ_MAX_FRAMES + 1]; /* [has a trace frame][Lua frames] */
static bool g_trace_only, g_check_guards;
static unsigned g_trace_seeds;

/* The ss_lj_trace_cfa calls of the sample being unwound (on_sample resets). */
#define MAX_TCALLS 64
struct tcall {
    uint64_t ip, time_ns, regs[SS_NREGS];
    bool exact;
    uint32_t known, token; /* token: what the live runtime returned */
};
static struct tcall g_tc[MAX_TCALLS];
static unsigned g_ntc;

static int rec_readv(void *ctx, struct ss_iov *iov, int n)
{
    struct recmem *r = ctx;
    for (int i = 0; i < n; i++) {
        iov[i].err = ss_mem_read(r->inner, iov[i].addr, iov[i].dst, iov[i].len);
        if (iov[i].err || !iov[i].len) continue;
        if (r->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            struct rd *nv = realloc(r->v, cap * sizeof(*nv));
            if (!nv) continue;
            r->v = nv;
            r->cap = cap;
        }
        struct rd *d = &r->v[r->n];
        if (!(d->data = malloc(iov[i].len))) continue;
        memcpy(d->data, iov[i].dst, iov[i].len);
        d->addr = iov[i].addr;
        d->len = (uint32_t)iov[i].len;
        r->n++;
    }
    return 0;
}

static const struct ss_target_ops rec_ops = {.readv = rec_readv};

static int rd_cmp(const void *a, const void *b)
{
    const struct rd *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void put(FILE *f, const void *p, size_t n)
{
    fwrite(p, 1, n, f);
}

/* Merge overlapping/adjacent reads into regions and write the seed; tc[i]:
 * the trace call of native frame i, or NULL. */
static bool write_seed(const struct ss_lj_runtime *rt, const uint64_t *regs,
                       const struct ss_lj_native *nat, uint32_t nn, const struct tcall *const *tc,
                       struct recmem *r, const struct ss_mem *mem)
{
    char *buf0 = NULL;
    size_t len0 = 0;
    FILE *f = open_memstream(&buf0, &len0);
    if (!f) return false;
    const struct ss_lj_elfinfo *info = ss_lj_runtime_info(rt);
    unsigned hint = info->hints & 7u, ver = 0;
    for (unsigned i = 1; i < 8; i++)
        if (!strcmp(info->version, lj_versions[i])) ver = i;
    uint8_t hdr[2] = {(uint8_t)((info->gc64 ? LJF_GC64 : 0) |
                                (info->vm_cfa_off == 96 ? LJF_CFA96 : 0) |
                                (hint << LJF_HINT_SHIFT) | (ver << LJF_VER_SHIFT)),
                      (uint8_t)(nn > LJF_MAX_NAT ? LJF_MAX_NAT : nn)};
    put(f, hdr, 2);
    put(f, &rt->vm_lo, 8);
    put(f, &rt->vm_hi, 8);
    put(f, regs, 8 * SS_NREGS);
    for (uint32_t i = 0; i < hdr[1]; i++) {
        put(f, &nat[i].ip, 8);
        put(f, &nat[i].cfa, 8);
        put(f, &nat[i].rbx, 8);
        put(f, &nat[i].r14, 8);
        uint8_t b[2] = {(uint8_t)nat[i].have, (uint8_t)((nat[i].signal ? LJN_SIGNAL : 0) | LJN_EXT |
                                                        (tc[i] ? LJN_TRACE : 0))};
        put(f, b, 2);
        put(f, &nat[i].r15, 8);
        put(f, &nat[i].rbp, 8);
        if (tc[i]) {
            uint8_t tf =
                (uint8_t)((tc[i]->exact ? LJT_EXACT : 0) | (g_check_guards ? LJT_CHECK_GUARDS : 0));
            put(f, &tf, 1);
            put(f, &tc[i]->known, 4);
            put(f, &tc[i]->time_ns, 8);
            put(f, tc[i]->regs, 8 * SS_NREGS);
        }
    }
    qsort(r->v, r->n, sizeof(*r->v), rd_cmp);
    /* the region holding SP first: the fuzzer makes it the snapshot */
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 0;
        while (i < r->n) {
            uint64_t lo = r->v[i].addr, hi = lo + r->v[i].len;
            size_t j = i + 1;
            while (j < r->n && r->v[j].addr <= hi) {
                if (r->v[j].addr + r->v[j].len > hi) hi = r->v[j].addr + r->v[j].len;
                j++;
            }
            bool has_sp = regs[SS_REG_SP] >= lo && regs[SS_REG_SP] < hi;
            if (has_sp == (pass == 0) && hi - lo < (1u << 24)) {
                uint8_t *buf = calloc(1, hi - lo);
                for (size_t k = i; buf && k < j; k++)
                    memcpy(buf + (r->v[k].addr - lo), r->v[k].data, r->v[k].len);
                uint32_t len = (uint32_t)(hi - lo);
                put(f, &lo, 8);
                put(f, &len, 4);
                if (buf) put(f, buf, len);
                free(buf);
            }
            i = j;
        }
    }
    /* the sample's memory windows, as the BPF program copied them */
    for (unsigned i = 0; i < mem->nwin; i++) {
        const struct ss_window *w = &mem->win[i];
        if (!w->len) continue;
        uint32_t len = w->len | LJF_WINDOW;
        put(f, &w->addr, 8);
        put(f, &len, 4);
        put(f, w->data, w->len);
    }
    fclose(f);
    bool ok = len0 <= 65536; /* the CI run's -max_len: larger seeds would be cut */
    char path[4096];
    snprintf(path, sizeof(path), "%s/lj-%03u", g_dir, g_have);
    FILE *o = ok ? fopen(path, "wb") : NULL;
    if (o) {
        fwrite(buf0, 1, len0, o);
        fclose(o);
        g_have++;
    }
    free(buf0);
    return o != NULL;
}

uint64_t __real_ss_lj_trace_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                                uint64_t ip, bool exact, const uint64_t *regs, uint32_t known,
                                uint64_t time_ns, uint32_t *token);

/* Note the call's arguments for the fresh replay at the splice. */
uint64_t __wrap_ss_lj_trace_cfa(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                                uint64_t ip, bool exact, const uint64_t *regs, uint32_t known,
                                uint64_t time_ns, uint32_t *token)
{
    uint64_t cfa = __real_ss_lj_trace_cfa(rts, nrts, mem, ip, exact, regs, known, time_ns, token);
    if (g_ntc < MAX_TCALLS) {
        struct tcall *c = &g_tc[g_ntc++];
        c->ip = ip;
        c->exact = exact;
        c->known = known;
        c->time_ns = time_ns;
        c->token = *token;
        memcpy(c->regs, regs, sizeof(c->regs));
    }
    return cfa;
}

int __real_ss_lj_splice(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                        const uint64_t *regs, const struct ss_lj_native *natives, uint32_t n,
                        struct ss_lj_out *out);

int __wrap_ss_lj_splice(struct ss_lj_runtime *const *rts, uint32_t nrts, struct ss_mem *mem,
                        const uint64_t *regs, const struct ss_lj_native *natives, uint32_t n,
                        struct ss_lj_out *out)
{
    if (g_have >= g_want || nrts > 8 || n > LJF_MAX_NAT)
        return __real_ss_lj_splice(rts, nrts, mem, regs, natives, n, out);
    /* which native frame each trace call was for: the frame holding the
     * token it returned, else (no trace found) the next frame with its ip;
     * calls for frames the walk then dropped have none */
    const struct tcall *tc[LJF_MAX_NAT] = {0};
    uint32_t next = 0;
    for (unsigned c = 0; c < g_ntc && nrts == 1; c++) {
        for (uint32_t i = next; i < n; i++)
            if (g_tc[c].token ? natives[i].trace == g_tc[c].token
                              : !natives[i].trace && natives[i].ip == g_tc[c].ip) {
                tc[i] = &g_tc[c];
                next = i + 1;
                break;
            }
    }
    /* the sequence lj_fuzz runs, with fresh runtimes, reads recorded */
    struct recmem r = {.inner = mem};
    struct ss_mem rm;
    ss_mem_init(&rm, NULL, &rec_ops, &r);
    struct ss_lj_runtime *fresh[8] = {0};
    uint32_t nf = 0;
    for (uint32_t k = 0; k < nrts; k++)
        if (ss_lj_runtime_new(&fresh[nf], ss_lj_runtime_info(rts[k]), rts[k]->bias, rts[k]->pid,
                              NULL) == 0) {
            ss_lj_runtime_check_guards(fresh[nf], g_check_guards);
            nf++;
        }
    struct ss_lj_native nat[LJF_MAX_NAT];
    memcpy(nat, natives, n * sizeof(nat[0]));
    bool traced = false;
    for (uint32_t k = 0; k < nf; k++)
        (void)ss_lj_leaf_cfa(fresh[k], &rm, regs);
    for (uint32_t i = 0; i < n; i++) {
        nat[i].trace = 0;
        if (!tc[i]) continue;
        uint32_t token = 0;
        uint64_t cfa = __real_ss_lj_trace_cfa(fresh, nf, &rm, tc[i]->ip, tc[i]->exact, tc[i]->regs,
                                              tc[i]->known, tc[i]->time_ns, &token);
        if (cfa) nat[i].cfa = cfa;
        nat[i].trace = token;
        traced |= token != 0;
    }
    int rc = __real_ss_lj_splice(fresh, nf, &rm, regs, nat, n, out);
    /* one seed per distinct Lua frame count (trace samples and the others
     * apart), for the runtime that ran them */
    unsigned *seen = &g_seen_frames[traced][out->lua_frames <= LJ_MAX_FRAMES ? out->lua_frames : 0];
    if (rc == 0 && out->lua_frames && out->lua_frames <= LJ_MAX_FRAMES && !*seen &&
        (traced || !g_trace_only)) {
        for (uint32_t i = 0; i < n; i++) {
            const struct ss_lj_runtime *rt = NULL;
            for (uint32_t k = 0; k < nf && !rt; k++)
                if (ss_lj_in_vm(fresh[k], natives[i].ip) ||
                    ss_lj_in_vm(fresh[k], natives[i].ip - 1) || (traced && nat[i].trace))
                    rt = fresh[k];
            if (rt) {
                /* the input keeps the live cfa of a frame the fresh run
                 * found no trace for, and lj_fuzz stores what it finds */
                if (write_seed(rt, regs, natives, n, tc, &r, mem)) {
                    *seen = 1;
                    g_trace_seeds += traced;
                }
                break;
            }
        }
    }
    for (size_t i = 0; i < r.n; i++)
        free(r.v[i].data);
    free(r.v);
    for (uint32_t k = 0; k < nf; k++)
        ss_lj_runtime_free(fresh[k]);
    /* then the real splice for the unwinder */
    return __real_ss_lj_splice(rts, nrts, mem, regs, natives, n, out);
}

struct run {
    struct ss_unwinder *u;
    struct ss_capture *cap;
};

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct run *run = ctx;
    struct ss_stack st;
    struct ss_win_plan plan;
    g_ntc = 0; /* the trace calls of this sample's unwinding */
    ss_unwinder_intake(run->u, s);
    ss_unwind(run->u, s, &st);
    if (ss_unwinder_take_plan(run->u, s->pid, &plan)) /* as record does */
        ss_capture_set_plan(run->cap, (pid_t)s->pid, &plan, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: lj_mkseed OUTDIR COUNT COMMAND [ARGS...]\n");
        return 2;
    }
    g_dir = argv[1];
    g_want = (unsigned)atoi(argv[2]);
    g_trace_only = getenv("LJ_MKSEED_TRACE") && atoi(getenv("LJ_MKSEED_TRACE"));
    g_check_guards = getenv("LJ_MKSEED_CHECK_GUARDS") && atoi(getenv("LJ_MKSEED_CHECK_GUARDS"));
    mkdir(g_dir, 0755);
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[3], argv + 3);
        _exit(127);
    }
    usleep(300000);
    struct ss_err err = {0};
    struct ss_capture *cap;
    struct ss_capture_opts co = {.freq_hz = 499};
    struct run run = {0};
    struct ss_unwinder_opts uo = {0};
    if (ss_capture_open(&cap, &co, &err) < 0 || ss_capture_add_pid(cap, pid, &err) < 0 ||
        ss_capture_start(cap, &err) < 0 || ss_unwinder_new(&run.u, &uo, &err) < 0) {
        fprintf(stderr, "lj_mkseed: %s\n", err.msg);
        kill(pid, SIGKILL);
        return 1;
    }
    run.cap = cap;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        ss_capture_poll(cap, 1, on_sample, &run);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (g_have < g_want && t.tv_sec - t0.tv_sec < 20);
    ss_capture_close(cap);
    ss_unwinder_free(run.u);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    printf("lj_mkseed: %u seeds (%u with trace frames) in %s\n", g_have, g_trace_seeds, g_dir);
    return g_have ? 0 : 1;
}
