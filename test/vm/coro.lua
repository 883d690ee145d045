-- test/vm/coro.lua SECONDS [N]: a coroutine for the arm64 VM (arm64-guest.sh)
-- and test/cli/shortcalls.c: main > outer > the wrap function > produce >
-- leaf, leaf's loop (N iterations a resume, 2e5) a trace on the coroutine's
-- stack (JIT on), or interpreted (-joff: the chain the JIT run is judged against).
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function produce()
  local n = tonumber(arg[2]) or 2e5 while true do coroutine.yield(leaf(n)) end
end
local function outer(g) return g() + 1 end
local g = coroutine.wrap(produce)
local stop, x = os.clock() + tonumber(arg[1] or 1), 0
while os.clock() < stop do x = x + outer(g) end
io.write(x, "\n")
