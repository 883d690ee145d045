jit.off() -- Tarantool fibers (separate native stacks) that yield between slices of work (test_servers.c: line numbers matter)
local fiber = require('fiber')
local function spin(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function pack(n) local r = spin(n) return r end
local function index(n) local r = spin(n) return r end
local function packer() while true do local r = pack(3000000) fiber.yield() end end
local function indexer() while true do local r = index(2000000) fiber.yield() end end
fiber.create(packer)
fiber.create(indexer)
while true do fiber.sleep(1) end
