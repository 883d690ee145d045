/* test/cli/secret.c: a target that keeps a secret on its stack, for the
 * tests of `record --no-stack-bytes` (test/cli/nostack.c, issue 31): 32
 * random bytes (getrandom, new every run) in a buffer of main's frame that
 * stays live (its address escapes, it is summed at the end) across a hot
 * loop deeper down the same stack, so every stack snapshot copies it.
 *
 *   cli_secret SECONDS            spin for SECONDS of CPU time in C:
 *                                 main > secret_outer > secret_mid > secret_leaf
 *   cli_secret_lj SECONDS SCRIPT  run the Lua SCRIPT (test/cli/spin.lua: it
 *                                 spins for SECONDS, arg[1]) through libluajit,
 *                                 JIT off, from main
 *
 * Prints "secret HEX" (the 32 bytes) on stdout before it starts. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifdef SECRET_LUA
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#endif

#define NI __attribute__((noinline, noclone, used))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

static volatile unsigned long sink;

#ifndef SECRET_LUA
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NI unsigned long secret_leaf(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++) {
        s += i * i;
        KEEP(s);
    }
    return s;
}

NI unsigned long secret_mid(unsigned long n)
{
    unsigned long s = secret_leaf(n);
    KEEP(s);
    return s + 1;
}

NI unsigned long secret_outer(void)
{
    unsigned long s = secret_mid(20000);
    KEEP(s);
    return s + 1;
}

static int run(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    double end = now() + secs;
    while (now() < end)
        sink += secret_outer();
    return 0;
}
#else
static int run(int argc, char **argv)
{
    if (argc < 3) return 2;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_createtable(L, 1, 0); /* arg[1] = SECONDS, as luajit's */
    lua_pushstring(L, argv[1]);
    lua_rawseti(L, -2, 1);
    lua_setglobal(L, "arg");
    if (luaL_loadfile(L, argv[2]) || lua_pcall(L, 0, 0, 0)) {
        fprintf(stderr, "cli_secret_lj: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    unsigned char secret[32];
    if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret)) return 3;
    __asm__ volatile("" : : "r"(secret) : "memory"); /* in memory, in this frame */
    printf("secret ");
    for (size_t i = 0; i < sizeof(secret); i++)
        printf("%02x", secret[i]);
    printf("\n");
    fflush(stdout);
    int rc = run(argc, argv);
    __asm__ volatile("" : : "r"(secret) : "memory"); /* still there after the loop */
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof(secret); i++)
        sum += secret[i];
    sink += sum;
    return rc;
}
