-- test/luajit/tt_states.lua: C functions and allocation from Lua, for the
-- VM-state pseudo frames of Tarantool's LuaJIT fork (its LFUNC/FFUNC/CFUNC
-- states sit where upstream numbers GC and the trace exit).
local x = 0
local function clocks() for _ = 1, 2000 do x = x + os.clock() end end
local function alloc(n) local t for i = 1, n do t = {i, i + 1, {}} end return #t end
while true do
  clocks()
  alloc(20000)
end
