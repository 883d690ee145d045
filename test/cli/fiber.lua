-- test/cli/fiber.lua: the Tarantool workload of the CLI tests.
--   tarantool fiber.lua [joff]
-- A fiber spins in mid > leaf forever (Tarantool ignores SIGTERM while it
-- spins: kill it with SIGKILL). With "joff" the JIT is off.
if arg[1] == 'joff' then jit.off() end
local fiber = require('fiber')
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function mid(n) return leaf(n) + 1 end
local function spin()
  local x = 0
  while true do x = x + mid(2000) end
end
io.write('ready\n')
io.flush()
fiber.create(spin)
fiber.sleep(1e9)
