-- stacksnap demo workload: a known call chain with a hot leaf and a string
-- builtin, run for a few seconds. `scripts/dev demo` profiles it.
local M = {}

local function leaf(n)
  local s = 0
  for i = 1, n do s = s + (i % 7) * (i % 13) end
  return s
end

local function build(n)
  return string.rep("x", n) .. tostring(n)
end

function M.work(n)
  local t = 0
  for _ = 1, 50 do t = t + leaf(n) end
  t = t + #build(n)
  return t
end

local function outer(seconds)
  local stop = os.clock() + seconds
  local acc = 0
  while os.clock() < stop do acc = acc + M.work(2000) end
  return acc
end

local seconds = tonumber(arg and arg[1]) or 4
print(("demo: %d"):format(outer(seconds) % 1000))
