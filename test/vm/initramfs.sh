#!/usr/bin/env bash
# test/vm/initramfs.sh SRC BUILD OUT: the guest's root for the kernel matrix,
# a gzipped cpio taken from a Debian 12 root (test/roots/mkroot.sh bookworm,
# cached) that holds the packages of every library the built programs load:
# busybox (static) for the shell, Debian's luajit, and for the built
# stacksnap, capture tests and workloads the shared libraries they load (as
# ldd lists them here), at the same absolute paths (the tests have their
# build folder compiled in), and test/vm/guest.sh as /init. Only those files,
# so it stays ~10 MiB: the kernel unpacks it in well under a second even
# under emulation.
set -euo pipefail
src=${1:?usage: initramfs.sh SRC BUILD OUT}
build=${2:?}
out=${3:?}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

bins=("$build/stacksnap" "$build/capture_test" "$build/capture_prog_test"
      "$build/capture_workload" "$build/capture_cost" "$build/cli_native" "$build/cli_execloop")
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "initramfs.sh: missing $b (build it first)" >&2; exit 1; }
done
libs=$(for b in "${bins[@]}" /usr/bin/luajit; do
    ldd "$b" | awk '/=> \//{print $3} /^\t\/[^ ]*ld-linux/{print $1}'
done | sort -u)
# The Debian packages of those libraries (dpkg knows each by one of its paths
# of the merged /usr: as ldd prints it, the file it links to, or under /usr),
# plus luajit and busybox. One dpkg -S for the libraries still unknown per
# form of the path: each call reads dpkg's whole file list (~0.3 s, 10-20 s
# for the ~60 libraries one at a time, in each of the four vm_* tests).
owners=
left=($libs)
for form in ldd real usr; do
    [ ${#left[@]} -gt 0 ] || break
    paths=()
    for l in "${left[@]}"; do
        case $form in
        ldd) paths+=("$l") ;;
        real) paths+=("$(readlink -f "$l")") ;;
        usr) paths+=("/usr$l") ;;
        esac
    done
    found=$(dpkg -S "${paths[@]}" 2>/dev/null | grep -v '^diversion by ' || true)
    owners+=$found$'\n'
    known=$(sed -E 's/^.*: //' <<<"$found")
    next=()
    for i in "${!left[@]}"; do
        grep -qxF -- "${paths[$i]}" <<<"$known" || next+=("${left[$i]}")
    done
    left=("${next[@]}")
done
[ ${#left[@]} -eq 0 ] || { echo "initramfs.sh: no package has ${left[*]}" >&2; exit 1; }
pkgs=$(sed -E 's/:.*//; s/:amd64//' <<<"$owners" | tr ', ' '\n\n' | grep -v '^$' | sort -u | tr '\n' ',')
deb=$("$src/test/roots/mkroot.sh" bookworm "${pkgs}luajit,busybox-static")
from() { # path: copy it from the Debian 12 root (following its links) to the same path
    [ -e "$deb$1" ] || { echo "initramfs.sh: $1 is not in $deb" >&2; exit 1; }
    mkdir -p "$root$(dirname "$1")"
    cp -L "$deb$1" "$root$1"
}
add() { # file of the build: to the same path
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
}
for b in "${bins[@]}"; do add "$b"; done
for l in $libs /lib64/ld-linux-x86-64.so.2 /usr/bin/luajit; do from "$l"; done
add "$src/test/vm/chain.lua"
add "$src/test/cli/short.lua"
add "$src/test/cli/offcpu_sleep.lua"
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run"
cp "$deb/bin/busybox" "$root/bin/busybox"
for a in sh mount umount mkdir cat echo grep awk sed sort head tail wc tr cut sleep poweroff \
         uname ls rm timeout seq date printf test dmesg sync kill dd true; do
    ln -sf busybox "$root/bin/$a"
done
ln -sf bin "$root/sbin"
install -m 755 "$src/test/vm/guest.sh" "$root/init"
printf '%s\n' "$src" >"$root/etc-src"     # where SRC and BUILD are, for the checks
printf '%s\n' "$build" >"$root/etc-build"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
