#!/usr/bin/env bash
# test/vm/kernel.sh SUITE [ARCH]: print the path of the newest stock Debian
# kernel (vmlinuz) of SUITE (bullseye, bookworm, trixie, sid, ...) for ARCH
# (amd64, the default, or arm64), fetched from the Debian mirror this
# machine's apt uses and cached under
# ${SS_CACHE:-/var/cache/stacksnap}/kernels/SUITE/ (SUITE-arm64/ for arm64).
# A cached kernel is reused without asking the network; delete the folder to
# take a newer one. arm64's vmlinuz is a gzipped Image (qemu-system-aarch64
# -kernel takes it as it is).
#
# The image package holds vmlinuz (bullseye..trixie); since 2026 sid's
# linux-image-* is a stub depending on linux-binary-*, which holds it under
# /usr/lib/modules/VERSION/.
set -euo pipefail
suite=${1:?usage: kernel.sh SUITE [ARCH]}
arch=${2:-amd64}
case $arch in amd64) dir=$suite ;; arm64) dir=$suite-arm64 ;; *) echo "kernel.sh: arch $arch?" >&2; exit 2 ;; esac
cache=${SS_CACHE:-/var/cache/stacksnap}/kernels/$dir
found=$(ls "$cache"/vmlinuz-* 2>/dev/null | head -n 1 || true)
if [ -n "$found" ]; then echo "$found"; exit 0; fi

. "$(dirname "$0")/debian-index.sh"
m=$(mirror)
[ -n "$m" ] || { echo "kernel.sh: no Debian mirror in apt's sources" >&2; exit 1; }
mkdir -p "${cache%/*}"
tmp=$(mktemp -d "${cache%/*}/.$dir.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
index "$suite" "$arch" "$tmp/Packages"
# Newest flavourless image: Package/Version/Filename of each stanza.
line=$(pick "^linux-image-[0-9][^ ]*-$arch\$" "$tmp/Packages" | grep -Ev -- "-(cloud|rt|16k)-$arch" | sort -V | tail -n 1)
[ -n "$line" ] || { echo "kernel.sh: no linux-image for $suite" >&2; exit 1; }
read -r ver pkg file <<<"$line"
bin=$(pick '^linux-binary-' "$tmp/Packages" | awk -v v="$ver" -v p="linux-binary-${pkg#linux-image-}" \
    '$1 == v && $2 == p {print $3}' | head -n 1)
[ -n "$bin" ] && file=$bin
echo "kernel.sh: $suite: fetching $pkg $ver" >&2
curl -fsS -o "$tmp/k.deb" "$m/$file"
# /boot/vmlinuz-VERSION, or (sid's linux-binary) /usr/lib/modules/VERSION/vmlinuz
dpkg-deb --fsys-tarfile "$tmp/k.deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*' \
    './usr/lib/modules/*/vmlinuz' 2>/dev/null || true
mkdir -p "$cache"
if k=$(ls "$tmp"/boot/vmlinuz-* 2>/dev/null | head -n 1) && [ -n "$k" ]; then
    mv "$k" "$cache/"
else
    k=$(ls "$tmp"/usr/lib/modules/*/vmlinuz | head -n 1)
    [ -n "$k" ] || { echo "kernel.sh: no vmlinuz in $file" >&2; exit 1; }
    v=${k%/vmlinuz}
    mv "$k" "$cache/vmlinuz-${v##*/}"
fi
echo "$ver" >"$cache/version"
ls "$cache"/vmlinuz-*
