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

add_library(cli_helpers STATIC ${CLI_T}/cli.c)
target_link_libraries(cli_helpers PUBLIC stacksnap)
target_compile_definitions(cli_helpers PRIVATE SS_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  SS_BINARY_DIR="${CMAKE_BINARY_DIR}")

foreach(t determinism portability badinput usage fixtures shortcalls diff top)
  ss_add_test(cli_${t} SOURCES ${CLI_T}/${t}.c LABELS cli TIMEOUT 300)
  target_link_libraries(cli_${t} PRIVATE cli_helpers)
  add_dependencies(cli_${t} stacksnap_cli cli_native cli_native_alt)
endforeach()
ss_add_test(cli_session SOURCES ${CLI_T}/session.c LABELS cli TIMEOUT 300)
target_link_libraries(cli_session PRIVATE cli_helpers util)
add_dependencies(cli_session stacksnap_cli cli_native)

# Fixture maker (test/fixtures/make.sh): prunes bundles of a capture while an
# in-process replay still gives the live output.
add_executable(cli_fixtool ${CMAKE_SOURCE_DIR}/test/fixtures/fixtool.c)
target_include_directories(cli_fixtool PRIVATE ${CLI_T})
target_link_libraries(cli_fixtool PRIVATE cli_helpers PkgConfig::ZLIB PkgConfig::ZSTD)
