#!/usr/bin/env bash
# test/vm/initramfs.sh SRC BUILD OUT: the guest's root for the kernel matrix,
# a gzipped cpio of this Debian 12 userland's files: busybox (static) for the
# shell, the built stacksnap, the capture tests and workloads, Debian's
# luajit, each with the shared libraries it loads (ldd), at the same absolute
# paths as here (the tests have their build folder compiled in), and
# test/vm/guest.sh as /init. Only files, so it stays a few MiB: the kernel
# unpacks it in well under a second even under emulation.
set -euo pipefail
src=${1:?usage: initramfs.sh SRC BUILD OUT}
build=${2:?}
out=${3:?}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

bins=("$build/stacksnap" "$build/capture_test" "$build/capture_prog_test"
      "$build/capture_workload" "$build/capture_cost" "$build/cli_native" /usr/bin/luajit)
add() { # file: copy it (following links) to the same path in the root
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
}
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "initramfs.sh: missing $b (build it first)" >&2; exit 1; }
    add "$b"
    ldd "$b" | awk '/=> \//{print $3} /^\t\/[^ ]*ld-linux/{print $1}' | while read -r lib; do
        [ -e "$root$lib" ] || add "$lib"
    done
done
# The dynamic loader at its canonical path, whatever ldd printed.
add /lib64/ld-linux-x86-64.so.2
add "$src/test/vm/chain.lua"
add "$src/test/cli/short.lua"
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run"
cp /bin/busybox "$root/bin/busybox"
for a in sh mount umount mkdir cat echo grep awk sed sort head tail wc tr cut sleep poweroff \
         uname ls rm timeout seq date printf test dmesg sync kill; do
    ln -sf busybox "$root/bin/$a"
done
ln -sf bin "$root/sbin"
install -m 755 "$src/test/vm/guest.sh" "$root/init"
printf '%s\n' "$src" >"$root/etc-src" # where SRC is inside, for the checks
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
