#!/bin/sh
# tools/bench.sh - runs every benchmark binary build/tools/bench-* (make bench).
status=0
for b in build/tools/bench-*; do
    [ -x "$b" ] || continue
    case "$b" in *.d|*.o) continue ;; esac
    echo "== $(basename "$b")"
    "$b" || status=1
done
exit $status
