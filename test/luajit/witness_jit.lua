-- Mixed JIT workload for test_trace.c, profiled by stacksnap and LuaJIT's
-- own profiler (-jp) in the same run: hot loops that compile to traces,
-- an inlined helper, a builtin (string.rep), allocation (GC) and
-- interpreter-only code (a vararg function is not compiled).
local function spin(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function roots(n) local s = 0 for i = 1, n do s = s + math.sqrt(i) end return s end
local function scale(x) return math.sqrt(x) * 1.5 + x % 7 end
local function inl(n) local s = 0 for i = 1, n do s = s + scale(i) end return s end
local function alloc(n) local t for i = 1, n do t = {i, i + 1} end return #t end
local function reps(n) local s = 0 for _ = 1, n do s = s + #string.rep("ab", 300) end return s end
local function vsum(...) local s = 0 for i = 1, select("#", ...) do s = s + select(i, ...) end return s end
local function interp(n) local s = 0 for i = 1, n do s = s + vsum(i, 2, 3) end return s end
local T = tonumber(arg and arg[1]) or 3
local t0 = os.clock()
while os.clock() - t0 < T do
  spin(3000000)
  roots(2000000)
  inl(3000000)
  alloc(150000)
  reps(20000)
  interp(100000)
end
