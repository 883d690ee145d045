/* test/native/dl_lib.c: libnative_dl.so, dlopen()ed by the workload in the
 * middle of its chain: dl_outer > dl_inner > callback into the executable. */
typedef int (*nw_cb_fn)(int);

__attribute__((noinline, noclone, visibility("hidden"))) int dl_inner(nw_cb_fn cb, int x)
{
    int r = cb(x * 2);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

__attribute__((noinline, noclone)) int dl_outer(nw_cb_fn cb, int x)
{
    int r = dl_inner(cb, x + 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}
