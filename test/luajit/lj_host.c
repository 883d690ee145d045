/* test/luajit/lj_host.c: a C host embedding libluajit-5.1 (JIT off, or on
 * with LJ_HOST_JIT=1 in the environment). Runs
 * a script (lj_host SCRIPT [ARGS...], ARGS in arg[1..]) through lua_pcall and offers it
 * host.ccall(f) (C calls back into Lua with lua_call) and host.cspin(n) (spins in C, a leaf C
 * function). */
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

static __attribute__((noinline)) int l_ccall(lua_State *L)
{
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    return 1;
}

static __attribute__((noinline)) int l_cspin(lua_State *L)
{
    long n = (long)luaL_checknumber(L, 1);
    double s = 0;
    for (long i = 0; i < n; i++)
        s += (double)(i % 7);
    sink = s;
    lua_pushnumber(L, s);
    return 1;
}

static const luaL_Reg hostlib[] = {{"ccall", l_ccall}, {"cspin", l_cspin}, {NULL, NULL}};

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    const char *jit = getenv("LJ_HOST_JIT");
    if (!jit || jit[0] != '1') luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    luaL_register(L, "host", hostlib);
    lua_pop(L, 1);
    lua_createtable(L, argc, 0); /* arg[1..]: the script's arguments, as luajit's */
    for (int i = 2; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - 1);
    }
    lua_setglobal(L, "arg");
    if (luaL_loadfile(L, argv[1]) || lua_pcall(L, 0, 0, 0)) {
        fprintf(stderr, "lj_host: %s\n", lua_tostring(L, -1));
        return 1;
    }
    return 0;
}
