#!/bin/sh
# tests/test-eval.sh - `gemma3 eval`: logits file sizes, agreement with the golden Hugging Face
# logits (--exact, 1e-3), -b splits giving identical bytes, and flag errors (exit 2).
. tests/lib.sh
GOLD=tests/data/golden
DIFF=$G3_BUILD/tools/logits-diff
tokens_of() { sed -n '/"tokens"/,/]/p' "$1" | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/'; }

# expect_le NAME LIMIT FILE: FILE holds "max_abs_diff X" with X <= LIMIT
expect_le() {
    v=$(sed -n 's/^max_abs_diff //p' "$3")
    if [ -n "$v" ] && awk -v v="$v" -v l="$2" 'BEGIN { exit !(v <= l) }'; then ok; else bad "$1: max_abs_diff '$v' > $2"; fi
}
size_is() { # NAME FILE BYTES
    s=$(wc -c <"$2")
    if [ "$s" -eq "$3" ]; then ok; else bad "$1: $s bytes, expected $3"; fi
}

for m in tiny-causal tiny-mm tiny-knobs; do
    V=$(sed -n 's/.*"n_vocab": *\([0-9]*\).*/\1/p' $GOLD/$m.json)
    TOKS=$(tokens_of $GOLD/$m.json)
    N=$(echo "$TOKS" | tr ',' '\n' | wc -l)
    expect_ok "$m all" $G3 eval -m $GOLD/$m --tokens "$TOKS" --all-logits --exact -t 2 \
        --dump-logits "$TMP/$m.all"
    size_is "$m all size" "$TMP/$m.all" $((N * V * 4))
    "$DIFF" "$TMP/$m.all" $GOLD/$m.logits.f32 >"$TMP/d" 2>&1 || bad "$m: logits-diff failed: $(cat "$TMP/d")"
    expect_le "$m exact vs HF" 1e-3 "$TMP/d"
    echo "$m --exact: $(cat "$TMP/d")"

    expect_ok "$m last" $G3 eval -m $GOLD/$m --tokens "$TOKS" --exact -t 1 --step 1 --dump-logits "$TMP/$m.last"
    size_is "$m last size" "$TMP/$m.last" $((V * 4))
    "$DIFF" "$TMP/$m.last" "$TMP/$m.all" $(((N - 1) * V)) >"$TMP/d" 2>&1 || bad "$m: logits-diff last failed"
    expect_le "$m last row == all-logits last row" 0 "$TMP/d"

    expect_ok "$m default" $G3 eval -m $GOLD/$m --tokens "$TOKS" --all-logits --dump-logits "$TMP/$m.def"
    "$DIFF" "$TMP/$m.def" $GOLD/$m.logits.f32 >"$TMP/d" 2>&1 || bad "$m: logits-diff default failed"
    expect_le "$m default vs HF" 1e-1 "$TMP/d"
    echo "$m default: $(cat "$TMP/d")"
    expect_ok "$m default --step 5 -b 3 -t 3" $G3 eval -m $GOLD/$m --tokens "$TOKS" --all-logits --step 5 -b 3 -t 3 \
        --dump-logits "$TMP/$m.def5"
    if cmp -s "$TMP/$m.def" "$TMP/$m.def5"; then ok; else bad "$m: --step 5 -b 3 -t 3 changed the logits"; fi
done

# verbose output names the ISA, threads, mode and tok/s
$G3 eval -m $GOLD/tiny-causal --tokens 2,3,4,5 --step 1 -v -t 2 --dump-logits "$TMP/v" 2>"$TMP/verr"
for w in "isa " "threads 2" "mode default" "prefill" "decode" "tok/s"; do
    if grep -q "$w" "$TMP/verr"; then ok; else bad "verbose output lacks '$w': $(cat "$TMP/verr")"; fi
done

M=$GOLD/tiny-causal
expect_error "no model" 2 "-m DIR" $G3 eval --tokens 2 --dump-logits "$TMP/x"
expect_error "no tokens" 2 "--tokens" $G3 eval -m $M --dump-logits "$TMP/x"
expect_error "no dump" 2 "--dump-logits" $G3 eval -m $M --tokens 2
expect_error "bad threads" 2 "-t: '0'" $G3 eval -m $M --tokens 2 -t 0 --dump-logits "$TMP/x"
expect_error "bad ctx" 2 "-c: 'abc'" $G3 eval -m $M --tokens 2 -c abc --dump-logits "$TMP/x"
expect_error "bad batch" 2 "-b: '-3'" $G3 eval -m $M --tokens 2 -b -3 --dump-logits "$TMP/x"
expect_error "bad kv" 2 "--kv-type: 'f16'" $G3 eval -m $M --tokens 2 --kv-type f16 --dump-logits "$TMP/x"
expect_error "bad isa" 2 "--isa: 'sse'" $G3 eval -m $M --tokens 2 --isa sse --dump-logits "$TMP/x"
expect_error "exact+bf16" 2 "--kv-type" $G3 eval -m $M --tokens 2 --exact --kv-type bf16 --dump-logits "$TMP/x"
expect_error "bad ids" 2 "--tokens" $G3 eval -m $M --tokens 2,x --dump-logits "$TMP/x"
expect_error "id >= vocab" 2 "out of range" $G3 eval -m $M --tokens 2,4096 --dump-logits "$TMP/x"
expect_error "ctx > max" 2 "max_position_embeddings" $G3 eval -m $M --tokens 2 -c 40000 --dump-logits "$TMP/x"
expect_error "unknown flag" 2 "--frobnicate" $G3 eval -m $M --tokens 2 --frobnicate --dump-logits "$TMP/x"
expect_error "context full" 1 "context" $G3 eval -m $M --tokens 2,3,4,5,6 -c 4 --dump-logits "$TMP/x"
expect_error "missing model" 1 "no-such" $G3 eval -m "$TMP/no-such" --tokens 2 --dump-logits "$TMP/x"
expect_error "unwritable dump" 1 "--dump-logits" $G3 eval -m $M --tokens 2 --dump-logits "$TMP/no/dir/x"
expect_ok "help" $G3 eval --help
report
