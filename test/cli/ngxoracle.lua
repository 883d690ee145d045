-- test/cli/ngxoracle.lua: the workload of ngxoracle.c, a module of the
-- nginx handlers (loaded once per worker, as an OpenResty application's
-- code is). handle(n): lua-resty-core's FFI paths and lua-cjson, each from
-- a helper of its own; handle_fib(): a naive recursive fib(30).
local cjson = require("cjson")
local dict = ngx.shared.d
local s = string.rep("ab", 4000) .. "c123x"
local val = string.rep("v", 32768)
local mid = string.rep("ab", 1500)
local doc = {}
for i = 1, 20 do doc[i] = { id = i, name = "item" .. i, v = i / 7 } end
local blob = cjson.encode(doc)

local function do_find() return ngx.re.find(s, [[[ab]+c[0-9]+x]], "jo") or 0 end

-- issue 32's handler: the hot path is ngx.re.find in a loop of its own
-- (a trace that inlines re_match_compile and lrucache_get, which returned
-- before the FFI call)
local function hk_parse(n)
  local hits = 0
  for _ = 1, n do
    local from = ngx.re.find(s, [[[ab]+c[0-9]+x]], "jo")
    if from then hits = hits + 1 end
  end
  return hits
end

local function do_match()
  local m = ngx.re.match(s, [[c([0-9]+)x]], "jo")
  return m and #m[1] or 0
end

local function do_gsub() -- no match: the subject comes back, no new string
  local _, n = ngx.re.gsub(s, "c9", "C9", "jo")
  return n
end

local function do_var() -- $http_*: a scan of the request's headers
  return #ngx.var.uri + #(ngx.var.http_x_last or "") + #(ngx.var.http_x_none or "")
end

local function do_headers()
  local h = ngx.req.get_headers(200)
  return h.host and 1 or 0
end

local function do_dict(i)
  dict:set("k" .. i % 20, val) -- a copy into the zone (no Lua string)
  return dict:get("n") or 0
end

local function do_b64() return #ngx.encode_base64(mid) end

local function do_json() return #cjson.encode(doc) + #cjson.decode(blob) end

local function handle(n)
  local t = 0
  for i = 1, n do
    t = t + do_find() + hk_parse(3) + do_match() + do_gsub() + do_var()
    t = t + do_headers()
    t = t + do_dict(i) + do_b64() + do_json()
  end
  return t
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function handle_fib() return fib(30) end

return { handle = handle, handle_fib = handle_fib }
