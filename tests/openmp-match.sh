# tests/openmp-match.sh - the OpenMP build ($G3, make OPENMP=1) against the default pool build
# ($G3_REF): the same logits bit for bit at 1, 2 and 3 threads on every kernel table this CPU
# has, default and --exact, BF16 and quantized at load, also when the OpenMP runtime fields fewer
# threads than asked, and the same seeded generation. Run by
# `make omp-test` (not a test-*.sh: it needs both builds).
. tests/lib.sh
[ -n "$G3_REF" ] && [ -x "$G3_REF" ] || { echo "G3_REF (the pool build's gemma3) is not set"; exit 77; }
# comparing a pool build with itself would pass whatever OpenMP does
if command -v ldd >/dev/null 2>&1; then
    if ldd "$G3" | grep -q 'libgomp\|libomp'; then ok; else bad "$G3 is not linked with an OpenMP runtime"; fi
    if ldd "$G3_REF" | grep -q 'libgomp\|libomp'; then bad "$G3_REF (the reference) is an OpenMP build"; else ok; fi
fi
GOLD=tests/data/golden
tokens_of() { sed -n '/"tokens"/,/]/p' "$1" | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/'; }

# same NAME FILE_A FILE_B: identical, non-empty bytes
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok; else bad "$1: $(cmp "$2" "$3" 2>&1 | head -c 200)"; fi
}

for m in tiny-causal tiny-mm; do
    TOKS=$(tokens_of $GOLD/$m.json)
    for isa in scalar avx2 avx512; do
        if ! "$G3_REF" eval -m $GOLD/$m --tokens 2 --isa $isa --dump-logits "$TMP/probe" >/dev/null 2>&1; then
            skip "isa $isa"
            continue
        fi
        for mode in default --exact -q=q8_0 -q=q4_0; do
            flags=; [ $mode = default ] || flags=$(echo $mode | tr = ' ')
            case $mode in -q=*) [ $isa = scalar ] || continue ;; esac # the quantized tables: once
            what="$m $isa $mode"
            "$G3_REF" eval -m $GOLD/$m --tokens "$TOKS" --all-logits --isa $isa $flags -t 2 -b 7 \
                --dump-logits "$TMP/ref" >/dev/null 2>"$TMP/err" || bad "$what: pool build failed: $(cat "$TMP/err")"
            for t in 1 2 3; do
                "$G3" eval -m $GOLD/$m --tokens "$TOKS" --all-logits --isa $isa $flags -t $t -b 7 \
                    --dump-logits "$TMP/omp" >/dev/null 2>"$TMP/err" || bad "$what -t $t: $(cat "$TMP/err")"
                same "$what: OpenMP -t $t vs pool -t 2 logits" "$TMP/omp" "$TMP/ref"
            done
            # a team smaller than asked (the runtime's limit): its threads take the other shares
            OMP_THREAD_LIMIT=2 "$G3" eval -m $GOLD/$m --tokens "$TOKS" --all-logits --isa $isa $flags -t 3 -b 7 \
                --dump-logits "$TMP/omp" >/dev/null 2>"$TMP/err" || bad "$what -t 3, 2-thread limit: $(cat "$TMP/err")"
            same "$what: OpenMP -t 3 on a 2-thread team vs pool logits" "$TMP/omp" "$TMP/ref"
        done
    done
done

# generation: seeded sampling over the same logits gives the same text
GEN="$G3_BUILD/tools/gen-checkpoint"
[ -x "$GEN" ] || GEN="build/tools/gen-checkpoint"
if "$GEN" tiny "$TMP/tiny" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1; then
    "$G3_REF" -m "$TMP/tiny" -p "Hello there" -n 24 -s 123 -t 2 >"$TMP/ref.txt" 2>/dev/null
    for t in 1 2 3; do
        "$G3" -m "$TMP/tiny" -p "Hello there" -n 24 -s 123 -t $t >"$TMP/omp.txt" 2>"$TMP/err"
        same "generate -t $t" "$TMP/omp.txt" "$TMP/ref.txt"
    done
else
    bad "gen-checkpoint tiny failed"
fi
report
