#!/usr/bin/env bash
# Unpack nginx + the lua module and what it needs (OpenResty luajit2,
# lua-resty-core) into DEST/nginx. Never installed: libnginx-mod-http-lua
# depends on luajit2, which would remove the system luajit. Idempotent; needs
# apt-get (root, Debian mirror).
set -euo pipefail
dest=$1
[ -f "$dest/nginx/usr/lib/nginx/modules/ngx_http_lua_module.so" ] && exit 0
pkgs=(nginx libnginx-mod-http-lua libnginx-mod-http-ndk libluajit2-5.1-2 lua-resty-core
      lua-resty-lrucache)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
apt-get download "${pkgs[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get download "${pkgs[@]}" >/dev/null 2>&1; }
mkdir -p "$dest/nginx.tmp"
for f in ./*.deb; do dpkg-deb -x "$f" "$dest/nginx.tmp"; done
rm -rf "$dest/nginx"
mv "$dest/nginx.tmp" "$dest/nginx"
