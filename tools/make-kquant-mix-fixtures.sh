#!/bin/bash
# tools/make-kquant-mix-fixtures.sh - tests/data/quant/mix-types.txt: the type llama-quantize gives
# each tensor in its K-quant mixes (no --pure, no importance matrix) of two synthetic checkpoints
# that tests/test-kquant-mix.sh regenerates (build/tools/gen-checkpoint is deterministic):
#   deep:   34 layers (4B's depth: every branch of llama.cpp's use_more_bits), hidden 256,
#           intermediate 512, GQA 4:1, the bundled model's 4096-piece vocabulary;
#   narrow: 8 layers, intermediate 1152 (not whole super-blocks: ffn_down falls back to Q5_0,
#           Q5_1 or Q8_0, as in the 1B).
# Lines: SHAPE RECIPE TENSOR TYPE. llama.cpp in $LLAMA (default /tmp/llama.cpp, built), its
# converter through /work/shared/tools/anchor-llamacpp.sh ($ANCHOR).
set -e
cd "$(dirname "$0")/.."
LLAMA=${LLAMA:-/tmp/llama.cpp}
ANCHOR=${ANCHOR:-../../shared/tools/anchor-llamacpp.sh}
OUT=tests/data/quant/mix-types.txt
W=$(mktemp -d /tmp/kquant-mix-XXXXXX)
trap 'rm -rf "$W"' EXIT
[ -x build/tools/gen-checkpoint ] || make -s build/tools/gen-checkpoint
TOK=models/wordnet-gemma/tokenizer.model
build/tools/gen-checkpoint tiny "$W/deep" --layers 34 --hidden 256 --intermediate 512 --vocab 4096 \
    --heads 4 --kv-heads 1 --head-dim 64 --qpas 64 --seed 3 --tokenizer "$TOK" >/dev/null
build/tools/gen-checkpoint tiny "$W/narrow" --layers 8 --hidden 256 --intermediate 1152 --vocab 4096 \
    --heads 4 --kv-heads 1 --head-dim 64 --qpas 64 --seed 4 --tokenizer "$TOK" >/dev/null
{
    echo "# made by tools/make-kquant-mix-fixtures.sh with llama.cpp $(git -C "$LLAMA" rev-parse --short=9 HEAD)"
    for shape in deep narrow; do
        bash "$ANCHOR" gguf "$W/$shape" >/dev/null 2>&1
        recipes="Q4_K_M Q5_K_M Q4_K_S Q5_K_S Q6_K"
        for r in $recipes; do
            "$LLAMA/build/bin/llama-quantize" "$W/$shape-bf16.gguf" "$W/$shape-$r.gguf" "$r" 2 >/dev/null 2>&1
            python3 tools/gguf-types.py "$W/$shape-$r.gguf" | sed "s/^/$shape ${r,,} /"
        done
    done
} >"$OUT"
wc -l "$OUT"
