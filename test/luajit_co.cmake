# LuaJIT coroutines, FFI callbacks, servers (OpenResty, Tarantool), the build
# matrix and the witness test: recorded with real BPF (test/luajit/ljrec.c).
set(LJC_DIR ${CMAKE_SOURCE_DIR}/test/luajit)
set(LJC_COMMON ${LJC_DIR}/ljrec.c ${LJC_DIR}/ljcheck.c ${LJC_DIR}/ljtest.c)
ss_add_test(luajit_coro SOURCES ${LJC_DIR}/test_coro.c ${LJC_COMMON} LABELS luajit TIMEOUT 120)
foreach(t luajit_coro)
  target_include_directories(${t} PRIVATE ${LJC_DIR})
endforeach()
