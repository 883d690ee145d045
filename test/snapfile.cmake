# Capture-file (snapfile/) tests: round trip of every record type, damage
# (truncation at every offset, byte flips, random inputs, SIGKILL, full disk),
# bad-input errors and output-file safety.
set(SNAPFILE_TEST_HELPERS ${CMAKE_CURRENT_LIST_DIR}/snapfile/helpers.c)
ss_add_test(snapfile_roundtrip SOURCES ${CMAKE_CURRENT_LIST_DIR}/snapfile/roundtrip.c
  ${SNAPFILE_TEST_HELPERS} LABELS snapfile TIMEOUT 120)
