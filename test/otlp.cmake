# OTLP profiles (issue 30): record/replay -o x.otlp decoded by protoc with
# the official v1.11.0 schema (Debian's protobuf-compiler), and the agent's
# --otlp push to a loopback receiver. Only in builds with OTLP.
if(SS_HAVE_OTLP)
  set(OTLP_T ${CMAKE_CURRENT_LIST_DIR}/otlp)
  add_library(otlp_pbtext STATIC ${OTLP_T}/pbtext.c)
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
