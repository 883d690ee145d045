/* test/cli/native.c: the native-only workload of the CLI tests. Built -O2
 * -fomit-frame-pointer without sanitizers (cli_native, and cli_native_alt:
 * the same code with another build-id).
 *
 *   cli_native SECONDS [EXIT]   spin for SECONDS of CPU time (so a loaded
 *                               machine gives as many samples) in main > cli_outer >
 *                               cli_mid > cli_leaf (and a libc qsort
 *                               comparator chain), then exit with EXIT
 *
 * SECONDS 0 spins until killed. Prints "ready PID" when it starts spinning. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NI __attribute__((noinline, noclone, used))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

#ifdef CLI_ALT
const char cli_variant[] = "alt"; /* a different build-id */
#else
const char cli_variant[] = "main";
#endif

static volatile unsigned long sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NI unsigned long cli_leaf(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++) {
        s += i * i;
        KEEP(s);
    }
    return s;
}

NI unsigned long cli_mid(unsigned long n)
{
    unsigned long s = cli_leaf(n);
    KEEP(s);
    return s + 1;
}

NI int cli_cmp(const void *a, const void *b)
{
    sink += cli_leaf(200);
    return *(const int *)a - *(const int *)b;
}

NI unsigned long cli_sort(void)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 7919) % 64;
    qsort(v, 64, sizeof(v[0]), cli_cmp);
    return (unsigned long)v[0];
}

NI unsigned long cli_outer(int round)
{
    unsigned long s = (round % 4) ? cli_mid(20000) : cli_sort();
    KEEP(s);
    return s + 1;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int code = argc > 2 ? atoi(argv[2]) : 0;
    printf("ready %d %s\n", (int)getpid(), cli_variant);
    fflush(stdout);
    double end = now() + secs;
    for (int round = 0; secs <= 0 || now() < end; round++)
        sink += cli_outer(round);
    return code;
}
