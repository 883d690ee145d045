/* test/cli/nocfi.c: workloads that spend their time in code without CFI,
 * beneath a known C call chain (main > nocfi_outer > nocfi_middle >
 * nocfi_inner, noinline, built without frame pointers), for the stack scan
 * of src/unwind/native_scan.c (issue 32).
 *   nocfi pcre SECONDS       PCRE2's JIT (sljit code in anonymous memory),
 *                            on the machine stack (pcre2_match's default:
 *                            32 KiB of locals in jit_machine_stack_exec, most
 *                            of whose pages are never touched: the
 *                            kernel-side copy goes on past them, bpf/pages.h)
 *   nocfi pcrestack SECONDS  the same with a JIT stack assigned
 *   nocfi rwx SECONDS        a hand-written x86-64 or arm64 function in RWX
 *                            memory that spins, clobbers rbp / x29 and calls
 *                            back into C
 *   nocfi rwxmap SECONDS     the same, named in /tmp/perf-PID.map
 * Prints "ready" when the hot loop starts. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile long sink;
static double t_end;

/* ---- PCRE2 JIT ---- */
static pcre2_code *re;
static pcre2_match_data *md;
static pcre2_match_context *mctx;
static char subject[8192];

__attribute__((noinline)) static long pcre_work(void)
{
    long hits = 0;
    for (int i = 0; i < 50; i++)
        hits += pcre2_match(re, (PCRE2_SPTR)subject, sizeof(subject) - 1, 0, 0, md, mctx) > 0;
    return hits;
}

/* ---- hand-written JIT code ----
 * x86-64:
 *   push rbp; push rbx; sub rsp, 0x28
 *   mov rbx, rdi; mov [rsp+8], rsi; mov rbp, rdi      (rbp: no frame pointer)
 * 1: mov ecx, 20000; 2: dec rcx; jnz 2b
 *   call [rsp+8]; dec rbx; jnz 1b
 *   add rsp, 0x28; pop rbx; pop rbp; ret */
#if defined(__aarch64__)
/* arm64 (words): a frame record, then x29 clobbered (no frame pointer)
 *   stp x29, x30, [sp, #-48]!; stp x19, x20, [sp, #16]
 *   mov x19, x0; mov x20, x1; mov x29, x0
 * 1: mov x9, #20000; 2: subs x9, x9, #1; b.ne 2b
 *   blr x20; subs x19, x19, #1; b.ne 1b
 *   ldp x19, x20, [sp, #16]; ldp x29, x30, [sp], #48; ret */
static const uint32_t jit_fn[] = {
    0xa9bd7bfd, 0xa90153f3, 0xaa0003f3, 0xaa0103f4, 0xaa0003fd, 0xd289c409, 0xf1000529,
    0x54ffffe1, 0xd63f0280, 0xf1000673, 0x54ffff61, 0xa94153f3, 0xa8c37bfd, 0xd65f03c0,
};
#else
static const uint8_t jit_fn[] = {
    0x55, 0x53, 0x48, 0x83, 0xec, 0x28,             /* prologue */
    0x48, 0x89, 0xfb, 0x48, 0x89, 0x74, 0x24, 0x08, /* mov rbx, rdi; mov [rsp+8], rsi */
    0x48, 0x89, 0xfd,                               /* mov rbp, rdi */
    0xb9, 0x20, 0x4e, 0x00, 0x00,                   /* 1: mov ecx, 20000 */
    0x48, 0xff, 0xc9, 0x75, 0xfb,                   /* 2: dec rcx; jnz 2b */
    0xff, 0x54, 0x24, 0x08,                         /* call [rsp+8] */
    0x48, 0xff, 0xcb, 0x75, 0xed,                   /* dec rbx; jnz 1b */
    0x48, 0x83, 0xc4, 0x28, 0x5b, 0x5d, 0xc3,       /* epilogue */
};
#endif
static long (*jit_call)(long, void (*)(void));

__attribute__((noinline)) void nocfi_callback(void)
{
    for (int i = 0; i < 2000; i++)
        sink += i;
}

__attribute__((noinline)) static long rwx_work(void)
{
    return jit_call(20, nocfi_callback);
}

/* ---- the chain ---- */
static int use_pcre;

__attribute__((noinline)) void nocfi_inner(void)
{
    while (now() < t_end)
        sink += use_pcre ? pcre_work() : rwx_work();
}
__attribute__((noinline)) void nocfi_middle(void)
{
    nocfi_inner();
    sink++;
}
__attribute__((noinline)) void nocfi_outer(void)
{
    nocfi_middle();
    sink++;
}

static int setup_pcre(int with_stack)
{
    int err;
    PCRE2_SIZE eo;
    re = pcre2_compile((PCRE2_SPTR) "(?:a|b)*c[0-9]+x", PCRE2_ZERO_TERMINATED, 0, &err, &eo, NULL);
    if (!re || pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) != 0) return -1;
    md = pcre2_match_data_create_from_pattern(re, NULL);
    memset(subject, 'a', sizeof(subject) - 1);
    if (with_stack) {
        pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 512 * 1024, NULL);
        mctx = pcre2_match_context_create(NULL);
        if (!js || !mctx) return -1;
        pcre2_jit_stack_assign(mctx, NULL, js);
    }
    return md ? 0 : -1;
}

static int setup_rwx(int map)
{
    void *m =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    memcpy(m, jit_fn, sizeof(jit_fn));
    __builtin___clear_cache((char *)m, (char *)m + sizeof(jit_fn));
    jit_call = (long (*)(long, void (*)(void)))m;
    if (map) {
        char path[64];
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
        FILE *f = fopen(path, "w");
        if (!f) return -1;
        fprintf(f, "%lx %zx nocfi_jit_spin\n", (unsigned long)(uintptr_t)m, sizeof(jit_fn));
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nocfi pcre|pcrestack|rwx|rwxmap SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    int r = -1;
    use_pcre = !strncmp(mode, "pcre", 4);
    if (!strcmp(mode, "pcre") || !strcmp(mode, "pcrestack"))
        r = setup_pcre(!strcmp(mode, "pcrestack"));
    else if (!strcmp(mode, "rwx") || !strcmp(mode, "rwxmap"))
        r = setup_rwx(!strcmp(mode, "rwxmap"));
    if (r < 0) {
        fprintf(stderr, "nocfi: cannot set up '%s'\n", mode);
        return 1;
    }
    puts("ready");
    fflush(stdout);
    t_end = now() + atof(argv[2]);
    nocfi_outer();
    if (!strcmp(mode, "rwxmap")) {
        char path[64];
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
        unlink(path);
    }
    return 0;
}
