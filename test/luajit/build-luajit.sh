#!/usr/bin/env bash
# Build Debian's LuaJIT source (apt-get source luajit) as the four variants
# of the build matrix, cached outside the clone (below) and linked from DEST
# (the build folder's ext/):
#   DEST/lj-gc64-jit  DEST/lj-gc64-nojit  DEST/lj-nogc64-jit  DEST/lj-nogc64-nojit
# With a SUITE (build-luajit.sh DEST SUITE, e.g. trixie): that suite's luajit
# source (fetch-src.sh, cached in ${SS_CACHE:-/var/cache/stacksnap}/src), built
# into DEST/SUITE-VERSION-VARIANT (keyed by source version and flags) with
# DEST/lj-SUITE-VARIANT a symlink to the current one; DEST is then meant to be
# a cache outside the clone (${SS_CACHE}/luajit).
# each holding `luajit` (static, unstripped) and `jit/` (its Lua modules, for
# -jp / jit.p). A variant is rebuilt only when its binary is missing. Needs
# root for apt (adds a deb-src entry for Debian if none exists), dpkg-dev,
# build-essential. ~1 min per variant on 2 cores.
set -euo pipefail
dest=$(mkdir -p "$1" && cd "$1" && pwd)
suite=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
jobs=$(nproc)
[ "$jobs" -gt 2 ] && jobs=2
variants=(gc64-jit gc64-nojit nogc64-jit nogc64-nojit)
flags() {
    case $1 in
    gc64-jit) echo "" ;;
    gc64-nojit) echo "-DLUAJIT_DISABLE_JIT" ;;
    nogc64-jit) echo "-DLUAJIT_DISABLE_GC64" ;;
    nogc64-nojit) echo "-DLUAJIT_DISABLE_GC64 -DLUAJIT_DISABLE_JIT" ;;
    esac
}
if [ -n "$suite" ]; then
    exec 9>"$dest/.lj-build-$suite.lock"
    flock 9
    log=$dest/lj-build-$suite.log
    src=$("$here/fetch-src.sh" "$suite" luajit "${SS_CACHE:-/var/cache/stacksnap}/src" 2>>"$log") ||
        { echo "build-luajit: no $suite luajit source (see $log)" >&2; exit 1; }
    ver=$(basename "$src")
    ver=${ver#luajit-}
    for v in "${variants[@]}"; do
        out=$dest/$suite-$ver-$v
        if [ ! -x "$out/luajit" ]; then
            b=$dest/.build-$suite-$v
            rm -rf "$b" "$out.tmp"
            cp -a "$src" "$b"
            t0=$(date +%s)
            xf=$(flags "$v")
            # OpenResty's lj_init.c (CPU detection for its string hash) uses
            # the JIT_F_* CPU flags, which lj_jit.h defines only with the
            # JIT: give the nojit builds the same values (lj_jit.h, x86).
            if [ -f "$b/src/lj_init.c" ] && [[ $v == *nojit ]]; then
                xf="$xf -DJIT_F_SSE3=0x10 -DJIT_F_SSE4_1=0x20 -DJIT_F_BMI2=0x40 -DJIT_F_SSE4_2=0x80"
            fi
            make -C "$b" -j"$jobs" BUILDMODE=static XCFLAGS="$xf" Q= E=@: >>"$log" 2>&1 ||
                { echo "build-luajit: make failed for $suite $v (see $log)" >&2; exit 1; }
            mkdir -p "$out.tmp"
            cp "$b/src/luajit" "$out.tmp/luajit"
            cp -a "$b/src/jit" "$out.tmp/jit"
            cp "$src/.stacksnap-src" "$out.tmp/SOURCE" 2>/dev/null || true
            rm -rf "$b"
            mv "$out.tmp" "$out"
            echo "build-luajit: $suite $ver $v built in $(($(date +%s) - t0)) s" >>"$log"
        fi
        ln -sfn "$suite-$ver-$v" "$dest/lj-$suite-$v"
    done
    exit 0
fi

# Debian's own luajit source (the host's release): built once per source
# version in ${SS_CACHE:-/var/cache/stacksnap}/luajit/host-VERSION, which
# outlives build folders; DEST/lj-VARIANT are symlinks to it.
cache=${SS_CACHE:-/var/cache/stacksnap}/luajit
if [[ $dest != "$cache"/host-* ]]; then
    ver=$(dpkg-query -W -f='${source:Version}' luajit 2>/dev/null || true)
    [ -n "$ver" ] || { echo "build-luajit: Debian's luajit package is not installed" >&2; exit 1; }
    hd=$cache/host-$ver
    "$0" "$hd" || exit 1
    for v in "${variants[@]}"; do
        [ -L "$dest/lj-$v" ] || rm -rf "$dest/lj-$v"
        ln -sfn "$hd/lj-$v" "$dest/lj-$v"
    done
    exit 0
fi

missing=()
for v in "${variants[@]}"; do
    [ -x "$dest/lj-$v/luajit" ] || missing+=("$v")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# One builder at a time (several test binaries may ask at once).
exec 9>"$dest/.lj-build.lock"
flock 9
log=$dest/lj-build.log
: >"$log"

src=$(ls -d "$dest"/lj-src/luajit-*/ 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
    if ! apt-get source --print-uris luajit >/dev/null 2>&1; then
        # No deb-src entry: add one for the Debian suites the deb entries use.
        . /etc/os-release
        cat >/etc/apt/sources.list.d/stacksnap-deb-src.sources <<EOS
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
        apt-get update -qq >>"$log" 2>&1
    fi
    rm -rf "$dest/lj-src.tmp"
    mkdir -p "$dest/lj-src.tmp"
    (cd "$dest/lj-src.tmp" && apt-get source luajit >>"$log" 2>&1) || {
        echo "build-luajit: apt-get source luajit failed (see $log)" >&2
        exit 1
    }
    rm -rf "$dest/lj-src"
    mv "$dest/lj-src.tmp" "$dest/lj-src"
    src=$(ls -d "$dest"/lj-src/luajit-*/ | head -1)
fi

for v in "${missing[@]}"; do
    [ -x "$dest/lj-$v/luajit" ] && continue
    b=$dest/lj-$v.build
    rm -rf "$b" "$dest/lj-$v"
    cp -a "$src" "$b"
    t0=$(date +%s)
    if ! make -C "$b" -j"$jobs" BUILDMODE=static XCFLAGS="$(flags "$v")" Q= E=@: >>"$log" 2>&1; then
        echo "build-luajit: make failed for $v (see $log)" >&2
        exit 1
    fi
    mkdir -p "$dest/lj-$v.tmp"
    cp "$b/src/luajit" "$dest/lj-$v.tmp/luajit"
    cp -a "$b/src/jit" "$dest/lj-$v.tmp/jit"
    rm -rf "$b"
    mv "$dest/lj-$v.tmp" "$dest/lj-$v"
    echo "build-luajit: $v built in $(($(date +%s) - t0)) s" >>"$log"
done
