-- Mixed workload for the witness test (test_witness.c): Lua functions of
-- different cost on different call paths, a builtin (string.rep) and a
-- coroutine. Runs for arg[1] seconds (os.clock) under LuaJIT's own profiler.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function alpha(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function beta(n) local t = {} for i = 1, n do t[i % 64 + 1] = i end return #t end
local function gamma(n) local r = alpha(n) + spin(n) return r end
local function reps(n) local s = string.rep("ab", n) return #s end
local function viaco(n)
  local co = coroutine.wrap(function() local r = spin(n) coroutine.yield(r) end)
  return co()
end
local T = tonumber(arg and arg[1]) or 3
local t0 = os.clock()
while os.clock() - t0 < T do
  spin(3000000)
  alpha(4500000)
  beta(1500000)
  gamma(1500000)
  reps(2000000)
  viaco(1500000)
end
