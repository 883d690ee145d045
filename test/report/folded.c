/* test/report/folded: the aggregator and the folded writer on the hand-made
 * corpus: exact lines (frame text of every kind, escapes of ';', '\', non-
 * UTF-8 bytes), merging by text, sorting, the 1000-deep stack, empty stacks,
 * and that the report keeps its own copies of the producer's strings. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"

/* What the corpus must fold to (hand-checked against DESIGN.md). */
static const char *const expected[] = {
    "V8 Worker 2;main;foo 2",
    "a\\x3bb c;bar 1",
    "idle;[no frames] 2",
    "luajit;__libc_start_main;main;lua_pcall;M.run (test.lua:31);[GC] 2",
    "luajit;__libc_start_main;main;lua_pcall;g (C:\\\\dir\\\\x.lua:9);"
    "anonymous ([string \"x(1)\"]:1);a->b (x.lua:2);f (bad\\xff\\xfe.lua:7) 1",
    "luajit;__libc_start_main;main;lua_pcall;leaf (test.lua:12);io.write;write;"
    "do_syscall_64_[k];clear_page_erms_[k];[kernel.kallsyms]+0xffffffff81000010_[k] 1",
    "luajit;__libc_start_main;main;lua_pcall;libfoo.so+0x1234;[unknown]+0xdeadbeef 1",
    "luajit;__libc_start_main;main;lua_pcall;main (test.lua:40);M.run (test.lua:30);"
    "leaf (test.lua:12) 3",
    "luajit;__libc_start_main;main;lua_pcall;main (test.lua:40);M.run (test.lua:30);"
    "leaf (test.lua:12);string.rep 4",
    "luajit;__libc_start_main;main;lua_pcall;main (test.lua:40);M.run (test.lua:30);"
    "leaf (test.lua:13) 2",
    "luajit;__libc_start_main;main;lua_pcall;na\xc3\xafve \xe2\x86\x92 caf\xc3\xa9;"
    "obj:method (my dir/a\\x3bb.lua:3);weird\\x3bname with spaces 1",
    NULL, /* the deep stack, built below */
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

static char *deep_line(void)
{
    size_t cap = 64 + FX_DEEP * 20;
    char *s = malloc(cap);
    strcpy(s, "luajit;main;main (deep.lua:9)");
    for (int i = 0; i < FX_DEEP - 2; i++)
        strcat(s, ";rec (deep.lua:5)");
    strcat(s, " 1");
    return s;
}

static char *folded_of(const struct ss_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct ss_err err = {0};
    cr_assert_eq(ss_report_write_folded(r, f, &err), 0, "%s", err.msg);
    fclose(f);
    return buf;
}

static void check_corpus_output(const char *out, uint64_t total)
{
    struct fx_lines ls = fx_split(out);
    cr_assert_eq(ls.n, NEXPECTED, "%zu lines, want %zu:\n%.2000s", ls.n, NEXPECTED, out);
    char *deep = deep_line();
    for (size_t i = 0; i < NEXPECTED; i++) {
        const char *want = expected[i] ? expected[i] : deep;
        cr_expect_str_eq(ls.l[i], want, "line %zu", i);
    }
    /* structure: sorted, unique stacks, counts add up, ';' splits exactly */
    uint64_t sum = 0;
    for (size_t i = 0; i < ls.n; i++) {
        char *sp = strrchr(ls.l[i], ' ');
        cr_assert(sp);
        sum += strtoull(sp + 1, NULL, 10);
        if (i) {
            char *prev = strndup(ls.l[i - 1], (size_t)(strrchr(ls.l[i - 1], ' ') - ls.l[i - 1]));
            char *cur = strndup(ls.l[i], (size_t)(sp - ls.l[i]));
            cr_expect_lt(strcmp(prev, cur), 0, "not sorted/unique: %s | %s", prev, cur);
            free(prev);
            free(cur);
        }
    }
    cr_expect_eq(sum, total);
    size_t semis = 0;
    for (const char *p = ls.l[NEXPECTED - 1]; *p; p++)
        semis += *p == ';';
    cr_expect_eq(semis, FX_DEEP, "deep stack: %zu separators", semis);
    free(deep);
    fx_lines_free(&ls);
}

Test(report_folded, corpus_exact_lines)
{
    struct fx fx;
    fx_build(&fx);
    struct ss_report *r = fx_report(&fx, 99);
    cr_assert(r);
    cr_expect_eq(ss_report_samples(r), fx.total);
    char *out = folded_of(r);
    check_corpus_output(out, fx.total);
    free(out);
    ss_report_free(r);
    fx_free(&fx);
}

Test(report_folded, report_owns_its_strings)
{
    struct fx fx;
    fx_build(&fx);
    struct ss_report *r = fx_report(&fx, 99);
    cr_assert(r);
    uint64_t total = fx.total;
    fx_poison(&fx); /* the producer reuses its memory ... */
    fx_free(&fx);   /* ... or frees its context */
    char *out = folded_of(r);
    cr_expect_null(strstr(out, "XXX"), "report kept producer pointers");
    check_corpus_output(out, total);
    free(out);
    ss_report_free(r);
}

/* The producer's buffers come back with other text at the same addresses
 * (a process's names freed, their memory reused): each add names its frames
 * by the text there now, not by what the address held before. */
Test(report_folded, reused_producer_addresses)
{
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    cr_assert(r, "%s", err.msg);
    char name[32], module[32];
    const char *names[] = {"alpha", "beta", "alpha", "gamma"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "%s", names[i]);
        snprintf(module, sizeof(module), "/lib/lib%s.so", names[i]);
        struct ss_frame f = {.kind = SS_FRAME_NATIVE,
                             .addr = 0x1000,
                             .offset = 0x1000,
                             .name = name,
                             .module = module};
        struct ss_stack st = {.pid = 7, .tid = 7, .nframes = 1, .frames = &f};
        snprintf(st.comm, sizeof(st.comm), "prog");
        cr_assert_eq(ss_report_add(r, &st, 1, &err), 0, "%s", err.msg);
    }
    char *out = folded_of(r);
    cr_expect_str_eq(out, "prog;alpha 2\nprog;beta 1\nprog;gamma 1\n");
    free(out);
    ss_report_free(r);
}

static char *unescape(const char *s)
{
    char *o = malloc(strlen(s) + 1), *d = o;
    while (*s) {
        if (s[0] == '\\' && s[1] == '\\') {
            *d++ = '\\';
            s += 2;
        } else if (s[0] == '\\' && s[1] == 'x' && s[2] && s[3]) {
            char h[3] = {s[2], s[3], 0};
            *d++ = (char)strtoul(h, NULL, 16);
            s += 4;
        } else {
            *d++ = *s++;
        }
    }
    *d = '\0';
    return o;
}

Test(report_folded, escape_is_reversible)
{
    /* names with every character the escape touches survive a round trip */
    const char *names[] = {"a;b",       "back\\slash",     "x\\x3b",      "tab\there", "nl\nx",
                           "\xff\xfe;", "ok \xe2\x9c\x93", "\xed\xa0\x80" /* surrogate: invalid */};
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    cr_assert(r);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct ss_frame f = {.kind = SS_FRAME_PSEUDO, .name = names[i]};
        struct ss_stack st = {.pid = 1, .tid = 1, .comm = "t", .nframes = 1, .frames = &f};
        st.pid = (uint32_t)i + 1;
        cr_assert_eq(ss_report_add(r, &st, i + 1, &err), 0);
    }
    char *out = folded_of(r);
    struct fx_lines ls = fx_split(out);
    cr_assert_eq(ls.n, sizeof(names) / sizeof(names[0]), "%s", out);
    for (size_t i = 0; i < ls.n; i++) {
        char *line = ls.l[i];
        for (unsigned char *p = (unsigned char *)line; *p; p++)
            cr_expect(*p >= 0x20 && *p != 0x7f, "control byte in %s", line);
        char *sp = strrchr(line, ' ');
        *sp = '\0';
        size_t count = strtoull(sp + 1, NULL, 10);
        char *semi = strchr(line, ';');
        cr_assert(semi && !strchr(semi + 1, ';'), "extra ';' in %s", line);
        *semi = '\0';
        cr_expect_str_eq(line, "t"); /* comm */
        char *raw = unescape(semi + 1);
        cr_expect_str_eq(raw, names[count - 1], "round trip of line %zu", i);
        free(raw);
    }
    fx_lines_free(&ls);
    free(out);
    ss_report_free(r);
}

Test(report_folded, merges_by_text_and_counts)
{
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    struct ss_frame a = {.kind = SS_FRAME_NATIVE, .name = "f", .module = "/x", .addr = 0x10};
    struct ss_frame b = a;
    b.addr = 0x20; /* other pc, same text */
    struct ss_stack s1 = {.pid = 1, .tid = 1, .comm = "p", .nframes = 1, .frames = &a};
    struct ss_stack s2 = {.pid = 2, .tid = 3, .comm = "p", .nframes = 1, .frames = &b};
    cr_assert_eq(ss_report_add(r, &s1, 5, &err), 0);
    cr_assert_eq(ss_report_add(r, &s2, 7, &err), 0);
    cr_assert_eq(ss_report_add(r, &s2, 0, &err), 0); /* no-op */
    cr_expect_eq(ss_report_nstacks(r), 2);           /* distinct keys ... */
    char *out = folded_of(r);
    cr_expect_str_eq(out, "p;f 12\n"); /* ... one folded line */
    free(out);
    struct ss_stack bad = {.nframes = 2, .frames = NULL};
    cr_expect_eq(ss_report_add(r, &bad, 1, &err), -EINVAL);
    cr_expect(strstr(err.msg, "invalid stack"));
    ss_report_free(r);
}

Test(report_folded, frame_text_api)
{
    struct ss_frame f = {.kind = SS_FRAME_LUA, .name = "leaf", .module = "t.lua", .line = 7};
    char buf[8];
    size_t n = ss_frame_text(&f, buf, sizeof(buf));
    cr_expect_eq(n, strlen("leaf (t.lua:7)"));
    cr_expect_str_eq(buf, "leaf (t");
    char big[64];
    f = (struct ss_frame){.kind = SS_FRAME_NATIVE, .module = "/a/b/libz.so.1", .offset = 0xbeef};
    ss_frame_text(&f, big, sizeof(big));
    cr_expect_str_eq(big, "libz.so.1+0xbeef");
    f = (struct ss_frame){.kind = SS_FRAME_KERNEL, .name = "schedule"};
    ss_frame_text(&f, big, sizeof(big));
    cr_expect_str_eq(big, "schedule_[k]");
    f = (struct ss_frame){.kind = SS_FRAME_LUA, .name = NULL, .module = NULL};
    ss_frame_text(&f, big, sizeof(big));
    cr_expect_str_eq(big, "anonymous");
}

Test(report_folded, many_samples_speed)
{
    /* 100k samples over 2000 distinct 30-frame stacks: aggregation cost */
    struct ss_err err = {0};
    struct ss_report *r = ss_report_new(NULL, &err);
    struct ss_frame fr[30];
    char names[30][32];
    for (int i = 0; i < 30; i++) {
        snprintf(names[i], sizeof(names[i]), "function_%d", i);
        fr[i] = (struct ss_frame){.kind = i % 2 ? SS_FRAME_LUA : SS_FRAME_NATIVE,
                                  .name = names[i],
                                  .module = i % 2 ? "app.lua" : "/usr/lib/libapp.so",
                                  .addr = 0x1000 + i,
                                  .offset = 0x1000 + i,
                                  .line = (uint32_t)i};
    }
    struct ss_stack st = {.pid = 1, .tid = 1, .comm = "app", .nframes = 30, .frames = fr};
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (int i = 0; i < 100000; i++) {
        fr[0].addr = 0x1000 + (uint64_t)(i % 2000);
        cr_assert_eq(ss_report_add(r, &st, 1, &err), 0);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_log_info("report_add: %.0f samples/s of CPU time (%.2f us/sample, 30 frames)", 100000 / s,
                s * 1e6 / 100000);
    cr_expect_eq(ss_report_nstacks(r), 2000);
    cr_expect_eq(ss_report_samples(r), 100000);
    char *out = folded_of(r);
    cr_expect_eq(strchr(out, '\n') + 1 - out, (long)strlen(out), "one merged line");
    free(out);
    ss_report_free(r);
}
