/* test/capture/workload.c: the process the capture tests sample.
 *
 *   capture_workload deep     spin in ss_spin below ~70 KiB of frames (main thread)
 *   capture_workload main     spin in ss_spin called from main (shallow
 *                             main thread: partial copies at 16 KiB)
 *   capture_workload syscall  same as deep, but spin in read(/dev/zero) (kernel mode)
 *   capture_workload top [N]  a thread spinning N KiB (default 0: ~100 bytes)
 *                             below the top of a small mmap'd stack with a
 *                             PROT_NONE page, then readable memory, above;
 *                             "open" on stdin makes that page readable
 *   capture_workload fork     print own line, wait for "go" on stdin, fork a
 *                             child that runs "deep", wait for it
 *
 * The spinning frame keeps SS_PATTERN in a volatile local array; the ready
 * line (pattern.h) tells the test where it is. Built -O2, no sanitizers. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "pattern.h"

static volatile int forever = 1;
static uintptr_t top_end; /* end of the readable stack, 0 if not known */
static int top_depth;
static int zero_fd = -1;
static char zero_buf[1 << 16];

static void publish(void *fn, volatile unsigned char *pat)
{
    const ElfW(Sym) *sym = NULL;
    Dl_info di;

    if (!dladdr1(fn, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym || !di.dli_saddr) {
        fprintf(stderr, "workload: no dynamic symbol for %p (link with -rdynamic)\n", fn);
        exit(1);
    }
    printf(SS_READY_FMT "\n", getpid(), gettid(), (unsigned long)di.dli_saddr,
           (unsigned long)sym->st_size, (unsigned long)pat, (unsigned long)top_end);
    fflush(stdout);
}

__attribute__((noinline, noclone)) void ss_spin(void)
{
    volatile unsigned char pat[SS_PATTERN_LEN];

    for (int i = 0; i < SS_PATTERN_LEN; i++)
        pat[i] = (unsigned char)SS_PATTERN[i];
    publish((void *)ss_spin, pat);
    while (forever)
        pat[0] = (unsigned char)SS_PATTERN[0];
}

__attribute__((noinline, noclone)) void ss_spin_syscall(void)
{
    volatile unsigned char pat[SS_PATTERN_LEN];

    for (int i = 0; i < SS_PATTERN_LEN; i++)
        pat[i] = (unsigned char)SS_PATTERN[i];
    publish((void *)ss_spin_syscall, pat);
    while (forever)
        if (read(zero_fd, zero_buf, sizeof(zero_buf)) < 0) exit(1);
}

/* ~1 KiB per level, so snapshots of up to 64 KiB are full copies. */
__attribute__((noinline, noclone)) void ss_descend(int n, void (*leaf)(void))
{
    volatile char pad[1000];

    pad[0] = (char)n;
    if (n > 0)
        ss_descend(n - 1, leaf);
    else
        leaf();
    pad[1] = pad[0];
}

#define TOP_STACK (96 * 1024)

static void top_entry(void)
{
    if (top_depth > 0)
        ss_descend(top_depth - 1, ss_spin);
    else
        ss_spin();
}

/* Run ss_spin on [base, base + TOP_STACK) with a PROT_NONE page right
 * above and 64 KiB of readable (touched) memory above that: the readable
 * prefix ends at the guard although more is readable further up. */
static void *top_thread(void *arg)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t above = 64 * 1024;
    char *base = mmap(NULL, TOP_STACK + page + above, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ucontext_t here, there;

    (void)arg;
    if (base == MAP_FAILED || mprotect(base + TOP_STACK, page, PROT_NONE)) exit(1);
    memset(base + TOP_STACK + page, 0x5a, above);
    top_end = (uintptr_t)base + TOP_STACK;
    getcontext(&there);
    there.uc_stack.ss_sp = base;
    there.uc_stack.ss_size = TOP_STACK;
    there.uc_link = NULL;
    makecontext(&there, top_entry, 0);
    swapcontext(&here, &there);
    return NULL;
}

/* Die with the parent: a failed test must not leave spinning workloads. */
static void die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "deep";

    die_with_parent(getppid());

    if (!strcmp(mode, "deep")) {
        ss_descend(70, ss_spin);
    } else if (!strcmp(mode, "main")) {
        ss_spin(); /* a shallow main thread: the copy ends at its stack's end */
    } else if (!strcmp(mode, "syscall")) {
        zero_fd = open("/dev/zero", O_RDONLY);
        if (zero_fd < 0) return 1;
        ss_descend(70, ss_spin_syscall);
    } else if (!strcmp(mode, "top")) {
        pthread_t t;
        top_depth = argc > 2 ? atoi(argv[2]) : 0;
        char line[16];
        if (pthread_create(&t, NULL, top_thread, NULL)) return 1;
        /* "open": make the guard page above the stack readable (and touch
         * it), so the readable prefix runs on into the memory above; "map":
         * map and unmap a page elsewhere. Each answered by a ready line
         * whose top is 0. */
        while (fgets(line, sizeof(line), stdin)) {
            long page = sysconf(_SC_PAGESIZE);
            if (!strncmp(line, "open", 4) && top_end) {
                if (mprotect((void *)top_end, page, PROT_READ | PROT_WRITE)) return 1;
                memset((void *)top_end, 0x5a, page);
            } else if (!strncmp(line, "map", 3)) { /* change the map elsewhere */
                void *p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED || munmap(p, page)) return 1;
            } else {
                continue;
            }
            printf(SS_READY_FMT "\n", getpid(), gettid(), 0ul, 0ul, 0ul, 0ul);
            fflush(stdout);
        }
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "fork")) {
        char line[16];
        int st;
        printf(SS_READY_FMT "\n", getpid(), gettid(), 0ul, 0ul, 0ul, 0ul);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin)) return 1;
        pid_t parent = getpid(), child = fork();
        if (child == 0) {
            die_with_parent(parent);
            ss_descend(70, ss_spin);
            _exit(0);
        }
        if (child < 0 || waitpid(child, &st, 0) < 0) return 1;
    } else {
        fprintf(stderr, "usage: capture_workload deep|main|syscall|top|fork\n");
        return 2;
    }
    return 0;
}
