-- test/cli/fwdrefuse.lua: string.rep and an FFI call through a mutable
-- upvalue (strlen) reached where the forward replay of trace_fwd.c must
-- refuse (a metamethod, a callee through a table, tail calls, a branch) or
-- prove the frames (two string.rep in a row in a local function the loop
-- calls). jitoracle.c fwd_never_a_frame_not_on_the_stack: every chain
-- above lj_buf_putstr_rep, string.format's helpers and strlen with the JIT on must be one the
-- interpreter shows there, or a prefix of one. arg[1]: seconds (CPU).
local mt = { __add = function(a, b) return #string.rep("ab", 600 + b % 3) end }
local obj = setmetatable({}, mt)
local function viamm(i) return obj + i end -- string.rep inside __add
local function ra(i) return #string.rep("cd", 700 + i % 5) end
local function rb(i) return #string.rep("ef", 800 + i % 5) end
local fns = { ra, rb }
local function viatab(i) return fns[i % 2 + 1](i) end -- a tail call through TGETV
local function viabranch(i)
  if i % 3 == 0 then local r = ra(i); return r end -- a comparison, then a call
  local r = rb(i); return r
end
local function twice(i) return #string.rep("gh", 500 + i % 7) + ra(i) end
-- an FFI call through a mutable upvalue (lua-resty-core's base64.lua):
-- after a helper that returned past a comparison (proven), and from two
-- frames on the two sides of a branch (one of them must not be guessed)
local ffi = require("ffi")
ffi.cdef("size_t strlen(const char *);")
local slen
slen = ffi.C.strlen
local str, lim = string.rep("x", 20000), 4096
local function buf(n, must) -- base.lua's get_string_buf
  if n > lim or must then return n + 1 end
  return n
end
local ffistring = ffi.string
local function viaup(s) -- base64.lua's encode_base64
  local n = buf(#s % 4000)
  local r = slen(s)
  return ffistring(s, r - n % 2)
end
local function deeper(s) return tonumber(slen(s)) + 1 end
local function upbranch(i, s)
  if i % 3 == 0 then local r = deeper(s); return r end
  return tonumber(slen(s))
end
-- string.format's helpers (trace_fwdcalls.c): the same format twice with
-- the same arguments (the second chain CSE'd: its guarded CALLL is not in
-- the machine code, so the calls do not match the IR), after a CAT (not
-- replayed), after a "%s" of "" (its BUFHDR is DCE'd: not counted), on two
-- sides of a branch (refused), and two in a row (proven)
local function fmtcse(i)
  return #string.format("%5.2f|", i / 3) + #string.format("%5.2f|", i / 3)
end
local function fmtcat(i)
  local s = "k" .. i
  return #string.format("%8.3f", i / 7) + #s
end
local function fmtempty(i)
  local e = string.format("%s", "")
  return #string.format("%9.4f", i / 9) + #e
end
local function fmtbranch(i)
  if i % 3 == 0 then return #string.format("%.6f", i / 11) end
  return #string.format("%.7f", i / 13)
end
local function fmttwo(i) return #string.format("%d-%5.1f", i / 2, i / 5) + #string.format("%7.3g", i) end
local t0, acc, i = os.clock(), 0, 0
while os.clock() - t0 < tonumber(arg[1] or "2") do
  for _ = 1, 50 do
    i = i + 1
    acc = acc + fmttwo(i) + fmtcse(i) + fmtcat(i) + fmtempty(i) + fmtbranch(i)
    acc = acc + twice(i) + viabranch(i) + #viaup(str) + upbranch(i, str)
    if i % 4 == 0 then acc = acc + viamm(i) + viatab(i) end
  end
end
io.stderr:write(string.format("acc %d\n", acc % 7))
