# Report writers (src/report/): tests on hand-made stacks.
set(SS_REPORT_FX ${CMAKE_SOURCE_DIR}/test/report/fixture.c)
ss_add_test(report_folded SOURCES ${CMAKE_SOURCE_DIR}/test/report/folded.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 120)
target_include_directories(report_folded PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
ss_add_test(report_pprof SOURCES ${CMAKE_SOURCE_DIR}/test/report/pprof.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 180)
target_include_directories(report_pprof PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
ss_add_test(report_perf SOURCES ${CMAKE_SOURCE_DIR}/test/report/perf.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 120)
target_include_directories(report_perf PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
pkg_check_modules(SS_PNG REQUIRED IMPORTED_TARGET libpng)
ss_add_test(report_svg SOURCES ${CMAKE_SOURCE_DIR}/test/report/svg.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 300)
target_include_directories(report_svg PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
target_link_libraries(report_svg PRIVATE PkgConfig::SS_PNG)
