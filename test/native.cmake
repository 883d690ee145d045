# Native unwinding (issue 3): ELF/process/memory unit tests and ground-truth
# chains of C workloads sampled with the real BPF capture.

# The workloads: -O2 without frame pointers and without sanitizers (their
# stacks are the subject), one PIE and one non-PIE build.
set(NW_SOURCES ${CMAKE_SOURCE_DIR}/test/native/workload.c ${CMAKE_SOURCE_DIR}/test/native/df.c)
set_source_files_properties(${CMAKE_SOURCE_DIR}/test/native/df.c PROPERTIES COMPILE_OPTIONS
  "-fno-asynchronous-unwind-tables;-fno-unwind-tables;-g")
foreach(v pie nopie)
  add_executable(native_workload_${v} ${NW_SOURCES})
  target_compile_options(native_workload_${v} PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
  target_link_options(native_workload_${v} PRIVATE -fno-sanitize=all)
  target_link_libraries(native_workload_${v} PRIVATE dl pthread)
endforeach()
target_compile_options(native_workload_pie PRIVATE -fPIE)
target_link_options(native_workload_pie PRIVATE -pie)
target_compile_options(native_workload_nopie PRIVATE -fno-pie)
target_link_options(native_workload_nopie PRIVATE -no-pie)

add_library(native_dl SHARED ${CMAKE_SOURCE_DIR}/test/native/dl_lib.c)
target_compile_options(native_dl PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
target_link_options(native_dl PRIVATE -fno-sanitize=all)
set_target_properties(native_dl PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

set(NW_HARNESS ${CMAKE_SOURCE_DIR}/test/native/harness.c)
# 36 s in the normal build; the ASan build walks every sample three ways
# (rule cache, libunwind, offline replay) 8x slower: 284 s and one 300 s
# timeout in a fresh-clone run on a slow host phase (2026-12-02)
ss_add_test(native_truth_test SOURCES ${CMAKE_SOURCE_DIR}/test/native/truth_test.c ${NW_HARNESS}
  LABELS native TIMEOUT 600)
add_dependencies(native_truth_test native_workload_pie native_workload_nopie native_dl)

ss_add_test(native_elf_test SOURCES ${CMAKE_SOURCE_DIR}/test/native/elf_test.c
  LABELS native TIMEOUT 120)
add_dependencies(native_elf_test native_workload_pie native_workload_nopie)

# Same workload, same time: our chains against `perf record --call-graph dwarf`.
# Normal build only: it measures agreement with another profiler, not memory
# safety; its sampling and live unwinding (harness.c's nw_sample on
# native_workload_pie's qsort, signal and threads modes) run under ASan in
# native_truth_test, and the rest is this test's own parsing of perf script
# (it ran alone for 10 s of the ASan phase). Alone (CMakeLists.txt), its three
# cases at once: each is 2 s of perf and our capture on one workload process,
# then perf script, mostly one core busy of the two.
if(NOT SS_SANITIZE)
  ss_add_test(native_perf_test SOURCES ${CMAKE_SOURCE_DIR}/test/native/perf_test.c ${NW_HARNESS}
    LABELS native TIMEOUT 180 JOBS 3)
  add_dependencies(native_perf_test native_workload_pie)
endif()

# PLT symbols (NAME@plt) against objdump's labels: tarantool, luajit, libc and
# a small program linked with an IBT PLT (.plt.sec, PIE) and a plain one.
foreach(v ibt plain)
  add_executable(native_plt_${v} ${CMAKE_SOURCE_DIR}/test/native/plt_prog.c)
  target_compile_options(native_plt_${v} PRIVATE -O2 -fno-builtin -fno-sanitize=all)
  target_link_options(native_plt_${v} PRIVATE -fno-sanitize=all)
  target_link_libraries(native_plt_${v} PRIVATE m)
endforeach()
target_compile_options(native_plt_ibt PRIVATE -fcf-protection=full -fPIE)
target_link_options(native_plt_ibt PRIVATE -pie -Wl,-z,ibtplt)
target_compile_options(native_plt_plain PRIVATE -fcf-protection=none -fno-pie)
target_link_options(native_plt_plain PRIVATE -no-pie)
ss_add_test(native_procid_test SOURCES ${CMAKE_SOURCE_DIR}/test/native/procid_test.c
  LABELS native TIMEOUT 60)
target_include_directories(native_procid_test PRIVATE ${CMAKE_SOURCE_DIR}/src)

ss_add_test(native_plt_test SOURCES ${CMAKE_SOURCE_DIR}/test/native/plt_test.c
  LABELS native TIMEOUT 120)
add_dependencies(native_plt_test native_plt_ibt native_plt_plain)
