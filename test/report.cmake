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
# The sanitizer build runs report_svg's xml_is_valid only: every case writes
# the same fixture's SVG with the same writer (setup()) and xml_is_valid also
# writes the empty one; the others run headless Chromium on it and parse its
# DOM and screenshot in the test (~10 s of the ASan phase, nothing of ours).
if(SS_SANITIZE)
  set_property(TEST report_svg APPEND PROPERTY ENVIRONMENT
    "CRITERION_TEST_PATTERN=report_svg/xml_is_valid")
endif()
