# LuaJIT JIT traces (src/unwind/luajit/trace.c, vmstate.c): inlined frames
# from snapshots, LuaJIT's own profiler as witness with the JIT on, VM-state
# pseudo frames, replay of JIT captures. Real BPF, real processes.
set(LJT_TDIR ${CMAKE_SOURCE_DIR}/test/luajit)
ss_add_test(luajit_trace SOURCES ${LJT_TDIR}/test_trace.c ${LJT_TDIR}/ljrec.c ${LJT_TDIR}/ljcheck.c
  ${LJT_TDIR}/ljtest.c LABELS luajit TIMEOUT 400)
target_include_directories(luajit_trace PRIVATE ${LJT_TDIR})
add_dependencies(luajit_trace stacksnap_cli)
set_tests_properties(luajit_trace PROPERTIES FIXTURES_REQUIRED luajit_builds)
