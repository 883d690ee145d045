#!/usr/bin/env bash
# The demo behind `scripts/dev demo`: profile the bundled LuaJIT workload
# (examples/demo.lua) for a few seconds, then show the hottest stacks, the
# top table and where the flame graph is.
set -euo pipefail
build=${1:?usage: demo.sh BUILD_DIR}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${DEMO_OUT:-$PWD}
ss="$build/stacksnap"
rm -f "$out/stacksnap-demo.snap"
echo "== stacksnap record -F 499 -- luajit examples/demo.lua 4" >&2
"$ss" record -F 499 -o "$out/stacksnap-demo.snap" -o "$out/stacksnap-demo.folded" \
    -o "$out/stacksnap-demo.svg" -o "$out/stacksnap-demo.pb.gz" -- luajit "$top/examples/demo.lua" 4
echo
echo "== hottest stacks (folded, root first)"
sort -t' ' -k2 -nr "$out/stacksnap-demo.folded" | awk '{print}' | head -8 | cut -c1-240
echo
echo "== stacksnap report stacksnap-demo.snap --top 15"
"$ss" report "$out/stacksnap-demo.snap" --top 15 2>/dev/null
echo
echo "flame graph: $out/stacksnap-demo.svg (open it in a browser)"
echo "also: $out/stacksnap-demo.folded, $out/stacksnap-demo.pb.gz (go tool pprof), $out/stacksnap-demo.snap (stacksnap replay)"
