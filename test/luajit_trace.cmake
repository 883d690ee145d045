# LuaJIT JIT traces (src/unwind/luajit/trace.c, vmstate.c): inlined frames
# from snapshots, LuaJIT's own profiler as witness with the JIT on, VM-state
# pseudo frames, replay of JIT captures. Real BPF, real processes.
set(LJT_TDIR ${CMAKE_SOURCE_DIR}/test/luajit)
# The jit.p witness measures agreement between two profilers, not memory
# safety (its replays are the same code as luajit_trace's): normal build only.
set(LJT_TESTS luajit_trace)
if(NOT SS_SANITIZE)
  list(APPEND LJT_TESTS luajit_jitwit)
endif()
foreach(t ${LJT_TESTS})
  string(REPLACE "luajit_" "test_" src ${t})
  ss_add_test(${t} SOURCES ${LJT_TDIR}/${src}.c ${LJT_TDIR}/ljtrec.c ${LJT_TDIR}/ljrec.c
    ${LJT_TDIR}/ljcheck.c ${LJT_TDIR}/ljtest.c LABELS luajit TIMEOUT 400)
  target_include_directories(${t} PRIVATE ${LJT_TDIR})
  add_dependencies(${t} stacksnap_cli)
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED luajit_builds)
endforeach()
# the jit.p witness of Tarantool's LuaJIT fork needs its builds (luajit_co.cmake)
if(TARGET luajit_jitwit)
  set_tests_properties(luajit_jitwit PROPERTIES FIXTURES_REQUIRED "luajit_builds;luajit_tt_builds"
    TIMEOUT 800)
endif()
