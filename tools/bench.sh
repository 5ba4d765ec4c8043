#!/bin/sh
# tools/bench.sh - runs every build/tools/bench-* binary, the model benchmark and the pool against
# OpenMP (make bench: POOL_BUILD and OMP_BUILD, see tools/bench-omp.sh). BUILD overrides build/.
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
echo
echo "== threads: decode and prefill at 1, 2, 4, 8, 16 threads (up to the CPUs) beside the bandwidth probe"
BUILD=$BUILD sh tools/bench-threads.sh 2>/dev/null || status=1
echo
echo "== threads: our pool against OpenMP (make OPENMP=1)"
MODELS=$BUILD/bench-models sh tools/bench-omp.sh || status=1
exit $status
