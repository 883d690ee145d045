#!/usr/bin/env bash
# test/luajit/build-ttlj-arm64.sh [DEST]: Tarantool's LuaJIT fork (the
# source snapshot build-ttlj.sh builds, or TTLJ_TARBALL) cross-built for
# arm64 with Debian's aarch64-linux-gnu-gcc, cached in DEST (normally
# ${SS_CACHE:-/var/cache/stacksnap}/luajit) as
#   DEST/tt-COMMIT-arm64-gc64-jit/luajit   (LuaJIT linked in statically,
#                                          unstripped: the test strips a copy)
# and prints that directory. GC64 (always on arm64) with the JIT: what
# Tarantool's arm64 packages link in. The fork's CMake builds its host tools
# (minilua, buildvm) with the target compiler, so this uses the fork's
# Makefile.original, whose cross build takes HOST_CC for them and
# CROSS=aarch64-linux-gnu- for the rest. XCFLAGS given on make's command
# line replaces the Makefile's own, so it repeats the one the fork turns on
# by default (as its CMake build does): LUAJIT_SMART_STRINGS=1, the bloom
# filters at the start of global_State (without it every G offset moves by
# 32 bytes). Rebuilt when the binary is missing or was built from another
# source or flags (its SOURCE file; ~1.5 min on 2 cores). Exit 77: no
# source tarball (nothing cached either).
set -euo pipefail
dest=$(mkdir -p "${1:-${SS_CACHE:-/var/cache/stacksnap}/luajit}" && cd "${1:-${SS_CACHE:-/var/cache/stacksnap}/luajit}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tarball=${TTLJ_TARBALL:-$here/../../../shared/tarantool-luajit/tarantool-luajit-b52fe979.tar.gz}
tag=$(basename "$tarball" .tar.gz)
tag=${tag#tarantool-luajit-}
out=$dest/tt-$tag-arm64-gc64-jit
xcflags="-DLUAJIT_ENABLE_GC64 -DLUAJIT_SMART_STRINGS=1"
recipe="$tag arm64 $xcflags (Makefile.original, CROSS=aarch64-linux-gnu-)"
built() { [ -x "$out/luajit" ] && [ "$(cat "$out/SOURCE" 2>/dev/null)" = "$recipe" ]; }
if ! built; then
    [ -f "$tarball" ] || { echo "build-ttlj-arm64: no source tarball $tarball (set TTLJ_TARBALL)" >&2; exit 77; }
    command -v aarch64-linux-gnu-gcc >/dev/null ||
        { echo "build-ttlj-arm64: aarch64-linux-gnu-gcc missing (scripts/dev cross arm64 installs it)" >&2; exit 1; }
    exec 9>"$dest/.tt-build.lock" # the x86-64 builds' lock: one build at a time
    flock 9
    if ! built; then
        log=$dest/tt-build.log
        b=$dest/.tt-build-arm64
        rm -rf "$b" "$out.tmp"
        mkdir -p "$b"
        tar -xzf "$tarball" -C "$b"
        top=$(ls -d "$b"/*/ | head -1)
        t0=$(date +%s)
        jobs=$(nproc)
        [ "$jobs" -gt 2 ] && jobs=2
        if ! make -C "$top/src" -f Makefile.original -j"$jobs" HOST_CC=gcc \
            CROSS=aarch64-linux-gnu- TARGET_SYS=Linux BUILDMODE=static CCDEBUG=-g \
            XCFLAGS="$xcflags" >>"$log" 2>&1; then
            echo "build-ttlj-arm64: the cross build failed (see $log)" >&2
            exit 1
        fi
        mkdir -p "$out.tmp"
        cp "$top/src/luajit" "$out.tmp/luajit"
        echo "$recipe" >"$out.tmp/SOURCE"
        rm -rf "$b" "$out.old"
        [ -e "$out" ] && mv "$out" "$out.old"
        mv "$out.tmp" "$out"
        rm -rf "$out.old"
        echo "build-ttlj-arm64: built in $(($(date +%s) - t0)) s" >>"$log"
    fi
fi
echo "$out"
