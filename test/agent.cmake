# The agent (issue 19): `stacksnap agent` as a subprocess with real clients —
# go tool pprof, Debian's prometheus and promtool, curl, a Pyroscope ingest
# receiver on libmicrohttpd — real BPF and the CLI tests' workloads.
set(AG_T ${CMAKE_CURRENT_LIST_DIR}/agent)
ss_add_test(agent_e2e SOURCES ${AG_T}/agent_test.c ${AG_T}/agent_util.c LABELS agent TIMEOUT 300)
target_link_libraries(agent_e2e PRIVATE cli_helpers)
add_dependencies(agent_e2e stacksnap_cli cli_native)
# cmake --install: binary, man page, systemd unit (its capabilities and
# systemd-analyze's offline security rating).
add_test(NAME agent_install COMMAND ${AG_T}/install.sh ${CMAKE_BINARY_DIR})
set_tests_properties(agent_install PROPERTIES LABELS agent TIMEOUT 60)
# The 3-minute soak under process churn (issue 19): memory flat, exited
# processes freed, truncation and unwind errors under measured bars. Normal
# build only (ASan's quarantine keeps freed memory resident).
if(NOT SS_SANITIZE)
  ss_add_test(agent_soak SOURCES ${AG_T}/soak_test.c ${AG_T}/agent_util.c LABELS "agent;soak"
    TIMEOUT 360)
  target_link_libraries(agent_soak PRIVATE cli_helpers)
  add_dependencies(agent_soak stacksnap_cli)
endif()
# The agent on an open network (issue 31): slowloris, bad requests,
# dropped connections and the log, from real sockets and curl. Its three
# cases at once (each its own agent on its own port): the slowloris case
# mostly waits for the agent's idle timeout (~20 s), the others fit beside it.
ss_add_test(agent_net SOURCES ${AG_T}/net_test.c ${AG_T}/agent_util.c LABELS agent TIMEOUT 300
  JOBS 3)
target_link_libraries(agent_net PRIVATE cli_helpers)
add_dependencies(agent_net stacksnap_cli cli_native)
# TLS and authentication (issue 31): openssl-made certificates, curl,
# bcrypt basic auth, bearer token, bad configurations, push over TLS. Two
# cases at a time (own agents, ports and folders): they mostly wait on
# pushes, scrapes and profiles of fixed seconds.
ss_add_test(agent_tls SOURCES ${AG_T}/tls_test.c ${AG_T}/agent_util.c LABELS agent TIMEOUT 300
  JOBS 2)
target_link_libraries(agent_tls PRIVATE cli_helpers)
add_dependencies(agent_tls stacksnap_cli cli_native)
