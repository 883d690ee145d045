-- test/cli/offcpu_pipe.lua: off-CPU ground truth (issue 17): lines read
-- from stdin, a pipe fed at a known pace, and a 1 ms usleep after each.
-- Prints "truth READ SLEEP" (seconds each took, CLOCK_MONOTONIC).
local ffi = require("ffi")
ffi.cdef [[
int usleep(unsigned int);
typedef struct { long s, ns; } ss_ts;
int clock_gettime(int, ss_ts *);
]]
local t = ffi.new("ss_ts")
local function now()
  ffi.C.clock_gettime(1, t)
  return tonumber(t.s) + tonumber(t.ns) * 1e-9
end
local tr, ts = 0, 0
local function wait_line()
  local t0 = now()
  local l = io.read("*l")
  tr = tr + now() - t0
  return l
end
local function nap()
  local t0 = now()
  ffi.C.usleep(1000)
  ts = ts + now() - t0
end
while wait_line() do nap() end
io.stderr:write(string.format("truth %.6f %.6f\n", tr, ts))
