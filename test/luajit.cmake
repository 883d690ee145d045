# LuaJIT frames (src/unwind/luajit/): detection, layouts, live walks.
set(LJT_DIR ${CMAKE_SOURCE_DIR}/test/luajit)
ss_add_test(luajit_detect SOURCES ${LJT_DIR}/test_detect.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 180)
ss_add_test(luajit_walk SOURCES ${LJT_DIR}/test_walk.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 180)
ss_add_test(luajit_garbage SOURCES ${LJT_DIR}/test_garbage.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 120)
foreach(t luajit_detect luajit_walk luajit_garbage)
  target_include_directories(${t} PRIVATE ${LJT_DIR})
endforeach()
# C host embedding libluajit-5.1 (Debian) for the nested-entry test.
pkg_check_modules(LUAJIT REQUIRED IMPORTED_TARGET luajit)
add_executable(lj_host ${LJT_DIR}/lj_host.c)
target_link_libraries(lj_host PRIVATE PkgConfig::LUAJIT)
ss_add_test(luajit_host SOURCES ${LJT_DIR}/test_host.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 120)
target_include_directories(luajit_host PRIVATE ${LJT_DIR})
add_dependencies(luajit_host lj_host)
# Layout facts derived from the code vs the table rows and vs offsetof() on
# Debian 13's source (needs the builds: luajit_builds fixture).
ss_add_test(luajit_derive SOURCES ${LJT_DIR}/test_derive.c ${LJT_DIR}/ljtest.c LABELS luajit TIMEOUT 300)
target_include_directories(luajit_derive PRIVATE ${LJT_DIR})
set_tests_properties(luajit_derive PROPERTIES FIXTURES_REQUIRED "luajit_builds;luajit_tt_builds")
