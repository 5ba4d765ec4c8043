#!/bin/sh
# tests/test-shapes.sh - the forward pass on generated checkpoints (tools/gen-checkpoint): the real
# 270m shape loads and decodes to finite logits, bit-identical for any -t/-b; the same weights in every tensor-name layout,
# sharded, and with the new rope_parameters config give bit-identical logits; the softcaps act.
# Skipped (77) when the generator is not built.
. tests/lib.sh
GEN=$G3_BUILD/tools/gen-checkpoint
DIFF=$G3_BUILD/tools/logits-diff
[ -x "$GEN" ] || { echo "no $GEN: skipped"; exit 77; }

# finite NAME FILE BYTES: FILE has BYTES bytes of floats, finite and plausible logits: compared
# with zeros, max |x| is a number in (1e-3, 1e3) (NaN fails logits-diff; inf, a huge value or an
# all-zero file fail the range)
finite() {
    s=$(wc -c <"$2")
    [ "$s" -eq "$3" ] || { bad "$1: $s bytes, expected $3"; return; }
    head -c "$3" /dev/zero >"$TMP/zeros"
    "$DIFF" "$2" "$TMP/zeros" >"$TMP/d" 2>"$TMP/e" || { bad "$1: $(cat "$TMP/e")"; return; }
    v=$(sed -n 's/^max_abs_diff //p' "$TMP/d")
    if [ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v + 0 > 1e-3 && v + 0 < 1e3) }'; then ok
    else bad "$1: max |logit| '$v' is not finite and in (1e-3, 1e3)"; fi
}

# real 270m shape (512 MB of random bf16 weights): prefill + decode, default and exact
"$GEN" 270m "$TMP/m270" >/dev/null 2>"$TMP/e" || bad "gen 270m: $(cat "$TMP/e")"
expect_ok "270m decode" $G3 eval -m "$TMP/m270" --tokens 2,1000,2000,3000 --step 3 -t 2 --dump-logits "$TMP/a"
finite "270m logits" "$TMP/a" $((262144 * 4))
expect_ok "270m exact" $G3 eval -m "$TMP/m270" --tokens 2,1000 --exact -t 2 --dump-logits "$TMP/b"
finite "270m exact logits" "$TMP/b" $((262144 * 4))
# real shapes exercise the kernels' large-n_in paths: logits bit-identical for -t 1/2/3 and for
# prefill / single steps / chunks of 4, for each SIMD table this CPU runs, in both modes
# (scalar is covered by test-forward; it is too slow here)
TOK=2,100,2000,30000,400,5000
for isa in avx2 avx512; do
    $G3 eval -m "$TMP/m270" --tokens 2 --isa $isa --dump-logits "$TMP/x" 2>"$TMP/e" ||
        { grep -q "not supported" "$TMP/e" && { skip "isa $isa (this CPU lacks it)"; continue; }; bad "270m --isa $isa: $(cat "$TMP/e")"; }
    for ex in "" --exact; do
        $G3 eval -m "$TMP/m270" --tokens $TOK --all-logits --isa $isa $ex -t 1 --dump-logits "$TMP/d1" &&
        $G3 eval -m "$TMP/m270" --tokens $TOK --all-logits --isa $isa $ex -t 2 --step 1 --dump-logits "$TMP/d2" &&
        $G3 eval -m "$TMP/m270" --tokens $TOK --all-logits --isa $isa $ex -t 3 -b 4 --dump-logits "$TMP/d3" ||
            bad "270m $isa $ex eval failed"
        if cmp -s "$TMP/d1" "$TMP/d2" && cmp -s "$TMP/d1" "$TMP/d3"; then ok; else bad "270m $isa $ex: logits depend on -t/-b"; fi
    done
done
rm -rf "$TMP/m270"

# one set of weights in every layout gives the same logits, bit for bit
TOK=2,5,9,13,17,21,25,29,33,37,41,45
for v in "causal" "mm --layout mm" "mmnew --layout mm-new" "shards --shards 3 --rope new"; do
    set -- $v
    lay=$1
    shift
    "$GEN" tiny "$TMP/t-$lay" "$@" >/dev/null 2>"$TMP/e" || bad "gen tiny $lay: $(cat "$TMP/e")"
    expect_ok "tiny $lay" $G3 eval -m "$TMP/t-$lay" --tokens $TOK --all-logits --exact -t 2 \
        --dump-logits "$TMP/t-$lay.f32"
    if cmp -s "$TMP/t-causal.f32" "$TMP/t-$lay.f32"; then ok; else bad "layout $lay changed the logits"; fi
done
finite "tiny logits" "$TMP/t-causal.f32" $((12 * 262144 * 4))

# final softcap bounds every logit; attention softcap changes them
"$GEN" tiny "$TMP/t-fcap" --final-softcap 0.5 >/dev/null 2>&1 || bad "gen tiny final softcap"
expect_ok "final softcap" $G3 eval -m "$TMP/t-fcap" --tokens $TOK --all-logits --dump-logits "$TMP/fcap"
head -c $((12 * 262144 * 4)) /dev/zero >"$TMP/zero"
"$DIFF" "$TMP/fcap" "$TMP/zero" >"$TMP/d" 2>&1 || bad "diff fcap"
v=$(sed -n 's/^max_abs_diff //p' "$TMP/d")
if awk -v v="$v" 'BEGIN { exit !(v > 0.05 && v <= 0.5) }'; then ok; else bad "final softcap 0.5: max |logit| $v"; fi
"$GEN" tiny "$TMP/t-acap" --attn-softcap 0.3 >/dev/null 2>&1 || bad "gen tiny attn softcap"
expect_ok "attn softcap" $G3 eval -m "$TMP/t-acap" --tokens $TOK --all-logits --exact --dump-logits "$TMP/acap"
finite "attn softcap logits" "$TMP/acap" $((12 * 262144 * 4))
if cmp -s "$TMP/acap" "$TMP/t-causal.f32"; then bad "attn softcap 0.3 had no effect"; else ok; fi
report
