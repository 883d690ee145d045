/* test/cli/fixtures.c: the committed captures of test/fixtures/ (real,
 * bundled recordings of the native workload and of luajit -joff; made by
 * test/fixtures/make.sh) replay to the live output recorded with them. No
 * BPF, and no recorded binary: the programs ran from a deleted temporary
 * folder, and one check replays in a mount namespace where /usr is an
 * empty tmpfs, so libc & co can only come from the bundle. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "stacksnap/ss.h"
#include "stacksnap/unwind.h"

static const char *names[] = {"native", "luajit"};

static char *fixture(const char *name, const char *ext)
{
    char *p;
    cr_assert(asprintf(&p, "%s/test/fixtures/%s.%s", SS_SOURCE_DIR, name, ext) > 0);
    return p;
}

static void no_complaints(const char *err)
{
    cr_assert(!strstr(err, "not found") && !strstr(err, "differs") && !strstr(err, "corrupt") &&
                  !strstr(err, "truncated at"),
              "replay complained:\n%s", err);
}

/* `stacksnap replay SNAP -o GOT`: exit 0, no complaints, GOT the same as
 * WANT (the live output; how to make a new fixture: remake) */
static void replay_as_live(const char *snap, const char *want, const char *got, const char *remake)
{
    char *argv[] = {(char *)cli_ss(), "replay", (char *)snap, "-o", (char *)got, NULL};
    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "%s: exit %d\n%s", snap, r.status, r.err);
    no_complaints(r.err);
    char *d = cli_diff(want, got);
    cr_assert(!d, "%s: %s\n(a new fixture: %s)", snap, d, remake);
    cli_res_free(&r);
}

Test(cli_fixtures, replay_gives_the_recorded_live_output)
{
    char *dir = cli_tmpdir("fix");
    for (int i = 0; i < 2; i++) {
        char *snap = fixture(names[i], "snap"), *want_f = fixture(names[i], "folded"),
             *want_t = fixture(names[i], "txt");
        char *got_f = cli_path(dir, "got.folded"), *got_t = cli_path(dir, "got.txt");
        char *argv[] = {(char *)cli_ss(), "replay", snap, "-o", got_f, "-o", got_t, NULL};
        struct cli_res r;
        cr_assert(cli_run(&r, 60, argv) == 0);
        cr_assert(r.status == 0, "%s: exit %d\n%s", snap, r.status, r.err);
        no_complaints(r.err);
        char *d = cli_diff(want_f, got_f);
        cr_assert(!d, "%s\n(rerun test/fixtures/make.sh if the change is intended)", d);
        d = cli_diff(want_t, got_t);
        cr_assert(!d, "%s\n(rerun test/fixtures/make.sh if the change is intended)", d);
        /* the fixture is worth replaying: samples, and the frames we expect */
        char *text = cli_load(want_f, NULL), why[300];
        cr_assert(cli_folded_check(text, why, sizeof(why)) >= 30, "%s", why);
        if (i == 0)
            cr_assert(cli_count_lines(text, ";main;cli_outer;cli_mid;cli_leaf ") > 0, "%s", text);
        else
            cr_assert(cli_count_lines(text, ";mid (spin.lua:10);leaf (spin.lua:") > 0, "%s", text);
        free(text);
        cli_res_free(&r);
        free(snap), free(want_f), free(want_t), free(got_f), free(got_t);
    }
    cli_rmtree(dir);
    free(dir);
}

/* In a child: new mount namespace, an empty tmpfs over /usr, replay in this
 * process (the stacksnap executable could not start there). */
static int replay_hidden(const char *snap, const char *folded, const char *txt, char *msgs,
                         size_t len)
{
    if (unshare(CLONE_NEWNS) < 0) return 10;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return 11;
    if (mount("tmpfs", "/usr", "tmpfs", 0, "size=1m") < 0) return 12;
    if (access("/usr/lib/x86_64-linux-gnu/libc.so.6", F_OK) == 0) return 13;
    return cli_replay_inproc(snap, NULL, folded, txt, msgs, len) == 0 ? 0 : 14;
}

Test(cli_fixtures, replay_with_the_recorded_files_absent)
{
    char *dir = cli_tmpdir("fix-ns");
    for (int i = 0; i < 2; i++) {
        char *snap = fixture(names[i], "snap"), *want_f = fixture(names[i], "folded"),
             *want_t = fixture(names[i], "txt");
        char *got_f = cli_path(dir, "ns.folded"), *got_t = cli_path(dir, "ns.txt");
        char *msgs_path = cli_path(dir, "msgs");
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            char msgs[8192] = "";
            int rc = replay_hidden(snap, got_f, got_t, msgs, sizeof(msgs));
            if (rc && !msgs[0]) snprintf(msgs, sizeof(msgs), "step %d: %s", rc, strerror(errno));
            cli_store(msgs_path, msgs, strlen(msgs));
            _exit(rc);
        }
        int st = cli_wait(pid, 60);
        char *msgs = cli_load(msgs_path, NULL);
        cr_assert(st == 0, "replay with /usr hidden: status %d: %s", st, msgs ? msgs : "");
        no_complaints(msgs ? msgs : "");
        char *d = cli_diff(want_f, got_f);
        cr_assert(!d, "%s", d);
        d = cli_diff(want_t, got_t);
        cr_assert(!d, "%s", d);
        free(msgs);
        free(snap), free(want_f), free(want_t), free(got_f), free(got_t), free(msgs_path);
    }
    cli_rmtree(dir);
    free(dir);
}

Test(cli_fixtures, info_and_report)
{
    for (int i = 0; i < 2; i++) {
        char *snap = fixture(names[i], "snap"), *folded = fixture(names[i], "folded");
        char *text = cli_load(folded, NULL), why[300];
        long long samples = cli_folded_check(text, why, sizeof(why));
        cr_assert(samples > 0, "%s", why);
        char *info[] = {(char *)cli_ss(), "info", snap, NULL};
        struct cli_res r;
        cr_assert(cli_run(&r, 30, info) == 0);
        char want[64];
        snprintf(want, sizeof(want), "samples      %lld over", samples);
        cr_assert(r.status == 0 && strstr(r.out, want) && strstr(r.out, "bundled files") &&
                      strstr(r.out, "bundle       /usr/lib/x86_64-linux-gnu/libc.so.6") &&
                      strstr(r.out, "process      "),
                  "info (want '%s'):\n%s\n%s", want, r.out, r.err);
        cli_res_free(&r);
        char *report[] = {(char *)cli_ss(), "report", snap, "--top", "5", NULL};
        cr_assert(cli_run(&r, 30, report) == 0);
        cr_assert(r.status == 0 && strstr(r.out, "TOTAL") && cli_count_lines(r.out, "%") >= 5,
                  "report:\n%s\n%s", r.out, r.err);
        cr_assert(strstr(r.out, i == 0 ? "cli_leaf" : "leaf (spin.lua:"), "report:\n%s", r.out);
        cli_res_free(&r);
        free(text), free(snap), free(folded);
    }
}

/* The header says the samples' architecture: info prints it; a capture of an
 * architecture this build cannot unwind is refused with a clear error (exit
 * 2) by every command that would unwind it; an empty arch (captures made
 * before arm64) is x86-64. The captures of another architecture are the
 * native fixture with its header rewritten (cli_snap_set_arch), checked first
 * to rewrite faithfully: the same arch rewritten replays as the original. */
static void run_ok(char **argv, int want, const char *needle, const char *where)
{
    struct cli_res r;
    cr_assert(cli_run(&r, 60, argv) == 0);
    const char *text = want ? r.err : r.out;
    cr_assert(r.status == want && strstr(text, needle), "%s %s: exit %d (want %d, '%s'):\n%s\n%s",
              argv[1], where, r.status, want, needle, r.out, r.err);
    cli_res_free(&r);
}

Test(cli_fixtures, captures_say_their_architecture)
{
    char *dir = cli_tmpdir("fix-arch");
    char *snap = fixture("native", "snap"), *want_f = fixture("native", "folded");
    char *same = cli_path(dir, "same.snap"), *old = cli_path(dir, "old.snap");
    char *other = cli_path(dir, "other.snap"), *got = cli_path(dir, "got.folded");
    char *ss = (char *)cli_ss();
    run_ok((char *[]){ss, "info", snap, NULL}, 0, "\narch: x86_64\n", snap);

    /* the rewriting keeps everything else: same arch, same output */
    cr_assert(cli_snap_set_arch(snap, "x86_64", 0, same) == 0);
    cr_assert(cli_snap_set_arch(snap, "", 0, old) == 0);
    const bool x86 = strcmp(SS_ARCH, "x86_64") == 0;
    for (int i = 0; i < 2 && x86; i++) {
        char *in = i ? old : same;
        run_ok((char *[]){ss, "info", in, NULL}, 0, "\narch: x86_64\n", in);
        run_ok((char *[]){ss, "replay", in, "-o", got, NULL}, 0, "", in);
        char *d = cli_diff(want_f, got);
        cr_assert(!d, "%s: %s", in, d);
    }

    /* the other architecture: info reads it; an architecture no build
     * knows: info reads it, unwinding commands refuse it clearly */
    const char *arch = x86 ? "aarch64" : "x86_64";
    cr_assert(cli_snap_set_arch(snap, arch, x86 ? 34 : 24, other) == 0);
    char want[64], msg[160];
    snprintf(want, sizeof(want), "\narch: %s\n", arch);
    run_ok((char *[]){ss, "info", other, NULL}, 0, want, other);
    cr_assert(cli_snap_set_arch(snap, "riscv64", 0, other) == 0);
    run_ok((char *[]){ss, "info", other, NULL}, 0, "\narch: riscv64\n", other);
    snprintf(msg, sizeof(msg),
             "a capture of riscv64 samples: this stacksnap (%s) cannot unwind riscv64", SS_ARCH);
    unlink(got);
    run_ok((char *[]){ss, "replay", other, "-o", got, NULL}, 2, msg, other);
    cr_assert(access(got, F_OK) != 0, "replay of %s wrote %s", other, got);
    run_ok((char *[]){ss, "report", other, NULL}, 2, msg, other);
    run_ok((char *[]){ss, "diff", snap, other, "-o", got, NULL}, 2, msg, other);
    cli_rmtree(dir);
    free(snap), free(want_f), free(same), free(old), free(other), free(got), free(dir);
}

/* test/fixtures/arm64-native.snap and .folded: a bundled capture with
 * stack bytes of the native workload on arm64 (-O2, no frame pointers),
 * recorded attached in the emulated VM (SS_VM_DUMP=1 test/vm/arm64.sh
 * leaves build-arm64/vm/arm64-stack-native.*; pruned by cli_fixtool as
 * make.sh does), and that record's live output there. An x86-64 build
 * walks its native frames with libdw (unwind/foreign.c), an arm64 build
 * with libunwind: both give the live output (the arm64 build's replay,
 * run under qemu-aarch64-static, and the x86-64 one are byte-identical,
 * per sample too: the VM's .txt). */
Test(cli_fixtures, a_real_arm64_capture_replays_everywhere)
{
    char *snap = fixture("arm64-native", "snap"), *want_f = fixture("arm64-native", "folded");
    struct cli_res r;
    char *info[] = {(char *)cli_ss(), "info", snap, NULL};
    cr_assert(cli_run(&r, 30, info) == 0);
    cr_assert(r.status == 0 && strstr(r.out, "\narch: aarch64\n") && !strstr(r.err, "corrupt") &&
                  strstr(r.out, "cli_native (/bin/cli_native)"),
              "info:\n%s\n%s", r.out, r.err);
    cli_res_free(&r);
    char *dir = cli_tmpdir("fix-a64"), *got_f = cli_path(dir, "got.folded");
    replay_as_live(snap, want_f, got_f, "test/fixtures/make.sh says how");
    /* worth replaying: samples, and the whole chain through code without
     * frame pointers */
    char *text = cli_load(want_f, NULL), why[300];
    cr_assert(cli_folded_check(text, why, sizeof(why)) >= 30, "%s", why);
    cr_assert(cli_count_lines(text, "cli_native;_start;__libc_start_main;") > 0 &&
                  cli_count_lines(text, ";main;cli_outer;cli_mid;cli_leaf ") > 0,
              "%s", text);
    free(text);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(snap), free(want_f), free(got_f), free(dir);
}

/* test/fixtures/arm64-luajit.snap and .folded: Debian's arm64 luajit -joff
 * on test/vm/chain.lua, recorded attached with --no-stack-bytes in the
 * emulated VM of test/vm/arm64.sh (SS_VM_DUMP=1), and that record's live
 * output there. The capture holds the frames the arm64 LuaJIT walker
 * unwound in the VM, so any build replays it, to the same output; info
 * shows the runtime as the VM found it (the layout derived from the arm64
 * VM's code, equal to the arm64 table row). */
Test(cli_fixtures, a_real_arm64_luajit_capture_replays_everywhere)
{
    char *snap = fixture("arm64-luajit", "snap"), *want = fixture("arm64-luajit", "folded");
    struct cli_res r;
    char *info[] = {(char *)cli_ss(), "info", snap, NULL};
    cr_assert(cli_run(&r, 30, info) == 0);
    cr_assert(r.status == 0 && strstr(r.out, "\narch: aarch64\n") &&
                  strstr(r.out, "LuaJIT 2.1.0-beta3, GC64, arm64, JIT traces not walked") &&
                  strstr(r.out, "facts derived from the code: VM entries (3), GC checks, exit "
                                "handler, BC_JLOOP") &&
                  strstr(r.out, "layout debian-luajit-2.1.0-beta3-git20220320-arm64 (derived "
                                "from the code, equal to this table row)"),
              "info:\n%s\n%s", r.out, r.err);
    cli_res_free(&r);
    char *dir = cli_tmpdir("fix-a64lj"), *got = cli_path(dir, "got.folded");
    char *argv[] = {(char *)cli_ss(), "replay", snap, "-o", got, NULL};
    cr_assert(cli_run(&r, 60, argv) == 0);
    cr_assert(r.status == 0, "%s: exit %d\n%s", snap, r.status, r.err);
    char *d = cli_diff(want, got);
    cr_assert(!d, "%s\n(a new fixture: SS_VM_DUMP=1 test/vm/arm64.sh, build-arm64/vm/)", d);
    /* worth replaying: samples, and the interpreter's exact chain */
    char *text = cli_load(want, NULL), why[300];
    cr_assert(cli_folded_check(text, why, sizeof(why)) >= 30, "%s", why);
    cr_assert(cli_count_lines(text, ";lua_pcall;main (chain.lua:14);outer (chain.lua:12);mid "
                                    "(chain.lua:11);leaf (chain.lua:") > 0,
              "%s", text);
    free(text);
    cli_res_free(&r);
    cli_rmtree(dir);
    free(snap), free(want), free(got), free(dir);
}

/* test/fixtures/arm64-luajit-joff.snap, arm64-luajit-jit.snap and their
 * .folded: Debian's arm64 luajit on test/vm/chain.lua, interpreted (-joff)
 * and with JIT traces, recorded attached in the emulated VM with stack
 * bytes, windows and live reads, bundled (SS_VM_FIXTURES=1 test/vm/arm64.sh
 * leaves build-arm64/vm/arm64-stack-luajit-*; pruned as make.sh says), and
 * that record's live output. An x86-64 build walks their samples itself:
 * native frames with libdw (unwind/foreign.c), Lua frames with the arm64
 * VM's runtime (its registers, cframe, layout derived from its arm64 code,
 * arm64 trace code: mcofs in instructions, x29 the VM frame's, VM helpers
 * called from traces), to the output the arm64 walker gave live, byte for
 * byte. */
Test(cli_fixtures, arm64_luajit_stack_bytes_replay_to_the_live_output)
{
    static const char *const names[] = {"arm64-luajit-joff", "arm64-luajit-jit"};
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char *snap = fixture(names[i], "snap"), *want = fixture(names[i], "folded");
        struct cli_res r;
        char *info[] = {(char *)cli_ss(), "info", snap, NULL};
        cr_assert(cli_run(&r, 30, info) == 0);
        cr_assert(r.status == 0 && strstr(r.out, "\narch: aarch64\n") &&
                      strstr(r.out, "registers, stack bytes, memory windows") &&
                      strstr(r.out, "layout debian-luajit-2.1.0-beta3-git20220320-arm64 (derived "
                                    "from the code, equal to this table row)"),
                  "%s info:\n%s\n%s", names[i], r.out, r.err);
        cli_res_free(&r);
        char *dir = cli_tmpdir("fix-a64ljs"), *got = cli_path(dir, "got.folded");
        replay_as_live(snap, want, got, "SS_VM_FIXTURES=1 test/vm/arm64.sh");
        /* worth replaying: samples, most with the interpreter's exact chain */
        char *text = cli_load(want, NULL), why[300];
        long long n = cli_folded_check(text, why, sizeof(why));
        cr_assert(n >= 30, "%s", why);
        int lua = cli_count_lines(text, ";lua_pcall;main (chain.lua:14);outer (chain.lua:12);mid "
                                        "(chain.lua:11);leaf (chain.lua:");
        cr_assert(lua > 0, "%s", text);
        free(text);
        cli_res_free(&r);
        cli_rmtree(dir);
        free(snap), free(want), free(got), free(dir);
    }
}

/* test/fixtures/arm64-pac.snap and .folded: the native chain of
 * cli_native_pac (-mbranch-protection=standard: main, cli_outer, cli_mid
 * and cli_sort sign the return addresses they save) on trixie's libc (its
 * qsort signs too), recorded attached with stack bytes, bundled, under
 * trixie's 6.12 kernel in the emulated VM (SS_VM_PACFX=1 test/vm/arm64.sh
 * SRC BUILD_ARM64 trixie leaves build-arm64/vm/arm64-stack-pac.*; pruned as
 * make.sh says), and that record's live output. Every step of the replay
 * (the rule cache's and libdw's: unwind/foreign_walk.c) strips the return
 * address it gives with the capture's PAC mask, as the arm64 build's do,
 * so the x86-64 build gives the live output; the same samples replayed
 * without stripping (STACKSNAP_PAC_MASK=0) lose their chains at the first
 * signed frame: the fixture needs the strip. */
Test(cli_fixtures, arm64_pac_signed_frames_replay_to_the_live_output)
{
    char *snap = fixture("arm64-pac", "snap"), *want = fixture("arm64-pac", "folded");
    static const char *whole[] = {";main;cli_outer;cli_mid;cli_leaf ", ";main;cli_outer;cli_sort;"};
    struct cli_res r;
    char *info[] = {(char *)cli_ss(), "info", snap, NULL};
    cr_assert(cli_run(&r, 30, info) == 0);
    cr_assert(r.status == 0 && strstr(r.out, "\narch: aarch64\n") &&
                  strstr(r.out, "registers, stack bytes") && strstr(r.out, "\npac mask     0x"),
              "info:\n%s\n%s", r.out, r.err);
    cli_res_free(&r);
    char *dir = cli_tmpdir("fix-a64pac"), *got = cli_path(dir, "got.folded");
    char *argv[] = {(char *)cli_ss(), "replay", snap, "-o", got, NULL};
    for (int strip = 1; strip >= 0; strip--) {
        if (!strip) setenv("STACKSNAP_PAC_MASK", "0", 1);
        cr_assert(cli_run(&r, 60, argv) == 0);
        unsetenv("STACKSNAP_PAC_MASK");
        cr_assert(r.status == 0, "%s: exit %d\n%s", snap, r.status, r.err);
        char *text = cli_load(got, NULL), why[300];
        if (strip) {
            no_complaints(r.err);
            char *d = cli_diff(want, got);
            cr_assert(!d, "%s\n(a new fixture: SS_VM_PACFX=1 test/vm/arm64.sh)", d);
            /* worth replaying: samples, the chains through signed frames */
            cr_assert(cli_folded_check(text, why, sizeof(why)) >= 30, "%s", why);
        }
        for (int k = 0; k < 2; k++)
            cr_assert((cli_count_lines(text, whole[k]) > 0) == strip, "%s (%s):\n%s", whole[k],
                      strip ? "stripped" : "not stripped", text);
        free(text);
        cli_res_free(&r);
    }
    cli_rmtree(dir);
    free(snap), free(want), free(got), free(dir);
}

/* The samples of the folded lines that start with prefix and hold needle. */
static long long count_with(const char *text, const char *prefix, const char *needle)
{
    long long n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n'), *end = e ? e : l + strlen(l), *c = end;
        while (c > l && c[-1] != ' ')
            c--;
        if (!strncmp(l, prefix, strlen(prefix)) &&
            memmem(l, (size_t)(end - l), needle, strlen(needle)))
            n += atoll(c);
        l = e ? e + 1 : NULL;
    }
    return n;
}

/* test/fixtures/arm64-nocfi.snap and arm64-nocfi-rwx.snap (and .folded):
 * code without CFI on arm64, recorded in the arm64 VM (SS_VM_A64SCAN=1
 * test/vm/arm64.sh . build-arm64; bundled, pruned by test/fixtures/make.sh's
 * cli_fixtool): cli_nocfi pcre, PCRE2's JIT code that called on; cli_nocfi_fp
 * rwx and cli_nocfi rwx, hand-written code in RWX memory under callers with
 * frame pointers and without. The replay (an x86-64 build: foreign_scan.c;
 * an arm64 build: native_scan.c; the same stack scan, a64scan.c) gives the
 * live output: the chains through the JIT code reach the root as the live
 * walk's did, and stop where it refused (callers without frame pointers:
 * cut, never a wrong chain). Before the x86-64 build scanned, its replay
 * stopped at the JIT code: 0 of those chains whole. Every rule step
 * checked against the slow path's: 0 differ. */
Test(cli_fixtures, arm64_code_without_cfi_replays_to_the_live_output)
{
    static const struct {
        const char *name, *root;
        long long min;
    } cases[] = {{"arm64-nocfi", "cli_nocfi;_start;", 100},
                 {"arm64-nocfi-rwx", "cli_nocfi_fp;_start;", 200}};
    char *dir = cli_tmpdir("fix-a64nocfi"), *got = cli_path(dir, "got.folded"), msgs[2048];
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *snap = fixture(cases[i].name, "snap"), *want = fixture(cases[i].name, "folded");
        replay_as_live(snap, want, got, "SS_VM_A64SCAN=1 test/vm/arm64.sh");
        char *text = cli_load(got, NULL);
        long long whole = count_with(text, cases[i].root, ";[jit] [anon]");
        cr_log_info("%s: %lld samples through JIT code with the whole chain", cases[i].name, whole);
        cr_assert(whole >= cases[i].min, "%s: %lld samples through JIT code whole:\n%s",
                  cases[i].name, whole, text);
        if (i == 1) { /* callers without frame pointers: refused there, no chain on */
            long long cut = count_with(text, "cli_nocfi;[unknown]+0x", "");
            cr_assert(cut >= 200 && count_with(text, "cli_nocfi;_start;", "[jit]") == 0,
                      "cli_nocfi rwx: %lld cut:\n%s", cut, text);
        }
        struct cli_steps ru = {0};
        cr_assert(cli_replay_steps(snap, SS_NATIVE_RULES, true, NULL, &ru, msgs, sizeof(msgs)) == 0,
                  "%s: %s", cases[i].name, msgs);
        cr_assert(ru.checks > 100 && ru.diffs == 0, "%s: %lld of %lld rule steps differ",
                  cases[i].name, ru.diffs, ru.checks);
        free(text);
        free(snap), free(want);
    }
    cli_rmtree(dir);
    free(dir), free(got);
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Copy capture IN to OUT with the stack bytes of every key sample (format
 * 4, docs/capture-format.md; the delta samples take theirs) shuffled as
 * 8-byte words by seed: hostile stacks whose words are still plausible
 * (return addresses, frame records, stack pointers, out of place). The
 * records keep their lengths; their CRCs are made anew. */
static void scramble(const char *in, uint64_t seed, const char *out)
{
    size_t n;
    uint8_t *b = (uint8_t *)cli_load(in, &n);
    cr_assert(b && n > 16);
    for (size_t off = 16; off + 20 <= n;) {
        uint8_t *h = b + off, *pl = h + 20;
        uint32_t type = (uint32_t)get_le(h + 4, 2), flags = (uint32_t)get_le(h + 6, 2),
                 len = (uint32_t)get_le(h + 8, 4);
        cr_assert(!memcmp(h, "\x9eSR\n", 4) && len <= n - off - 20);
        off += 20 + (size_t)len;
        if (type != 3 || flags) continue;
        size_t at = 32, nregs = (size_t)get_le(pl + at, 4); /* seq .. time_ns, nregs */
        at += 4 + 8 * nregs;
        cr_assert(at + 16 <= len);
        size_t slen = (size_t)get_le(pl + at + 4, 4), words = slen / 8;
        uint8_t *st = pl + at + 16;
        if (get_le(pl + at + 8, 8) != UINT64_MAX || at + 16 + slen > len) continue; /* a delta */
        for (size_t i = words; i > 1; i--) { /* Fisher-Yates, xorshift64 */
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            size_t j = (size_t)(seed % i);
            uint8_t t[8];
            memcpy(t, st + 8 * (i - 1), 8), memcpy(st + 8 * (i - 1), st + 8 * j, 8);
            memcpy(st + 8 * j, t, 8);
        }
        uint32_t c = (uint32_t)crc32(0, pl, len);
        for (int k = 0; k < 4; k++)
            h[12 + k] = (uint8_t)(c >> (8 * k));
        c = (uint32_t)crc32(0, h, 16);
        for (int k = 0; k < 4; k++)
            h[16 + k] = (uint8_t)(c >> (8 * k));
    }
    cr_assert(cli_store(out, b, n) == 0);
    free(b);
}

/* Hostile stacks (scramble) under the arm64 scan: each replay ends, soon,
 * with a stack per sample (truncated where the scan refuses), never a crash
 * or a hang (the scan's bounds: 8 KiB of slots, 256 CFI steps). */
Test(cli_fixtures, arm64_scan_over_hostile_stacks_ends)
{
    static const char *const fx[] = {"arm64-nocfi", "arm64-nocfi-rwx"};
    char *dir = cli_tmpdir("fix-a64hostile"), *bad = cli_path(dir, "bad.snap"),
         *got = cli_path(dir, "got.folded");
    for (unsigned i = 0; i < 2; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            char *snap = fixture(fx[i], "snap"),
                 *argv[] = {(char *)cli_ss(), "replay", bad, "-o", got, NULL};
            scramble(snap, seed * 0x9e3779b97f4a7c15ull, bad);
            struct cli_res r;
            cr_assert(cli_run(&r, 60, argv) == 0, "%s seed %d: no end in 60 s", fx[i], (int)seed);
            cr_assert(r.status == 0, "%s seed %d: exit %d\n%s", fx[i], (int)seed, r.status, r.err);
            char *text = cli_load(got, NULL), why[300], *want = fixture(fx[i], "folded"),
                 *d = cli_diff(want, got);
            cr_assert(cli_folded_check(text, why, sizeof(why)) >= 100, "%s", why);
            cr_assert(d, "%s seed %d: the stacks were not scrambled", fx[i], (int)seed);
            free(text), free(snap), free(want), free(d);
            cli_res_free(&r);
        }
    cli_rmtree(dir);
    free(dir), free(bad), free(got);
}

/* The arm64 captures' native steps in an x86-64 build: the rule cache of
 * unwind/foreign_rules.c answers most of them without libdw, and each rule
 * step gives exactly libdw's registers. Each fixture is replayed twice in
 * this process, without the memo: with libdw alone (SS_NATIVE_UNW_CURSOR,
 * the walk before the rule cache: no rule step; for arm64-pac, whose signed
 * return addresses a whole libdw walk keeps, SS_NATIVE_UNW_STEP: a libdw
 * step per frame, stripped as a rule step is), and with the rules, every
 * rule step checked against libdw's step from the same frame (pc, x0-x30,
 * sp: which are known and their values). Both replays give the same
 * perf-script text, sample by sample. The walks' times are logged. The
 * x86-64 fixtures' rule steps are checked against libunwind's likewise
 * (unwind/native.c; an arm64 build checks its own in the arm64 VM:
 * test/vm/arm64.sh's fx_ lines). */
Test(cli_fixtures, rule_steps_are_the_slow_paths)
{
    if (strcmp(SS_ARCH, "x86_64"))
        cr_skip_test("an arm64 build walks arm64 captures with libunwind");
    static const char *const a64[] = {"arm64-native", "arm64-luajit-joff", "arm64-luajit-jit",
                                      "arm64-pac"};
    char *dir = cli_tmpdir("fix-a64rules");
    for (unsigned i = 0; i < sizeof(a64) / sizeof(a64[0]); i++) {
        char *snap = fixture(a64[i], "snap"), *t_dw = cli_path(dir, "libdw.txt"),
             *t_rules = cli_path(dir, "rules.txt"), msgs[2048];
        struct cli_steps dw = {0}, ru = {0};
        int alone = strcmp(a64[i], "arm64-pac") ? SS_NATIVE_UNW_CURSOR : SS_NATIVE_UNW_STEP;
        cr_assert(cli_replay_steps(snap, alone, false, t_dw, &dw, msgs, sizeof(msgs)) == 0,
                  "%s: %s", a64[i], msgs);
        cr_assert(cli_replay_steps(snap, SS_NATIVE_RULES, true, t_rules, &ru, msgs, sizeof(msgs)) ==
                      0,
                  "%s: %s", a64[i], msgs);
        /* the walks' time without output, best of 3 (logged, not judged: a
         * loaded machine) */
        double best[2] = {1e9, 1e9};
        for (int k = 0; k < 6; k++) {
            struct cli_steps s = {0};
            int mode = k % 2 ? SS_NATIVE_RULES : alone;
            cr_assert(cli_replay_steps(snap, mode, false, NULL, &s, msgs, sizeof(msgs)) == 0);
            if (s.secs < best[k % 2]) best[k % 2] = s.secs;
        }
        cr_log_info("%s: libdw alone %lld steps; rules %lld of %lld steps (%.1f%%), %lld checked, "
                    "%lld differ; replay without output %.2f ms with libdw alone, %.2f ms with "
                    "rules",
                    a64[i], dw.slow, ru.rule, ru.rule + ru.slow,
                    100.0 * (double)ru.rule / (double)(ru.rule + ru.slow), ru.checks, ru.diffs,
                    best[0] * 1e3, best[1] * 1e3);
        cr_assert(dw.rule == 0 && dw.slow > 100, "%s: libdw alone: %lld rule, %lld libdw steps",
                  a64[i], dw.rule, dw.slow);
        cr_assert(ru.diffs == 0 && ru.checks == ru.rule,
                  "%s: %lld of %lld rule steps differ from libdw's", a64[i], ru.diffs, ru.checks);
        cr_assert(ru.rule >= 4 * ru.slow, "%s: %lld rule steps, %lld libdw steps", a64[i], ru.rule,
                  ru.slow);
        char *d = cli_diff(t_dw, t_rules);
        cr_assert(!d, "%s: rules vs libdw alone: %s", a64[i], d);
        free(snap), free(t_dw), free(t_rules);
    }
    /* this build's own captures: its rule steps checked against libunwind's */
    for (int i = 0; i < 2; i++) {
        char *snap = fixture(names[i], "snap"), msgs[2048];
        struct cli_steps ru = {0};
        cr_assert(cli_replay_steps(snap, SS_NATIVE_RULES, true, NULL, &ru, msgs, sizeof(msgs)) == 0,
                  "%s: %s", names[i], msgs);
        cr_log_info("%s: rules %lld, libunwind %lld steps; %lld checked, %lld differ", names[i],
                    ru.rule, ru.slow, ru.checks, ru.diffs);
        cr_assert(ru.rule > 100 && ru.checks >= ru.rule && ru.diffs == 0,
                  "%s: %lld of %lld rule steps differ from libunwind's", names[i], ru.diffs,
                  ru.checks);
        free(snap);
    }
    cli_rmtree(dir);
    free(dir);
}
