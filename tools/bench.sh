#!/bin/sh
# tools/bench.sh - runs every benchmark binary in build/tools/bench-*.
BUILD=${BUILD:-build}
for b in "$BUILD"/tools/bench-*; do
    [ -x "$b" ] || continue
    case "$b" in *.d|*.o) continue ;; esac
    echo "== $(basename "$b")"
    "$b" || exit 1
done
