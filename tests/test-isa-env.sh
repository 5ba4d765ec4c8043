#!/bin/sh
# tests/test-isa-env.sh - the level every kernel table is chosen for: GEMMA3_ISA picks it for a
# run as --isa does (the same logits bytes), --isa wins over it, and a bad GEMMA3_ISA fails the
# run with one line naming the variable.
. tests/lib.sh
M=tests/data/golden/tiny-causal
run() { # FILE ENV FLAGS...: eval two tokens under env ENV, its verbose line's isa into FILE.isa
    out=$1 e=$2
    shift 2
    env $e $G3 eval -m $M --tokens 1,2 -t 1 -v --dump-logits "$out" "$@" 2>"$out.err" &&
        sed -n 's/^eval: isa \([^,]*\),.*/\1/p' "$out.err" >"$out.isa"
}
same_isa() { # NAME FILE WANT
    if [ "$(cat "$2.isa" 2>/dev/null)" = "$3" ]; then ok; else bad "$1: isa '$(cat "$2.isa" 2>/dev/null)', expected $3"; fi
}

run "$TMP/flag" G3_TEST=1 --isa scalar || bad "--isa scalar: $(cat "$TMP/flag.err")"
run "$TMP/env" GEMMA3_ISA=scalar || bad "GEMMA3_ISA=scalar: $(cat "$TMP/env.err")"
same_isa "GEMMA3_ISA=scalar" "$TMP/env" scalar
if cmp -s "$TMP/flag" "$TMP/env"; then ok; else bad "GEMMA3_ISA=scalar and --isa scalar: different logits"; fi
for isa in avx2 avx512; do
    if ! run "$TMP/$isa" G3_TEST=1 --isa $isa; then
        skip "isa $isa"
        continue
    fi
    run "$TMP/both-$isa" GEMMA3_ISA=scalar --isa $isa || bad "--isa $isa under GEMMA3_ISA=scalar"
    same_isa "--isa $isa over GEMMA3_ISA=scalar" "$TMP/both-$isa" "$(cat "$TMP/$isa.isa")"
done
expect_error "GEMMA3_ISA=bogus" 1 "isa 'bogus' (GEMMA3_ISA) is not scalar, avx2 or avx512" \
    env GEMMA3_ISA=bogus $G3 eval -m $M --tokens 1,2 -t 1 --dump-logits "$TMP/bogus"
report
