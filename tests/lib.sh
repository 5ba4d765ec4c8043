# tests/lib.sh - helpers for the shell test suites (sourced). Each suite ends with `report`.
# $G3 is the gemma3 binary, $G3_BUILD the build directory, $TMP a scratch directory.
# `skip WHAT` counts a part that cannot run here (printed "SKIP WHAT"; "SKIP isa NAME" for a
# kernel table: run.sh fails the run if this CPU has NAME).
pass=0
fail=0
skipped=0
G3=${G3:-./build/gemma3}
G3_BUILD=${G3_BUILD:-build}
TMP=$(mktemp -d) || { echo "SKIP mktemp -d failed"; exit 77; }
trap 'rm -rf "$TMP"' EXIT

ok() { pass=$((pass + 1)); }
skip() { skipped=$((skipped + 1)); echo "SKIP $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_error NAME EXIT_CODE MESSAGE_SUBSTRING CMD...: the command must exit with EXIT_CODE and
# print exactly one line to stderr containing MESSAGE_SUBSTRING.
expect_error() {
    name=$1 code=$2 msg=$3
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" -ne "$code" ]; then
        bad "$name: exit $rc, expected $code; stderr: $(head -c 300 "$TMP/err")"
    elif ! grep -qF -- "$msg" "$TMP/err"; then
        bad "$name: stderr lacks '$msg': $(head -c 300 "$TMP/err")"
    elif [ "$lines" -ne 1 ]; then
        bad "$name: expected a one-line error, got $lines lines: $(head -c 300 "$TMP/err")"
    else
        ok
    fi
}

# expect_ok NAME CMD...: the command must exit 0.
expect_ok() {
    name=$1
    shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then ok; else bad "$name: exit $?; stderr: $(head -c 300 "$TMP/err")"; fi
}

report() {
    echo "RESULT passed=$pass failed=$fail skipped=$skipped"
    [ "$fail" -eq 0 ]
}
