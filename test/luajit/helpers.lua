-- test/luajit/helpers.lua: Lua code that spends its time in LuaJIT's
-- helpers (issue 16): integer modulo (lj_vm_modi from traces), number to
-- string, concatenation and table growth (lj_strfmt_*, lj_buf_*, lj_str_new,
-- lj_tab_*), and the GC steps they cause.
--   luajit helpers.lua SECONDS
local secs = tonumber(arg[1] or 1)
local function work()
  local s, acc = 0, {}
  for i = 1, 20000 do
    s = s + i % 7
    acc[#acc + 1] = tostring(i) .. "x"
  end
  return s + #acc
end
io.write("ready\n")
io.flush()
local t0, x = os.clock(), 0
while os.clock() - t0 < secs do x = x + work() end
