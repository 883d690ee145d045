#!/bin/sh
# test/reliability/fuzz_run.sh FUZZER REGRESS_DIR SECONDS [LIBFUZZER ARGS...] CORPUS...
# The CI step of one libFuzzer target: replay every regression input in
# REGRESS_DIR (each a crash found earlier and fixed), then fuzz for SECONDS
# from the given corpus directories (copied to a scratch corpus so the
# source tree is never written). Fails on any crash, leak, timeout or OOM.
set -eu
fuzzer=$1 regress=$2 secs=$3
shift 3
[ -x "$fuzzer" ] || { echo "fuzz_run: $fuzzer not built" >&2; exit 1; }
name=$(basename "$fuzzer")
work=$(mktemp -d "${TMPDIR:-/tmp}/ss-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
opts=""
for a in "$@"; do
    case $a in
    -*) opts="$opts $a" ;;
    *) [ -d "$a" ] && cp "$a"/* "$work/corpus/" 2>/dev/null || true ;;
    esac
done
if [ -d "$regress" ] && [ -n "$(ls -A "$regress" 2>/dev/null)" ]; then
    echo "== $name: $(ls "$regress" | wc -l) regression inputs"
    # shellcheck disable=SC2086
    "$fuzzer" $opts -rss_limit_mb=4096 "$regress"/*
fi
echo "== $name: fuzzing ${secs}s"
rc=0
# shellcheck disable=SC2086
"$fuzzer" $opts -rss_limit_mb=4096 -timeout=25 -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
tail -25 "$work/log"
st=$(ls "$work/artifacts" | wc -l)
if [ "$rc" -ne 0 ] || [ "$st" -ne 0 ]; then
    echo "fuzz_run: $name failed (exit $rc)" >&2
    echo "fuzz_run: $name found $st crashing inputs:" >&2
    for f in "$work"/artifacts/*; do
        echo "  $(basename "$f"): $(od -An -tx1 -N64 "$f" | tr -d '\n')" >&2
    done
    cp "$work"/artifacts/* "${FUZZ_ARTIFACTS:-.}/" 2>/dev/null || true
    exit 1
fi
