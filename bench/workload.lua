local function leaf(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function rec(d, n) local s if d == 0 then s = leaf(n) else s = rec(d - 1, n) end return s + 1 end
-- bench/workload.lua: the LuaJIT workload of the bench (bench/run).
--   luajit [-joff] workload.lua ITER [UNITS]
-- ITER times: main chunk > rec x19 > leaf (21 Lua frames), leaf loops UNITS
-- times (default 100000); ITER 0 runs until killed. Prints "elapsed SECONDS
-- cpu SECONDS" (wall and CPU time of the work only). Every function sits on
-- one line, so a frame's current line is its first line: leaf is line 1, rec
-- line 2, the main chunk calls from line 19. The bench checks Lua frames
-- against exactly that.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long sec, nsec; } bench_ts;
int clock_gettime(int clk, bench_ts *ts);
]]
local ts = ffi.new("bench_ts")
local function now() ffi.C.clock_gettime(1, ts) return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9 end
local iter, units = tonumber(arg[1]) or 0, tonumber(arg[2]) or 100000
local t0, c0, x, i = now(), os.clock(), 0, 0
while iter == 0 or i < iter do x = x + rec(18, units) i = i + 1 end
io.write(string.format("elapsed %.6f cpu %.6f\n", now() - t0, os.clock() - c0))
