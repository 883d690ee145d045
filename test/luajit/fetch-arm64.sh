#!/usr/bin/env bash
# test/luajit/fetch-arm64.sh: Debian's arm64 luajit and libluajit-5.1-2 (the
# version this machine's apt offers for amd64), unpacked (never installed)
# into a cached folder whose path is printed: FOLDER/usr/bin/luajit,
# FOLDER/usr/lib/aarch64-linux-gnu/libluajit-5.1.so.2. With the arm64
# architecture added (scripts/dev cross arm64) apt-get downloads them;
# without it, the amd64 URLs with the architecture swapped (same mirror,
# same version). Used by the arm64 VM's root (test/vm/arm64.sh) and by
# luajit_detect's arm64 cases.
set -euo pipefail
cache=${SS_CACHE:-/var/cache/stacksnap}/arm64
pkgs=(luajit libluajit-5.1-2)
uris=$(apt-get download --print-uris "${pkgs[@]}" 2>/dev/null) ||
    { apt-get update -qq >/dev/null 2>&1; uris=$(apt-get download --print-uris "${pkgs[@]}"); }
ver=$(sed -nE "s/^'[^']*' luajit_([^_]*)_amd64\.deb .*/\1/p" <<<"$uris")
[ -n "$ver" ] || { echo "fetch-arm64.sh: no luajit version from apt" >&2; exit 1; }
dest=$cache/luajit-$ver
if [ ! -x "$dest/usr/bin/luajit" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    if dpkg --print-foreign-architectures | grep -qx arm64; then
        (cd "$tmp" && apt-get download -qq "${pkgs[@]/%/:arm64}" >/dev/null 2>&1)
    else
        for u in $(sed -nE "s/^'([^']*)_amd64\.deb' .*/\1_arm64.deb/p" <<<"$uris"); do
            (cd "$tmp" && curl -fsSLO "$u")
        done
    fi
    mkdir -p "$tmp/x"
    for f in "$tmp"/*_arm64.deb; do dpkg-deb -x "$f" "$tmp/x"; done
    [ -x "$tmp/x/usr/bin/luajit" ] || { echo "fetch-arm64.sh: no arm64 luajit unpacked" >&2; exit 1; }
    mkdir -p "$cache"
    rm -rf "$dest.tmp.$$" && mv "$tmp/x" "$dest.tmp.$$"
    mv -T "$dest.tmp.$$" "$dest" 2>/dev/null || rm -rf "$dest.tmp.$$" # another run won the race
fi
echo "$dest"
