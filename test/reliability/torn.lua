-- test/reliability/torn.lua: a LuaJIT workload whose stacks never stay put,
-- for the torn-state test (test/reliability/torn_test.c).
--
-- Every round is a new generation G: a chain of freshly load()ed functions
-- with chunk names "=mGdK" (K = depth, 1 at the root) is built, run a few
-- times and dropped; its leaf may resume coroutines whose bodies are chains
-- "=cGdK" of the same generation, which yield from their leaf. Depths vary
-- from 1 to 300 per round (the Lua stack grows, is reallocated and shrinks),
-- and a full GC runs every few rounds so prototypes and coroutines of old
-- generations are freed and their memory reused by new ones.
--
-- What a correct sample can show (checked by the test): every generated
-- frame belongs to ONE generation, depths of each chain are consecutive
-- (root first), "c" frames only above "m" frames, and frames of this file
-- are only the functions defined here. A stale cache or a torn read that
-- mixed two states would break one of these.
local load, co_create, co_resume, co_yield = load, coroutine.create, coroutine.resume, coroutine.yield
local floor, random, collectgarbage = math.floor, math.random, collectgarbage
local duration = tonumber(arg and arg[1]) or 1e9

local src = [[
local nxt, leafwork, arg = ...
return function(x)
  local r
  if nxt then r = nxt(x + 1) else r = leafwork(x, arg) end
  return r + 1
end
]]

local function spin(n)
  local s = 0
  for i = 1, n do s = s + (i * 7) % 13 end
  return s
end

-- leaf of a coroutine chain: a little work, then yield (the coroutine is
-- suspended with its whole chain on its own Lua stack)
local function coleaf(x, rounds)
  local s = 0
  for _ = 1, rounds do
    s = s + spin(200 + x)
    co_yield(s)
  end
  return s
end

local function chain(prefix, gen, depth, leafwork, arg)
  local f = nil
  for k = depth, 1, -1 do
    f = assert(load(src, "=" .. prefix .. gen .. "d" .. k))(f, leafwork, arg)
  end
  return f
end

-- leaf of a main chain: spin, and run the generation's coroutines
local function mainleaf(x, cos)
  local s = spin(3000)
  for i = 1, #cos do
    local co = cos[i]
    while true do
      local ok, v = co_resume(co, x)
      if not ok or v == nil then break end
      s = s + v + spin(100)
    end
  end
  return s
end

local t0 = os.time()
local gen = 0
local keep = {}
while os.time() - t0 < duration do
  gen = gen + 1
  local cos = {}
  for i = 1, random(0, 3) do
    local cdepth = random(1, 60)
    local cf = chain("c", gen, cdepth, coleaf, random(1, 5))
    cos[i] = co_create(cf)
  end
  local depth = random(1, 300)
  local f = chain("m", gen, depth, mainleaf, cos)
  for _ = 1, random(1, 4) do
    f(1)
  end
  -- some generations linger a little (collected later), most die now
  keep[gen % 3 + 1] = f
  if gen % 5 == 0 then collectgarbage("collect") end
end
print("generations", gen)
