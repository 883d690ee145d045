# Report writers (src/report/): tests on hand-made stacks.
set(SS_REPORT_FX ${CMAKE_SOURCE_DIR}/test/report/fixture.c)
ss_add_test(report_folded SOURCES ${CMAKE_SOURCE_DIR}/test/report/folded.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 120)
target_include_directories(report_folded PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
ss_add_test(report_pprof SOURCES ${CMAKE_SOURCE_DIR}/test/report/pprof.c ${SS_REPORT_FX}
  LABELS report TIMEOUT 180)
target_include_directories(report_pprof PRIVATE ${CMAKE_SOURCE_DIR}/test/report)
