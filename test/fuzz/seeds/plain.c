/* test/fuzz/seeds/plain.c: a small shared object with calls several levels
 * deep, a signal-handler-like leaf and a recursive function: seed for
 * elf_fuzz (compiled with .eh_frame, with .debug_frame only, stripped). */
#include <signal.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) int leaf(int x)
{
    char buf[64];
    memset(buf, x, sizeof(buf));
    sink += buf[x & 63];
    return sink;
}

__attribute__((noinline)) int recurse(int n)
{
    if (n <= 0) return leaf(n);
    return recurse(n - 1) + 1;
}

__attribute__((noinline)) int middle(int a, int b)
{
    int v[16];
    for (int i = 0; i < 16; i++)
        v[i] = recurse(a + i) * b;
    return v[a & 15];
}

static void handler(int sig)
{
    sink += sig;
}

int entry(int a)
{
    signal(SIGUSR1, handler);
    return middle(a, a + 1);
}
