-- C called from an ASM fast function (test_trace.c, run with -joff): the VM
-- calls libm's sin straight from math.sin without storing L->base.
-- arg[1]: seconds (default 3).
local function f(n) local s = 0 for i = 1, n do s = s + math.sin(i) end return s end
local t0 = os.clock()
while os.clock() - t0 < (tonumber(arg and arg[1]) or 3) do f(1000000) end
