-- Trace exits for test_trace.c: exits()'s loop compiles to a trace that
-- leaves through a side exit on every other iteration; hotexit is set past
-- what a snapshot's exit counter can reach, so no side trace ever takes
-- over and the samples in the exit handler (lj_trace_exit, snapshot
-- restore) keep coming. arg[1]: rounds (default: forever).
jit.opt.start("hotexit=1000")
local function odd(i) return i * 3 end
local function exits(n)
  local s = 0
  for i = 1, n do
    if i % 2 == 0 then s = s + 1 else s = s + odd(i) end
  end
  return s
end
local acc = 0
for _ = 1, tonumber(arg and arg[1]) or math.huge do acc = acc + exits(100000) end
print(acc)
