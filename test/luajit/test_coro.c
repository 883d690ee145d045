/* test/luajit/test_coro.c: coroutines and FFI callbacks, recorded with real
 * BPF and unwound live (ljrec.h), on Debian's luajit (JIT off):
 *  - producer/consumer (co.lua): a sample in a coroutine shows the
 *    coroutine's frames on top of the chain that resumed it
 *    (coroutine.resume / coroutine.wrap in the resumer, also a coroutine
 *    resumed inside another one), exactly, with lines;
 *  - FFI callback (ffi_cb.lua): Lua -> ffi.C.qsort -> libc -> Lua
 *    comparator: the caller's Lua frames, libc's native frames and the
 *    callback's Lua frames in order.
 * The build matrix (test_matrix.c) runs the same cases on every build. */
#include <criterion/criterion.h>

#include "ljcheck.h"

#define DIR SS_SOURCE_DIR "/test/luajit/"

Test(luajit_coro, producer_consumer_resume_chain)
{
    static struct ljc c;
    ljc_case_coro(&c, DIR "co.lua");
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "co.lua", NULL};
    ljc_run("debian luajit co.lua", argv, NULL, 2.5, &c);
}

Test(luajit_coro, ffi_callback_through_qsort)
{
    static struct ljc c;
    ljc_case_ffi(&c, DIR "ffi_cb.lua");
    char *argv[] = {"/usr/bin/luajit", "-joff", DIR "ffi_cb.lua", NULL};
    ljc_run("debian luajit ffi_cb.lua", argv, NULL, 2.5, &c);
}
