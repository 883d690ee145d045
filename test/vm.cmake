# Kernel matrix (issue 13): Debian's stock kernels (bullseye 5.10, bookworm
# 6.1, trixie 6.12, sid) booted under qemu with software emulation, the built
# programs and workloads in an initramfs; test/vm/matrix.sh boots one and
# judges what test/vm/guest.sh reports. Kernels are cached outside the build
# (${SS_CACHE:-/var/cache/stacksnap}/kernels). Normal build only: the guest
# runs the normal binaries, an ASan copy would double the ~5 minutes.
if(NOT SS_SANITIZE)
  foreach(suite bullseye bookworm trixie sid)
    add_test(NAME vm_${suite}
      COMMAND ${CMAKE_SOURCE_DIR}/test/vm/matrix.sh ${suite} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(vm_${suite} PROPERTIES TIMEOUT 700 LABELS vm RESOURCE_LOCK vm)
  endforeach()
endif()
# The arm64 cross build (scripts/dev test builds it first and names it in
# SS_ARM64_BUILD) booted on Debian's stock arm64 kernel under
# qemu-system-aarch64 -cpu max (test/vm/arm64.sh): native and LuaJIT
# interpreter chains, both BPF programs.
set(SS_ARM64_BUILD "" CACHE PATH "a cross build for arm64 (build-arm64) to boot in the arm64 VM test")
if(NOT SS_SANITIZE AND SS_ARM64_BUILD)
  add_test(NAME vm_arm64
    COMMAND ${CMAKE_SOURCE_DIR}/test/vm/arm64.sh ${CMAKE_SOURCE_DIR} ${SS_ARM64_BUILD})
  set_tests_properties(vm_arm64 PROPERTIES TIMEOUT 700 LABELS "vm;arm64" RESOURCE_LOCK vm)
  # trixie's 6.12 and sid's arm64 kernels: a short run on each (both
  # programs load, the PAC chain, luajit -joff's chain)
  add_test(NAME vm_arm64_kernels
    COMMAND ${CMAKE_SOURCE_DIR}/test/vm/arm64.sh ${CMAKE_SOURCE_DIR} ${SS_ARM64_BUILD} trixie sid)
  set_tests_properties(vm_arm64_kernels PROPERTIES TIMEOUT 700 LABELS "vm;arm64" RESOURCE_LOCK vm)
endif()
