assert(jit.status()) -- JIT on (Tarantool 2.6: no SnapShot.mcofs): leaf's loop runs as a trace (test_servers.c: lines matter)
local function leaf(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
function c(n) local r = leaf(n) return r end
function b(n) local r = c(n) return r end
function a(n) local r = b(n) return r end
while true do
  a(20000000)
end
