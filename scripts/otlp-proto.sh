#!/usr/bin/env bash
# scripts/otlp-proto.sh: print the folder that holds the OTLP v1.11.0 .proto
# files (opentelemetry/proto/...), taken from Debian sid's opentelemetry-proto
# package (trixie's 1.5.0 predates the v1.10 renumbering of the profiles
# messages and is wire-incompatible). The .deb comes from the Debian mirror
# this machine's apt uses (as test/vm/kernel.sh fetches kernels), checked
# against the SHA256 of sid's Packages index, and is unpacked under
# ${SS_CACHE:-/var/cache/stacksnap}/otlp-proto/VERSION/. A cached copy is used
# without asking the network. CMake takes the printed folder as
# SS_OTLP_PROTO_DIR.
set -euo pipefail
want=1.11.0
cache=${SS_CACHE:-/var/cache/stacksnap}/otlp-proto/$want
probe=opentelemetry/proto/profiles/v1development/profiles.proto
if [ -f "$cache/$probe" ]; then echo "$cache"; exit 0; fi

mirror() { # the first Debian archive URI in apt's sources
    { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
      grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          sed -E 's/^deb (\[[^]]*\] )?//' | awk '{print $1}'; } |
        grep -E '/debian/?$' | head -n 1 | sed 's,/$,,' || true
}
m=$(mirror)
[ -n "$m" ] || { echo "otlp-proto.sh: no Debian mirror in apt's sources" >&2; exit 1; }
mkdir -p "${cache%/*}"
tmp=$(mktemp -d "${cache%/*}/.$want.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
curl -fsS "$m/dists/sid/main/binary-all/Packages.xz" | xz -dc >"$tmp/Packages"
# Version Filename SHA256 of the opentelemetry-proto stanza
read -r ver file sum < <(awk -v RS= '/(^|\n)Package: opentelemetry-proto\n/ {
        v = f = s = ""
        n = split($0, l, "\n")
        for (i = 1; i <= n; i++) {
            if (l[i] ~ /^Version: /) v = substr(l[i], 10)
            else if (l[i] ~ /^Filename: /) f = substr(l[i], 11)
            else if (l[i] ~ /^SHA256: /) s = substr(l[i], 9)
        }
        print v, f, s
    }' "$tmp/Packages" | head -n 1) || true
[ -n "${file:-}" ] || { echo "otlp-proto.sh: no opentelemetry-proto in sid" >&2; exit 1; }
case "$ver" in
"$want"-*) ;;
*) echo "otlp-proto.sh: sid has opentelemetry-proto $ver, not $want" >&2; exit 1 ;;
esac
echo "otlp-proto.sh: fetching opentelemetry-proto $ver from sid" >&2
curl -fsS -o "$tmp/p.deb" "$m/$file"
echo "$sum  $tmp/p.deb" | sha256sum -c --quiet - >&2 ||
    { echo "otlp-proto.sh: $file: SHA256 mismatch" >&2; exit 1; }
mkdir -p "$tmp/x"
dpkg-deb --fsys-tarfile "$tmp/p.deb" | tar -x -C "$tmp/x" ./usr/include/opentelemetry
[ -f "$tmp/x/usr/include/$probe" ] || { echo "otlp-proto.sh: no $probe in $file" >&2; exit 1; }
mkdir -p "$tmp/out"
mv "$tmp/x/usr/include/opentelemetry" "$tmp/out/"
echo "$ver" >"$tmp/out/version"
mv -T "$tmp/out" "$cache" 2>/dev/null || [ -f "$cache/$probe" ] # a parallel fetch won
echo "$cache"
