#!/usr/bin/env bash
# Build Debian's LuaJIT source (apt-get source luajit) as the four variants
# of the build matrix, cached under DEST (the build folder's ext/):
#   DEST/lj-gc64-jit  DEST/lj-gc64-nojit  DEST/lj-nogc64-jit  DEST/lj-nogc64-nojit
# each holding `luajit` (static, unstripped) and `jit/` (its Lua modules, for
# -jp / jit.p). A variant is rebuilt only when its binary is missing. Needs
# root for apt (adds a deb-src entry for Debian if none exists), dpkg-dev,
# build-essential. ~1 min per variant on 2 cores.
set -euo pipefail
dest=$(mkdir -p "$1" && cd "$1" && pwd)
jobs=$(nproc)
variants=(gc64-jit gc64-nojit nogc64-jit nogc64-nojit)
flags() {
    case $1 in
    gc64-jit) echo "" ;;
    gc64-nojit) echo "-DLUAJIT_DISABLE_JIT" ;;
    nogc64-jit) echo "-DLUAJIT_DISABLE_GC64" ;;
    nogc64-nojit) echo "-DLUAJIT_DISABLE_GC64 -DLUAJIT_DISABLE_JIT" ;;
    esac
}
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
