-- test/cli/short.lua: Lua code that makes many short calls, the shape of
-- request handlers and parsers (issue 14).
--   luajit [-joff] short.lua SECONDS [DEPTH [co]]
-- main > run > [recurse x DEPTH] > handler > parse (~1 us) | route (~5 us)
-- | render (~20 us), each of those > spin. Prints "ready" first. With "co",
-- each handler call runs in a new coroutine (a request per coroutine, as
-- OpenResty and Tarantool run them): recurse > wrap > handler > ...
local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
-- (no tail calls: each caller keeps its frame)
local function parse() return spin(100) + 0 end
local function route() return spin(500) + 0 end
local function render() return spin(2000) + 0 end
local function handler() return parse() + route() + render() end
local per_co = arg[3] == "co"
local wrap = coroutine.wrap
local function recurse(d)
  if d == 0 then
    if per_co then return wrap(handler)() + 0 end
    return handler() + 0
  end
  return recurse(d - 1) + 1
end
local function run(t, depth)
  local e, x = os.clock() + t, 0
  while os.clock() < e do
    for _ = 1, 20 do x = x + recurse(depth) end
  end
  return x
end
io.write("ready\n")
io.flush()
run(tonumber(arg[1] or 1), tonumber(arg[2] or 0))
