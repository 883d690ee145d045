-- VM states for test_trace.c: allocation-heavy code (GC steps) and a
-- stream of new functions whose hot loops keep the trace compiler busy.
-- arg[1]: rounds (default: forever).
local function alloc(n)
  local t = {}
  for i = 1, n do t[i] = {i, tostring(i)} end
  return #t
end
local function compile(k)
  local src = ("local s = 0 for i = 1, 300 do s = s + i * %d end return s"):format(k)
  return loadstring(src)()
end
local acc, k = 0, 0
for _ = 1, tonumber(arg and arg[1]) or math.huge do
  acc = acc + alloc(20000)
  for _ = 1, 20 do k = k + 1; acc = acc + compile(k) end
end
print(acc)
