# LuaJIT coroutines, FFI callbacks, servers (OpenResty, Tarantool), the build
# matrix and the witness test: recorded with real BPF (test/luajit/ljrec.c).
set(LJC_DIR ${CMAKE_SOURCE_DIR}/test/luajit)
set(LJC_COMMON ${LJC_DIR}/ljrec.c ${LJC_DIR}/ljcheck.c ${LJC_DIR}/ljtest.c)
ss_add_test(luajit_coro SOURCES ${LJC_DIR}/test_coro.c ${LJC_COMMON} LABELS luajit TIMEOUT 120)
foreach(t luajit_coro)
  target_include_directories(${t} PRIVATE ${LJC_DIR})
endforeach()
# Build matrix: Debian's LuaJIT source built four ways, once (cached in
# ext/ of the build folder; the fixture gives the first build its own time).
add_test(NAME luajit_matrix_build COMMAND ${LJC_DIR}/build-luajit.sh ${CMAKE_BINARY_DIR}/ext)
set_tests_properties(luajit_matrix_build PROPERTIES FIXTURES_SETUP luajit_builds TIMEOUT 900
  LABELS luajit)
ss_add_test(luajit_matrix SOURCES ${LJC_DIR}/test_matrix.c ${LJC_COMMON} LABELS luajit TIMEOUT 400)
target_include_directories(luajit_matrix PRIVATE ${LJC_DIR})
add_dependencies(luajit_matrix lj_host)
set_tests_properties(luajit_matrix PROPERTIES FIXTURES_REQUIRED luajit_builds)
ss_add_test(luajit_servers SOURCES ${LJC_DIR}/test_servers.c ${LJC_COMMON} LABELS luajit TIMEOUT 180)
target_include_directories(luajit_servers PRIVATE ${LJC_DIR})
target_link_libraries(luajit_servers PRIVATE cli_helpers) # cli_free_port, cli_port_open
# The jit.p witness with the JIT off: normal build only, as luajit_jitwit (it
# measures agreement between two profilers, not memory safety; the
# interpreter's walks of its calls, builtins and coroutine run under ASan in
# luajit_walk, luajit_coro and luajit_matrix; it ran alone for 4 s of the
# ASan phase).
if(NOT SS_SANITIZE)
  ss_add_test(luajit_witness SOURCES ${LJC_DIR}/test_witness.c ${LJC_COMMON} LABELS luajit
    TIMEOUT 180)
  target_include_directories(luajit_witness PRIVATE ${LJC_DIR})
endif()
# Debian 13 (trixie): its luajit source built four ways and a debootstrap
# root with its luajit, nginx and lua module, both cached outside the build
# folder in ${SS_CACHE:-/var/cache/stacksnap} (luajit/, roots/trixie).
add_test(NAME luajit_trixie_setup COMMAND sh -c
  "${LJC_DIR}/build-luajit.sh \"\${SS_CACHE:-/var/cache/stacksnap}/luajit\" trixie && ${CMAKE_SOURCE_DIR}/test/roots/mkroot.sh trixie luajit,libluajit-5.1-2,nginx,libnginx-mod-http-lua,lua-resty-core,lua-cjson >/dev/null")
set_tests_properties(luajit_trixie_setup PROPERTIES FIXTURES_SETUP luajit_builds TIMEOUT 900
  LABELS luajit)
# Stripped builds of the matrix named as their own symbol tables name them
# (issue 16: LuaJIT internals without symbols).
ss_add_test(luajit_stripped SOURCES ${LJC_DIR}/test_stripped.c ${LJC_COMMON} LABELS luajit TIMEOUT 300)
target_include_directories(luajit_stripped PRIVATE ${LJC_DIR})
set_tests_properties(luajit_stripped PROPERTIES FIXTURES_REQUIRED luajit_builds)
# Tarantool's LuaJIT fork (issue 34): built three ways by build-ttlj.sh into
# ${SS_CACHE:-/var/cache/stacksnap}/luajit (once), recorded stripped.
add_test(NAME luajit_ttfork_build COMMAND ${LJC_DIR}/build-ttlj.sh)
set_tests_properties(luajit_ttfork_build PROPERTIES FIXTURES_SETUP luajit_tt_builds TIMEOUT 900
  LABELS luajit)
ss_add_test(luajit_ttfork SOURCES ${LJC_DIR}/test_ttfork.c ${LJC_COMMON} LABELS luajit TIMEOUT 300)
target_include_directories(luajit_ttfork PRIVATE ${LJC_DIR})
add_dependencies(luajit_ttfork stacksnap_cli)
set_tests_properties(luajit_ttfork PROPERTIES FIXTURES_REQUIRED luajit_tt_builds)
