#!/usr/bin/env bash
# The demo behind `scripts/dev demo`: profile the bundled LuaJIT workload
# (examples/demo.lua) for a few seconds, then show the hottest stacks, the
# top table and where the flame graph is.
set -euo pipefail
build=${1:?usage: demo.sh BUILD_DIR}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath "${DEMO_OUT:-$PWD}")
ss="$(realpath "$build")/stacksnap"
rm -f "$out/stacksnap-demo.snap"
echo "== stacksnap record -F 499 -- luajit examples/demo.lua 4" >&2
(cd "$top/examples" && # relative script path: chunk names read "demo.lua"
    "$ss" record -F 499 -o "$out/stacksnap-demo.snap" -o "$out/stacksnap-demo.folded" \
        -o "$out/stacksnap-demo.svg" -o "$out/stacksnap-demo.pb.gz" -- luajit demo.lua 4)
echo
echo "== hottest stacks (folded: root first, leaf last)"
# the count is the last field (Lua frames contain spaces); show the leaf end
awk '{print $NF "\t" $0}' "$out/stacksnap-demo.folded" | sort -t$'\t' -k1,1nr | cut -f2- | head -8 |
    awk '{ if (length($0) > 150) $0 = "..." substr($0, length($0) - 146); print }'
echo
echo "== stacksnap report stacksnap-demo.snap --top 15"
"$ss" report "$out/stacksnap-demo.snap" --top 15 2>/dev/null
echo
echo "flame graph: $out/stacksnap-demo.svg (open it in a browser)"
echo "also: $out/stacksnap-demo.folded, $out/stacksnap-demo.pb.gz (go tool pprof), $out/stacksnap-demo.snap (stacksnap replay)"
