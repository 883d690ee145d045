local function leaf(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function inner() local r = leaf(3000000) return r end
function viac() local r = host.ccall(inner) return r end
function spin() local r = host.cspin(20000000) return r end
function outer() local ok, r = pcall(viac) local r2 = spin() return r2 end
while true do outer() end
