/* test/luajit/test_host.c: a C host embedding libluajit (JIT off), sampled
 * with perf_event_open and unwound with the native unwinder + the LuaJIT
 * splice: exact interleaving for
 *   main -> lua_pcall -> Lua -> pcall -> Lua -> C callback -> lua_call -> Lua -> leaf
 * and for a leaf inside a C function called from Lua. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elf/elf.h"
#include "ljtest.h"
#include "process/process.h"
#include "unwind/native.h"

#define HOST SS_BINARY_DIR "/lj_host"

struct sym {
    uint64_t lo, hi;
    char name[64];
};

/* Samples whose top Lua frame (lua_top) or leaf native frame is named key
 * must read exactly want (from the host's main up to that frame). */
struct expect {
    const char *key;
    bool lua_top;
    const char *want;
    unsigned n, ok;
    char bad[1024];
};

/* The host's memory as a sample's first splice read it: each page is read
 * live once per sample and kept, so that the checks splicing the same
 * sample again (registers lost, a fresh runtime) read the same bytes, not
 * the state the running host has moved on to since (their verdicts would
 * otherwise follow the race: CI saw a builtin named by the first splice
 * and gone in the next). */
#define FZ_PAGES 256
struct frozen {
    struct ss_target_live live; /* the reads themselves */
    unsigned n;
    uint64_t page[FZ_PAGES];
    int err[FZ_PAGES];
    uint8_t (*bytes)[4096];
};

static int fz_page(struct frozen *z, uint64_t pg)
{
    for (unsigned i = 0; i < z->n; i++)
        if (z->page[i] == pg) return (int)i;
    if (z->n == FZ_PAGES) return -1;
    unsigned i = z->n++;
    struct ss_iov one = {.addr = pg, .dst = z->bytes[i], .len = 4096};
    int rc = ss_target_live.readv(&z->live, &one, 1);
    z->page[i] = pg;
    z->err[i] = rc ? rc : one.err;
    return (int)i;
}

static int fz_readv(void *ctx, struct ss_iov *iov, int n)
{
    struct frozen *z = ctx;
    for (int i = 0; i < n; i++) {
        uint64_t a = iov[i].addr;
        uint8_t *d = iov[i].dst;
        size_t left = iov[i].len;
        iov[i].err = 0;
        while (left) {
            uint64_t pg = a & ~(uint64_t)4095;
            size_t off = a - pg, k = left < 4096 - off ? left : 4096 - off;
            int p = fz_page(z, pg);
            if (p < 0) { /* more pages than kept: read live */
                struct ss_iov one = {.addr = a, .dst = d, .len = k};
                int rc = ss_target_live.readv(&z->live, &one, 1);
                iov[i].err = rc ? rc : one.err;
            } else if (z->err[p]) {
                iov[i].err = z->err[p] == -ESRCH ? -ESRCH : -EFAULT;
            } else {
                memcpy(d, z->bytes[p] + off, k);
            }
            if (iov[i].err) break;
            a += k, d += k, left -= k;
        }
        if (iov[i].err == -ESRCH) return -ESRCH;
    }
    return 0;
}

static const struct ss_target_ops fz_ops = {.readv = fz_readv};

struct hrun {
    struct ss_lj_runtime *rt;
    struct ss_mem mem;
    struct frozen fz;
    struct ss_nproc *np;
    uint64_t host_bias, lj_lo, lj_hi;
    struct sym syms[64];
    unsigned nsyms;
    unsigned vm_failed;
    /* the same samples spliced as if a stack scan below had lost PC and
     * KBASE at every native frame (unwind/native.h: ss_nregs.lost):
     * samples with a builtin on top, those that kept the frames below it
     * with the builtin counted unproven; samples with a Lua frame on top,
     * those spliced the same, those with a Lua frame not in the normal
     * splice (a walk whose top frame's pc only PC proved fails instead) */
    unsigned lost_builtin, lost_dropped, lost_lua, lost_same, lost_other;
    char lost_bad[600];
    /* the first sample with a builtin on top, spliced by fresh runtimes
     * (their first walk verifies the layout): with its registers, and with
     * a PC register 4 bytes off at its VM frames (-1: not done) */
    pid_t pid;
    int first_good, first_bad;
    struct expect *exp;
    unsigned nexp;
};

static const char *native_name(struct hrun *r, uint64_t ip)
{
    for (unsigned i = 0; i < r->nsyms; i++)
        if (ip - r->host_bias >= r->syms[i].lo && ip - r->host_bias < r->syms[i].hi)
            return r->syms[i].name;
    if (ip >= r->lj_lo && ip < r->lj_hi) return "libluajit";
    return "other";
}

static unsigned collect(struct hrun *r, const struct ljt_sample *s, struct ss_lj_native *nat,
                        unsigned cap)
{
    struct ss_native_frame f, c;
    ss_native_frame_from_sample(&f, s->regs);
    unsigned n = 0;
    while (n < cap) {
        struct ss_lj_native *o = &nat[n];
        memset(o, 0, sizeof(*o));
        o->ip = ss_nf_ip(&f);
        o->signal = false;
        uint64_t v;
        if (ss_nf_reg(&f, SS_REG_BX, &v)) o->rbx = v, o->have |= SS_LJ_HAVE_RBX;
        if (ss_nf_reg(&f, SS_REG_R14, &v)) o->r14 = v, o->have |= SS_LJ_HAVE_R14;
        if (n == 0 && ss_lj_in_vm(r->rt, o->ip)) {
            /* leaf in the VM: CFA validated by the LuaJIT side */
            uint64_t cfa = ss_lj_leaf_cfa(r->rt, &r->mem, s->regs);
            if (!cfa) return n;
            o->cfa = cfa;
            n++;
            struct ss_nregs rg = {0};
            uint64_t w[5];
            if (ss_mem_read(&r->mem, cfa - 40, w, sizeof(w))) return n;
            rg.r[SS_DR_RIP] = w[4];
            rg.r[SS_DR_RSP] = cfa;
            rg.r[SS_DR_RBP] = w[3];
            rg.r[SS_DR_RBX] = w[2];
            rg.r[SS_DR_R15] = w[1];
            rg.r[SS_DR_R14] = w[0];
            rg.valid = 1u << SS_DR_RIP | 1u << SS_DR_RSP | 1u << SS_DR_RBP | 1u << SS_DR_RBX |
                       1u << SS_DR_R15 | 1u << SS_DR_R14;
            ss_native_frame_init(&f, &rg, false);
            continue;
        }
        enum ss_trunc why;
        int k = ss_native_step(r->np, &f, &c, &why);
        o->cfa = f.cfa;
        n++;
        if (k != 1) break;
        f = c;
    }
    return n;
}

static void text(struct hrun *r, const struct ss_lj_out *out, uint32_t from,
                 const struct ss_lj_native *nat, char *buf, size_t cap)
{
    size_t len = 0;
    const char *last = NULL;
    buf[0] = 0;
    for (uint32_t k = out->n; k-- > from;) {
        const struct ss_lj_item *it = &out->items[k];
        char one[300];
        if (it->native >= 0) {
            const char *nm = native_name(r, nat[it->native].ip);
            if (last && !strcmp(last, nm) && (!strcmp(nm, "libluajit") || !strcmp(nm, "other")))
                continue;
            last = nm;
            snprintf(one, sizeof(one), "%s", nm);
        } else {
            last = NULL;
            snprintf(one, sizeof(one), "%s (%s:%u)", it->lua.name, it->lua.module, it->lua.line);
        }
        if (!strcmp(one, "host:main")) len = 0; /* keep from the host's main on */
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", len ? ";" : "", one);
        if (len >= cap) break;
    }
}

/* Splice the sample again with PC and KBASE lost to a stack scan below:
 * a builtin on top (read from the process: nothing else ties it to the
 * sample) is left out and counted, the frames below it kept; a Lua frame
 * on top is kept as it was. */
static void lost_regs(struct hrun *r, const struct ljt_sample *s, const struct ss_lj_native *nat,
                      unsigned n, const struct ss_lj_out *out, uint32_t lt)
{
    if (lt >= out->n) return;
    bool builtin = out->items[lt].lua.module && !strcmp(out->items[lt].lua.module, "[builtin]");
    if (builtin && (lt + 1 >= out->n || out->items[lt + 1].native >= 0)) return; /* no Lua below */
    /* a sample in trace code or in a helper it called: its frames come from
     * the trace's snapshots (trace_post.c, trace_fwd.c: string.rep's frame
     * at lj_buf_putstr_rep), not from the VM frame's PC and KBASE */
    for (unsigned i = 0; i < n; i++)
        if (nat[i].trace) return;
    /* a builtin whose own code in the VM (a fast function) is the leaf: its
     * frame's PC and KBASE are the sample's registers, which no scan below
     * could lose (CI's ASan run kept 1 of 624 such builtins, rightly) */
    if (builtin && n && ss_lj_in_vm(r->rt, nat[0].ip)) return;
    struct ss_lj_native ln[128];
    for (unsigned i = 0; i < n; i++) {
        ln[i] = nat[i];
        ln[i].have &= ~(SS_LJ_HAVE_RBX | SS_LJ_HAVE_R15);
        ln[i].lost = SS_LJ_HAVE_RBX | SS_LJ_HAVE_R15;
    }
    struct ss_lj_item items[256];
    struct ss_lj_out lo = {.items = items, .cap = 256};
    if (ss_lj_splice(&r->rt, 1, &r->mem, s->regs, ln, n, &lo) || lo.n < lt) return;
    uint32_t skip = builtin ? 1 : 0;
    bool same = lo.n + skip == out->n;
    for (uint32_t k = 0; same && k < lo.n; k++) {
        const struct ss_lj_item *a = &lo.items[k], *b = &out->items[k < lt ? k : k + skip];
        same = a->native == b->native && (a->native >= 0 || (a->lua.name && b->lua.name &&
                                                             !strcmp(a->lua.name, b->lua.name) &&
                                                             a->lua.line == b->lua.line));
    }
    if (builtin) {
        r->lost_builtin++;
        same = same && lo.items[lt].lua.unproven >= 1;
        r->lost_dropped += same;
    } else {
        r->lost_lua++;
        same = same && lo.items[lt].lua.unproven == out->items[lt].lua.unproven;
        r->lost_same += same;
        /* else each Lua frame it gives is one of the normal splice's */
        uint32_t j = 0;
        for (uint32_t k = 0; !same && k < lo.n; k++) {
            const struct ss_lj_item *a = &lo.items[k];
            if (a->native >= 0) continue;
            while (j < out->n &&
                   (out->items[j].native >= 0 || !a->lua.name || !out->items[j].lua.name ||
                    strcmp(a->lua.name, out->items[j].lua.name) ||
                    a->lua.line != out->items[j].lua.line))
                j++;
            if (j++ >= out->n) {
                r->lost_other++;
                break;
            }
        }
        same = true; /* reported by the counts */
    }
    if (!same && !r->lost_bad[0])
        snprintf(r->lost_bad, sizeof(r->lost_bad), "top %s: %u items, %u with lost registers",
                 out->items[lt].lua.name, out->n, lo.n);
}

/* Does a fresh runtime's splice of the sample (natives nat, PC registers
 * off by delta) give a Lua item named name? -1: it could not be made. */
static int fresh_names(struct hrun *r, const struct ljt_sample *s, const struct ss_lj_native *nat,
                       unsigned n, uint64_t delta, const char *name)
{
    struct ss_lj_runtime *rt;
    struct ss_lj_elfinfo info;
    if (ljt_runtime(r->pid, "libluajit-5.1.so", &rt, &info)) return -1;
    struct ss_lj_native ln[128];
    for (unsigned i = 0; i < n; i++) {
        ln[i] = nat[i];
        if (ln[i].have & SS_LJ_HAVE_RBX) ln[i].rbx += delta;
    }
    struct ss_lj_item items[256];
    struct ss_lj_out lo = {.items = items, .cap = 256};
    int named = 0;
    if (ss_lj_splice(&rt, 1, &r->mem, s->regs, ln, n, &lo) == 0)
        for (uint32_t k = 0; k < lo.n; k++)
            named |= lo.items[k].native < 0 && lo.items[k].lua.name &&
                     !strcmp(lo.items[k].lua.name, name);
    ss_lj_runtime_free(rt);
    return named;
}

/* A process's first walk checks the top frame against the VM frame's PC
 * as any other does (splice.c: the registers are taken again once the walk
 * verified the layout; before, the first walk had none and checked
 * nothing): a builtin on top is named with the right PC, not with a wrong
 * one. */
static void first_walk(struct hrun *r, const struct ljt_sample *s, const struct ss_lj_native *nat,
                       unsigned n, const struct ss_lj_out *out, uint32_t lt)
{
    if (r->first_good >= 0 || lt >= out->n || !out->items[lt].lua.module ||
        strcmp(out->items[lt].lua.module, "[builtin]"))
        return;
    const char *name = out->items[lt].lua.name;
    r->first_good = fresh_names(r, s, nat, n, 0, name);
    r->first_bad = fresh_names(r, s, nat, n, 4, name);
}

static void on_sample(void *ctx, const struct ljt_sample *s)
{
    struct hrun *r = ctx;
    struct ss_lj_native nat[128];
    r->fz.n = 0; /* a new sample: the host's memory is read again */
    ss_mem_set_snapshot(&r->mem, s->regs[SS_REG_SP], s->stack, s->stack_len, 0);
    unsigned n = collect(r, s, nat, 128);
    struct ss_lj_item items[256];
    struct ss_lj_out out = {.items = items, .cap = 256};
    if (ss_lj_splice(&r->rt, 1, &r->mem, s->regs, nat, n, &out)) return;
    r->vm_failed += out.vm_failed;
    if (!out.n) return;
    uint32_t lt = 0; /* top Lua item */
    while (lt < out.n && out.items[lt].native >= 0)
        lt++;
    lost_regs(r, s, nat, n, &out, lt);
    first_walk(r, s, nat, n, &out, lt);
    for (unsigned e = 0; e < r->nexp; e++) {
        struct expect *x = &r->exp[e];
        uint32_t from;
        if (x->lua_top && lt < out.n && !strcmp(out.items[lt].lua.name, x->key))
            from = lt;
        else if (!x->lua_top && out.items[0].native >= 0 &&
                 !strcmp(native_name(r, nat[out.items[0].native].ip), x->key))
            from = 0;
        else
            continue;
        char buf[1024];
        text(r, &out, from, nat, buf, sizeof(buf));
        x->n++;
        if (!strcmp(buf, x->want))
            x->ok++;
        else if (!x->bad[0])
            snprintf(x->bad, sizeof(x->bad), "%.1000s", buf);
    }
}

static void load_syms(struct hrun *r, const char *host)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "nm -S --defined-only %s", host);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[256];
    while (fgets(line, sizeof(line), f) && r->nsyms < 64) {
        unsigned long a, sz;
        char t, nm[48];
        if (sscanf(line, "%lx %lx %c %47s", &a, &sz, &t, nm) != 4 || (t != 'T' && t != 't'))
            continue;
        if (strcmp(nm, "main") && strcmp(nm, "l_ccall") && strcmp(nm, "l_cspin")) continue;
        struct sym *s = &r->syms[r->nsyms++];
        s->lo = a;
        s->hi = a + sz;
        snprintf(s->name, sizeof(s->name), "host:%s", nm);
    }
    pclose(f);
    cr_assert_eq(r->nsyms, 3u, "host symbols not found");
}

/* root: run in a namespaced chroot of root (host: the host binary's path
 * seen from here, its path inside is given by bin) */
static void run_host_in(const char *script, struct expect *exp, unsigned nexp, const char *root,
                        const char *bin, const char *host)
{
    char *argv[] = {(char *)bin, (char *)script, NULL};
    pid_t outer = 0;
    pid_t pid = root ? ljt_spawn_root(root, SS_SOURCE_DIR "/test/luajit", argv, &outer)
                     : (outer = ljt_spawn(argv, NULL));
    cr_assert(pid > 0, "cannot start %s", bin);
    usleep(300 * 1000);
    struct hrun r = {.exp = exp, .nexp = nexp, .pid = pid, .first_good = -1, .first_bad = -1};
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    char path[512];
    cr_assert_eq(ljt_runtime(pid, "libluajit-5.1.so", &r.rt, &info), 0);
    uint64_t bias;
    cr_assert_eq(ljt_find_module(pid, "libluajit-5.1.so", path, sizeof(path), &bias), 0);
    r.lj_lo = bias;
    r.lj_hi = bias + 0x200000;
    cr_assert_eq(ljt_find_module(pid, "lj_host", path, sizeof(path), &r.host_bias), 0);
    load_syms(&r, host);
    struct ss_elf_cache *ec;
    struct ss_proc *proc;
    cr_assert_eq(ss_elf_cache_new(&ec, NULL), 0);
    cr_assert_eq(ss_proc_new_live(&proc, pid, ec, NULL, &err), 0, "%s", err.msg);
    r.fz.live.pid = pid;
    r.fz.bytes = malloc(FZ_PAGES * sizeof(*r.fz.bytes));
    cr_assert_not_null(r.fz.bytes);
    ss_mem_init(&r.mem, proc, &fz_ops, &r.fz);
    cr_assert_eq(ss_nproc_new(&r.np, proc, &r.mem, &err), 0, "%s", err.msg);
    struct ljt_perf *perf;
    cr_assert_eq(ljt_perf_open(&perf, pid, 1000, 16384), 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        struct pollfd pf = {.fd = ljt_perf_fd(perf), .events = POLLIN};
        poll(&pf, 1, 20);
        ljt_perf_drain(perf, on_sample, &r);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
    ljt_perf_close(perf);
    ljt_kill(outer);
    cr_log_info("PC and KBASE lost: %u/%u builtins on top left out, counted; %u/%u Lua tops kept, "
                "%u with other Lua frames",
                r.lost_dropped, r.lost_builtin, r.lost_same, r.lost_lua, r.lost_other);
    cr_expect(r.lost_lua >= 30, "only %u samples with a Lua frame on top", r.lost_lua);
    cr_log_info("a fresh runtime's first walk, builtin on top: named %d with its PC, %d with a "
                "wrong one (-1: no such sample)",
                r.first_good, r.first_bad);
    if (r.first_good >= 0 || r.first_bad >= 0)
        cr_expect(r.first_good == 1 && r.first_bad == 0,
                  "a fresh runtime's first walk of a builtin on top: named %d with its PC, %d with "
                  "a wrong one",
                  r.first_good, r.first_bad);
    cr_expect(r.lost_dropped == r.lost_builtin && r.lost_other == 0 &&
                  r.lost_same * 100 >= r.lost_lua * 95,
              "PC and KBASE lost: %u/%u builtins left out, %u/%u Lua tops kept, %u with other "
              "Lua frames (%s)",
              r.lost_dropped, r.lost_builtin, r.lost_same, r.lost_lua, r.lost_other, r.lost_bad);
    for (unsigned e = 0; e < nexp; e++) {
        struct expect *x = &exp[e];
        cr_log_info("%s: %u/%u exact (VM frames left native: %u)", x->key, x->ok, x->n,
                    r.vm_failed);
        cr_expect(x->n >= 30, "%s: only %u samples", x->key, x->n);
        cr_expect(x->ok * 100 >= x->n * 95, "%s: exact %u/%u, e.g.\n%s\nexpected\n%s", x->key,
                  x->ok, x->n, x->bad, x->want);
    }
    ss_nproc_free(r.np);
    ss_mem_free(&r.mem);
    free(r.fz.bytes);
    ss_proc_free(proc);
    ss_elf_cache_free(ec);
    ss_lj_runtime_free(r.rt);
}

static void run_host(const char *script, struct expect *exp, unsigned nexp)
{
    run_host_in(script, exp, nexp, NULL, HOST, HOST);
}

static void nested(const char *root, const char *bin, const char *host)
{
    char S[64] = SS_SOURCE_DIR "/test/luajit/h.lua", w0[1024], w1[1024];
    if (root) snprintf(S, sizeof(S), "/mnt/h.lua");
    /* lua_call tail-jumps to lj_vm_call: no lua_call frame between */
    snprintf(w0, sizeof(w0),
             "host:main;libluajit;main (%s:6);outer (%s:5);pcall ([builtin]:0);viac (%s:3);"
             "host:l_ccall;anonymous (%s:2);leaf (%s:1)",
             S, S, S, S, S);
    snprintf(w1, sizeof(w1),
             "host:main;libluajit;main (%s:6);outer (%s:5);spin (%s:4);host:l_cspin", S, S, S);
    struct expect exp[] = {{.key = "leaf", .lua_top = true, .want = w0},
                           {.key = "host:l_cspin", .want = w1}};
    run_host_in(S, exp, 2, root, bin, host);
}

/* The same host linking Debian 13's libluajit-5.1.so.2, built into the
 * root's /tmp and run in the container (test_matrix.c builds it the same
 * way). */
Test(luajit_host, nested_entries_trixie_container)
{
    char root[512], cmd[2048], bin[64], host[700];
    ljt_trixie_root(root, sizeof(root));
    snprintf(bin, sizeof(bin), "/tmp/lj_host-h-%d", (int)getpid());
    snprintf(host, sizeof(host), "%s%s", root, bin);
    snprintf(cmd, sizeof(cmd),
             "cc -O1 -g -I/usr/include/luajit-2.1 %s/test/luajit/lj_host.c -o %s "
             "%s/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2 -Wl,--allow-shlib-undefined",
             SS_SOURCE_DIR, host, root);
    cr_assert_eq(system(cmd), 0, "could not build the trixie C host (%s)", cmd);
    nested(root, bin, host);
    unlink(host);
}

Test(luajit_host, nested_entries_and_c_leaf)
{
    nested(NULL, HOST, HOST);
}

Test(luajit_host, names_fields_methods_builtins)
{
#define S SS_SOURCE_DIR "/test/luajit/n.lua"
    struct expect exp[] = {
        {.key = "M.run",
         .lua_top = true,
         .want = "host:main;libluajit;main (" S ":9);obj:method (" S ":5);M.run (" S ":3)"},
        {.key = "string.rep",
         .lua_top = true,
         .want = "host:main;libluajit;main (" S ":9);reps (" S ":7);string.rep ([builtin]:0)"},
    };
    run_host(S, exp, 2);
#undef S
}
