#!/bin/sh
# tools/bench.sh - runs every build/tools/bench-* binary (make bench). BUILD overrides build/.
BUILD=${BUILD:-build}
status=0
for b in "$BUILD"/tools/bench-*; do
    [ -x "$b" ] || continue
    case "$b" in *.d|*.o) continue ;; esac
    echo "== $(basename "$b")"
    "$b" || status=1
    echo
done
echo "== gemma3 bench: synthetic 1B-shaped checkpoint"
BUILD=$BUILD sh tools/bench-model.sh || status=1
exit $status
