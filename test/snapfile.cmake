# Capture-file (snapfile/) tests: round trip of every record type, damage
# (truncation at every offset, byte flips, random mutations, crafted garbage,
# SIGKILL, pipes), bad-input errors and output-file safety (0600, symlinks,
# full disk), compression (zstd written, deflate of older captures still
# read). Plus the fuzz corpus generator and, with clang, libFuzzer
# targets for the reader (docs/capture-format.md, "Fuzzing").
set(SNAPFILE_T ${CMAKE_CURRENT_LIST_DIR}/snapfile)
foreach(t roundtrip damage errors compat delta ljdet mapped stackrec)
  ss_add_test(snapfile_${t} SOURCES ${SNAPFILE_T}/${t}.c ${SNAPFILE_T}/helpers.c
    LABELS snapfile TIMEOUT 120)
endforeach()

add_executable(snapfile_mkseed ${CMAKE_CURRENT_LIST_DIR}/fuzz/snapfile_mkseed.c)
target_link_libraries(snapfile_mkseed PRIVATE stacksnap)

if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  # The reader sources are compiled into the fuzzer (coverage-instrumented);
  # _nocrc accepts any CRC so that mutations reach the record decoders.
  set(SNAPFILE_FUZZ_SRC ${CMAKE_CURRENT_LIST_DIR}/fuzz/snapfile_fuzz.c
    ${CMAKE_SOURCE_DIR}/src/snapfile/codec.c ${CMAKE_SOURCE_DIR}/src/snapfile/reader.c
    ${CMAKE_SOURCE_DIR}/src/snapfile/crc.c ${CMAKE_SOURCE_DIR}/src/snapfile/payload.c
    ${CMAKE_SOURCE_DIR}/src/snapfile/delta.c
    ${CMAKE_SOURCE_DIR}/src/snapfile/rdelta.c ${CMAKE_SOURCE_DIR}/src/snapfile/kcodec.c ${CMAKE_SOURCE_DIR}/src/snapfile/ljcodec.c ${CMAKE_SOURCE_DIR}/src/snapfile/frames.c
    ${CMAKE_SOURCE_DIR}/src/snapfile/target.c ${CMAKE_SOURCE_DIR}/src/util/err.c ${CMAKE_SOURCE_DIR}/src/util/zmem.c)
  foreach(v snapfile_fuzz snapfile_fuzz_nocrc)
    add_executable(${v} ${SNAPFILE_FUZZ_SRC})
    target_include_directories(${v} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
    target_compile_options(${v} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${v} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${v} PRIVATE PkgConfig::ZLIB PkgConfig::ZSTD PkgConfig::ISAL)
    target_compile_definitions(${v} PRIVATE SS_HAVE_ISAL=1)
    # a short smoke run in ctest; run it long by hand (see the docs)
    add_test(NAME ${v} COMMAND sh -c "rm -rf corpus-${v} && mkdir corpus-${v} && \
$<TARGET_FILE:snapfile_mkseed> corpus-${v} && $<TARGET_FILE:${v}> -runs=10000 -max_len=8192 corpus-${v}")
    set_tests_properties(${v} PROPERTIES TIMEOUT 300 LABELS "snapfile;fuzz")
  endforeach()
  target_compile_definitions(snapfile_fuzz_nocrc PRIVATE FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
endif()
