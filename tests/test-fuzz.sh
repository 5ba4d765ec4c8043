#!/bin/sh
# test-fuzz.sh - a short libFuzzer run of every tests/fuzz-*.c target (FUZZ_SECONDS each,
# default 10), starting from its seeds in tests/fuzz-seeds/NAME/. One pass per target that runs
# clean; a crash, leak or sanitizer report is a failure. Skipped (exit 77) without clang.
# The long runs are `make fuzz FUZZ_SECONDS=600`.
. tests/lib.sh
command -v clang >/dev/null 2>&1 || { echo "clang not found: fuzz targets skipped"; exit 77; }
# clang without the libFuzzer runtime (Debian: libclang-rt-dev) cannot build any target either
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$TMP/probe.c"
if ! clang -fsanitize=fuzzer "$TMP/probe.c" -o "$TMP/probe" >/dev/null 2>&1; then
    echo "clang cannot link libFuzzer (install libclang-rt-dev): fuzz targets skipped"
    exit 77
fi
secs=${FUZZ_SECONDS:-10}
for src in tests/fuzz-*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    if ! make -s "build/fuzz/$name" >"$TMP/build.log" 2>&1; then
        bad "$name: build failed: $(tail -n 5 "$TMP/build.log")"
        continue
    fi
    mkdir -p "$TMP/corpus-$name"
    seeds=tests/fuzz-seeds/$name
    [ -d "$seeds" ] || seeds=
    dict=
    [ -f "tests/fuzz-seeds/$name.dict" ] && dict=-dict=tests/fuzz-seeds/$name.dict
    # crash/leak/timeout reproducers go to build/fuzz/artifacts/, never the repository root; one
    # input may take 30 s at most (-timeout), the whole run its budget plus a minute
    mkdir -p build/fuzz/artifacts
    if timeout -k 10 $((secs + 60)) "build/fuzz/$name" -max_total_time="$secs" -timeout=30 \
        -artifact_prefix="build/fuzz/artifacts/$name-" -print_final_stats=1 $dict \
        "$TMP/corpus-$name" $seeds >"$TMP/fuzz.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/fuzz.log")
        cov=$(grep -o 'cov: [0-9]*' "$TMP/fuzz.log" | tail -n 1)
        echo "$name: $runs runs in ${secs}s, $cov, no finding"
        ok
    else
        bad "$name: finding: $(grep -E 'ERROR|SUMMARY|Test unit written' "$TMP/fuzz.log" | head -n 5)"
    fi
done
report
