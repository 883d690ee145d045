/* test/reliability/hostile_lib.c: the library a hostile target maps and then
 * swaps on disk. Built twice: RL_FN = rl_alpha_spin (mapped) and
 * rl_beta_evil (the file put in its place): the same code at the same
 * offsets, so only the symbol names tell which file the profiler read. */
#ifndef RL_FN
#error RL_FN must name the function
#endif

static volatile unsigned long sink;

__attribute__((noinline)) static void inner(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink += i * 7 % 13;
}

__attribute__((visibility("default"))) void RL_FN(unsigned long n)
{
    inner(n);
    sink++;
}
