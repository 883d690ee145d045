-- jit.p around a script in Tarantool (test_trace.c): tarantool jp_tt.lua OUT SCRIPT ARGS...
local out, script = arg[1], arg[2]
local p = require('jit.p')
p.start('fri1m0', out)
arg = {[0] = script, select(3, unpack(arg))}
dofile(script)
p.stop()
os.exit(0)
