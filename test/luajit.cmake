# LuaJIT frames (src/unwind/luajit/): detection, layouts, live walks.
set(LJT_DIR ${CMAKE_SOURCE_DIR}/test/luajit)
ss_add_test(luajit_detect SOURCES ${LJT_DIR}/test_detect.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 180)
ss_add_test(luajit_walk SOURCES ${LJT_DIR}/test_walk.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 180)
ss_add_test(luajit_garbage SOURCES ${LJT_DIR}/test_garbage.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 120)
foreach(t luajit_detect luajit_walk luajit_garbage)
  target_include_directories(${t} PRIVATE ${LJT_DIR})
endforeach()
