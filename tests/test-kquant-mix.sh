#!/bin/sh
# tests/test-kquant-mix.sh - `gemma3 quantize --type q4_k_m|q5_k_m|q4_k_s|q5_k_s|q6_k` gives each
# tensor the type llama-quantize gives it (tests/data/quant/mix-types.txt, written by
# tools/make-kquant-mix-fixtures.sh from the same synthetic checkpoints, regenerated here); the
# file's general.file_type is the recipe's, so `info` and `bench` name the mix as llama.cpp does.
. tests/lib.sh
FIX=tests/data/quant/mix-types.txt
GEN=$G3_BUILD/tools/gen-checkpoint
[ -x "$GEN" ] || { echo "SKIP no $GEN"; exit 77; }
TOK=models/wordnet-gemma/tokenizer.model
"$GEN" tiny "$TMP/deep" --layers 34 --hidden 256 --intermediate 512 --vocab 4096 \
    --heads 4 --kv-heads 1 --head-dim 64 --qpas 64 --seed 3 --tokenizer "$TOK" >/dev/null || bad "gen deep"
"$GEN" tiny "$TMP/narrow" --layers 8 --hidden 256 --intermediate 1152 --vocab 4096 \
    --heads 4 --kv-heads 1 --head-dim 64 --qpas 64 --seed 4 --tokenizer "$TOK" >/dev/null || bad "gen narrow"
for pair in deep:q4_k_m deep:q5_k_m deep:q4_k_s deep:q5_k_s deep:q6_k narrow:q4_k_m narrow:q5_k_m narrow:q4_k_s \
    narrow:q5_k_s narrow:q6_k; do
    shape=${pair%%:*} r=${pair#*:}
    grep "^$shape $r " "$FIX" | cut -d' ' -f3- | sort >"$TMP/want"
    if ! "$G3" quantize -m "$TMP/$shape" -o "$TMP/$shape-$r.gguf" --type "$r" -t 2 2>"$TMP/err"; then
        bad "$shape $r: quantize failed: $(head -c 300 "$TMP/err")"
        continue
    fi
    python3 tools/gguf-types.py "$TMP/$shape-$r.gguf" | sort >"$TMP/got"
    if [ -s "$TMP/want" ] && cmp -s "$TMP/want" "$TMP/got"; then
        echo "$shape $r: $(wc -l <"$TMP/got") tensors, the types llama-quantize gives"
        ok
    else
        bad "$shape $r: per-tensor types differ from llama-quantize's: $(diff "$TMP/want" "$TMP/got" | head -5 | tr '\n' ' ')"
    fi
done
# the recipe travels with the file: info names it, bench labels the model as llama-bench does
"$G3" info -m "$TMP/deep-q4_k_m.gguf" >"$TMP/info" 2>&1
grep -q "weight type: *q4_k (mix: q4_k_m)" "$TMP/info" && ok || bad "info: $(grep -i weight "$TMP/info")"
"$G3" bench -m "$TMP/deep-q4_k_m.gguf" -p 0 -n 2 -r 1 -t 1 -o csv >"$TMP/bench" 2>/dev/null
grep -q "Q4_K - Medium" "$TMP/bench" && ok || bad "bench: no 'Q4_K - Medium' in $(head -c 300 "$TMP/bench")"
# quantizing at load with a recipe gives the same model as the file
"$G3" eval -m "$TMP/deep" -q q4_k_m --tokens 2,100,200 --all-logits --dump-logits "$TMP/a.f32" -t 2 2>/dev/null &&
    "$G3" eval -m "$TMP/deep-q4_k_m.gguf" --tokens 2,100,200 --all-logits --dump-logits "$TMP/b.f32" -t 2 2>/dev/null &&
    cmp -s "$TMP/a.f32" "$TMP/b.f32" && ok || bad "-q q4_k_m at load: logits differ from the quantized file's"
report
