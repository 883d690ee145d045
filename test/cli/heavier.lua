-- test/cli/heavier.lua: the workload of the diff tests.
--   luajit -joff heavier.lua SECONDS K
-- main > run calls steady(n) and heavy(K * n) in turn for SECONDS, each
-- spinning in its own loop: with K = 3 heavy() does three times the work it
-- does with K = 1, steady() the same (shares 50/50 -> 75/25).
local function steady(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function heavy(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function run(t, k)
  local x, e = 0, os.clock() + t
  while os.clock() < e do
    x = x + steady(20000)
    x = x + heavy(k * 20000)
  end
  return x
end
io.write("ready\n")
io.flush()
run(tonumber(arg[1] or 1), tonumber(arg[2] or 1))
