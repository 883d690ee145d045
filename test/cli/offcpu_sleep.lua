-- test/cli/offcpu_sleep.lua: off-CPU ground truth (issue 17). Each round
-- a() blocks 3 ms in usleep and b() 1 ms, in usleep (arg "usleep") or, so
-- that traces (which inline a and b) still tell them apart by their native
-- chain, in nanosleep (arg "nanosleep"). Arg "pipe": wait_line() reads a
-- line from stdin (a pipe fed at a known pace), then nap() sleeps 1 ms in
-- usleep, until the input ends. Each measures its own time off the CPU
-- (CLOCK_MONOTONIC around the call) and the totals are printed at the end:
-- "truth A B LONG" (or READ NAP) in seconds, LONG the part of B in waits
-- of 2 ms or more.
local ffi = require("ffi")
ffi.cdef [[
int usleep(unsigned int);
typedef struct { long s, ns; } ss_ts;
int clock_gettime(int, ss_ts *);
int nanosleep(const ss_ts *, ss_ts *);
]]
local mode, rounds = arg[1] or "usleep", tonumber(arg[2] or "300")
local t, req = ffi.new("ss_ts"), ffi.new("ss_ts", 0, 1000000)
local function now()
  ffi.C.clock_gettime(1, t)
  return tonumber(t.s) + tonumber(t.ns) * 1e-9
end
local ta, tb, tlong = 0, 0, 0 -- tlong: b's waits of 2 ms or more
local function a()
  local t0 = now()
  ffi.C.usleep(3000)
  ta = ta + now() - t0
end
local function b()
  local t0 = now()
  if mode == "nanosleep" then ffi.C.nanosleep(req, nil) else ffi.C.usleep(1000) end
  local dt = now() - t0
  tb = tb + dt
  if dt >= 0.002 then tlong = tlong + dt end
end
local function wait_line()
  local t0 = now()
  local l = io.read("*l")
  ta = ta + now() - t0
  return l
end
local function nap()
  local t0 = now()
  ffi.C.usleep(1000)
  tb = tb + now() - t0
end
if mode == "pipe" then
  while wait_line() do nap() end
else
  for _ = 1, rounds do a() b() end
end
io.stderr:write(string.format("truth %.6f %.6f %.6f\n", ta, tb, tlong))
