#!/usr/bin/env bash
# test/vm/debs.sh SUITE ARCH PKG...: the newest PKGs of Debian SUITE for ARCH
# (from the mirror this machine's apt uses), unpacked (never installed) into
# a cached folder whose path is printed:
# ${SS_CACHE:-/var/cache/stacksnap}/debs/SUITE-ARCH/PKG+PKG.../. A cached
# folder is reused without asking the network; delete it to take newer ones.
# The arm64 VM's short run on trixie's kernel runs the PAC workload on
# trixie's own libc (built with branch protection) this way.
set -euo pipefail
suite=${1:?usage: debs.sh SUITE ARCH PKG...}
arch=${2:?}
shift 2
[ $# -gt 0 ] || { echo "debs.sh: no package" >&2; exit 2; }
dest=${SS_CACHE:-/var/cache/stacksnap}/debs/$suite-$arch/$(IFS=+; echo "$*")
if [ -f "$dest/.done" ]; then echo "$dest"; exit 0; fi
. "$(dirname "$0")/debian-index.sh"
m=$(mirror)
[ -n "$m" ] || { echo "debs.sh: no Debian mirror in apt's sources" >&2; exit 1; }
mkdir -p "${dest%/*}"
tmp=$(mktemp -d "${dest%/*}/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
index "$suite" "$arch" "$tmp/Packages"
mkdir -p "$tmp/x"
for p in "$@"; do
    line=$(pick "^${p//+/\\+}\$" "$tmp/Packages" | sort -V | tail -n 1)
    [ -n "$line" ] || { echo "debs.sh: no $p in $suite/$arch" >&2; exit 1; }
    read -r ver _ file <<<"$line"
    echo "debs.sh: $suite/$arch: $p $ver" >&2
    curl -fsS -o "$tmp/p.deb" "$m/$file"
    dpkg-deb -x "$tmp/p.deb" "$tmp/x"
done
touch "$tmp/x/.done"
rm -rf "$dest"
mv "$tmp/x" "$dest"
echo "$dest"
