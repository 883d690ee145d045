local M = {}
function M.run(n)
  local s = 0 for i = 1, n do s = s + i % 7 end return s
end
function obj_method(self, n) local r = M.run(n) return r end
local obj = {method = obj_method}
function reps() local s = string.rep("abc", 4000000) return #s end
local k = 0
while true do k = k + obj:method(3000000) + reps() end
