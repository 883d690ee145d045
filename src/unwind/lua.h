/* unwind/lua.h: the LuaJIT adapter of the walk (lua.c): the hook through
 * which walk.c finds the VM frames under LuaJIT's interpreter and trace
 * code and splices the Lua frames they run in among the native ones. The
 * runtimes it walks are lua_runtimes.h's. */
#ifndef SS_UNWIND_LUA_H
#define SS_UNWIND_LUA_H

#include "unwind/frame_hook.h"

extern const struct ss_frame_hook ss_lua_hook;

#endif
