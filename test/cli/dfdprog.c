/* test/cli/dfdprog.c: the workload of cli_debuginfod — two named loops that
 * a fully stripped copy of this program can only name from its debug file,
 * served by a debuginfod server. Usage: dfdprog SECONDS (of CPU time: a
 * loaded machine gives as many samples). */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void dfd_alpha_spin(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink += i * 7;
}

__attribute__((noinline)) static void dfd_beta_spin(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink ^= i * 13;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do {
        dfd_alpha_spin(200000);
        dfd_beta_spin(200000);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9 < secs);
    return 0;
}
