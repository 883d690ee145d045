-- test/vm/ngxcase.lua: the handler of the arm64 guest's nginx case
-- (nginx-arm64.conf, arm64-guest.sh ngx_case), a module loaded once per
-- worker as an OpenResty application's code is (its closures live as long
-- as the worker: a walk seconds late under emulation still reads them).
-- handle > work > enc, whose loop calls the lua module's
-- ngx_http_lua_ffi_encode_base64 through the FFI (as lua-resty-core's
-- ngx.encode_base64 does; declared by it). No tail calls: every frame stays.
local ffi = require("ffi")
local C = ffi.C
local s = string.rep("stacksnap", 4000)
local buf = ffi.new("unsigned char[?]", 48100)

local function enc(n)
  local r = 0
  for _ = 1, n do r = r + tonumber(C.ngx_http_lua_ffi_encode_base64(s, #s, buf, 0)) end
  return r
end

local function work() local r = enc(20) return r end

local function handle()
  local t = 0
  for _ = 1, 5 do t = t + work() end
  return t
end

return { handle = handle }
