-- test/vm/chain.lua SECONDS: the Lua chain of the kernel matrix.
-- main > outer > mid > leaf, each leaf call a loop of 2e6 steps (~10 ms
-- here, longer under emulation), JIT-compiled or interpreted (-joff): the
-- chain a sample sees is still there when the walker reads it (the kernel
-- side is the subject here, not staleness).
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function mid(n) return leaf(n) + 1 end
local function outer(n) return mid(n) + 1 end
local stop, x = os.clock() + tonumber(arg[1] or 1), 0
while os.clock() < stop do x = x + outer(2e6) end
io.write(x, "\n")
