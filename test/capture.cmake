# Capture (issue 2): the snapshot BPF programs against real processes.
# Needs root and a kernel with perf events and BPF.

# The sampled workload: -O2, no sanitizers (its stack layout is the subject),
# -rdynamic so it can look up its own function sizes.
add_executable(capture_workload ${CMAKE_SOURCE_DIR}/test/capture/workload.c)
target_compile_options(capture_workload PRIVATE -O2 -fno-sanitize=all -fno-inline-functions-called-once)
target_link_options(capture_workload PRIVATE -rdynamic -fno-sanitize=all)
target_link_libraries(capture_workload PRIVATE dl pthread)

ss_add_test(capture_test SOURCES ${CMAKE_SOURCE_DIR}/test/capture/capture_test.c
  ${CMAKE_SOURCE_DIR}/test/capture/proc.c LABELS capture TIMEOUT 300)
add_dependencies(capture_test capture_workload)
ss_add_test(capture_prog_test SOURCES ${CMAKE_SOURCE_DIR}/test/capture/prog_test.c
  ${CMAKE_SOURCE_DIR}/test/capture/proc.c LABELS capture TIMEOUT 120)
add_dependencies(capture_prog_test capture_workload)

# capture_cost: per-sample kernel cost (run_time_ns / run_cnt); a short run
# doubles as a smoke test.
add_executable(capture_cost ${CMAKE_SOURCE_DIR}/test/capture/cost.c
  ${CMAKE_SOURCE_DIR}/test/capture/proc.c)
target_link_libraries(capture_cost PRIVATE stacksnap)
target_compile_definitions(capture_cost PRIVATE SS_BINARY_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(capture_cost capture_workload)
add_test(NAME capture_cost_smoke COMMAND capture_cost --seconds 0.5)
set_tests_properties(capture_cost_smoke PROPERTIES TIMEOUT 60 LABELS capture)

# Process markers (issue 19): fork, exec and exit in the sample stream, both
# programs; an unwinder that lags behind still walks a child's pre-exec
# samples with its parent's view (and a control without markers does not).
ss_add_test(capture_procev SOURCES ${CMAKE_SOURCE_DIR}/test/capture/procev_test.c
  LABELS capture TIMEOUT 120)
add_dependencies(capture_procev capture_workload)
