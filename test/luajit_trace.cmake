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
# luajit_jitwit runs alone (CMakeLists.txt: SS_ALONE_TESTS) and its cases two
# at a time, one per core: each witness run is one single-threaded process
# whose script runs 20 s of its own CPU time (os.clock), and both profilers
# count CPU time (jit.p's SIGPROF timer, our per-CPU cpu-clock events), so a
# second witness beside it changes neither side's shares, only the wall time.
foreach(t ${LJT_TESTS})
  string(REPLACE "luajit_" "test_" src ${t})
  set(jobs 1)
  if(t STREQUAL luajit_jitwit)
    set(jobs 2)
  endif()
  ss_add_test(${t} SOURCES ${LJT_TDIR}/${src}.c ${LJT_TDIR}/ljtrec.c ${LJT_TDIR}/ljrec.c
    ${LJT_TDIR}/ljcheck.c ${LJT_TDIR}/ljtest.c LABELS luajit TIMEOUT 400 JOBS ${jobs})
  target_include_directories(${t} PRIVATE ${LJT_TDIR})
  add_dependencies(${t} stacksnap_cli)
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED luajit_builds)
endforeach()
# the jit.p witness of Tarantool's LuaJIT fork needs its builds (luajit_co.cmake)
if(TARGET luajit_jitwit)
  set_tests_properties(luajit_jitwit PROPERTIES FIXTURES_REQUIRED "luajit_builds;luajit_tt_builds"
    TIMEOUT 800)
endif()
