-- JIT ground truth (test_trace.c): outer -> mid -> leaf, both calls inlined
-- into outer's loop trace; the store in leaf forces a snapshot inside it.
local function leaf(t, i)
  t.n = i
  return math.sqrt(t[i % 97 + 1]) * math.sin(i) + math.cos(t[i % 89 + 1])
end

local function mid(t, i)
  return leaf(t, i) * 0.5 + 1
end

local function outer(t, n)
  local acc = 0
  for i = 1, n do
    acc = acc + mid(t, i)
  end
  return acc
end

local t = {}
for i = 1, 100 do t[i] = i * 0.25 end
local acc, rounds = 0, tonumber(arg and arg[1]) or math.huge
for _ = 1, rounds do acc = acc + outer(t, 200000) % 7 end
print(("jit_inline: %.3f"):format(acc))
