-- test/vm/coro.lua SECONDS: a coroutine for the arm64 VM
-- (test/vm/arm64-guest.sh): main > outer > the wrap function > produce >
-- leaf, leaf's loop a trace on the coroutine's stack (JIT on), or
-- interpreted (-joff: the chain the JIT run is judged against).
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function produce()
  while true do coroutine.yield(leaf(2e5)) end
end
local function outer(g) return g() + 1 end
local g = coroutine.wrap(produce)
local stop, x = os.clock() + tonumber(arg[1] or 1), 0
while os.clock() < stop do x = x + outer(g) end
io.write(x, "\n")
