-- test/vm/ffi.lua SECONDS: an FFI call into libc from a trace, for the
-- arm64 VM (test/vm/arm64-guest.sh): main > outer > measure > strlen, with
-- measure inlined into outer's loop (the call's frames come from the
-- snapshot after it). Run with -joff for the interpreter's chain.
local ffi = require("ffi")
ffi.cdef [[size_t strlen(const char *);]]
local C = ffi.C
local s = string.rep("x", 20000)
local function measure(p) return tonumber(C.strlen(p)) + 1 end
local function outer(n)
  local t = 0
  for _ = 1, n do t = t + measure(s) end
  return t
end
local stop, x = os.clock() + tonumber(arg[1] or 1), 0
while os.clock() < stop do x = x + outer(1000) end
io.write(x, "\n")
