#!/usr/bin/env bash
# test/vm/fetch-nginx-arm64.sh: Debian's arm64 nginx + the lua module (the
# versions this machine's apt offers), unpacked (never installed) into a
# cached folder whose path is printed: FOLDER/usr/sbin/nginx, the modules in
# FOLDER/usr/lib/nginx/modules, OpenResty's luajit2 (which the lua module
# prefers), lua-resty-core + lrucache in FOLDER/usr/share/lua/5.1, and the
# libraries nginx loads that the cross build's :arm64 packages do not bring
# (libpcre3, libpcre2-8-0) in FOLDER/usr/lib/aarch64-linux-gnu. As
# fetch-arm64.sh: apt-get download with the arm64 architecture added
# (scripts/dev cross arm64), else the amd64 URLs with the architecture
# swapped (same mirror, same version). For the arm64 VM (test/vm/arm64.sh).
set -euo pipefail
cache=${SS_CACHE:-/var/cache/stacksnap}/arm64
pkgs=(nginx libnginx-mod-http-lua libnginx-mod-http-ndk libluajit2-5.1-2 libpcre3 libpcre2-8-0)
indep=(lua-resty-core lua-resty-lrucache) # Architecture: all
uris=$(apt-get download --print-uris "${pkgs[@]}" "${indep[@]}" 2>/dev/null) ||
    { apt-get update -qq >/dev/null 2>&1; uris=$(apt-get download --print-uris "${pkgs[@]}" "${indep[@]}"); }
ver=$(sed -nE "s/^'[^']*' nginx_([^_]*)_amd64\.deb .*/\1/p" <<<"$uris")
lver=$(sed -nE "s/^'[^']*' libnginx-mod-http-lua_([^_]*)_amd64\.deb .*/\1/p" <<<"$uris")
[ -n "$ver" ] && [ -n "$lver" ] || { echo "fetch-nginx-arm64.sh: no nginx version from apt" >&2; exit 1; }
dest=$cache/nginx-$ver-lua-${lver#*%3a}
if [ ! -f "$dest/usr/lib/nginx/modules/ngx_http_lua_module.so" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    if dpkg --print-foreign-architectures | grep -qx arm64; then
        (cd "$tmp" && apt-get download -qq "${pkgs[@]/%/:arm64}" "${indep[@]}" >/dev/null 2>&1)
    else
        for u in $(sed -nE "s/^'([^']*)_(amd64|all)\.deb' .*/\1_\2.deb/p" <<<"$uris" | sed 's/_amd64\.deb$/_arm64.deb/'); do
            (cd "$tmp" && curl -fsSLO "$u")
        done
    fi
    mkdir -p "$tmp/x"
    for f in "$tmp"/*.deb; do dpkg-deb -x "$f" "$tmp/x"; done
    [ -f "$tmp/x/usr/lib/nginx/modules/ngx_http_lua_module.so" ] && [ -x "$tmp/x/usr/sbin/nginx" ] ||
        { echo "fetch-nginx-arm64.sh: no arm64 nginx + lua module unpacked" >&2; exit 1; }
    mkdir -p "$cache"
    rm -rf "$dest.tmp.$$" && mv "$tmp/x" "$dest.tmp.$$"
    mv -T "$dest.tmp.$$" "$dest" 2>/dev/null || rm -rf "$dest.tmp.$$" # another run won the race
fi
echo "$dest"
