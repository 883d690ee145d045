/* test/cli/execloop.c: a process that starts short programs one after the
 * other, the shape of a shell loop or a process supervisor (issue 19's
 * churn). Built -O2 without frame pointers or sanitizers.
 *
 *   cli_execloop SECONDS PROGRAM [ARGS...]
 *
 * For SECONDS of wall time: fork; the child calls el_spawn, which execs
 * PROGRAM; the parent waits for it. Samples the kernel takes inside the
 * child's execve (after it switched the memory map) belong to
 * main > el_loop > el_spawn > execv. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NI __attribute__((noinline, noclone, used))

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NI void el_spawn(char **argv)
{
    execv(argv[0], argv);
    _exit(127);
}

NI int el_loop(double secs, char **argv)
{
    int n = 0;
    for (double end = now() + secs; now() < end; n++) {
        pid_t p = fork();
        if (p == 0) el_spawn(argv);
        if (p < 0 || waitpid(p, NULL, 0) < 0) return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cli_execloop SECONDS PROGRAM [ARGS...]\n");
        return 2;
    }
    int n = el_loop(atof(argv[1]), argv + 2);
    printf("%d execs\n", n);
    return n > 0 ? 0 : 1;
}
