#!/usr/bin/env bash
# test/otlp/collector.sh OUT: build test/otlp/collector_reader.go against the
# OpenTelemetry Collector's pdata/pprofile as Debian sid packages it
# (golang-opentelemetry-collector-dev), in a sid root made and cached by
# test/roots/mkroot.sh, and put the static binary at OUT. GOPATH mode over
# /usr/share/gocode, as Debian builds Go (the build cache stays in the root,
# so a second build takes seconds); no network besides the mirror.
set -euo pipefail
out=${1:?usage: collector.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
root=$("$here/../roots/mkroot.sh" sid golang-go,golang-opentelemetry-collector-dev)
work=$(mktemp -d "$root/tmp/ssotlp.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/ssotlp"
cp "$here/collector_reader.go" "$work/src/ssotlp/main.go"
rel=${work#"$root"}
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp GO111MODULE=off CGO_ENABLED=0 \
    GOPATH="$rel:/usr/share/gocode" GOCACHE=/var/cache/ssotlp-go GOFLAGS= GOROOT=/usr/lib/go \
    GOTELEMETRY=off GOTOOLCHAIN=local \
    sh -c "cd $rel/src/ssotlp && go build -o $rel/collector_reader ."
cp "$work/collector_reader" "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
