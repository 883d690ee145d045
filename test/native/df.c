/* test/native/df.c: a function whose CFI lives only in .debug_frame (built
 * with -fno-asynchronous-unwind-tables -g), in the middle of a chain. */
int nw_spin(int x);

__attribute__((noinline, noclone)) int df_middle(int x)
{
    int r = nw_spin(x + 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}
