/* test/cli/kernel.c: kernel frames (--kernel, issue 17). dd copying
 * /dev/zero to /dev/null spends most of its time in read/write system
 * calls: recorded with real BPF (ring buffer and compat programs), at least
 * 90 % of its samples with kernel frames must show the system call path
 * (entry_SYSCALL_64...) with the kernel frames above (leafward of) the user
 * ones, read_zero must be named, and replay of the capture must give the
 * same folded text byte for byte. A kallsyms whose addresses are hidden
 * (as kernel.kptr_restrict shows it) is refused with a message that says
 * so. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stacksnap/unwind.h"

/* Samples with kernel frames, and of those the ones through the syscall
 * entry; every kernel frame must come after every user frame. */
static void count(const char *text, long long *kern, long long *sys)
{
    char *t = strdup(text);
    *kern = *sys = 0;
    for (char *l = t, *e; l && *l; l = e ? e + 1 : NULL) {
        e = strchr(l, '\n');
        if (e) *e = 0;
        char *sp = strrchr(l, ' ');
        char *k = strstr(l, "_[k]");
        if (!sp || !k) continue;
        long long n = atoll(sp + 1);
        *kern += n;
        if (strstr(l, ";entry_SYSCALL_64")) *sys += n;
        /* from the first kernel frame on, only kernel frames */
        char *first = k;
        while (first > l && first[-1] != ';')
            first--;
        for (char *f = first; f < sp;) {
            char *end = strchr(f, ';');
            if (!end || end > sp) end = sp;
            cr_assert(end - f > 4 && !strncmp(end - 4, "_[k]", 4),
                      "a user frame above a kernel frame: %s", l);
            f = end + 1;
        }
    }
    free(t);
}

static void record_dd(const char *tag, const char *mode)
{
    char *dir = cli_tmpdir(tag);
    char *folded = cli_path(dir, "k.folded"), *snap = cli_path(dir, "k.snap");
    char *again = cli_path(dir, "r.folded");
    char *argv[] = {(char *)cli_ss(),
                    "record",
                    "--kernel",
                    (char *)mode,
                    "-F",
                    "499",
                    "-o",
                    folded,
                    "-o",
                    snap,
                    "--",
                    "dd",
                    "if=/dev/zero",
                    "of=/dev/null",
                    "bs=4k",
                    "count=1500000",
                    NULL};
    if (!*mode) memmove(&argv[3], &argv[4], sizeof(char *) * 13);
    struct cli_res r;
    cr_assert_eq(cli_run(&r, 60, argv), 0);
    cr_assert_eq(r.status, 0, "record: %s", r.err);
    cr_expect(!strstr(r.err, "kernel symbols"), "%s", r.err);
    cli_res_free(&r);
    char *text = cli_load(folded, NULL);
    cr_assert(text);
    char why[200];
    long long total = cli_folded_check(text, why, sizeof(why)), kern, sys;
    cr_assert_gt(total, 100, "%s: %s", mode, why);
    count(text, &kern, &sys);
    cr_assert_gt(kern * 3, total, "%s: %lld of %lld samples with kernel frames:\n%.3000s", mode,
                 kern, total, text);
    cr_expect_geq(sys * 10, kern * 9,
                  "%s: %lld of %lld kernel samples through the syscall entry:\n%.3000s", mode, sys,
                  kern, text);
    cr_expect(strstr(text, ";read_zero_[k]"), "%s: read_zero not named:\n%.3000s", mode, text);

    char *rargv[] = {(char *)cli_ss(), "replay", snap, "-o", again, NULL};
    cr_assert_eq(cli_run(&r, 60, rargv), 0);
    cr_assert_eq(r.status, 0, "replay: %s", r.err);
    cli_res_free(&r);
    char *d = cli_diff(folded, again);
    cr_expect(!d, "%s: replay differs: %s", mode, d);
    free(d);
    free(text);
    cli_rmtree(dir);
    free(again);
    free(snap);
    free(folded);
    free(dir);
}

Test(kernel, ringbuf_syscall_path)
{
    record_dd("kernel", "");
}

Test(kernel, compat_syscall_path)
{
    record_dd("kcompat", "--compat");
}

/* /proc/kallsyms as a reader without the privilege sees it: the same lines,
 * every address 0. */
Test(kernel, hidden_addresses)
{
    char *dir = cli_tmpdir("ksyms");
    char *path = cli_path(dir, "kallsyms");
    FILE *in = fopen("/proc/kallsyms", "r"), *out = fopen(path, "w");
    cr_assert(in && out);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), in) && n++ < 5000) {
        char *sp = strchr(line, ' ');
        if (sp) fprintf(out, "%016x%s", 0, sp);
    }
    fclose(in);
    fclose(out);
    struct ss_unwinder *u;
    struct ss_err err = {0};
    cr_assert_eq(ss_unwinder_new(&u, NULL, &err), 0);
    cr_expect_eq(ss_unwinder_kernel_syms(u, path, &err), -EACCES);
    cr_expect(strstr(err.msg, "kptr_restrict") && strstr(err.msg, "every address as 0"), "%s",
              err.msg);
    err = (struct ss_err){0};
    cr_expect_eq(ss_unwinder_kernel_syms(u, "/proc/kallsyms", &err), 0, "%s", err.msg);
    ss_unwinder_free(u);
    cli_rmtree(dir);
    free(path);
    free(dir);
}
