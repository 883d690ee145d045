-- test/cli/spin.lua: the LuaJIT workload of the CLI tests.
--   luajit [-joff] spin.lua SECONDS
-- Spins in main > M.run > mid > leaf (and string.rep, a builtin) until
-- SECONDS have passed (0: forever).
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function mid(n) return leaf(n) + 1 end
local M = {}
function M.run(t)
  local x, k, e = 0, 0, os.clock() + t
  while t <= 0 or os.clock() < e do
    k = k + 1
    x = x + mid(2000)
    if k % 8 == 0 then x = x + #string.rep("ab", 500) end
  end
  return x
end
io.write("ready\n")
io.flush()
M.run(tonumber(arg[1] or 1))
