#!/usr/bin/env bash
# test/agent/install.sh BUILD_DIR: `cmake --install` puts the binary, the man
# page and the agent's systemd unit; the unit grants exactly CAP_BPF,
# CAP_PERFMON and CAP_SYS_PTRACE, and systemd's own offline security
# analysis rates it (skips that part, loudly, without systemd-analyze).
set -euo pipefail
build=$1
dest=$(mktemp -d /tmp/ss-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
DESTDIR=$dest cmake --install "$build" >/dev/null
bin=$(find "$dest" -path '*/bin/stacksnap' -type f)
man=$(find "$dest" -path '*/man1/stacksnap.1' -type f)
unit=$(find "$dest" -path '*/systemd/system/stacksnap-agent.service' -type f)
[ -x "$bin" ] || { echo "FAIL: no bin/stacksnap installed"; exit 1; }
[ -s "$man" ] || { echo "FAIL: no man1/stacksnap.1 installed"; exit 1; }
[ -s "$unit" ] || { echo "FAIL: no stacksnap-agent.service installed"; exit 1; }
"$bin" --version >/dev/null
man -l "$man" >/dev/null 2>&1 || { echo "FAIL: man cannot read $man"; exit 1; }
grep -q '^ExecStart=/.*/stacksnap agent' "$unit" || { echo "FAIL: ExecStart"; exit 1; }
for k in AmbientCapabilities CapabilityBoundingSet; do
    v=$(sed -n "s/^$k=//p" "$unit" | tr ' ' '\n' | sort | tr '\n' ' ')
    [ "$v" = "CAP_BPF CAP_PERFMON CAP_SYS_PTRACE " ] || { echo "FAIL: $k=$v"; exit 1; }
done
grep -q '^DynamicUser=yes' "$unit" || { echo "FAIL: not its own user"; exit 1; }
if command -v systemd-analyze >/dev/null; then
    out=$(systemd-analyze security --offline=yes "$unit" 2>&1 | grep 'Overall exposure level')
    echo "$out"
    lvl=$(echo "$out" | grep -o 'level for [^:]*: [0-9.]*' | awk '{print $NF}')
    awk -v l="$lvl" 'BEGIN { exit !(l != "" && l < 4.0) }' || { echo "FAIL: exposure $lvl"; exit 1; }
    # with TLS and auth as the unit's comment says: the drop-in's credentials
    # (LoadCredential=) and the ExecStart that reads them
    cred=$dest/stacksnap-agent-cred.service
    sed -n 's/^#   \(LoadCredential=.*\)/\1/p' "$unit" >"$dest/cred.lines"
    [ "$(wc -l <"$dest/cred.lines")" -ge 2 ] || { echo "FAIL: no LoadCredential= drop-in in the unit"; exit 1; }
    awk -v cl="$dest/cred.lines" '/^ExecStart=/ { while ((getline l < cl) > 0) print l
            print $0 " --web-config ${CREDENTIALS_DIRECTORY}/web.yml --auth-token-file ${CREDENTIALS_DIRECTORY}/token"
            next } { print }' "$unit" >"$cred"
    out=$(systemd-analyze security --offline=yes "$cred" 2>&1 | grep 'Overall exposure level')
    echo "with credentials: $out"
    lvl=$(echo "$out" | grep -o 'level for [^:]*: [0-9.]*' | awk '{print $NF}')
    awk -v l="$lvl" 'BEGIN { exit !(l != "" && l < 4.0) }' || { echo "FAIL: exposure with credentials $lvl"; exit 1; }
else
    echo "SKIP: systemd-analyze missing (Debian systemd): unit not analysed"
fi
echo "install: ok"
