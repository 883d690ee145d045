-- test/cli/ffibuiltin.lua: builtins called through BC_FUNCC (jitoracle.c,
-- run with -joff): ffi.string (lj_cf_ffi_string -> lj_str_new) between
-- cdata field reads (ffi.meta.__index, metamethod frames above the Lua
-- frame's slots) and an FFI call (ffi.meta.__call). Short strings and a
-- short GC pause keep the collector busy, so some walks are made again
-- from live memory (the GC moved since the sample), when L->base already
-- points at a newer call's frame. arg[1]: seconds (default 2).
local ffi = require("ffi")
ffi.cdef [[
size_t strlen(const char *);
typedef struct { const char *p; size_t n; } ffib_pair;
]]
local C = ffi.C
collectgarbage("setpause", 100)
local buf = ffi.new("char[?]", 65)
ffi.fill(buf, 64, 65)
local pr = ffi.new("ffib_pair[4]")
for i = 0, 3 do
  pr[i].p = buf
  pr[i].n = 64 - i
end

local function one(i)
  local e = pr[i % 4]
  local s = ffi.string(e.p, e.n)
  return tonumber(C.strlen(e.p)) + #s
end

local t0, acc, i = os.clock(), 0, 0
while os.clock() - t0 < tonumber(arg[1] or "2") do
  for _ = 1, 100 do
    i = i + 1
    acc = acc + one(i)
  end
end
io.stderr:write(string.format("calls %d %d\n", i, acc % 7))
