#!/usr/bin/env bash
# Unpack the Debian source of a package for a given suite into DEST:
#   test/luajit/fetch-src.sh SUITE PACKAGE DEST
# DEST/<package>-<version>/ afterwards; prints that folder. Uses a private
# apt configuration (a temporary deb-src list for SUITE with the Debian
# mirror this machine's apt configuration names), so the system's sources
# are left alone. Idempotent: an unpacked tree is reused. Needs apt-get and
# dpkg-source (dpkg-dev).
set -euo pipefail
suite=${1:?usage: fetch-src.sh SUITE PACKAGE DEST}
pkg=${2:?}
dest=$(mkdir -p "$3" && cd "$3" && pwd)
exec 9>"$dest/.fetch-$suite-$pkg.lock"
flock 9
have=$(ls -d "$dest/$suite/$pkg"-*/ 2>/dev/null | head -1 || true)
if [ -n "$have" ]; then
    echo "${have%/}"
    exit 0
fi
m=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[ -n "$m" ] || m=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
[ -n "$m" ] || { echo "fetch-src: no Debian mirror in the apt configuration" >&2; exit 1; }
apt=$(mktemp -d)
trap 'rm -rf "$apt"' EXIT
mkdir -p "$apt/lists/partial" "$apt/archives/partial"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $suite main" >"$apt/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=-"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
      -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
apt-get "${opts[@]}" -qq update >"$apt/log" 2>&1 || { cat "$apt/log" >&2; exit 1; }
# Each file is fetched by apt's own downloader and checked against the hash
# that the signed Release -> Sources chain gives.
work=$dest/$suite.tmp
rm -rf "$work"
mkdir -p "$work"
apt-get "${opts[@]}" -qq source --print-uris "$pkg" 2>>"$apt/log" | grep "^'" >"$apt/uris" || true
[ -s "$apt/uris" ] || { cat "$apt/log" >&2; echo "fetch-src: no source for $pkg in $suite" >&2; exit 1; }
got_dsc= orig=
while read -r uri name size hash; do
    uri=${uri//\'/}
    if /usr/lib/apt/apt-helper -qq download-file "$uri" "$work/$name" "$hash" >>"$apt/log" 2>&1; then
        case $name in *.dsc) got_dsc=$work/$name ;; esac
    else
        rm -f "$work/$name"
    fi
    case $name in *.orig.tar.*) orig=$name ;; esac
done <"$apt/uris"
out=$work/unpacked
if [ -n "$got_dsc" ] && dpkg-source -x "$got_dsc" "$out" >>"$apt/log" 2>&1; then
    echo "Debian source package $(basename "$got_dsc"), unpacked with dpkg-source" >"$out/.stacksnap-src"
elif [ -n "$orig" ] && [ -f "$work/$orig" ]; then
    # The mirror may carry the upstream tarball but not the .dsc/.debian
    # part: build the upstream tree then, and say so.
    mkdir -p "$out"
    tar -xf "$work/$orig" -C "$out" --strip-components=1
    echo "upstream tarball $orig only: the mirror had no .dsc; Debian's patches are NOT applied" \
        >"$out/.stacksnap-src"
    echo "fetch-src: $suite $pkg: no .dsc on the mirror, using $orig without Debian's patches" >&2
else
    cat "$apt/log" >&2
    echo "fetch-src: could not fetch the source of $pkg ($suite)" >&2
    exit 1
fi
ver=$(awk '{ print $2 }' "$apt/uris" | sed -n 's/^[^_]*_\(.*\)\.dsc$/\1/p' | head -1)
mkdir -p "$dest/$suite"
mv "$out" "$dest/$suite/$pkg-${ver:-unknown}"
rm -rf "$work"
echo "$dest/$suite/$pkg-${ver:-unknown}"
