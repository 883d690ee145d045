# Native unwinding throughput against `perf script` (issue 3). Not a test:
#   build/native_bench [--seconds S] [--freq HZ]    (root: BPF + perf)
add_executable(native_bench ${CMAKE_SOURCE_DIR}/bench/native_bench.c)
target_link_libraries(native_bench PRIVATE stacksnap)
target_compile_definitions(native_bench PRIVATE SS_BINARY_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(native_bench native_workload_pie)
