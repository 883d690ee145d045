# End-to-end tests of the `stacksnap` command (issues 6 and 7): criterion
# binaries that run the real CLI as a subprocess against real workloads with
# real BPF (determinism, portability, usage, signals, terminal output), bad
# captures, and the committed fixtures of test/fixtures/ (no BPF needed).
set(CLI_T ${CMAKE_CURRENT_LIST_DIR}/cli)

# The native workload: -O2 without frame pointers or sanitizers; the _alt
# build is the same program with another build-id.
foreach(v cli_native cli_native_alt)
  add_executable(${v} ${CLI_T}/native.c)
  target_compile_options(${v} PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
  target_link_options(${v} PRIVATE -fno-sanitize=all)
endforeach()
target_compile_definitions(cli_native_alt PRIVATE CLI_ALT)
add_executable(cli_execloop ${CLI_T}/execloop.c)
target_compile_options(cli_execloop PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
target_link_options(cli_execloop PRIVATE -fno-sanitize=all)

add_library(cli_helpers STATIC ${CLI_T}/cli.c ${CLI_T}/inproc_replay.c ${CLI_T}/counts.c ${CLI_T}/oracle.c)
target_link_libraries(cli_helpers PUBLIC stacksnap)
target_compile_definitions(cli_helpers PRIVATE SS_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  SS_BINARY_DIR="${CMAKE_BINARY_DIR}")

# cli_shortcalls measures coverage shares (issue 14's bars), not memory
# safety: the windows and the GC proof run under ASan in rl_torn,
# luajit_walk, cli_fixtures and cli_determinism. Normal build only.
set(CLI_TESTS determinism portability badinput usage fixtures diff top kernel offcpu exec)
if(NOT SS_SANITIZE)
  list(APPEND CLI_TESTS shortcalls jitoracle)
endif()
# cli_usage and cli_top run alone (CMakeLists.txt) but mostly wait (short
# commands, a terminal's screen): their cases two and three at a time.
foreach(t ${CLI_TESTS})
  set(jobs 1)
  if(t STREQUAL usage)
    set(jobs 2)
  elseif(t STREQUAL top)
    set(jobs 3)
  endif()
  ss_add_test(cli_${t} SOURCES ${CLI_T}/${t}.c LABELS cli TIMEOUT 300 JOBS ${jobs})
  target_link_libraries(cli_${t} PRIVATE cli_helpers)
  add_dependencies(cli_${t} stacksnap_cli cli_native cli_native_alt cli_execloop)
endforeach()
# the arm64 forward replay judged on its fixtures (fixtures_fwd.c)
target_sources(cli_fixtures PRIVATE ${CLI_T}/fixtures_fwd.c)
if(NOT SS_SANITIZE)
  add_dependencies(cli_shortcalls lj_host) # the C host case
  # 27 recordings of 1 s of the target's CPU time at 999 Hz (~1,000 samples
  # each, as 2 s at 499 Hz gave) and one of 2 s: ~45 s on an idle machine
  # (85 s with 2 s recordings; 330 s seen with those at a load average of 15,
  # every case passed)
  set_tests_properties(cli_shortcalls PROPERTIES FIXTURES_REQUIRED luajit_builds TIMEOUT 900)
endif()
ss_add_test(cli_session SOURCES ${CLI_T}/session.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_session PRIVATE cli_helpers util)
add_dependencies(cli_session stacksnap_cli cli_native)

# Fixture maker (test/fixtures/make.sh): prunes bundles of a capture while an
# in-process replay still gives the live output.
add_executable(cli_fixtool ${CMAKE_SOURCE_DIR}/test/fixtures/fixtool.c)
target_include_directories(cli_fixtool PRIVATE ${CLI_T})
target_link_libraries(cli_fixtool PRIVATE cli_helpers PkgConfig::ZLIB PkgConfig::ZSTD)

# Demangled names (issue 16): a g++ program with namespaces and templates and
# a program built by Debian's rustc (PKGS), both with their symbol tables.
find_program(SS_GXX g++ REQUIRED)
find_program(SS_RUSTC rustc PATHS /usr/bin NO_DEFAULT_PATH)
find_program(SS_RUSTC rustc)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/demangle_cxx
  COMMAND ${SS_GXX} -O2 -g -o ${CMAKE_BINARY_DIR}/demangle_cxx ${CLI_T}/demangle_cxx.cpp
  DEPENDS ${CLI_T}/demangle_cxx.cpp COMMENT "g++ demangle_cxx")
set(DEMANGLE_PROGS ${CMAKE_BINARY_DIR}/demangle_cxx)
if(SS_RUSTC)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/demangle_rs
    COMMAND ${SS_RUSTC} -O -g -o ${CMAKE_BINARY_DIR}/demangle_rs ${CLI_T}/demangle_rs.rs
    DEPENDS ${CLI_T}/demangle_rs.rs COMMENT "rustc demangle_rs")
  list(APPEND DEMANGLE_PROGS ${CMAKE_BINARY_DIR}/demangle_rs)
else()
  message(WARNING "rustc not found (Debian package rustc): cli_demangle's Rust case will fail")
endif()
add_custom_target(demangle_progs DEPENDS ${DEMANGLE_PROGS})
ss_add_test(cli_demangle SOURCES ${CLI_T}/demangle.c LABELS cli TIMEOUT 120)
target_link_libraries(cli_demangle PRIVATE cli_helpers)
add_dependencies(cli_demangle stacksnap_cli demangle_progs)

# Perf maps (issue 16): a JIT-like program names its anonymous code in
# /tmp/perf-PID.map; live and replayed names.
add_executable(cli_jitmap ${CLI_T}/jitmap.c)
target_compile_options(cli_jitmap PRIVATE -O2 -fno-sanitize=all)
target_link_options(cli_jitmap PRIVATE -fno-sanitize=all)
ss_add_test(cli_perfmap SOURCES ${CLI_T}/perfmap.c LABELS cli TIMEOUT 120)
target_link_libraries(cli_perfmap PRIVATE cli_helpers)
add_dependencies(cli_perfmap stacksnap_cli cli_jitmap)

# debuginfod (issue 16): Debian's debuginfod server on loopback serves the
# debug file of a fully stripped copy of cli_dfdprog that the test splits off.
add_executable(cli_dfdprog ${CLI_T}/dfdprog.c)
target_compile_options(cli_dfdprog PRIVATE -O1 -g -fno-sanitize=all)
target_link_options(cli_dfdprog PRIVATE -fno-sanitize=all)
ss_add_test(cli_debuginfod SOURCES ${CLI_T}/debuginfod.c ${CMAKE_CURRENT_LIST_DIR}/agent/agent_util.c
  LABELS cli TIMEOUT 180)
target_link_libraries(cli_debuginfod PRIVATE cli_helpers)
add_dependencies(cli_debuginfod stacksnap_cli cli_dfdprog)

# record --no-stack-bytes (issue 31): targets that keep a random secret on
# their stack (native, and a libluajit host); the capture must not hold it
# and must replay to the live outputs.
pkg_check_modules(SECRET_LUAJIT REQUIRED IMPORTED_TARGET luajit)
foreach(v cli_secret cli_secret_lj)
  add_executable(${v} ${CLI_T}/secret.c)
  target_compile_options(${v} PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
  target_link_options(${v} PRIVATE -fno-sanitize=all)
endforeach()
target_compile_definitions(cli_secret_lj PRIVATE SECRET_LUA)
target_link_libraries(cli_secret_lj PRIVATE PkgConfig::SECRET_LUAJIT)
ss_add_test(cli_nostack SOURCES ${CLI_T}/nostack.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_nostack PRIVATE cli_helpers)
add_dependencies(cli_nostack stacksnap_cli cli_secret cli_secret_lj)

# Code without CFI (issue 32): PCRE2's JIT and hand-written JIT code with and
# without a perf map, beneath a C chain built without frame pointers; the
# native walk steps over it by a validated stack scan (native_scan.c).
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
add_executable(cli_nocfi ${CLI_T}/nocfi.c)
target_compile_options(cli_nocfi PRIVATE -O2 -fomit-frame-pointer -fno-sanitize=all)
target_link_options(cli_nocfi PRIVATE -fno-sanitize=all)
target_link_libraries(cli_nocfi PRIVATE PkgConfig::PCRE2)
# the same with frame pointers: callers whose CFA is rbp-based, under code
# that uses rbp for itself
add_executable(cli_nocfi_fp ${CLI_T}/nocfi.c)
target_compile_options(cli_nocfi_fp PRIVATE -O2 -fno-omit-frame-pointer -fno-sanitize=all)
target_link_options(cli_nocfi_fp PRIVATE -fno-sanitize=all)
target_link_libraries(cli_nocfi_fp PRIVATE PkgConfig::PCRE2)
ss_add_test(cli_jitscan SOURCES ${CLI_T}/jitscan.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_jitscan PRIVATE cli_helpers)
add_dependencies(cli_jitscan stacksnap_cli cli_nocfi cli_nocfi_fp)
# The same under OpenResty's ngx.re "jo" (nginx + lua module of Debian 12,
# unpacked by test/luajit/fetch-nginx.sh; wrk on loopback).
ss_add_test(cli_ngxre SOURCES ${CLI_T}/ngxre.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_ngxre PRIVATE cli_helpers)
add_dependencies(cli_ngxre stacksnap_cli)
# The differential oracle in nginx (issue 32): lua-resty-core's FFI paths and
# lua-cjson with jit.off() and with the JIT on, deep recursion; Debian 12's
# nginx, Debian 13's in a container (the trixie root of luajit_trixie_setup)
# and sid's (a root named sid-nginx: roots/sid is the Collector's).
add_test(NAME cli_ngxoracle_sid_setup COMMAND sh -c
  "${CMAKE_SOURCE_DIR}/test/roots/mkroot.sh sid luajit,libluajit-5.1-2,nginx,libnginx-mod-http-lua,lua-resty-core,lua-cjson sid-nginx >/dev/null")
set_tests_properties(cli_ngxoracle_sid_setup PROPERTIES FIXTURES_SETUP ngx_sid_root TIMEOUT 900
  LABELS cli)
ss_add_test(cli_ngxoracle SOURCES ${CLI_T}/ngxoracle.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_ngxoracle PRIVATE cli_helpers)
add_dependencies(cli_ngxoracle stacksnap_cli)
set_tests_properties(cli_ngxoracle PROPERTIES FIXTURES_REQUIRED "luajit_builds;ngx_sid_root")
# The sanitizer build walks the container case only: the walker's code under
# ASan is the same for the three nginx builds (the normal build judges them
# all), and each case is ~14 s of a test that runs alone.
if(SS_SANITIZE)
  set_property(TEST cli_ngxoracle APPEND PROPERTY ENVIRONMENT
    "CRITERION_TEST_PATTERN=ngxoracle/trixie_nginx_container")
endif()
