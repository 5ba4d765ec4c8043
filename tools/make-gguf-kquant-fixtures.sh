#!/bin/bash
# tools/make-gguf-kquant-fixtures.sh - the K-quant files of tests/data/gguf/ and llama.cpp's outputs
# on them, with llama.cpp's own tools (a developer machine; CI only reads what this wrote):
#   - wordnet-q4_k_m.gguf, wordnet-q5_k_m.gguf, wordnet-q6_k.gguf: llama-quantize's default
#     mixes (no --pure, no importance matrix) of tests/data/gguf/wordnet-bf16.gguf; not committed
#     (15 MB; issue 54): kquant-tensors.txt has each tensor's type and SHA-256
#     (tools/gguf-types.py --sha256), and the test makes the files with `gemma3 quantize` from the
#     BF16 file and holds them to those (our tensors are llama-quantize's byte for byte);
#   - their lines in llama-outputs.txt (replacing any earlier ones), in the format of
#     tools/make-gguf-fixtures.sh: llama-perplexity's final estimate (-c 128 over
#     tests/data/ppl-sample.txt), its KL statistics against the BF16 file, greedy continuations
#     (llama-completion --temp 0 -n 24) of the two prompts.
# Usage: tools/make-gguf-kquant-fixtures.sh   (LLAMA=/tmp/llama.cpp, built with its llama-quantize,
#        llama-perplexity and llama-completion)
set -e
cd "$(dirname "$0")/.."
LLAMA=${LLAMA:-/tmp/llama.cpp}
B=$LLAMA/build/bin
OUT=tests/data/gguf
O=$OUT/llama-outputs.txt
TEXT=tests/data/ppl-sample.txt
PROMPTS=("A dog is" "The meaning of the word light")
TYPES=(Q4_K_M Q5_K_M Q6_K)
W=$(mktemp -d /tmp/gguf-kfixtures-XXXXXX)
trap 'rm -rf "$W"' EXIT

for t in "${TYPES[@]}"; do
    "$B/llama-quantize" "$OUT/wordnet-bf16.gguf" "$W/wordnet-${t,,}.gguf" "$t" 2 >"$W/q.log" 2>&1
done
{
    echo "# made by tools/make-gguf-kquant-fixtures.sh: FILE TENSOR TYPE SHA256 of llama-quantize's K-quant files"
    for t in "${TYPES[@]}"; do
        python3 tools/gguf-types.py --sha256 "$W/wordnet-${t,,}.gguf" | LC_ALL=C sort | sed "s/^/wordnet-${t,,}.gguf /"
    done
} >"$OUT/kquant-tensors.txt"
ppl() { stdbuf -o0 -e0 "$B/llama-perplexity" -m "$1" -f "$TEXT" -c 128 -b 128 -t 2 "${@:2}" 2>&1; }
# retry CMD...: CMD's output, run again (up to 4 times) while it is empty: llama-perplexity and
# llama-completion sometimes end without their last lines on this machine
retry() { for _ in 1 2 3 4; do r=$("$@"); [ -n "$r" ] && break; done; printf '%s' "$r"; }
estimate() { ppl "$1" | grep -a 'Final estimate' | sed -n 's/.*PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p'; }
kl_stats() {
    ppl "$1" --kl-divergence-base "$W/base.kld" --kl-divergence >"$W/kl.log"
    kld=$(grep -a 'Mean *KLD:' "$W/kl.log" | sed -n 's/.*KLD: *\([-0-9.e]*\) *± *\([-0-9.e]*\).*/\1 \2/p')
    top=$(grep -a 'Same top p:' "$W/kl.log" | sed -n 's/.*top p: *\([0-9.]*\) *± *\([0-9.]*\).*/\1 \2/p')
    [ -n "$kld" ] && [ -n "$top" ] && echo "$kld $top"
}
complete() {
    stdbuf -o0 "$B/llama-completion" -m "$1" -p "$2" -n 24 --temp 0 -t 2 -no-cnv --no-warmup \
        --no-display-prompt 2>/dev/null | head -c 4000
}
ppl "$OUT/wordnet-bf16.gguf" --kl-divergence-base "$W/base.kld" >/dev/null
grep -v -E ' wordnet-(q4_k_m|q5_k_m|q6_k)\.gguf' "$O" >"$W/out.txt"
for t in "${TYPES[@]}"; do
    n=wordnet-${t,,}.gguf
    f=$W/$n
    echo "ppl $n $(retry estimate "$f")" >>"$W/out.txt"
    echo "kl $n $(retry kl_stats "$f")" >>"$W/out.txt"
    for pr in "${PROMPTS[@]}"; do
        c=$(retry complete "$f" "$pr")
        printf 'greedy %s %s\t%s\n' "$n" "$pr" "$(printf '%s' "$c" | sed ':a;N;$!ba;s/\n/\\n/g')" >>"$W/out.txt"
    done
done
cp "$W/out.txt" "$O"
ls -la "$W"/wordnet-q*_k*.gguf "$OUT/kquant-tensors.txt"
