#!/usr/bin/env bash
# Make (or reuse) a Debian root for container-style tests:
#   test/roots/mkroot.sh SUITE PKG[,PKG...] [NAME]
# prints the root's path: ${SS_CACHE:-/var/cache/stacksnap}/roots/NAME
# (NAME defaults to SUITE; two tests that need the same suite with other
# packages use two names, else each rebuilds the other's root).
# Built with debootstrap --variant=minbase from the Debian mirror this
# machine's apt configuration names (the first deb822 URIs: or sources.list
# entry whose path ends in /debian), into a temporary folder that is renamed
# into place once complete: a root in the cache is always whole, an
# interrupted build leaves only a .tmp.* folder that the next run removes.
# A root whose package list differs from the request is rebuilt. Needs root
# and debootstrap.
set -euo pipefail
suite=${1:?usage: mkroot.sh SUITE PKG[,PKG...] [NAME]}
pkgs=${2:-}
name=${3:-$suite}
cache=${SS_CACHE:-/var/cache/stacksnap}/roots
root=$cache/$name
mkdir -p "$cache"
exec 9>"$cache/.$name.lock"
flock 9
if [ -f "$root/.stacksnap-pkgs" ] && [ "$(cat "$root/.stacksnap-pkgs")" = "$pkgs" ]; then
    echo "$root"
    exit 0
fi
mirror() {
    local u
    u=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    [ -n "$u" ] || u=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
    echo "$u"
}
m=$(mirror)
if [ -z "$m" ]; then
    echo "mkroot: no Debian mirror in /etc/apt/sources.list{,.d/*}" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "mkroot: debootstrap is not installed" >&2; exit 1; }
rm -rf "$cache/.tmp.$name".*
tmp=$(mktemp -d "$cache/.tmp.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$cache/$name.log
inc=()
[ -n "$pkgs" ] && inc=(--include="$pkgs")
t0=$(date +%s)
if ! debootstrap --variant=minbase "${inc[@]}" "$suite" "$tmp" "$m" >"$log" 2>&1; then
    echo "mkroot: debootstrap $suite failed (see $log)" >&2
    exit 1
fi
# Package caches are not needed to run anything.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages
echo "$pkgs" >"$tmp/.stacksnap-pkgs"
echo "mkroot: $suite built in $(($(date +%s) - t0)) s" >>"$log"
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "$root"
