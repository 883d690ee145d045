/* test/luajit/test_walk.c: walk a live LuaJIT process from outside (JIT
 * off) and check exact frames for a known 5-deep chain spinning in a leaf;
 * layout self-checks per build; an inconsistent layout gives a diagnostic
 * and no Lua frames.
 *
 * Samples come from perf_event_open (user regs + 8 KiB of user stack), so
 * the top VM frame is handled exactly as with BPF samples: ip in the VM,
 * cframe = rsp (CFA - 80), BASE = rdx, PC = rbx, DISPATCH = r14. */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ljtest.h"

#define SCRIPT SS_SOURCE_DIR "/test/luajit/w.lua"
#define SCRIPT_TT SS_SOURCE_DIR "/test/luajit/w_tt.lua"

struct run {
    struct ss_lj_runtime *rt;
    struct ss_mem mem;
    struct ss_target_live tl;
    const char *expect;
    unsigned samples, vm, leaf, exact, failed;
    unsigned bad_r14; /* this many first VM samples get a wrong DISPATCH (r14) */
    char bad[512];
    double ns;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void on_sample(void *ctx, const struct ljt_sample *s)
{
    struct run *r = ctx;
    r->samples++;
    if (!ss_lj_in_vm(r->rt, s->regs[SS_REG_IP])) return;
    r->vm++;
    struct ss_lj_item items[64];
    struct ss_lj_out out = {.items = items, .cap = 64};
    ss_mem_set_snapshot(&r->mem, s->regs[SS_REG_SP], s->stack, s->stack_len, 0);
    uint64_t regs[SS_NREGS];
    memcpy(regs, s->regs, sizeof(regs));
    if (r->vm <= r->bad_r14) regs[SS_REG_R14] ^= 0x10000; /* what a trace's r14 may hold */
    double t0 = now_ns();
    /* as the walk does (lua.c): the validated leaf CFA, else the .eh_frame one */
    uint64_t cfa = ss_lj_leaf_cfa(r->rt, &r->mem, s->regs);
    if (!cfa) cfa = s->regs[SS_REG_SP] + ss_lj_runtime_info(r->rt)->vm_cfa_off;
    struct ss_lj_native nat = {.ip = s->regs[SS_REG_IP], .cfa = cfa};
    int rc = ss_lj_splice(&r->rt, 1, &r->mem, regs, &nat, 1, &out);
    r->ns += now_ns() - t0;
    if (rc || out.vm_failed) {
        r->failed++;
        return;
    }
    if (out.n == 0 || out.items[0].native >= 0 || strcmp(out.items[0].lua.name, "leaf")) return;
    r->leaf++;
    char buf[1024];
    ljt_folded(&out, buf, sizeof(buf));
    if (!strcmp(buf, r->expect))
        r->exact++;
    else if (!r->bad[0])
        snprintf(r->bad, sizeof(r->bad), "%.500s", buf);
}

/* Spawn argv, sample it for ~1.5 s, check the chain. */
static void run_chain_r14(char *const argv[], const char *ldp, const char *needle,
                          const char *script, const char *layout, unsigned bad_r14)
{
    pid_t pid = ljt_spawn(argv, ldp);
    cr_assert(pid > 0);
    usleep(300 * 1000);
    struct run r = {.bad_r14 = bad_r14};
    struct ss_lj_elfinfo info;
    int rc = ljt_runtime(pid, needle, &r.rt, &info);
    if (rc) {
        ljt_kill(pid);
        cr_assert_fail("no LuaJIT runtime for %s in pid %d: %d", needle, pid, rc);
    }
    r.tl.pid = pid;
    ss_mem_init(&r.mem, NULL, &ss_target_live, &r.tl);
    char expect[1024];
    snprintf(expect, sizeof(expect), "main (%s:%d);a (%s:%d);b (%s:%d);c (%s:%d);leaf (%s:%d)",
             script, strstr(script, "_tt") ? 7 : 6, script, strstr(script, "_tt") ? 5 : 4, script,
             strstr(script, "_tt") ? 4 : 3, script, strstr(script, "_tt") ? 3 : 2, script,
             strstr(script, "_tt") ? 2 : 1);
    r.expect = expect;
    struct ljt_perf *perf = NULL;
    rc = ljt_perf_open(&perf, pid, 1000, 8192);
    if (rc) {
        ljt_kill(pid);
        cr_assert_fail("perf_event_open: %d", rc);
    }
    double end = now_ns() + 1.5e9;
    while (now_ns() < end) {
        struct pollfd pf = {.fd = ljt_perf_fd(perf), .events = POLLIN};
        poll(&pf, 1, 20);
        ljt_perf_drain(perf, on_sample, &r);
    }
    ljt_perf_close(perf);
    ljt_kill(pid);
    struct ss_lj_stats st;
    ss_lj_runtime_stats(r.rt, &st);
    cr_log_info("%s: samples %u in-VM %u leaf %u exact %u failed %u; %.1f us/walk, "
                "%.2f reads/walk, protos hit %llu miss %llu; layout %s; diag '%s'",
                needle, r.samples, r.vm, r.leaf, r.exact, r.failed, r.vm ? r.ns / r.vm / 1000 : 0,
                st.walks ? (double)st.rounds / st.walks : 0, (unsigned long long)st.proto_hits,
                (unsigned long long)st.proto_misses,
                ss_lj_runtime_layout(r.rt) ? ss_lj_runtime_layout(r.rt) : "-",
                ss_lj_runtime_diag(r.rt));
    cr_expect_str_eq(ss_lj_runtime_layout(r.rt) ? ss_lj_runtime_layout(r.rt) : "-", layout);
    cr_expect(r.leaf >= 100, "only %u leaf samples (of %u, %u in VM)", r.leaf, r.samples, r.vm);
    cr_expect(r.exact * 100 >= r.leaf * 99, "exact %u of %u leaf samples; e.g. %s\nexpected %s",
              r.exact, r.leaf, r.bad, expect);
    ss_lj_runtime_free(r.rt);
}

static void run_chain(char *const argv[], const char *ldp, const char *needle, const char *script,
                      const char *layout)
{
    run_chain_r14(argv, ldp, needle, script, layout, 0);
}

Test(luajit_walk, debian_luajit_binary)
{
    char *argv[] = {"/usr/bin/luajit", "-joff", SCRIPT, NULL};
    run_chain(argv, NULL, "/usr/bin/luajit", SCRIPT, "debian-luajit-2.1.0-beta3-git20220320");
}

Test(luajit_walk, openresty_luajit2)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s/test/luajit/fetch-ext.sh %s/ext", SS_SOURCE_DIR, SS_BINARY_DIR);
    cr_assert_eq(system(cmd), 0, "could not unpack luajit2 (%s)", cmd);
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/ext/luajit2/usr/bin/luajit", SS_BINARY_DIR);
    char *argv[] = {bin, "-joff", SCRIPT, NULL};
    run_chain(argv, NULL, "/luajit2/usr/bin/luajit", SCRIPT, "openresty-luajit2-2.1-20230119");
}

Test(luajit_walk, tarantool_nogc64)
{
    if (access("/usr/bin/tarantool", X_OK))
        cr_skip_test("tarantool not installed (scripts/dev installs it)");
    char *argv[] = {"/usr/bin/tarantool", SCRIPT_TT, NULL};
    run_chain(argv, NULL, "/usr/bin/tarantool", SCRIPT_TT, "tarantool-2.6-luajit-nogc64");
}

/* r14 is DISPATCH in the interpreter only (a VM helper called from a trace
 * has the trace's r14): a wrong one must not turn Lua frames off for the
 * rest of the run (it did: CI flake); the layout is proven by the dispatch
 * table, the walk by BASE, PC and the cframe. */
Test(luajit_walk, wrong_dispatch_register_keeps_lua_frames_on)
{
    char *argv[] = {"/usr/bin/luajit", "-joff", SCRIPT, NULL};
    run_chain_r14(argv, NULL, "/usr/bin/luajit", SCRIPT, "debian-luajit-2.1.0-beta3-git20220320",
                  30);
}

/* A runtime whose detection result is wrong (GC64 off for a GC64 build):
 * no layout verifies, one diagnostic, and the VM frame stays native. */
Test(luajit_walk, inconsistent_layout_gives_diag_and_no_lua_frames)
{
    char *argv[] = {"/usr/bin/luajit", "-joff", SCRIPT, NULL};
    pid_t pid = ljt_spawn(argv, NULL);
    usleep(200 * 1000);
    char path[512];
    uint64_t bias;
    cr_assert_eq(ljt_find_module(pid, "/usr/bin/luajit", path, sizeof(path), &bias), 0);
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file(path, &info, &err), 0);
    info.gc64 = false; /* lie */
    struct ss_lj_runtime *rt;
    cr_assert_eq(ss_lj_runtime_new(&rt, &info, bias, (uint32_t)pid, &err), 0);
    struct ss_target_live tl = {.pid = pid};
    struct ss_mem mem;
    ss_mem_init(&mem, NULL, &ss_target_live, &tl);
    struct ljt_perf *perf;
    cr_assert_eq(ljt_perf_open(&perf, pid, 1000, 8192), 0);
    struct run r = {.rt = rt, .expect = "-"};
    r.mem = mem;
    r.tl = tl;
    r.mem.target_ctx = &r.tl;
    for (int i = 0; i < 40; i++) {
        usleep(20 * 1000);
        ljt_perf_drain(perf, on_sample, &r);
    }
    ljt_perf_close(perf);
    ljt_kill(pid);
    cr_assert(r.vm > 10, "too few VM samples: %u", r.vm);
    cr_expect_eq(r.leaf, 0u);
    cr_expect_eq(r.failed, r.vm, "every VM frame must stay native");
    cr_expect(strstr(ss_lj_runtime_diag(rt), "no known LuaJIT layout") != NULL, "diag: '%s'",
              ss_lj_runtime_diag(rt));
    cr_expect_null(ss_lj_runtime_layout(rt));
    ss_lj_runtime_free(rt);
}
