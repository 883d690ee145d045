# The bench (issue 8): bench/run builds these and runs bench_driver, which
# prints the markdown report (docs/bench.md). Not a test, except bench_quick
# below, which only proves the machinery works (tables and numbers present).
set(BN_DIR ${CMAKE_SOURCE_DIR}/bench)

# The C workload: -O2 without frame pointers (the subject), and a frame-
# pointer build for the in-kernel FP comparator. No sanitizers: their stacks
# and speed are the subject.
foreach(v native native_fp)
  add_executable(bench_${v} ${BN_DIR}/workload.c)
  target_compile_options(bench_${v} PRIVATE -O2 -fno-sanitize=all)
  target_link_options(bench_${v} PRIVATE -fno-sanitize=all)
  set_target_properties(bench_${v} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endforeach()
target_compile_options(bench_native PRIVATE -fomit-frame-pointer)
target_compile_options(bench_native_fp PRIVATE -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
target_compile_definitions(bench_native_fp PRIVATE BN_FP=1)

add_executable(bench_driver ${BN_DIR}/driver.c ${BN_DIR}/bpfrun.c ${BN_DIR}/truth.c
  ${BN_DIR}/kcost.c ${BN_DIR}/plan.c ${BN_DIR}/shortcov.c ${BN_DIR}/luacfg.c ${BN_DIR}/usercost.c ${BN_DIR}/slowdown.c ${BN_DIR}/report.c)
target_link_libraries(bench_driver PRIVATE stacksnap)
set_target_properties(bench_driver PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
add_dependencies(bench_driver bench_native bench_native_fp stacksnap_cli)
# bench/arm64's cost program (built here too, so that it keeps building)
add_executable(bench_vmcost ${BN_DIR}/vmcost.c ${BN_DIR}/bpfrun.c)
target_link_libraries(bench_vmcost PRIVATE stacksnap)
set_target_properties(bench_vmcost PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

# bench/run --quick --check: every table produced, every figure present.
# Never asserts on times; normal build only (a sanitized profiler's figures
# mean nothing, and every path it runs is tested under ASan elsewhere).
if(NOT SS_SANITIZE)
  add_test(NAME bench_quick COMMAND ${BN_DIR}/run --quick --check --no-build
    --build-dir ${CMAKE_BINARY_DIR})
  set_tests_properties(bench_quick PROPERTIES LABELS bench TIMEOUT 600)
endif()

# Live user-space cost per Lua sample (target calls, reads, CPU; issue 14):
# run by hand, `bench_livereads -- luajit test/cli/short.lua 10`.
add_executable(bench_livereads ${BN_DIR}/livereads.c)
target_link_libraries(bench_livereads PRIVATE stacksnap)
set_target_properties(bench_livereads PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
