#!/usr/bin/env bash
# Unpack OpenResty luajit2 (never installed: it would remove the system
# luajit) into DEST/luajit2. Idempotent; needs apt-get (root, Debian mirror).
set -euo pipefail
dest=$1
[ -x "$dest/luajit2/usr/bin/luajit" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
apt-get download luajit2 libluajit2-5.1-2 >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get download luajit2 libluajit2-5.1-2 >/dev/null 2>&1; }
mkdir -p "$dest/luajit2"
for f in ./*.deb; do dpkg-deb -x "$f" "$dest/luajit2"; done
