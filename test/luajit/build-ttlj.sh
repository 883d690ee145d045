#!/usr/bin/env bash
# Build Tarantool's LuaJIT fork (the source snapshot in shared/tarantool-luajit
# beside the clone, or TTLJ_TARBALL) as the variants of the
# build matrix, cached in DEST (normally ${SS_CACHE:-/var/cache/stacksnap}/luajit):
#   DEST/tt-COMMIT-VARIANT/{luajit,libluajit.a,jit/,include/}
#   DEST/lj-tt-VARIANT -> tt-COMMIT-VARIANT
#   DEST/tt-COMMIT-src/ (the unpacked tree: its src/ headers are what
#   test_derive.c compiles lj_offsets.c against)
# VARIANT: gc64-jit gc64-nojit nogc64-jit. `luajit` is static and
# unstripped (tests copy and strip it); libluajit.a + include/ are for the
# C host (lj_host.c linked against the fork). A variant is rebuilt only when
# its binary is missing. Needs cmake, git (the fork's CMake requires it for
# its version) and a C compiler. ~1 min per variant.
set -euo pipefail
dest=$(mkdir -p "${1:-${SS_CACHE:-/var/cache/stacksnap}/luajit}" && cd "${1:-${SS_CACHE:-/var/cache/stacksnap}/luajit}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tarball=${TTLJ_TARBALL:-$here/../../../shared/tarantool-luajit/tarantool-luajit-b52fe979.tar.gz}
tag=$(basename "$tarball" .tar.gz)
tag=${tag#tarantool-luajit-}
jobs=$(nproc)
[ "$jobs" -gt 2 ] && jobs=2
variants=(gc64-jit gc64-nojit nogc64-jit)
flags() {
    case $1 in
    gc64-jit) echo "-DLUAJIT_ENABLE_GC64=ON" ;;
    gc64-nojit) echo "-DLUAJIT_ENABLE_GC64=ON -DLUAJIT_DISABLE_JIT=ON" ;;
    nogc64-jit) echo "-DLUAJIT_ENABLE_GC64=OFF" ;;
    esac
}
missing=()
for v in "${variants[@]}"; do
    [ -x "$dest/tt-$tag-$v/luajit" ] || missing+=("$v")
done
if [ ${#missing[@]} -gt 0 ]; then
    # the source is needed only to build (a clone elsewhere than beside
    # shared/ still uses the cached builds); 77: none here
    [ -f "$tarball" ] || { echo "build-ttlj: no source tarball $tarball (set TTLJ_TARBALL)" >&2; exit 77; }
    exec 9>"$dest/.tt-build.lock"
    flock 9
    log=$dest/tt-build.log
    src=$dest/tt-$tag-src
    if [ ! -d "$src/src" ]; then
        rm -rf "$src.tmp"
        mkdir -p "$src.tmp"
        tar -xzf "$tarball" -C "$src.tmp"
        top=$(ls -d "$src.tmp"/*/ | head -1)
        mv "$top" "$src.tree"
        rm -rf "$src.tmp"
        mv "$src.tree" "$src"
    fi
    for v in "${missing[@]}"; do
        out=$dest/tt-$tag-$v
        [ -x "$out/luajit" ] && continue
        b=$dest/.tt-build-$v
        rm -rf "$b" "$out.tmp"
        t0=$(date +%s)
        # shellcheck disable=SC2046
        if ! { cmake -S "$src" -B "$b" -DBUILDMODE=static -DLUAJIT_USE_TEST=OFF \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo $(flags "$v") &&
            cmake --build "$b" -j"$jobs"; } >>"$log" 2>&1; then
            echo "build-ttlj: build failed for $v (see $log)" >&2
            exit 1
        fi
        mkdir -p "$out.tmp/include"
        cp "$b/src/luajit" "$out.tmp/luajit"
        cp "$b/src/libluajit.a" "$out.tmp/libluajit.a"
        cp -a "$src/src/jit" "$out.tmp/jit"
        cp "$b/src/jit/vmdef.lua" "$out.tmp/jit/"
        cp "$src"/src/{lua.h,lualib.h,lauxlib.h,luaconf.h,luajit.h,lua.hpp} "$out.tmp/include/" 2>/dev/null || true
        # Generated headers (lj_ffdef.h ...) for offset programs.
        cp "$b"/src/*.h "$out.tmp/include/" 2>/dev/null || true
        echo "$tag $(flags "$v")" >"$out.tmp/SOURCE"
        rm -rf "$b"
        mv "$out.tmp" "$out"
        echo "build-ttlj: $v built in $(($(date +%s) - t0)) s" >>"$log"
    done
fi
for v in "${variants[@]}"; do
    ln -sfn "tt-$tag-$v" "$dest/lj-tt-$v"
done
