/* test/native/workload.c: processes whose stacks the native unwinding tests
 * know exactly. Built -O2 -fomit-frame-pointer twice (PIE and non-PIE).
 *
 *   native_workload MODE
 *     recurse  main > run_recurse > rec x201 > nw_spin
 *     deep40   main > run_deep40 > d40 x34 > nw_spin: 40 frames (bench)
 *     qsort    main > run_qsort > qsort (libc) > nw_cmp > nw_spin
 *     signal   main > run_signal > sig_outer > sig_inner, interrupted by
 *              SIGALRM: nw_handler > nw_spin above __restore_rt
 *     sigsys   the same handler, interrupting write(2) blocked on a full pipe
 *              inside fwrite: ... __restore_rt > libc write path > sys_writer
 *     dlopen   spins in pre_spin, then dlopen()s libnative_dl.so:
 *              main > run_dlopen > dl_outer > dl_inner (library) > nw_cb > nw_spin
 *     threads  four threads, thread k: start_thread > tk_entry > chain of k+1
 *              tk_* functions > nw_spin; main waits in pthread_join
 *     dframe   main > run_dframe > df_middle (CFI only in .debug_frame) > nw_spin
 *     vdso     main > run_vdso > vdso_loop > clock_gettime (libc) > vdso code
 *     jit      main > run_jit > generated code in an anonymous mapping (no CFI,
 *              frame pointer) > nw_spin
 *     exec     spins in pre_spin for 0.3 s, then exec()s itself as "recurse"
 *
 * Prints "ready PID" once it is spinning. Every function on the expected
 * chains is noinline and does work after its call so that no call becomes a
 * jump. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NI __attribute__((noinline, noclone, used))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

volatile int nw_forever = 1;
volatile unsigned long nw_counter;

NI int nw_spin(int x)
{
    while (nw_forever)
        nw_counter++;
    return x + (int)nw_counter;
}

static void ready(void)
{
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
}

NI int pre_spin(void);

/* ---- recursion ---- */
NI int rec(int n)
{
    int r = n ? rec(n - 1) : nw_spin(n);
    KEEP(r);
    return r + 1;
}

NI int run_recurse(void)
{
    ready();
    int r = rec(200);
    KEEP(r);
    return r;
}

NI int d40(int n)
{
    int r = n ? d40(n - 1) : nw_spin(n);
    KEEP(r);
    return r + 1;
}

NI int run_deep40(void)
{
    ready();
    int r = d40(33);
    KEEP(r);
    return r;
}

/* ---- qsort callback ---- */
NI int nw_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    int r = nw_spin(x - y);
    KEEP(r);
    return r > 0 ? 1 : r < 0 ? -1 : 0;
}

NI int run_qsort(void)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    ready();
    qsort(v, 64, sizeof(int), nw_cmp);
    int r = v[0];
    KEEP(r);
    return r;
}

/* ---- signal ---- */
NI void nw_handler(int sig)
{
    int r = nw_spin(sig);
    KEEP(r);
    nw_counter += r;
}

volatile int sig_seen;

NI int sig_inner(int n)
{
    unsigned long x = (unsigned long)n;
    while (nw_forever) { /* interrupted here: no call in this loop */
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        __asm__ volatile("" : "+r"(x));
    }
    return (int)x;
}

NI int sig_outer(int n)
{
    int r = sig_inner(n + 1);
    KEEP(r);
    return r + 1;
}

NI int run_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = nw_handler;
    sigaction(SIGALRM, &sa, NULL);
    ready();
    struct itimerval it = {.it_value = {.tv_usec = 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    int r = sig_outer(1);
    KEEP(r);
    return r;
}

/* signal delivered while blocked in write(2) inside stdio */
NI int sys_writer(FILE *f)
{
    static char big[1 << 18];
    memset(big, 'x', sizeof(big));
    size_t r = fwrite(big, 1, sizeof(big), f); /* the pipe is full: blocks */
    r += (size_t)fflush(f);
    KEEP(r);
    return (int)r;
}

NI int run_sigsys(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = nw_handler;
    sigaction(SIGALRM, &sa, NULL);
    int p[2];
    if (pipe(p)) exit(1);
    FILE *f = fdopen(p[1], "w");
    ready();
    struct itimerval it = {.it_value = {.tv_usec = 100000}};
    setitimer(ITIMER_REAL, &it, NULL);
    int r = sys_writer(f);
    KEEP(r);
    return r;
}

/* ---- vdso ---- */
NI int vdso_loop(void)
{
    struct timespec ts;
    long sum = 0;
    while (nw_forever) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sum += ts.tv_nsec;
    }
    return (int)sum;
}

NI int run_vdso(void)
{
    ready();
    int r = vdso_loop();
    KEEP(r);
    return r;
}

/* ---- generated code without CFI, with a frame pointer ---- */
NI int run_jit(void)
{
    /* push %rbp; mov %rsp,%rbp; mov %edi,%eax... : call *%rsi (nw_spin) with
     * edi = 7; pop %rbp; ret */
    static const unsigned char code[] = {
        0x55,                         /* push %rbp */
        0x48, 0x89, 0xe5,             /* mov %rsp,%rbp */
        0xbf, 0x07, 0x00, 0x00, 0x00, /* mov $7,%edi */
        0xff, 0xd6,                   /* call *%rsi */
        0x5d,                         /* pop %rbp */
        0xc3,                         /* ret */
    };
    void *mem =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) exit(1);
    memcpy(mem, code, sizeof(code));
    int (*jit)(int, int (*)(int)) = (int (*)(int, int (*)(int)))mem;
    ready();
    int r = jit(0, nw_spin);
    KEEP(r);
    return r;
}

/* ---- exec: spin elsewhere, then become "recurse" ---- */
NI int run_exec(const char *self)
{
    ready();
    pre_spin();
    execl(self, self, "recurse", (char *)NULL);
    return 1;
}

/* ---- dlopen ---- */
NI int nw_cb(int x)
{
    int r = nw_spin(x);
    KEEP(r);
    return r + 1;
}

NI int pre_spin(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 10000; i++)
            nw_counter++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000l + (t.tv_nsec - t0.tv_nsec) < 300000000l);
    return (int)nw_counter;
}

NI int run_dlopen(const char *self)
{
    ready();
    pre_spin(); /* sampled before the library exists */
    char path[4096];
    snprintf(path, sizeof(path), "%s", self);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof(path) - (slash ? slash + 1 - path : 0),
             "libnative_dl.so");
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    int (*outer)(int (*)(int), int) = (int (*)(int (*)(int), int))dlsym(h, "dl_outer");
    int r = outer(nw_cb, 3);
    KEEP(r);
    return r;
}

/* ---- threads ---- */
NI int t0_a(int x)
{
    int r = nw_spin(x);
    KEEP(r);
    return r + 1;
}
NI int t1_b(int x)
{
    int r = nw_spin(x);
    KEEP(r);
    return r + 1;
}
NI int t1_a(int x)
{
    int r = t1_b(x);
    KEEP(r);
    return r + 1;
}
NI int t2_c(int x)
{
    int r = nw_spin(x);
    KEEP(r);
    return r + 1;
}
NI int t2_b(int x)
{
    int r = t2_c(x);
    KEEP(r);
    return r + 1;
}
NI int t2_a(int x)
{
    int r = t2_b(x);
    KEEP(r);
    return r + 1;
}
NI int t3_d(int x)
{
    int r = nw_spin(x);
    KEEP(r);
    return r + 1;
}
NI int t3_c(int x)
{
    int r = t3_d(x);
    KEEP(r);
    return r + 1;
}
NI int t3_b(int x)
{
    int r = t3_c(x);
    KEEP(r);
    return r + 1;
}
NI int t3_a(int x)
{
    int r = t3_b(x);
    KEEP(r);
    return r + 1;
}
NI void *t0_entry(void *p)
{
    long r = t0_a((int)(long)p);
    KEEP(r);
    return (void *)r;
}
NI void *t1_entry(void *p)
{
    long r = t1_a((int)(long)p);
    KEEP(r);
    return (void *)r;
}
NI void *t2_entry(void *p)
{
    long r = t2_a((int)(long)p);
    KEEP(r);
    return (void *)r;
}
NI void *t3_entry(void *p)
{
    long r = t3_a((int)(long)p);
    KEEP(r);
    return (void *)r;
}

NI int run_threads(void)
{
    void *(*fn[4])(void *) = {t0_entry, t1_entry, t2_entry, t3_entry};
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, fn[i], (void *)i);
    ready();
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* ---- .debug_frame only ---- */
int df_middle(int x); /* df.c, built without .eh_frame */

NI int run_dframe(void)
{
    ready();
    int r = df_middle(5);
    KEEP(r);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(
            stderr,
            "usage: %s recurse|deep40|qsort|signal|sigsys|dlopen|threads|dframe|vdso|jit|exec\n",
            argv[0]);
        return 2;
    }
    const char *m = argv[1];
    int r;
    if (!strcmp(m, "recurse"))
        r = run_recurse();
    else if (!strcmp(m, "deep40"))
        r = run_deep40();
    else if (!strcmp(m, "qsort"))
        r = run_qsort();
    else if (!strcmp(m, "signal"))
        r = run_signal();
    else if (!strcmp(m, "sigsys"))
        r = run_sigsys();
    else if (!strcmp(m, "dlopen"))
        r = run_dlopen(argv[0]);
    else if (!strcmp(m, "threads"))
        r = run_threads();
    else if (!strcmp(m, "dframe"))
        r = run_dframe();
    else if (!strcmp(m, "vdso"))
        r = run_vdso();
    else if (!strcmp(m, "jit"))
        r = run_jit();
    else if (!strcmp(m, "exec"))
        r = run_exec(argv[0]);
    else
        return 2;
    KEEP(r);
    return r & 1;
}
