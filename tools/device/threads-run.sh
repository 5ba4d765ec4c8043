#!/bin/bash
# tools/device/threads-run.sh - the 16-core runs of docs/measurements/threads-2026-12-07.md, on the
# device machine (docs/threads.md). Run from the repository root there: builds our HEAD in place,
# a copy in /tmp/new patched by tools/device/profile-patch.py (G3_PROFILE per-phase times, G3_DYN
# dynamic row split), pin-patch.py (G3_PIN: pool thread i on CPU i) and noamx-patch.py (G3_NOAMX:
# the avx512 level without its AMX tables), and llama.cpp's llama-bench;
# writes synthetic GGUFs; prints tools/bench-threads.sh tables (also into $OUT/tables.md).
# Needs in .dev/ (carried, git-ignored): debs/ (libcjson and libedit .debs, which that machine
# lacks) and llsrc.tar.xz (llama.cpp's source), for the L phases llama-bench (3f545be built on the dev
# VM, GGML_NATIVE, static ggml; rebuilt there from llsrc if it does not run); the tree sent without
# tests/data/gguf (64 MiB).
# Usage: tools/device/threads-run.sh PHASE...   (phases: the case below, in order)
D=/tmp/deps
export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
LB=/tmp/ll/b/bin/llama-bench; NEW=/tmp/new/build/gemma3; M=build/bench-models
setup() {
  mkdir -p $D; for f in .dev/debs/*.deb; do dpkg -x $f $D; done
  nproc; lscpu | grep -E 'Model name|Socket|Thread|Core|NUMA|L2|L3|MHz'; cat /sys/kernel/mm/transparent_hugepage/enabled
  mkdir -p /tmp/ll && tar -xJf .dev/llsrc.tar.xz -C /tmp/ll
  ( cmake -S /tmp/ll -B /tmp/ll/b -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TOOLS=ON >/tmp/ll.log 2>&1 && cmake --build /tmp/ll/b -j 10 --target llama-bench >>/tmp/ll.log 2>&1; echo "llama build rc=$?" >>/tmp/ll.log ) &
  rm -rf /tmp/new; mkdir -p /tmp/new
  tar --exclude=./tests/data --exclude=./.dev --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/new
  python3 tools/device/profile-patch.py /tmp/new/gemma3.c && python3 tools/device/pin-patch.py /tmp/new/threads.c &&
    python3 tools/device/noamx-patch.py /tmp/new/kernels/cpu.c || exit 1
  make -j6 CFLAGS="-O2 -g -I$D/usr/include" >/tmp/head.log 2>&1 || { tail -20 /tmp/head.log; exit 1; }
  (cd /tmp/new && make -j6 CFLAGS="-O2 -g -I$D/usr/include" >/tmp/new.log 2>&1) || { tail -20 /tmp/new.log; exit 1; }
  printf '#!/bin/sh\nG3_DYN=4 exec %s "$@"\n' $NEW >/tmp/dyn4; printf '#!/bin/sh\nG3_PIN=1 exec %s "$@"\n' $NEW >/tmp/pin
  printf '#!/bin/sh\nG3_PIN=1 G3_DYN=4 exec %s "$@"\n' $NEW >/tmp/pindyn; printf '#!/bin/sh\nG3_NOAMX=1 exec %s "$@"\n' $NEW >/tmp/noamx
  printf '#!/bin/sh\nexec %s "$@" --repack none\n' $PWD/build/gemma3 >/tmp/rows
  chmod +x /tmp/dyn4 /tmp/pin /tmp/pindyn /tmp/noamx /tmp/rows
  el built ours
}
gen() { # shape fill types...
  local sh=$1 fill=$2; shift 2; mkdir -p $M
  build/tools/gen-checkpoint $sh /tmp/ck-$sh --fill $fill --tokenizer models/tokenizer.model >/dev/null || exit 1
  for ty in "$@"; do build/gemma3 quantize -m /tmp/ck-$sh -o $M/$sh-$ty.gguf --type $ty -t 16 >/dev/null || exit 1; done
  rm -rf /tmp/ck-$sh; el "gen $sh $fill $*"
}
llwait() { while ! grep -q 'llama build rc' /tmp/ll.log 2>/dev/null; do sleep 2; done; tail -1 /tmp/ll.log; }
probe() { for t in 1 2 4 8 16; do echo "probe $t threads: $(build/tools/bench-kernels --bandwidth $t) GB/s, fork/join $(build/tools/bench-kernels --pool $t) us"; done; }
prof() { # model threads p n
  G3_PROFILE=1 $NEW bench -m $M/$1.gguf -t $2 -p $3 -n $4 -r 1 2>&1 | grep -E '\| gemma3|PROFILE' | sed "s/^/$1 t=$2 /"; }
table() { # SHAPES TYPES THREADS N_PROMPT N_GEN ROUNDS ENGINES
  SHAPES="$1" TYPES="$2" THREADS="$3" N_PROMPT=$4 N_GEN=$5 REPS=1 ROUNDS=$6 ENGINES="$7" LLAMA_BENCH=$LB sh tools/bench-threads.sh 2>&1 | tee -a $OUT/tables.md; }
spec() { # model threads: a batch of k + 1 = 1, 5, 9, 17 tokens (verifying k drafts) in both orders
  for p in 1,5,9,17 17,9,5,1; do build/gemma3 bench -m $M/$1.gguf -p $p -n 0 -r 2 -t $2 2>&1 | grep -E '\| gemma3' | sed "s/^/spec $1 t=$2 /"; done; }
for ph in "$@"; do
  case $ph in
    setup) [ -x $NEW ] || setup ;;
    genA) gen 1b random q4_0 q8_0; gen 270m random q4_0 q8_0; gen 4b random q4_0 q8_0 bf16 ;;
    genBig) gen 12b zero q4_0; gen 27b zero q4_0 ;;
    genK) gen 1b random q4_0 q8_0 q4_k_m q6_k; gen 270m random q4_0 q8_0 q4_k_m q6_k; gen 4b random q4_0 q4_k_m ;;
    probe) probe ;;
    prof) prof 1b-q4_0 16 512 128; prof 1b-q8_0 16 512 128 ;;
    llwait) llwait ;;
    t1b) table 1b "q4_0 q8_0" "4 8 16" 512 128 2 "gemma3=build/gemma3" ;;
    t4b) table 4b "q4_0 q8_0" "16" 512 64 2 "gemma3=build/gemma3" ;;
    t270m) table 270m "q4_0 q8_0" "16" 512 128 2 "gemma3=build/gemma3" ;;
    tvar) table 1b q4_0 "16" 512 128 2 "gemma3=build/gemma3 dyn4=/tmp/dyn4 pin=/tmp/pin" ;;
    t4bbf16) table 4b bf16 "16" 512 64 1 "gemma3=build/gemma3" ;;
    t12b) table 12b q4_0 "16" 256 32 1 "gemma3=build/gemma3" ;;
    t27b) table 27b q4_0 "16" 256 32 1 "gemma3=build/gemma3" ;;
    genS) gen 1b random q4_0 q8_0 q4_k_m; gen 4b random q4_0 ;;
    tS) table 1b "q4_0 q8_0 q4_k_m" "4 8 16" 256 64 1 "gemma3=build/gemma3 noamx=/tmp/noamx"
        table 4b q4_0 "16" 256 32 1 "gemma3=build/gemma3 noamx=/tmp/noamx" ;;
    tests) make -j16 CFLAGS="-O2 -g -I$D/usr/include" $(make -s -p -n 2>/dev/null | sed -n 's/^TEST_BINS := //p' | head -1) >/tmp/tests.log 2>&1 || tail -20 /tmp/tests.log
        SUITES="test-quant test-kernels test-backend test-forward test-state" sh tests/run.sh 2>&1 | tail -12 ;;
    quiet) sync; sleep 5; uptime; top -b -n 1 | sed -n 7,12p ;;
    tX8b) table 1b "q4_0 q8_0" "4 8 16" 256 64 1 "gemma3=build/gemma3 rows=/tmp/rows"
          table 4b q4_0 "16" 256 32 1 "gemma3=build/gemma3 rows=/tmp/rows" ;;
    tX8) table 1b "q4_0 q8_0" "4 8 16" 256 64 1 "gemma3=build/gemma3 rows=/tmp/rows noamx=/tmp/noamx"
         table 4b q4_0 "8 16" 256 32 1 "gemma3=build/gemma3 rows=/tmp/rows noamx=/tmp/noamx" ;;
    t1bK) table 1b "q4_0 q8_0 q4_k_m q6_k" "4 8 16" 512 64 2 "gemma3=build/gemma3 noamx=/tmp/noamx" ;;
    t4bK) table 4b "q4_0 q4_k_m" "16" 512 64 2 "gemma3=build/gemma3 noamx=/tmp/noamx" ;;
    t270mK) table 270m "q4_0 q8_0 q4_k_m q6_k" "16" 512 128 2 "gemma3=build/gemma3 noamx=/tmp/noamx" ;;
    genC) gen 1b random q4_0 q8_0 q4_k_m; gen 270m random q4_0 q8_0; gen 4b random q4_0 q8_0 q4_k_m ;;
    testsC) make -j16 CFLAGS="-O2 -g -I$D/usr/include" $(make -s -p -n 2>/dev/null | sed -n 's/^TEST_BINS := //p' | head -1) >/tmp/tests.log 2>&1 || tail -20 /tmp/tests.log
        SUITES="test-quant test-quant-k test-kernels test-backend test-forward test-state" sh tests/run.sh 2>&1 | tail -12 ;;
    t1bC) table 1b "q4_0 q8_0" "4 8 16" 512 64 2 "gemma3=build/gemma3" ;;
    t4bC) table 4b "q4_0 q8_0" "4 8 16" 512 64 1 "gemma3=build/gemma3" ;;
    tKC) table 1b q4_k_m "4 8 16" 512 64 2 "gemma3=build/gemma3"; table 4b q4_k_m "16" 512 64 1 "gemma3=build/gemma3" ;;
    specC) spec 1b-q4_0 16; spec 4b-q4_0 16; spec 4b-q4_0 4 ;;
    profC) prof 1b-q4_0 4 512 64; prof 1b-q4_0 16 512 64; prof 1b-q4_k_m 16 512 64 ;;
    setupL) mkdir -p $D; for f in .dev/debs/*.deb; do dpkg -x $f $D; done; nproc; lscpu | grep -E 'Model name|Core|L2|L3'
        make -j16 CFLAGS="-O2 -g -I$D/usr/include" >/tmp/head.log 2>&1 || { tail -20 /tmp/head.log; exit 1; }
        mkdir -p /tmp/ll/b/bin && cp .dev/llama-bench /tmp/ll/b/bin/ && printf '#!/bin/sh\nexec %s "$@" --repack none\n' $PWD/build/gemma3 >/tmp/rows && chmod +x /tmp/rows
        if $LB --help >/dev/null 2>&1; then echo "llama build rc=carried" >/tmp/ll.log; else # the carried build (made on the dev VM) does not run here
          rm -f $LB; tar -xJf .dev/llsrc.tar.xz -C /tmp/ll
          ( cmake -S /tmp/ll -B /tmp/ll/b -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TOOLS=ON >/tmp/ll.log 2>&1 && cmake --build /tmp/ll/b -j 10 --target llama-bench >>/tmp/ll.log 2>&1; echo "llama build rc=$?" >>/tmp/ll.log ) &
        fi ;;
    genL) gen 4b random q4_0 q8_0 q4_k_m ;;
    t4bL) table 4b "q4_0 q8_0 q4_k_m" "16" 512 64 1 "gemma3=build/gemma3" ;;
    specL) spec 4b-q4_0 16 ;;
    genF) gen 4b random q4_0 q8_0 q4_k_m q6_k; gen 1b random q4_0 q8_0 ;;
    t4bF) table 4b "q4_0 q8_0 q4_k_m q6_k" "16" 512 64 1 "gemma3=build/gemma3" ;;
    specF) spec 4b-q4_0 16; spec 1b-q4_0 16; spec 4b-q4_0 4 ;;
    t4bQ8F) table 4b q8_0 "16" 64 64 2 "gemma3=build/gemma3 rows=/tmp/rows" ;;
    t1bF) table 1b "q4_0 q8_0" "16" 512 64 1 "gemma3=build/gemma3" ;;
    t4bKF) table 4b q4_k_m "4 8" 512 64 1 "gemma3=build/gemma3" ;;
    testsF) make -j16 CFLAGS="-O2 -g -I$D/usr/include" build/tests/test-quant build/tests/test-quant-k >/tmp/tests.log 2>&1 || tail -20 /tmp/tests.log
        SUITES="test-quant test-quant-k" sh tests/run.sh 2>&1 | tail -4 ;;
    df) df -h /tmp . | tail -2; free -g | head -2 ;;
  esac; el "phase $ph done"
done
