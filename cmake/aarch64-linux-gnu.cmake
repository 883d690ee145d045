# cmake/aarch64-linux-gnu.cmake: cross-compiling stacksnap for arm64 on a
# Debian x86-64 machine (scripts/dev cross arm64): Debian's
# gcc-aarch64-linux-gnu and the multiarch -dev:arm64 packages (headers in
# /usr/include, /usr/include/aarch64-linux-gnu; libraries and .pc files in
# /usr/lib/aarch64-linux-gnu). Host tools (clang -target bpf, bpftool,
# protoc-c) are the build machine's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config: the arm64 .pc files only, never the build machine's
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
