#!/bin/sh
# test/vm/arm64-guest.sh: /init of the arm64 guest (test/vm/arm64.sh). Mounts
# what stacksnap needs, loads both BPF programs (ring buffer and compat) and
# records the running native workload (-O2, no frame pointers) with each, replays
# the capture, then Debian's arm64 luajit on the Lua chain (-joff), its
# traces (jit_cases: the chain, an FFI call and a coroutine, JIT on) and the
# C host of libluajit (lj_host, nested lua_pcall/lua_call), an FFI
# callback (ffi_cb.lua: C -> Lua under libc's qsort), then the
# PAC-signed native chain, nginx + the lua module under a request loop
# (ngx_case), PCRE2's JIT code (a64scan_case), --off-cpu and --kernel (or, with ssvm.short on the
# kernel's command line, only the PAC and luajit -joff chains), prints
# "SSVM key value..." lines on the console, powers off.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
exec </dev/null
ss=/bin/stacksnap
say() { echo "SSVM $*"; }
say kernel "$(uname -r)"
say btf "$([ -r /sys/kernel/btf/vmlinux ] && echo yes || echo no)"
say cpu "$(grep -m1 '^Features' /proc/cpuinfo)"
for mode in default compat; do
    flag=; [ $mode = compat ] && flag=--compat
    out=$($ss info --bpf $flag -v 2>/tmp/bpf.err); rc=$?
    say "bpf_$mode" "rc=$rc" "$out" "$(grep '^stacksnap: ' /tmp/bpf.err | grep -v 'verifier log' | tr '\n' ' ')"
    grep -v '^stacksnap: ' /tmp/bpf.err | tail -n 40 | sed "s/^/SSVM-LOG verifier: /"
done
# ---- a64replay: stack-byte captures an x86-64 build replays (unwind/foreign.c) ----
# stack_dump: the native chain (no frame pointers) and luajit's chain.lua
# interpreted (-joff) and with JIT traces, attached, short, each bundled (its
# files for test/fixtures/make.sh's pruning) with the live outputs of the same
# record (test/fixtures/arm64-*.snap). With ssvm.dump after the other cases;
# with ssvm.fixtures (SS_VM_FIXTURES=1 test/vm/arm64.sh) alone, right after
# both programs loaded.
stack_dump() {
    /bin/cli_native 30 >/tmp/x.out &
    xpid=$!
    i=0
    while ! grep -q '^ready' /tmp/x.out && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
    $ss record --bundle -F 49 -p $xpid -d 2 -o /tmp/native.snap -o /tmp/native.folded \
        -o /tmp/native.txt >/dev/null 2>&1
    kill $xpid
    wait $xpid 2>/dev/null
    for j in joff jit; do
        jflag=-joff
        [ $j = jit ] && jflag=
        # (300 s at most: bundling the files delays the first walks by
        # seconds under emulation; a workload gone by then fails the live
        # reads of the Lua stack)
        (cd /lua && exec luajit $jflag chain.lua 300 >/dev/null) &
        xpid=$!
        sleep 1
        $ss record --bundle -F 29 -p $xpid -d 2 -o /tmp/luajit-$j.snap -o /tmp/luajit-$j.folded \
            -o /tmp/luajit-$j.txt >/dev/null 2>/tmp/sd.err
        say "stack_dump_$j" "rc=$? $(tail -n 1 /tmp/sd.err)"
        kill $xpid
        wait $xpid 2>/dev/null
    done
    for f in native luajit-joff luajit-jit; do
        for x in snap folded txt; do
            echo "SSVM-STACK $f.$x begin"; base64 /tmp/$f.$x; echo "SSVM-STACK $f.$x end"
        done
    done
}
if grep -q ssvm.fixtures /proc/cmdline; then
    stack_dump
    say end
    sync
    poweroff -f
fi
# the committed arm64 captures (test/fixtures/arm64-*.snap, in /fx on the
# full run) replayed by this arm64 build: byte-identical to their .folded,
# as the x86-64 build's replay of them is (cli_fixtures)
fx_case() {
    for f in /fx/*.snap; do
        [ -e "$f" ] || continue
        n=$(basename "$f" .snap)
        # every native step by a rule checked against libunwind's (native.c)
        STACKSNAP_CHECK_RULES=1 $ss replay "$f" -o /tmp/fx.folded >/dev/null 2>/tmp/fx.err; rc=$?
        same=no; cmp -s /tmp/fx.folded "/fx/$n.folded" && same=yes
        say "fx_$n" "rc=$rc identical=$same $(tail -n 1 /tmp/fx.err)"
    done
}
# ---- end a64replay ----
# ---- a64pac: trixie's PAC-signed native chain as a fixture (test/fixtures/arm64-pac.snap) ----
# ssvm.pacfx (SS_VM_PACFX=1 test/vm/arm64.sh SRC BUILD trixie): right after
# both programs loaded, cli_native_pac on trixie's libc (in /trixie: its
# frames and cli_mid's, cli_outer's, cli_sort's, main's sign their return
# addresses) recorded attached, short, bundled, with stack bytes, and the
# live outputs of the same record, out on the console; then power off.
if grep -q ssvm.pacfx /proc/cmdline; then
    chroot /trixie /bin/cli_native_pac 60 >/tmp/pf.out &
    xpid=$!
    i=0
    while ! grep -q '^ready' /tmp/pf.out && kill -0 $xpid 2>/dev/null && [ $i -lt 60 ]; do
        sleep 1
        i=$((i + 1))
    done
    $ss record --bundle -F 49 -p $xpid -d 2 -o /tmp/pac.snap -o /tmp/pac.folded \
        -o /tmp/pac.txt >/dev/null 2>/tmp/pf.err
    say pac_dump "rc=$? $(tail -n 1 /tmp/pf.err)"
    kill $xpid
    wait $xpid 2>/dev/null
    for x in snap folded txt; do
        echo "SSVM-STACK pac.$x begin"; base64 /tmp/pac.$x; echo "SSVM-STACK pac.$x end"
    done
    say end
    sync
    poweroff -f
fi
# ---- end a64pac ----
# ---- a64fwd: the forward replay's calls out of traces as fixtures (test/fixtures/arm64-fwd-*.snap) ----
# ssvm.fwdfx (SS_VM_FWDFX=1 test/vm/arm64.sh SRC BUILD): right after both
# programs loaded, Debian's arm64 luajit on test/cli/jitoracle.lua and on
# test/cli/fwdrefuse.lua, two processes (string.rep, table.concat,
# string.format's helpers and FFI calls, some through a mutable upvalue,
# out of traces), -joff and JIT on, each recorded attached, bundled,
# with stack bytes, and the live outputs; out on the console; power off.
if grep -q ssvm.fwdfx /proc/cmdline; then
    for j in joff jit; do
        jflag=-joff
        [ $j = jit ] && jflag=-jon
        # attached as stack_dump does (the walks need the runtime seen
        # running, its traces made), the two workloads side by side, on past
        # the record's end
        (cd /lua && exec luajit $jflag jitoracle.lua 600 >/dev/null 2>&1) &
        xpid=$!
        (cd /lua && exec luajit $jflag fwdrefuse.lua 600 >/dev/null 2>&1) &
        ypid=$!
        sleep 3
        $ss record --bundle -F 99 -p $xpid,$ypid -d 8 -o /tmp/fwd-$j.snap -o /tmp/fwd-$j.folded \
            -o /tmp/fwd-$j.txt >/dev/null 2>/tmp/fwd.err
        rc=$?
        kill $xpid $ypid
        wait $xpid $ypid 2>/dev/null
        say "fwd_dump_$j" "rc=$rc $(tail -n 1 /tmp/fwd.err)"
    done
    for j in joff jit; do
        for x in snap folded txt; do
            echo "SSVM-STACK fwd-$j.$x begin"; base64 /tmp/fwd-$j.$x; echo "SSVM-STACK fwd-$j.$x end"
        done
    done
    say end
    sync
    poweroff -f
fi
# ---- end a64fwd ----
# ---- a64scan: code without CFI that called on (issue 32 on arm64) ----
# cli_nocfi pcre (test/cli/nocfi.c): PCRE2's JIT code (sljit, anonymous
# memory, no CFI) under main > nocfi_outer > nocfi_middle > nocfi_inner,
# called by libpcre2 and calling on inside itself (x30 no longer the return
# address): the stack scan (src/unwind/native_scan.c) steps over it through
# its frame record, to its caller jit_machine_stack_exec (a frame record at
# the top of 32 KiB of locals); pcrestack: the same with a JIT stack, its
# caller pcre2_jit_match (a record between locals and other saves). jit: the samples in that code (a "[jit] [anon]" frame,
# or an unnamed anonymous leaf where the walk stopped); whole: with the whole
# chain from _start; cut: stopped there or [truncated]; wrong: any other.
# With ssvm.a64scan (SS_VM_A64SCAN=1 test/vm/arm64.sh) alone, right after
# both programs loaded, the capture dumped for replay out of the guest.
# a64scan_judge FILE WHOLERE: the samples in the code without CFI (a
# "[jit] [anon]" frame, or an unnamed anonymous frame where the walk
# stopped), those matching WHOLERE, cut and wrong
a64scan_judge() {
    WRE=$2 awk '{ n = $NF; $NF = ""; sub(/ $/, ""); t += n
            if ($0 !~ /;\[jit\] \[anon\](;|$)/ && $0 !~ /;\[unknown\][+]0x[0-9a-f]+(;|$)/) next
            j += n
            if ($0 ~ ENVIRON["WRE"]) w += n
            else if ($0 !~ /\[jit\]/ || index($0, "[truncated]")) c += n
            else bad += n }
        END { printf "total=%d jit=%d whole=%d cut=%d wrong=%d", t, j, w, c, bad }' "$1"
}
a64scan_case() { # MODE [dump]
    local rc i=0 npid F=99 D=2 key=a64scan
    [ -n "${2:-}" ] && F=49 D=1 # dump: a small fixture
    [ $1 = pcre ] || key=a64scan_$1
    /bin/cli_nocfi $1 120 >/tmp/nc.out &
    npid=$!
    while ! grep -q '^ready' /tmp/nc.out && kill -0 $npid 2>/dev/null && [ $i -lt 60 ]; do
        sleep 1
        i=$((i + 1))
    done
    # dump: bundled, with the perf-script text (a fixture: test/fixtures/make.sh)
    $ss record -F $F -p $npid -d $D --stack-size 65528 -o /tmp/nc.folded -o /tmp/nc.snap \
        ${2:+--bundle -o /tmp/nc.txt} >/dev/null 2>/tmp/nc.err
    rc=$?
    kill $npid
    wait $npid 2>/dev/null
    say $key "rc=$rc" "$(a64scan_judge /tmp/nc.folded \
        '^cli_nocfi;_start;.*;main;nocfi_outer;nocfi_middle;nocfi_inner;pcre_work;pcre2_match_8;(.*;)?\[jit\] \[anon\](;|$)')" \
        "$(grep -o '[^,]*through code without CFI[^,]*' /tmp/nc.err | tr '\n' ' ')"
    awk '{ print $NF, $0 }' /tmp/nc.folded | sort -nr | head -n 4 | sed "s/^/SSVM-LOG folded $key: /"
    tail -n 2 /tmp/nc.err | sed "s/^/SSVM-LOG $key: /"
    if [ -n "${2:-}" ]; then
        say ${key}_dump "$(ls -ln /tmp/nc.snap | awk '{ print $5 }') bytes"
        for x in snap folded txt; do
            echo "SSVM-A64SCAN $1.$x begin"; base64 /tmp/nc.$x; echo "SSVM-A64SCAN $1.$x end"
        done
    fi
}
# rwx: test/cli/nocfi.c's hand-written arm64 code in RWX memory (a frame
# record, x29 clobbered, calls back into C) under callers built with frame
# pointers (cli_nocfi_fp: the scan proves their records) and without
# (cli_nocfi: a caller's record cannot be proven, the walk must stop there,
# never a wrong chain), both recorded at once (dump: bundled, kept as
# SSVM-A64SCAN rwx.*)
a64scan_rwx() { # [dump]
    local rc i=0 p1 p2 c
    /bin/cli_nocfi_fp rwx 120 >/tmp/nf.out &
    p1=$!
    /bin/cli_nocfi rwx 120 >/tmp/nn.out &
    p2=$!
    while ! { grep -q '^ready' /tmp/nf.out && grep -q '^ready' /tmp/nn.out; } && [ $i -lt 60 ]; do
        sleep 1
        i=$((i + 1))
    done
    $ss record -F 99 -p $p1,$p2 -d 2 -o /tmp/nr.folded \
        ${1:+--bundle -o /tmp/nr.snap -o /tmp/nr.txt} >/dev/null 2>/tmp/nr.err
    rc=$?
    kill $p1 $p2
    wait $p1 $p2 2>/dev/null
    for c in cli_nocfi_fp cli_nocfi; do
        grep "^$c;" /tmp/nr.folded >/tmp/nr1.folded
        say "a64scan_rwx_${c#cli_}" "rc=$rc" "$(a64scan_judge /tmp/nr1.folded \
            "^$c;_start;.*;main;nocfi_outer;nocfi_middle;nocfi_inner;\\[jit\\] \\[anon\\](;nocfi_callback)?\$")"
        awk '{ print $NF, $0 }' /tmp/nr1.folded | sort -nr | head -n 3 | sed "s/^/SSVM-LOG folded a64scan_rwx: /"
    done
    tail -n 1 /tmp/nr.err | sed "s/^/SSVM-LOG a64scan_rwx: /"
    if [ -n "${1:-}" ]; then
        for x in snap folded txt; do
            echo "SSVM-A64SCAN rwx.$x begin"; base64 /tmp/nr.$x; echo "SSVM-A64SCAN rwx.$x end"
        done
    fi
}
if grep -q ssvm.a64scan /proc/cmdline; then
    a64scan_rwx dump
    a64scan_case pcre dump
    a64scan_case pcrestack dump
    say end
    sync
    poweroff -f
fi
# ---- end a64scan ----
# share FILE LEAFRE WHOLERE: "whole=N total=M" (as test/vm/guest.sh)
share() {
    awk -v l="$2" -v w="$3" '{ n = $NF; $NF = ""; sub(/ $/, "")
            if ($0 ~ l) { t += n; if ($0 ~ w) k += n } }
        END { printf "whole=%d total=%d", k, t }' "$1"
}
# lua_judge FILE SAMPLERE SRC NAME...: each sample matching SAMPLERE by the
# names of its Lua frames from SRC, outermost first, against the chain
# NAME...: "exact=E prefix=P cut=C none=N wrong=W total=T" (prefix: the
# chain's first frames only; cut: its last frames only, under a
# [truncated] frame (a VM entry below them not walked, splice.c); wrong:
# any other)
lua_judge() {
    f=$1 s=$2 src=$3
    shift 3
    awk -v s="$s" -v src=" ($src:" -v want="$*" '{ n = $NF; $NF = ""; sub(/ $/, "")
            if ($0 !~ s) next
            t += n; k = split($0, fr, ";"); got = ""
            for (i = 1; i <= k; i++)
                if (index(fr[i], src)) { nm = fr[i]; sub(/ [(].*/, "", nm); got = got (got == "" ? "" : " ") nm }
            if (got == want) e += n
            else if (got == "") z += n
            else if (index(want " ", got " ") == 1) p += n
            else if (index($0, ";[truncated];") && substr(" " want, length(want) - length(got) + 1) == " " got) c += n
            else w += n }
        END { printf "exact=%d prefix=%d cut=%d none=%d wrong=%d total=%d", e, p, c, z, w, t }' "$f"
}
# lua_chain FILE SAMPLERE SRC: the most frequent chain of SRC's Lua frames
# (names, outermost first) of the samples matching SAMPLERE
lua_chain() {
    awk -v s="$2" -v src=" ($3:" '{ n = $NF; $NF = ""; sub(/ $/, "")
            if ($0 !~ s) next
            k = split($0, fr, ";"); got = ""
            for (i = 1; i <= k; i++)
                if (index(fr[i], src)) { nm = fr[i]; sub(/ [(].*/, "", nm); got = got (got == "" ? "" : " ") nm }
            c[got] += n }
        END { for (g in c) if (c[g] > m) { m = c[g]; b = g }; print b }' "$1"
}
# LuaJIT's traces (JIT on): chain.lua's chain, an FFI call into libc from
# a trace (ffi.lua: strlen under measure, inlined into outer's loop) and a
# trace in a coroutine (coro.lua: judged against the -joff run's chain),
# -joff first for the interpreter's chain
jit_cases() { # mode flag (the -joff runs in the default mode only)
    cases="chain:jit ffi:joff ffi:jit coro:joff coro:jit"
    # compat: the chain proves its program's data walks traces (the FFI
    # and coroutine cases walk the same data; the default mode judges them)
    [ $1 = default ] || cases="chain:jit"
    for c in $cases; do
        w=${c%:*} jflag=-joff
        [ ${c#*:} = jit ] && jflag=
        (cd /lua && exec luajit $jflag $w.lua 60 >/dev/null) &
        lpid=$!
        sleep 1
        $ss record $2 -v -F 199 -p $lpid -d 2 -o /tmp/j.folded >/dev/null 2>/tmp/rec.err; rc=$?
        kill $lpid
        wait $lpid 2>/dev/null
        if [ $w = chain ]; then
            sel=';lua_pcall;' want='main outer mid leaf'
        elif [ $w = coro ]; then
            sel=';leaf [(]coro[.]lua:[0-9]+[)]' want=$cwant
            [ ${c#*:} = joff ] && want=$(lua_chain /tmp/j.folded "$sel" coro.lua) cwant=$want
            say "jit_coro_chain_${c#*:}_$1" "$want"
        else
            # strlen: glibc's IFUNC target, unnamed in the stripped libc
            sel=';lua_pcall;.*;libc[.]so[.]6[+]0x[0-9a-f]+$' want='main outer measure'
        fi
        say "jit_${w}_${c#*:}_$1" "rc=$rc" "$(lua_judge /tmp/j.folded "$sel" $w.lua $want)"
        grep -i 'luajit\|trace' /tmp/rec.err | tail -n 3 | sed "s/^/SSVM-LOG $c $1: /"
        awk '{ print $NF, $0 }' /tmp/j.folded | sort -nr | head -n 6 | sed "s/^/SSVM-LOG folded $c $1: /"
        if [ $1 = default ] && [ $c = ffi:jit ] && grep -q ssvm.dump /proc/cmdline; then
            (cd /lua && exec luajit $w.lua 30 >/dev/null) &
            lpid=$!
            sleep 1
            $ss record -F 49 -p $lpid -d 2 -o /tmp/dj.snap >/dev/null 2>&1
            kill $lpid
            wait $lpid 2>/dev/null
            echo "SSVM-DUMPJIT begin"; base64 /tmp/dj.snap; echo "SSVM-DUMPJIT end"
        fi
    done
}

# ---- pointer authentication, off-CPU, kernel frames, short runs (issue 33) ----
# The native chain of cli_native_pac (test/cli/native.c built with
# -mbranch-protection=standard: cli_mid, cli_outer, cli_sort and main sign the
# return addresses they save), recorded as the plain one; replayed; and
# replayed once more with STACKSNAP_PAC_MASK=0 (nothing stripped): what the
# walk of the same samples gives without stripping.
PACWHOLE='^cli_native_pac;_start;.*;main;cli_outer;(cli_mid;cli_leaf|cli_sort;.*;cli_cmp;cli_leaf)$'
pac_case() { # MODE [ROOT]: ROOT, a root to run it in (/trixie: trixie's libc)
    local flag= rc secs t0 wpid i=0 libc=bookworm
    [ "$1" = compat ] && flag=--compat
    if [ -n "${2:-}" ]; then
        libc=${2#/}
        chroot "$2" /bin/cli_native_pac 60 >/tmp/p.out &
    else
        /bin/cli_native_pac 60 >/tmp/p.out &
    fi
    wpid=$!
    while ! grep -q '^ready' /tmp/p.out && kill -0 $wpid 2>/dev/null && [ $i -lt 60 ]; do
        sleep 1
        i=$((i + 1))
    done
    t0=$(date +%s)
    $ss record $flag -F 199 -p $wpid -d 2 -o /tmp/p.folded -o /tmp/p.snap >/dev/null 2>/tmp/rec.err
    rc=$?
    secs=$(($(date +%s) - t0))
    tail -n 3 /tmp/rec.err | sed "s/^/SSVM-LOG record pac $1: /"
    say "pac_$1" "rc=$rc secs=$secs" "$(share /tmp/p.folded ';cli_leaf$' "$PACWHOLE")" \
        "mask=$($ss info /tmp/p.snap 2>&1 | sed -n 's/^pac mask *//p') libc=$libc"
    sort -k2 -nr -t' ' /tmp/p.folded 2>/dev/null | head -n 3 | sed "s/^/SSVM-LOG folded pac $1: /"
    # every rule step (signed return addresses stripped) checked against libunwind's
    STACKSNAP_CHECK_RULES=1 $ss replay /tmp/p.snap -o /tmp/pr.folded >/dev/null 2>/tmp/rep.err
    rc=$?
    same=no
    cmp -s /tmp/p.folded /tmp/pr.folded && same=yes
    say "pac_replay_$1" "rc=$rc identical=$same $(tail -n 1 /tmp/rep.err)"
    kill $wpid
    wait $wpid 2>/dev/null
    if [ "$1" = default ]; then
        STACKSNAP_PAC_MASK=0 $ss replay /tmp/p.snap -o /tmp/p0.folded >/dev/null 2>&1
        rc=$?
        say pac_nostrip "rc=$rc" "$(share /tmp/p0.folded ';cli_leaf$' "$PACWHOLE")"
        sort -k2 -nr -t' ' /tmp/p0.folded 2>/dev/null | head -n 2 | sed "s/^/SSVM-LOG folded pac nostrip: /"
    fi
}
# --off-cpu: luajit -joff offcpu_sleep.lua (a() 3 ms, b() 1 ms in usleep
# per round, its own clock says how long): the time off the CPU against
# the program's, the share of it in usleep's chain and in a's and b's
offcpu_case() {
    local rc truth
    (cd /lua && $ss record --off-cpu -o /tmp/o.folded -- luajit -joff offcpu_sleep.lua usleep 150 \
        >/dev/null 2>/tmp/off.err)
    rc=$?
    truth=$(grep -m1 '^truth ' /tmp/off.err)
    say offcpu "rc=$rc" "$truth" "$(awk '{ n = $NF; t += n; if ($0 ~ /;usleep;/) u += n
            if ($0 ~ /;a [(]offcpu_sleep[.]lua:[0-9]+[)];/) a += n
            if ($0 ~ /;b [(]offcpu_sleep[.]lua:[0-9]+[)];/) b += n }
        END { printf "us=%d usleep=%d a=%d b=%d", t, u, a, b }' /tmp/o.folded)"
    sort -k2 -nr -t' ' /tmp/o.folded 2>/dev/null | head -n 3 | sed "s/^/SSVM-LOG folded offcpu: /"
    grep -v '^truth ' /tmp/off.err | tail -n 3 | sed "s/^/SSVM-LOG offcpu: /"
}
# --kernel: busybox dd from /dev/zero to /dev/null (read/write system
# calls): the samples with kernel frames, those through arm64's system call
# entry (el0_svc) with the kernel frames leafward of the user ones,
# read_zero named; replay identical
kernel_case() {
    local rc dpid
    dd if=/dev/zero of=/dev/null bs=512 2>/dev/null &
    dpid=$!
    sleep 1
    $ss record --kernel -F 199 -p $dpid -d 2 -o /tmp/k.folded -o /tmp/k.snap >/dev/null 2>/tmp/k.err
    rc=$?
    kill $dpid
    wait $dpid 2>/dev/null
    say kernel_frames "rc=$rc" "$(awk '{ n = $NF; $NF = ""; sub(/ $/, ""); t += n
            m = split($0, f, ";"); first = 0; bad = 0
            for (i = 1; i <= m; i++)
                if (f[i] ~ /_\[k\]$/) { if (!first) first = i } else if (first) bad = 1
            if (!first) next
            k += n
            if (!bad && $0 ~ /;el0_svc_\[k\]/) s += n
            if ($0 ~ /;read_zero_\[k\]/) z += n }
        END { printf "total=%d kern=%d syscall=%d read_zero=%d", t, k, s, z }' /tmp/k.folded)"
    sort -k2 -nr -t' ' /tmp/k.folded 2>/dev/null | head -n 3 | sed "s/^/SSVM-LOG folded kernel: /"
    tail -n 2 /tmp/k.err | sed "s/^/SSVM-LOG kernel: /"
    $ss replay /tmp/k.snap -o /tmp/kr.folded >/dev/null 2>&1
    rc=$?
    same=no
    cmp -s /tmp/k.folded /tmp/kr.folded && same=yes
    say kernel_replay "rc=$rc identical=$same"
}
# the C host of libluajit: main > outer > pcall > viac > l_ccall (C) >
# inner > leaf, and outer > spin > l_cspin (C) (test/luajit/h.lua); in
# the default mode only: the compat program's data for Lua walks is
# proven by the chains above, the host's walk is the same code
host_case() { # mode
    local hpid rc
    (cd /lua && exec /bin/lj_host h.lua) &
    hpid=$!
    sleep 2
    $ss record -v -F 199 -p $hpid -d 4 -o /tmp/h.folded >/dev/null 2>/tmp/rec.err; rc=$?
    grep -i 'luajit\|samples\|native steps' /tmp/rec.err | tail -n 4 | sed "s/^/SSVM-LOG host $1: /"
    kill $hpid
    wait $hpid 2>/dev/null
    H='[(]h[.]lua:'
    say "host_leaf_$1" "rc=$rc" "$(share /tmp/h.folded ";leaf ${H}1[)]\$" "^lj_host;.*;main;.*;main ${H}6[)];outer ${H}5[)];pcall [(][[]builtin[]]:0[)];viac ${H}3[)];l_ccall;anonymous ${H}2[)];leaf ${H}1[)]\$")"
    say "host_cspin_$1" "rc=$rc" "$(share /tmp/h.folded ';l_cspin$' "^lj_host;.*;main;.*;main ${H}6[)];outer ${H}5[)];spin ${H}4[)];l_cspin\$")" \
        "lua_$(share /tmp/h.folded ';l_cspin$' "${H}")"
    sort -k2 -nr -t' ' /tmp/h.folded 2>/dev/null | head -n 4 | sed "s/^/SSVM-LOG folded host $1: /"
    if [ $1 = default ] && grep -q ssvm.dump /proc/cmdline; then # a short capture, out
        $ss record -F 97 -o /tmp/d.snap -- /bin/cli_native 1 >/dev/null 2>&1
        echo "SSVM-DUMP begin"; base64 /tmp/d.snap; echo "SSVM-DUMP end"
        (cd /lua && exec luajit -joff chain.lua 30 >/dev/null) &
        lpid=$!
        sleep 1
        # the unwound frames only (--no-stack-bytes): any build replays them
        # (test/fixtures/arm64-luajit.snap; cli_fixtures)
        $ss record -F 97 -p $lpid -d 2 --no-stack-bytes -o /tmp/dl.snap -o /tmp/dl.folded >/dev/null 2>&1
        kill $lpid
        wait $lpid 2>/dev/null
        echo "SSVM-DUMPLJ begin"; base64 /tmp/dl.snap; echo "SSVM-DUMPLJ end"
        echo "SSVM-DUMPLJF begin"; base64 /tmp/dl.folded; echo "SSVM-DUMPLJF end"
        (cd /lua && exec /bin/lj_host h.lua) &
        hpid=$!
        sleep 1
        $ss record -F 97 -p $hpid -d 1 -o /tmp/dh.snap >/dev/null 2>&1
        kill $hpid
        wait $hpid 2>/dev/null
        echo "SSVM-DUMPHOST begin"; base64 /tmp/dh.snap; echo "SSVM-DUMPHOST end"
    fi
}
# ssvm.short (a newer kernel, test/vm/arm64.sh SUITE...): after both
# programs loaded, the PAC chain (on trixie's libc when the root has it) and
# luajit -joff's chain only
short_run() {
    t_pac=$(cut -d' ' -f1 /proc/uptime)
    if [ -x /trixie/bin/cli_native_pac ]; then pac_case default /trixie; else pac_case default; fi
    t_lua=$(cut -d' ' -f1 /proc/uptime)
    (cd /lua && exec luajit -joff chain.lua 60 >/dev/null) &
    lpid=$!
    sleep 1
    $ss record -F 199 -p $lpid -d 2 -o /tmp/l.folded >/dev/null 2>/tmp/rec.err
    rc=$?
    kill $lpid
    wait $lpid 2>/dev/null
    say lua_joff_default "rc=$rc" \
        "$(share /tmp/l.folded ';lua_pcall;' '^luajit;_start;.*;main [(]chain[.]lua:[0-9]+[)];outer [(]chain[.]lua:12[)];mid [(]chain[.]lua:11[)];leaf [(]chain[.]lua:[0-9]+[)](;|$)')"
    say uptime "$(cut -d' ' -f1 /proc/uptime) s (pac case from $t_pac, lua case from $t_lua)"
    say end
    sync
    poweroff -f
}
grep -q ssvm.short /proc/cmdline && short_run
# ssvm.cases=A,B... (SS_VM_CASES=A,B... test/vm/arm64.sh): those cases of
# the full run alone, after both programs loaded: main (the native, Lua,
# trace and host chains in both modes), host (the C host of libluajit in
# the default mode), ffi_cb, tt, ngx, a64scan, fx, pac, offcpu, kernel
# (vm_cases: jit_cases has its own "cases")
vm_cases=$(sed -n 's/.*ssvm[.]cases=\([^ ]*\).*/\1/p' /proc/cmdline)
want() { [ -z "$vm_cases" ] || case ",$vm_cases," in *",$1,"*) ;; *) return 1 ;; esac; }
for mode in default compat; do
    want main || { [ $mode = default ] && want host && host_case $mode; continue; }
    flag=; [ $mode = compat ] && flag=--compat
    # attached once the workload runs (-p): a recording from its exec on
    # may keep a view of the process without libc (docs/design.md,
    # "Architectures": open)
    /bin/cli_native 60 >/tmp/w.out &  # 60 s at most; checks the time (vDSO) as it spins
    wpid=$!
    i=0
    while ! grep -q '^ready' /tmp/w.out && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
    t0=$(date +%s)
    $ss record $flag -F 199 -p $wpid -d 3 -o /tmp/n.folded -o /tmp/n.snap \
        >/tmp/rec.out 2>/tmp/rec.err; rc=$?
    secs=$(($(date +%s) - t0))
    kill $wpid
    wait $wpid 2>/dev/null
    tail -n 5 /tmp/rec.err | sed "s/^/SSVM-LOG record $mode: /"
    say "native_$mode" "rc=$rc secs=$secs" \
        "$(share /tmp/n.folded ';cli_leaf$' '^cli_native;_start;.*;main;cli_outer;(cli_mid;cli_leaf|cli_sort;.*;cli_cmp;cli_leaf)$')"
    # the vDSO (no .eh_frame; signs x30 with pointer authentication under -cpu max)
    say "vdso_$mode" "$(share /tmp/n.folded ';__kernel_clock_gettime$' '^cli_native;_start;.*;main;(.*;)?clock_gettime;__kernel_clock_gettime$')"
    sort -k2 -nr -t' ' /tmp/n.folded 2>/dev/null | head -n 5 | sed "s/^/SSVM-LOG folded $mode: /"
    $ss replay /tmp/n.snap -o /tmp/r.folded >/dev/null 2>/tmp/rep.err; rc=$?
    same=no; cmp -s /tmp/n.folded /tmp/r.folded && same=yes
    say "replay_$mode" "rc=$rc identical=$same"
    say "info_$mode" "$($ss info /tmp/n.snap 2>&1 | grep -E '^arch: ')"
    # LuaJIT's interpreter: main > outer > mid > leaf (test/vm/chain.lua);
    # the share counts the samples taken once the script runs (lua_pcall)
    # (attached, as the native workload: under emulation the recorder lags
    # seconds behind at its start, and a workload it started could be gone
    # before its first samples are walked)
    for jit in joff; do
        jflag=-joff
        (cd /lua && exec luajit $jflag chain.lua 60 >/dev/null) &
        lpid=$!
        sleep 1
        $ss record $flag -v -F 199 -p $lpid -d 2 -o /tmp/l.folded >/dev/null 2>/tmp/rec.err; rc=$?
        kill $lpid
        wait $lpid 2>/dev/null
        say "lua_${jit}_$mode" "rc=$rc" \
            "$(share /tmp/l.folded ';lua_pcall;' '^luajit;_start;.*;main [(]chain[.]lua:[0-9]+[)];outer [(]chain[.]lua:12[)];mid [(]chain[.]lua:11[)];leaf [(]chain[.]lua:[0-9]+[)](;|$)')" \
            "lua_$(share /tmp/l.folded ';lua_pcall;' '[(]chain[.]lua:[0-9]+[)]')"
        grep -i 'luajit' /tmp/rec.err | tail -n 2 | sed "s/^/SSVM-LOG lua $jit $mode: /"
        grep ';lua_pcall;' /tmp/l.folded | grep -Ev ';main [(]chain[.]lua:[0-9]+[)];outer [(]chain[.]lua:12[)];mid [(]chain[.]lua:11[)];leaf [(]chain[.]lua:[0-9]+[)](;| )' |
            sort -k2 -nr -t' ' | head -n 4 | sed "s/^/SSVM-LOG not exact lua $jit $mode: /"
    done
    jit_cases $mode "$flag"
    [ $mode = default ] && host_case $mode
done
# ---- ffi_cb: C -> Lua through an FFI callback (issue 33) ----
# test/luajit/ffi_cb.lua (interpreted: jit.off()): main > sortit >
# ffi.meta.__call > lj_vm_ffi_call > libc's qsort > the callback
# (lj_vm_ffi_callback, lj_ccallback_enter's cframe) > anonymous > slow: the
# Lua frames on both sides of the C frames, and those C frames between;
# lua_whole: the samples under lua_pcall with Lua frames (in qsort between
# callbacks, the FFI call's frames: lj_vm_ffi_call, as in jit_ffi_joff)
ffi_cb_case() {
    local rc lpid
    (cd /lua && exec luajit ffi_cb.lua >/dev/null) &
    lpid=$!
    sleep 1
    $ss record -F 199 -p $lpid -d 2 -o /tmp/fc.folded >/dev/null 2>/tmp/fc.err
    rc=$?
    kill $lpid
    wait $lpid 2>/dev/null
    F='[(]ffi_cb[.]lua:'
    say ffi_cb_default "rc=$rc" "$(lua_judge /tmp/fc.folded ";slow ${F}4[)]\$" ffi_cb.lua main sortit anonymous slow)" \
        "native_$(share /tmp/fc.folded ";slow ${F}4[)]\$" ";main ${F}18[)];sortit ${F}14[)];ffi[.]meta[.]__call [(][[]builtin[]]:0[)];lj_cf_ffi_meta___call(;[^;[][^;]*)*;qsort(_r)?(;[^;[][^;]*)*;anonymous ${F}7[)];slow ${F}4[)]\$")" \
        "lua_$(share /tmp/fc.folded ';lua_pcall;' "$F")"
    awk '{ print $NF, $0 }' /tmp/fc.folded | sort -nr | head -n 3 | sed "s/^/SSVM-LOG folded ffi_cb: /"
    grep ';lua_pcall;' /tmp/fc.folded | grep -v "$F" | awk '{ print $NF, $0 }' | sort -nr | head -n 3 |
        sed "s/^/SSVM-LOG no Lua frame ffi_cb: /"
    tail -n 2 /tmp/fc.err | sed "s/^/SSVM-LOG ffi_cb: /"
}
want ffi_cb && ffi_cb_case
# ---- end ffi_cb ----
# ---- a64tt: Tarantool's LuaJIT fork, cross-built for arm64 (issue 33) ----
# /bin/tnt: the fork's luajit (GC64, JIT, stripped, a name of its own as in
# Tarantool; test/luajit/build-ttlj-arm64.sh) on w.lua (main > a > b > c >
# leaf, as test_ttfork.c on x86-64), -joff as tnt and JIT on as tntj (a
# symlink: its own comm, the root of its folded lines), both recorded at
# once: the samples under lua_pcall judged by their w.lua frames, and the
# share with any Lua frame (a layout that fits no row gives none, silently)
tt_case() {
    local c lpid jpid rc t0 t1
    [ -x /bin/tnt ] || return 0
    t0=$(cut -d' ' -f1 /proc/uptime)
    (cd /lua && exec /bin/tnt -joff w.lua >/dev/null) &
    lpid=$!
    (cd /lua && exec /bin/tntj w.lua >/dev/null) &
    jpid=$!
    renice 19 $lpid $jpid >/dev/null # the recorder's walks get the two vCPUs first
    sleep 1
    t1=$(cut -d' ' -f1 /proc/uptime)
    $ss record -v -F 99 -p $lpid,$jpid -d 2 -o /tmp/t.folded >/dev/null 2>/tmp/rec.err
    rc=$?
    echo "SSVM-LOG tt: record from $t1 to $(cut -d' ' -f1 /proc/uptime)"
    kill $lpid $jpid
    wait $lpid $jpid 2>/dev/null
    for c in joff:tnt jit:tntj; do
        grep "^${c#*:};" /tmp/t.folded >/tmp/t1.folded
        say "tt_${c%:*}" "rc=$rc" "$(lua_judge /tmp/t1.folded ';lua_pcall;' w.lua main a b c leaf)" \
            "lua_$(share /tmp/t1.folded ';lua_pcall;' '[(]w[.]lua:[0-9]+[)]')"
        awk '{ print $NF, $0 }' /tmp/t1.folded | sort -nr | head -n 3 | sed "s/^/SSVM-LOG folded tt ${c%:*}: /"
    done
    grep -i 'layout\|samples' /tmp/rec.err | tail -n 3 | sed "s/^/SSVM-LOG tt: /"
    say "tt_uptime" "$t0 $(cut -d' ' -f1 /proc/uptime)"
}
want tt && tt_case
# ---- end a64tt ----
# ---- a64ngx: nginx + the lua module under a request loop ----
# Debian 12's arm64 nginx, a master and one worker (/lua/nginx-arm64.conf,
# the packages in /ngx: OpenResty's luajit2, lua-resty-core), under two
# busybox wget loops: /j's chunk (main) calls the module ngxcase.lua's
# handle > work > enc, whose loop (a trace) calls the lua module's
# ngx_http_lua_ffi_encode_base64 through the FFI; /i the module's own copy
# with the JIT off (the interpreter's chain: the truth). One record of the
# worker (-p) for both; each sample in that C function is judged by the
# names of its Lua frames of the location's chunk (content_by_lua(
# nginx.conf:LINE)) and of the module: exact, a prefix, none, or wrong (any
# other chain, frames of both chunks, or module frames without a chunk:
# "mixed"), and "rooted" when the chain sits right on
# ngx_http_lua_run_thread (the C that resumed the request's coroutine).
# "traces=N": jit.util's count in the worker, from /j.
ngx_case() {
    local rc t0 t1 mpid wpid i=0 jl il tr pj pi
    t0=$(cut -d' ' -f1 /proc/uptime)
    ifconfig lo 127.0.0.1 up
    mkdir -p /tmp/ngx/conf /tmp/ngx/logs /tmp/ngx/tmp
    cp /lua/nginx-arm64.conf /tmp/ngx/conf/nginx.conf
    LD_LIBRARY_PATH=/ngx/lib /ngx/usr/sbin/nginx -p /tmp/ngx -c conf/nginx.conf \
        -e /tmp/ngx/logs/error.log >/tmp/ngx/out 2>&1 &
    mpid=$!
    while ! wget -q -O /dev/null http://127.0.0.1:8080/ping 2>/dev/null && kill -0 $mpid 2>/dev/null &&
        [ $i -lt 150 ]; do
        sleep 0.2
        i=$((i + 1))
    done
    wpid=$(awk -v m=$mpid '$4 == m { print $1 }' /proc/[0-9]*/stat 2>/dev/null | head -n 1)
    t1=$(cut -d' ' -f1 /proc/uptime)
    # a request before the record: its answer counts the traces it compiled
    tr=$(wget -q -O - http://127.0.0.1:8080/j | sed -n 's/.*traces=//p')
    (while :; do wget -q -O /dev/null http://127.0.0.1:8080/j; done) &
    pj=$!
    (while :; do wget -q -O /dev/null http://127.0.0.1:8080/i; done) &
    pi=$!
    $ss record -v -F 99 -p "${wpid:-0}" -d 2 -o /tmp/ngx.folded >/dev/null 2>/tmp/rec.err
    rc=$?
    kill $pj $pi
    wait $pj $pi 2>/dev/null
    kill $mpid
    wait $mpid 2>/dev/null
    jl=$(grep -n 'ngx_case: jit' /tmp/ngx/conf/nginx.conf | cut -d: -f1)
    il=$(grep -n 'ngx_case: interpreter' /tmp/ngx/conf/nginx.conf | cut -d: -f1)
    awk -v j="content_by_lua(nginx.conf:$jl)" -v i="content_by_lua(nginx.conf:$il)" \
        -v want="main handle work enc" -v rc=$rc -v tr="${tr:-none}" -v w="${wpid:-none}" '
        function judge(k, line, ch) {
            tot[k] += n
            if (got == want) { e[k] += n; if (index(line, ";ngx_http_lua_run_thread;main (" ch ":")) r[k] += n }
            else if (index(want " ", got " ") == 1) p[k] += n
            else bad[k] += n
        }
        { n = $NF; $NF = ""; sub(/ $/, ""); t += n
            if ($0 !~ /;ngx_http_lua_ffi_encode_base64(;|$)/) next
            c += n; m = split($0, fr, ";"); got = ""; fj = fi = 0
            for (x = 1; x <= m; x++) { # the frames of the chunks and of the module
                nm = fr[x]; sub(/ [(].*/, "", nm)
                if (index(fr[x], " (" j ":")) fj++
                else if (index(fr[x], " (" i ":")) fi++
                else if (fr[x] !~ /ngxcase[.]lua:[0-9]+[)]$/) continue
                got = got (got == "" ? "" : " ") nm
            }
            if (fj && fi) mixed += n
            else if (fj) judge("jit", $0, j)
            else if (fi) judge("joff", $0, i)
            else if (got != "") mixed += n # module frames without a chunk
            else none += n }
        END {
            printf "SSVM ngx_c rc=%d samples=%d c=%d none=%d mixed=%d worker=%s traces=%s\n", rc, t, c, none, mixed, w, tr
            for (k in tot)
                printf "SSVM ngx_%s exact=%d prefix=%d wrong=%d total=%d rooted=%d\n", k, e[k], p[k], bad[k], tot[k], r[k]
        }' /tmp/ngx.folded
    grep -i 'luajit\|samples' /tmp/rec.err | tail -n 3 | sed "s/^/SSVM-LOG ngx: /"
    tail -n 3 /tmp/ngx/logs/error.log /tmp/ngx/out 2>/dev/null | sed "s/^/SSVM-LOG ngx error.log: /"
    awk '{ print $NF, $0 }' /tmp/ngx.folded | sort -nr | head -n 6 | sed "s/^/SSVM-LOG folded ngx: /"
    say ngx_uptime "start=$t0 ready=$t1 end=$(cut -d' ' -f1 /proc/uptime)"
}
want ngx && ngx_case
# ---- end a64ngx ----
if want a64scan; then
    a64scan_case pcre
    a64scan_case pcrestack
    a64scan_rwx
fi
grep -q ssvm.dump /proc/cmdline && stack_dump # (a64replay)
want fx && fx_case # (a64replay)
want pac && pac_case default
want offcpu && offcpu_case
want kernel && kernel_case
say uptime "$(cut -d' ' -f1 /proc/uptime) s"
say end
sync
poweroff -f
