/* test/cli/jitmap.c: a JIT-like workload for perf maps (issue 16). It puts
 * two copies of a counting loop into anonymous executable memory, names the
 * first in /tmp/perf-PID.map, spins in it for half the time, then appends
 * the second's line and spins there; the map file is deleted at the end, so
 * a replay can only name them from the capture.
 *   jitmap SECONDS    prints "ready" first */
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

static void name(const char *path, const char *mode, const void *at, size_t len, const char *n)
{
    FILE *f = fopen(path, mode);
    if (!f) exit(1);
    fprintf(f, "%lx %zx %s\n", (unsigned long)(uintptr_t)at, len, n);
    fclose(f);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1;
    /* mov rax, rdi; 1: dec rax; jnz 1b; ret */
    static const uint8_t loop[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE | PROT_EXEC,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    memcpy(m, loop, sizeof(loop));
    memcpy(m + pg, loop, sizeof(loop));
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    name(path, "w", m, sizeof(loop), "jit_alpha_loop");
    long (*fa)(long) = (long (*)(long))(void *)m, (*fb)(long) = (long (*)(long))(void *)(m + pg);
    puts("ready");
    fflush(stdout);
    double t0 = now();
    volatile long sink = 0;
    while (now() < t0 + secs / 2)
        sink += fa(200000);
    name(path, "a", m + pg, sizeof(loop), "jit_beta_loop");
    while (now() < t0 + secs)
        sink += fb(200000);
    unlink(path);
    return 0;
}
