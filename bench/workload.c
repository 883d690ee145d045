/* bench/workload.c: the CPU-bound C workload of the bench (bench/run).
 *
 *   bench_native[_fp] ITER [UNITS]
 *
 * ITER times: descend main > bn_run > bn_d40 x37 > bn_leaf (40 frames), and
 * spin in bn_leaf for UNITS rounds of an LCG (default 200000, ~0.4 ms), then
 * return all the way up. ITER 0 runs until killed. At the end it prints
 * "elapsed SECONDS cpu SECONDS" (wall and CPU time of the work only) on
 * stdout, so profiler start-up never counts as slowdown.
 *
 * Built twice by bench/bench.cmake: -fomit-frame-pointer (bench_native, the
 * subject) and -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
 * plus BN_FP (bench_native_fp, for the in-kernel frame-pointer comparator). Every
 * function is noinline and works after its call, so no call becomes a jump. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NI __attribute__((noinline, noclone, used))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

#define BN_DEPTH 37 /* bn_d40 frames: main + bn_run + 37 + bn_leaf = 40 */

static unsigned long bn_units = 200000;

NI unsigned long bn_leaf(unsigned long x)
{
#ifdef BN_FP /* GCC 12 ignores -mno-omit-leaf-frame-pointer: ask for the frame */
    void *fa = __builtin_frame_address(0);
    KEEP(fa);
#endif
    for (unsigned long i = 0; i < bn_units; i++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        KEEP(x);
    }
    return x;
}

NI unsigned long bn_d40(int n, unsigned long x)
{
    unsigned long r = n > 1 ? bn_d40(n - 1, x) : bn_leaf(x);
    KEEP(r);
    return r + 1;
}

NI unsigned long bn_run(long iter)
{
    unsigned long x = 1;
    for (long i = 0; iter == 0 || i < iter; i++) {
        x = bn_d40(BN_DEPTH, x);
        KEEP(x);
    }
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s ITER [UNITS]\n", argv[0]);
        return 2;
    }
    long iter = atol(argv[1]);
    if (argc > 2) bn_units = strtoul(argv[2], NULL, 10);
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    unsigned long x = bn_run(iter);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    KEEP(x);
    printf("elapsed %.6f cpu %.6f\n",
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
           (double)(cb.tv_sec - ca.tv_sec) + (double)(cb.tv_nsec - ca.tv_nsec) / 1e9);
    return (int)(x & 0);
}
