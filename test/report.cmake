# Report writers (src/report/): tests on the hand-made corpus of
# test/report/fixture.c. pprof needs golang-go, svg needs chromium,
# libxml2-utils and libpng (all in scripts/dev's PKGS).
set(SS_REPORT_TESTS folded top output perf pprof svg)
foreach(t ${SS_REPORT_TESTS})
  ss_add_test(report_${t}
    SOURCES ${CMAKE_SOURCE_DIR}/test/report/${t}.c ${CMAKE_SOURCE_DIR}/test/report/fixture.c
            ${CMAKE_SOURCE_DIR}/test/report/perf_rules.c
    LABELS report TIMEOUT 300)
  target_include_directories(report_${t} PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
endforeach()
pkg_check_modules(SS_PNG REQUIRED IMPORTED_TARGET libpng)
target_link_libraries(report_svg PRIVATE PkgConfig::SS_PNG)
