jit.off() -- Producer/consumer through coroutine.resume, coroutine.wrap and a coroutine resumed inside another one (test_coro.c: line numbers matter)
local function spin(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local N = tonumber(arg and arg[1]) or 4000000
local function produce()
  while true do
    local v = spin(N)
    coroutine.yield(v)
  end
end
local function relay(src)
  while true do
    local ok, v = coroutine.resume(src)
    local w = spin(N)
    coroutine.yield(v + w)
  end
end
local function consume(rounds)
  local p = coroutine.create(produce)
  local gen = coroutine.wrap(produce)
  local nested = coroutine.wrap(relay)
  local q = coroutine.create(produce)
  local t = 0
  for i = 1, rounds do
    local ok, v = coroutine.resume(p)
    local a = gen()
    local b = nested(q)
    local own = spin(N)
    t = t + v + a + b + own
  end
  return t
end
while true do
  consume(10)
end
