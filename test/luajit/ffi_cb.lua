jit.off() -- C -> Lua through an FFI callback: a Lua comparator passed to libc qsort (test_coro.c: line numbers matter)
local ffi = require("ffi")
ffi.cdef [[ void qsort(void *base, size_t nmemb, size_t size, int (*compar)(const void *, const void *)); ]]
local function slow(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local SPIN = tonumber(arg and arg[1]) or 2000000
local cmp = ffi.cast("int (*)(const void *, const void *)", function(a, b)
  local r = slow(SPIN)
  local x, y = ffi.cast("const int *", a)[0], ffi.cast("const int *", b)[0]
  return x < y and -1 or (x > y and 1 or 0)
end)
local function sortit(n)
  local arr = ffi.new("int[?]", n)
  for i = 0, n - 1 do arr[i] = (i * 7919) % n end
  ffi.C.qsort(arr, n, ffi.sizeof("int"), cmp)
  return arr[0]
end
while true do
  local r = sortit(64)
end
