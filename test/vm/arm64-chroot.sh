#!/usr/bin/env bash
# test/vm/arm64-chroot.sh: proves that `scripts/dev build` builds on an arm64
# Debian 12 machine, on an x86-64 one: a bookworm arm64 root (debootstrap
# --foreign, second stage under qemu-user-static, cached in
# /var/cache/stacksnap/roots/bookworm-arm64-dev), this checkout's HEAD (git
# archive) in its /src, `scripts/dev build` there (apt installs PKGS, cmake,
# ninja: every arm64 binary runs under qemu-aarch64 through binfmt_misc),
# then the arm64 stacksnap's --version, and info + replay of the bundled
# arm64 captures against their .folded. No BPF (qemu-user has no arm64
# kernel): recording on arm64 is the arm64 VM's proof (test/vm/arm64.sh).
# Not in ctest: the first run takes most of an hour on 2 cores (apt under
# emulation), a rerun with the root cached some minutes (the build).
# As root:  test/vm/arm64-chroot.sh [ROOT]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
root=${1:-/var/cache/stacksnap/roots/bookworm-arm64-dev}
mirror=${SS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
t0=$(date +%s)
step() { echo "== arm64-chroot: $* ($(($(date +%s) - t0)) s)" >&2; }

[ "$(id -u)" -eq 0 ] || { echo "arm64-chroot: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
for p in debootstrap qemu-user-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
done

# binfmt_misc: arm64 ELF files run under qemu-aarch64 (F: the interpreter is
# opened now, so it works inside the chroot too)
mountpoint -q /proc/sys/fs/binfmt_misc ||
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    if command -v update-binfmts >/dev/null; then
        update-binfmts --enable qemu-aarch64
    else
        grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
    fi
fi

if [ ! -x "$root/usr/bin/apt-get" ]; then
    step "debootstrap bookworm arm64 into $root"
    rm -rf "$root.tmp"
    mkdir -p "$(dirname "$root")"
    debootstrap --arch arm64 --foreign --variant=minbase bookworm "$root.tmp" "$mirror" >/dev/null
    cp /usr/bin/qemu-aarch64-static "$root.tmp/usr/bin/"
    chroot "$root.tmp" /debootstrap/debootstrap --second-stage >/dev/null
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
        "$mirror" "$mirror" "$mirror" >"$root.tmp/etc/apt/sources.list"
    mv "$root.tmp" "$root"
fi
cp /etc/resolv.conf "$root/etc/"

mounted=()
cleanup() {
    local m i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        m=${mounted[$i]}
        umount -R "$m" 2>/dev/null || umount -lR "$m"
    done
}
trap cleanup EXIT
for m in proc sys dev; do
    mountpoint -q "$root/$m" && continue
    mount --rbind "/$m" "$root/$m"
    mount --make-rslave "$root/$m"
    mounted+=("$root/$m")
done

step "git archive HEAD into $root/src"
find "$root/src" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} + 2>/dev/null || true
mkdir -p "$root/src"
git -C "$top" archive HEAD | tar -x -C "$root/src"

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 "$@"; }
step "scripts/dev build in the arm64 root"
in_root bash -c 'cd /src && scripts/dev build'
step "built"
in_root file /src/build/stacksnap
in_root /src/build/stacksnap --version

rc=0
for f in arm64-native arm64-luajit arm64-luajit-joff arm64-luajit-jit arm64-fwd-joff arm64-fwd-jit; do
    in_root /src/build/stacksnap info "/src/test/fixtures/$f.snap" | grep -x 'arch: aarch64' >/dev/null ||
        { echo "arm64-chroot: $f: info says no 'arch: aarch64'" >&2; rc=1; }
    in_root /src/build/stacksnap replay "/src/test/fixtures/$f.snap" -o "/tmp/$f.folded"
    if cmp -s "$root/src/test/fixtures/$f.folded" "$root/tmp/$f.folded"; then
        echo "arm64-chroot: $f: replay == test/fixtures/$f.folded" >&2
    else
        diff "$root/src/test/fixtures/$f.folded" "$root/tmp/$f.folded" | head -20 >&2
        echo "arm64-chroot: $f: replay differs from test/fixtures/$f.folded" >&2
        rc=1
    fi
done
# an x86-64 capture: refused by its architecture (exit 2), not misread
st=0
in_root /src/build/stacksnap replay /src/test/fixtures/native.snap -o /tmp/x86.folded 2>/dev/null || st=$?
[ $st -eq 2 ] || { echo "arm64-chroot: x86-64 native.snap: exit $st, want 2" >&2; rc=1; }
step "done, $([ $rc -eq 0 ] && echo ok || echo FAILED)"
exit $rc
