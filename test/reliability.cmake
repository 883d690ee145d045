# Reliability and security (issue 9): fuzzing, process churn, torn state,
# SIGKILL, never stopping the target, least privilege, hostile targets,
# valgrind. See docs/security.md.
set(RL_DIR ${CMAKE_SOURCE_DIR}/test/reliability)
set(FZ_DIR ${CMAKE_SOURCE_DIR}/test/fuzz)

# ---- fuzzing -------------------------------------------------------------
# Seed generator for lj_fuzz: samples a live LuaJIT process and records the
# inputs of every ss_lj_splice and ss_lj_trace_cfa call (linker --wrap).
add_executable(rl_lj_mkseed ${FZ_DIR}/lj_mkseed.c)
target_link_libraries(rl_lj_mkseed PRIVATE stacksnap)
target_link_options(rl_lj_mkseed PRIVATE -Wl,--wrap=ss_lj_splice,--wrap=ss_lj_trace_cfa)

# The fuzzers need clang's libFuzzer whatever compiler builds the rest: they
# are their own CMake project (test/fuzz/CMakeLists.txt), built with clang
# into BUILD/fuzz. Only in the plain build: the fuzzers carry ASan+UBSan
# themselves, the sanitizer variant would only build them twice.
if(NOT SS_SANITIZE)
  include(ExternalProject)
  set(FZ_BIN ${CMAKE_BINARY_DIR}/fuzz)
  ExternalProject_Add(rl_fuzzers
    SOURCE_DIR ${FZ_DIR}
    BINARY_DIR ${FZ_BIN}
    CMAKE_ARGS -DCMAKE_C_COMPILER=${CLANG} -DCMAKE_ASM_COMPILER=${CLANG}
               -DSS_SOURCE_DIR=${CMAKE_SOURCE_DIR} -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # a fuzz build failure fails the fuzz_* tests, not the whole build
    BUILD_COMMAND sh -c "${CMAKE_COMMAND} --build . || echo 'rl_fuzzers: build FAILED, fuzz_* tests will fail' >&2"
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    USES_TERMINAL_BUILD OFF)
  # Each fuzzer: first every regression input (crashes found earlier, fixed),
  # then a short run from the seeds. Run them long by hand: docs/security.md.
  set(FZ_SECS 10)
  set(FZ_RUN ${RL_DIR}/fuzz_run.sh)
  add_test(NAME fuzz_elf COMMAND ${FZ_RUN} ${FZ_BIN}/elf_fuzz ${FZ_DIR}/regress/elf ${FZ_SECS}
    -max_len=65536 ${FZ_BIN}/elf_seeds)
  add_test(NAME fuzz_lj COMMAND ${FZ_RUN} ${FZ_BIN}/lj_fuzz ${FZ_DIR}/regress/lj ${FZ_SECS}
    -max_len=65536 ${FZ_DIR}/seeds/lj)
  set(FZ_TESTS fuzz_elf fuzz_lj)
  # The capture reader's fuzzers (test/snapfile.cmake adds them itself when
  # the main compiler is clang).
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    foreach(v snapfile_fuzz snapfile_fuzz_nocrc)
      add_test(NAME fuzz_${v} COMMAND sh -c "rm -rf corpus-fz-${v} && mkdir corpus-fz-${v} && \
$<TARGET_FILE:snapfile_mkseed> corpus-fz-${v} >/dev/null && \
${FZ_RUN} ${FZ_BIN}/${v} ${FZ_DIR}/regress/snapfile ${FZ_SECS} -max_len=8192 corpus-fz-${v}")
      list(APPEND FZ_TESTS fuzz_${v})
    endforeach()
  endif()
  set_tests_properties(${FZ_TESTS} PROPERTIES TIMEOUT 300 LABELS "reliability;fuzz")
endif()

# ---- tests ---------------------------------------------------------------
set(RL_HELP ${RL_DIR}/rl.c)
ss_add_test(rl_gc SOURCES ${RL_DIR}/gc_test.c ${RL_HELP} LABELS reliability TIMEOUT 180)
ss_add_test(rl_torn SOURCES ${RL_DIR}/torn_test.c ${RL_HELP} LABELS reliability TIMEOUT 300)
ss_add_test(rl_churn SOURCES ${RL_DIR}/churn_test.c ${RL_HELP} LABELS reliability TIMEOUT 400)
ss_add_test(rl_kill SOURCES ${RL_DIR}/kill_test.c ${RL_HELP} LABELS reliability TIMEOUT 300)
# Never stopping the target is the program's behaviour, not memory safety:
# normal build only (it ran alone for 9 s of the ASan phase). Its recorder's
# path (record -p of torn.lua at 999 Hz, Lua walks) runs under ASan in rl_kill
# and rl_torn.
if(NOT SS_SANITIZE)
  ss_add_test(rl_nostop SOURCES ${RL_DIR}/nostop_test.c ${RL_HELP} LABELS reliability
    TIMEOUT 300)
endif()

# hostile targets: a library mapped, then swapped on disk (other ELF,
# symlink, FIFO) or shipped with a .gnu_debuglink into a FIFO
find_program(RL_OBJCOPY objcopy REQUIRED)
foreach(v alpha_spin beta_evil)
  string(REGEX REPLACE "_.*" "" lib ${v})
  add_library(rl_${lib} SHARED ${RL_DIR}/hostile_lib.c)
  target_compile_definitions(rl_${lib} PRIVATE RL_FN=rl_${v})
  set_target_properties(rl_${lib} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endforeach()
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/librl_alpha_dl.so
  # the link's CRC is of a file that is not the debug file (any file will do)
  COMMAND ${CMAKE_COMMAND} -E copy ${RL_DIR}/hostile_lib.c evil.debug
  COMMAND ${RL_OBJCOPY} --strip-all --add-gnu-debuglink=evil.debug $<TARGET_FILE:rl_alpha>
          librl_alpha_dl.so
  COMMAND ${CMAKE_COMMAND} -E rm -f evil.debug
  DEPENDS rl_alpha WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "stripped rl_alpha with a .gnu_debuglink")
add_custom_target(rl_alpha_dl ALL DEPENDS ${CMAKE_BINARY_DIR}/librl_alpha_dl.so)
add_executable(rl_hostile_target ${RL_DIR}/hostile_target.c)
target_link_libraries(rl_hostile_target PRIVATE dl)
ss_add_test(rl_hostile SOURCES ${RL_DIR}/hostile_test.c ${RL_HELP} LABELS reliability TIMEOUT 400)
add_dependencies(rl_hostile rl_hostile_target rl_alpha rl_beta rl_alpha_dl)
ss_add_test(rl_caps SOURCES ${RL_DIR}/caps_test.c ${RL_HELP} LABELS reliability TIMEOUT 300)
# Alone (CMakeLists.txt), its two cases at once: valgrind runs a program's
# threads one at a time, so each case keeps one core busy (the fixtures' four
# runs on one, the fresh capture's record and replay on the other).
if(NOT SS_SANITIZE) # valgrind and ASan do not mix
  ss_add_test(rl_valgrind SOURCES ${RL_DIR}/valgrind_test.c ${RL_HELP} LABELS reliability
    TIMEOUT 900 JOBS 2)
endif()
