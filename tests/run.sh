#!/bin/sh
# tests/run.sh - runs every test suite and sums their RESULT lines into "N passed, N failed".
# C suites: $BUILD/tests/test-*; shell suites: tests/test-*.sh. Exit 77 from a suite = skipped.
# A suite that crashes or prints no RESULT line counts as one failure.
# SUITES="test-a test-b" runs only those C suites; RUNNER prefixes each C suite's command line
# (make cross-test: RUNNER=qemu-aarch64).
BUILD=${BUILD:-build}
export G3="$BUILD/gemma3" G3_BUILD="$BUILD"
total_pass=0
total_fail=0
skipped=0
log=$(mktemp)
if [ -n "$SUITES" ]; then
    set --
    for s in $SUITES; do set -- "$@" "$BUILD/tests/$s"; done
else
    set -- "$BUILD"/tests/test-* tests/test-*.sh
fi
for t in "$@"; do
    [ -e "$t" ] || [ -n "$SUITES" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    name=$(basename "$t")
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" >"$log" 2>&1 ;;
        *) $RUNNER "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 77 ]; then
        echo "SKIP $name"
        skipped=$((skipped + 1))
        continue
    fi
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
[ $skipped -gt 0 ] && echo "($skipped suites skipped)"
echo "$total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
