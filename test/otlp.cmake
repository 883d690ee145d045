# OTLP profiles (issue 30): record/replay -o x.otlp decoded by protoc with
# the official v1.11.0 schema (Debian's protobuf-compiler), and the agent's
# --otlp push to a loopback receiver. Only in builds with OTLP.
if(SS_HAVE_OTLP)
  set(OTLP_T ${CMAKE_CURRENT_LIST_DIR}/otlp)
  add_library(otlp_pbtext STATIC ${OTLP_T}/pbtext.c ${OTLP_T}/otlp_util.c)
  target_link_libraries(otlp_pbtext PUBLIC cli_helpers PkgConfig::CRITERION)
  target_compile_definitions(otlp_pbtext PRIVATE SS_OTLP_PROTO_DIR="${SS_OTLP_PROTO_DIR}")
  ss_add_test(otlp_record SOURCES ${OTLP_T}/otlp_test.c LABELS otlp TIMEOUT 300)
  target_link_libraries(otlp_record PRIVATE cli_helpers otlp_pbtext)
  target_compile_definitions(otlp_record PRIVATE SS_OTLP_PROTO_DIR="${SS_OTLP_PROTO_DIR}")
  add_dependencies(otlp_record stacksnap_cli cli_native)
endif()
if(SS_HAVE_OTLP)
  ss_add_test(otlp_agent SOURCES ${OTLP_T}/otlp_agent.c ${CMAKE_CURRENT_LIST_DIR}/agent/agent_util.c
    LABELS "otlp;agent" TIMEOUT 300)
  target_link_libraries(otlp_agent PRIVATE cli_helpers otlp_pbtext)
  target_compile_definitions(otlp_agent PRIVATE SS_OTLP_PROTO_DIR="${SS_OTLP_PROTO_DIR}")
  add_dependencies(otlp_agent stacksnap_cli cli_native)
endif()
# The Collector's reader: a sid root with golang-opentelemetry-collector-dev
# (test/roots/mkroot.sh, cached), collector_reader.go built there (fixture).
if(SS_HAVE_OTLP)
  add_test(NAME otlp_collector_reader
    COMMAND ${OTLP_T}/collector.sh ${CMAKE_BINARY_DIR}/otlp_collector_reader)
  set_tests_properties(otlp_collector_reader PROPERTIES FIXTURES_SETUP otlp_collector
    TIMEOUT 2400 LABELS "otlp;collector")
  ss_add_test(otlp_collector SOURCES ${OTLP_T}/collector_test.c LABELS "otlp;collector"
    TIMEOUT 300)
  target_link_libraries(otlp_collector PRIVATE otlp_pbtext)
  add_dependencies(otlp_collector stacksnap_cli)
  set_tests_properties(otlp_collector PROPERTIES FIXTURES_REQUIRED otlp_collector)
endif()
