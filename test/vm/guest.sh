#!/bin/sh
# test/vm/guest.sh: /init of the kernel-matrix guest (test/vm/initramfs.sh).
# Mounts what stacksnap needs, runs every check on this kernel and prints one
# "SSVM key value..." line per result on the serial console, then powers off.
# test/vm/matrix.sh reads those lines on the host and decides.
export PATH=/bin:/usr/bin SS_VM_GUEST=1
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# (/tmp stays the initramfs's own: the build folder may be under /tmp)
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm # criterion's arena
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ulimit -l unlimited # kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK
exec </dev/null
src=$(cat /etc-src)
build=$(cat /etc-build)
ss=$build/stacksnap
say() { echo "SSVM $*"; }

say kernel "$(uname -r)"
say btf "$([ -r /sys/kernel/btf/vmlinux ] && echo yes || echo no)"

# Which program loads by default, its size, the forced compat one, and the
# one --kernel loads (the ring buffer one from 5.15 on, as by default).
for mode in default compat kernel; do
    flag=; [ $mode = compat ] && flag=--compat; [ $mode = kernel ] && flag=--kernel
    out=$($ss info --bpf $flag -v 2>/tmp/bpf.err); rc=$?
    say "bpf_$mode" "rc=$rc" "$out" "$(grep '^stacksnap: ' /tmp/bpf.err | grep -v 'verifier log' | tr '\n' ' ')"
    grep -v '^stacksnap: ' /tmp/bpf.err | tail -n 40 | sed "s/^/SSVM-LOG verifier: /"
done

# Capture tests (pattern in the snapshot, partial copies, drops, children,
# the compat program forced) and program-size / run-time-stats tests.
# A failed binary runs once more (its first failure stays in the log):
# capture::guard_opened (ring buffer) failed in 2 of ~12 boots of 6.12 and
# 7.2, every sample after the guard page opened still cut at the old end;
# not understood yet (docs/kernels.md).
for t in capture_test capture_prog_test; do
    again=
    $build/$t --jobs 1 >/tmp/$t.log 2>&1; rc=$?
    if [ $rc != 0 ]; then
        tail -n 30 /tmp/$t.log | sed "s/^/SSVM-LOG $t: /"
        $build/$t --jobs 1 >/tmp/$t.log 2>&1; rc=$?
        again=" (second run)"
        [ $rc = 0 ] || tail -n 30 /tmp/$t.log | sed "s/^/SSVM-LOG $t again: /"
    fi
    say "$t" "rc=$rc$again" "$(grep -E 'Synthesis' /tmp/$t.log | tail -n 1)"
done

# share FILE LEAFRE WHOLERE: "whole=N total=M" over a folded file: samples
# whose stack matches LEAFRE (awk ERE), and those of them matching WHOLERE.
share() {
    awk -v l="$2" -v w="$3" '{ n = $NF; $NF = ""; sub(/ $/, "")
            if ($0 ~ l) { t += n; if ($0 ~ w) k += n } }
        END { printf "whole=%d total=%d", k, t }' "$1"
}
# A native chain and a Lua chain, with the default program and with compat.
# The Lua shares count the samples taken once the script runs (lua_pcall):
# startup under emulation is a tenth of the run. Where the default program
# is the compat one (before 5.15), the second pass would run the same
# program again: skipped (matrix.sh reads "same_program").
modes="default compat"
if $ss info --bpf 2>&1 | grep -q 'snapshot_compat'; then
    modes=default
    say same_program yes
fi
# The compat program's recordings on the oldest ring-buffer kernel (6.1)
# only: after it, the compat program's loading (bpf_compat) and its capture
# cases (capture_test) are what a newer verifier changes (suite time).
kv=$(uname -r); kmaj=${kv%%.*}; kr=${kv#*.}; kmin=${kr%%.*}
if [ "$modes" != default ] && { [ "$kmaj" -gt 6 ] || { [ "$kmaj" = 6 ] && [ "$kmin" -gt 1 ]; }; }; then
    modes=default
    say compat_records no
fi
for mode in $modes; do
    flag=; [ $mode = compat ] && flag=--compat
    $ss record $flag -F 499 -o /tmp/n.folded -- $build/cli_native 2 >/dev/null 2>/tmp/rec.err
    say "native_$mode" "rc=$?" \
        "$(share /tmp/n.folded ';cli_leaf$' '^cli_native;_start;.*;main;cli_outer;(cli_mid;cli_leaf|cli_sort;.*;cli_cmp;cli_leaf)$')" \
        "$(tail -n 1 /tmp/rec.err)"
    grep ';cli_leaf ' /tmp/n.folded | grep -v '^cli_native;_start;.*;main;cli_outer;' |
        head -n 3 | sed 's/^/SSVM-LOG native: /'
    jits="joff jon"
    [ $mode = compat ] && jits=joff # the JIT adds nothing on the kernel side
    for jit in $jits; do
        jflag=; [ $jit = joff ] && jflag=-joff
        (cd "$src/test/vm" && $ss record $flag -F 499 -o /tmp/l.folded -- luajit $jflag chain.lua 2 \
            >/dev/null 2>/tmp/rec.err)
        say "lua_${jit}_$mode" "rc=$?" \
            "$(share /tmp/l.folded ';lua_pcall;' '^luajit;_start;.*;main [(]chain[.]lua:[0-9]+[)];outer [(]chain[.]lua:12[)];mid [(]chain[.]lua:11[)];leaf [(]chain[.]lua:[0-9]+[)](;|$)')" \
            "lua_$(share /tmp/l.folded ';lua_pcall;' '[(]chain[.]lua:[0-9]+[)]')" "$(tail -n 1 /tmp/rec.err)"
        grep -v ';mid (chain[.]lua:11);leaf (chain' /tmp/l.folded | awk '$NF > 2' | head -n 3 |
            sed 's/^/SSVM-LOG lua: /'
    done
    # Sample-time Lua state (memory windows): many short calls, interpreter.
    F=' [(][^;()]*short[.]lua:[0-9]+[)]'
    (cd "$src/test/cli" && $ss record $flag -F 499 -o /tmp/s.folded -- luajit -joff short.lua 2 \
        >/dev/null 2>/tmp/rec.err)
    say "short_$mode" "rc=$?" \
        "$(share /tmp/s.folded "(spin|parse|route|render)$F" ";main$F;run$F;recurse$F;handler$F;(parse|route|render)$F(;spin$F)?(;[^(;]+)*\$")" \
        "$(tail -n 1 /tmp/rec.err)"
    grep -E "(spin|parse|route|render)$F" /tmp/s.folded |
        grep -Ev ";main$F;run$F;recurse$F;handler$F;(parse|route|render)$F(;spin$F)?(;[^(;]+)*\$" |
        awk '{print $NF, $0}' | sort -n | tail -n 4 | cut -d' ' -f2- | sed 's/^/SSVM-LOG short: /'
    # Kernel frames (--kernel, bpf_get_stack): a syscall-heavy dd, its
    # kernel samples on the system call's path (issue 17).
    $ss record $flag --kernel -F 499 -d 1.5 -o /tmp/k.folded -- dd if=/dev/zero of=/dev/null bs=64k \
        >/dev/null 2>/tmp/rec.err
    say "kernel_$mode" "rc=$?" "$(share /tmp/k.folded '_[[]k[]]' '^[^;]*;(.*;)?entry_SYSCALL_64[a-z_]*_[[]k[]](;|$)')" \
        "all_$(share /tmp/k.folded '' '_[[]k[]]')" "$(tail -n 1 /tmp/rec.err)"
    grep '_\[k\]' /tmp/k.folded | grep -v 'entry_SYSCALL_64' | head -n 3 | sed 's/^/SSVM-LOG kernel: /'
    # Kernel cost per sample (emulated: compare kernels, not hosts), for
    # bench/kernels only (kernel command line ssvm.bench).
    if grep -q ssvm.bench /proc/cmdline; then
        say "cost_$mode" "$($build/capture_cost $flag --seconds 2 2>&1 | tr '\n' ' ')"
        say "costwin_$mode" "$($build/capture_cost $flag --windows --seconds 2 2>&1 | tr '\n' ' ')"
    fi
done
# Off-CPU (--off-cpu --kernel: tp_btf/sched_switch and sys_exit, the ring
# buffer program only): 3 ms and 1 ms usleeps of the interpreter, weighted by
# time; on kernels without what it needs (5.10: compat) a clear error.
# "offcpu rc=N total=US a=US b=US whole=US kern=US truth A B": a and b on
# their Lua function, whole on main..a/b down to usleep, kern with kernel
# frames; truth is the program's own clock (s).
# Bounded (timeout): one boot of 6.1 in CI hung at this step until qemu's
# 600 s timeout; a hang is now this check failing, with record's last lines.
(cd "$src/test/cli" && timeout -s INT 120 $ss record --off-cpu --kernel -o /tmp/o.folded -- luajit -joff offcpu_sleep.lua usleep 100 \
    >/dev/null 2>/tmp/rec.err)
rc=$?
w=$(awk '/^luajit;/ { n = $NF; t += n
        if ($0 ~ /;a [(]/) a += n; if ($0 ~ /;b [(]/) b += n
        if ($0 ~ /;main [(]offcpu_sleep[.]lua:[0-9]+[)];[ab] [(]offcpu_sleep[.]lua:[0-9]+[)];.*usleep/) k += n
        if ($0 ~ /_[[]k[]]/) kk += n }
    END { printf "total=%d a=%d b=%d whole=%d kern=%d", t, a, b, k, kk }' /tmp/o.folded 2>/dev/null)
say offcpu "rc=$rc" "$w" "$(grep -m1 '^truth ' /tmp/rec.err)" "$(grep '^stacksnap: ' /tmp/rec.err | tail -n 2 | tr '\n' ' ')"
[ $rc = 0 ] || tail -n 5 /tmp/rec.err | sed 's/^/SSVM-LOG offcpu: /'
# Samples inside an exec keep their callers: the stack copied at the exec's
# entry (bpf/execstack.h: ring buffer program, loaded with the process
# markers) stands in for the copy that fails once the memory map changed.
# "execstack rc=N whole=W total=T ...": samples in execve, those with the
# loop's callers, then the summary's marker and exec-stack counts.
timeout -s INT 120 $ss record -v -F 999 -o /tmp/e.folded -- $build/cli_execloop 3 /bin/true >/dev/null 2>/tmp/rec.err
rc=$?
say execstack "rc=$rc" "$(share /tmp/e.folded 'execve$' ';main;el_loop;el_spawn;')" \
    "$(grep -m1 'process markers' /tmp/rec.err | sed 's/.*without user registers; //')"
[ $rc = 0 ] || tail -n 5 /tmp/rec.err | sed 's/^/SSVM-LOG execstack: /'
say end
sync
poweroff -f
