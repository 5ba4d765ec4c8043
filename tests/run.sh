#!/bin/sh
# tests/run.sh - runs every test suite and sums their RESULT lines into
# "N passed, N failed, N skipped".
# C suites: $BUILD/tests/test-*; shell suites: tests/test-*.sh. Exit 77 from a suite = the whole
# suite skipped; a RESULT line's skipped=N counts parts skipped inside it (each printed as
# "SKIP ..."). A suite that crashes or prints no RESULT line counts as one failure, and so does
# one that runs past SUITE_TIMEOUT seconds (default 1800: nothing may hang). A skipped kernel
# table ("SKIP isa NAME") fails the run when this CPU has NAME (natively; not under RUNNER).
# SUITES="test-a test-b.sh" runs only those suites; RUNNER prefixes each C suite's command line
# (make cross-test: RUNNER=qemu-aarch64).
BUILD=${BUILD:-build}
export G3="$BUILD/gemma3" G3_BUILD="$BUILD"
total_pass=0
total_fail=0
skipped=0
SUITE_TIMEOUT=${SUITE_TIMEOUT:-1800}
log=$(mktemp) || { echo "run.sh: mktemp failed"; exit 1; }
# timeout(1) sends TERM, then KILL 10 s later; without coreutils' timeout the suites run bare
TO=
command -v timeout >/dev/null 2>&1 && TO="timeout -k 10 $SUITE_TIMEOUT"
# this CPU's kernel tables, as kernels.c detects them (cpuid flags from /proc/cpuinfo)
cpu_has_isa() {
    [ -z "$RUNNER" ] && [ -r /proc/cpuinfo ] || return 1
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    case "$1" in
        avx2) set -- avx2 fma ;;
        avx512) set -- avx2 fma avx512f avx512bw avx512vl avx512dq ;;
        *) return 1 ;;
    esac
    for f in "$@"; do case " $flags " in *" $f "*) ;; *) return 1 ;; esac; done
}
if [ -n "$SUITES" ]; then
    set --
    for s in $SUITES; do
        case "$s" in *.sh) set -- "$@" "tests/$s" ;; *) set -- "$@" "$BUILD/tests/$s" ;; esac
    done
else
    set -- "$BUILD"/tests/test-* tests/test-*.sh
fi
for t in "$@"; do
    [ -e "$t" ] || [ -n "$SUITES" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    name=$(basename "$t")
    start=$(date +%s)
    case "$t" in
        *.sh) $TO sh "$t" >"$log" 2>&1 ;;
        *) $TO $RUNNER "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    if [ -n "$TO" ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; }; then
        echo "FAIL $name: timed out after ${SUITE_TIMEOUT}s"
        total_fail=$((total_fail + 1))
        continue
    fi
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 77 ]; then
        echo "SKIP $name: $(grep -v '^RESULT' "$log" | tail -n 1)"
        skipped=$((skipped + 1))
        continue
    fi
    grep '^SKIP ' "$log" | sed "s/^/  $name: /"
    for isa in $(sed -n 's/^SKIP isa \([a-z0-9]*\).*/\1/p' "$log" | sort -u); do
        if cpu_has_isa "$isa"; then
            echo "FAIL $name skipped isa $isa, which this CPU has"
            total_fail=$((total_fail + 1))
        fi
    done
    sk=$(grep '^RESULT passed=' "$log" | tail -n 1 | sed -n 's/.* skipped=\([0-9]*\).*/\1/p')
    skipped=$((skipped + ${sk:-0}))
    line=$(grep '^RESULT passed=' "$log" | tail -n 1)
    p=$(echo "$line" | sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\).*/\1/p')
    f=$(echo "$line" | sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\).*/\2/p')
    if [ -z "$p" ]; then
        p=0
        f=1
        echo "CRASH $name (exit $rc, no RESULT line)"
    elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAIL $name exited $rc"
    fi
    if [ "$f" -ne 0 ]; then
        grep -v '^RESULT' "$log" | tail -n 40
        echo "FAIL $name: $p passed, $f failed (${secs}s)"
    else
        echo "ok   $name: $p passed (${secs}s)"
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done
rm -f "$log"
echo "$total_pass passed, $total_fail failed, $skipped skipped"
[ $total_fail -eq 0 ]
