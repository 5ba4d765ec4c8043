#!/bin/sh
# test-hostile.sh - hostile and careless input (issue 19), one section per class: non-finite
# numbers, a vocabulary larger or smaller than the tokenizer, NUL bytes, files that are not
# regular files, the KV cache's memory, strict configs, chat from a pipe, bench's sizes and the
# smaller flag checks. Each refusal is one line naming what was wrong and a non-zero exit; no
# silent wrong answer.
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
[ -x "$GEN" ] || { echo "no $GEN"; exit 77; }
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed by this suite"; report; exit 1; }
M="$TMP/tiny"
"$GEN" tiny "$M" --seed 5 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint tiny"; report; exit 1; }
POKE="python3 tests/poke-weights.py"
json_get() { # json_get FILE PYTHON_EXPR(j)
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}
# expect_out NAME PATTERN FILE: FILE has a line matching PATTERN (grep -E).
expect_in() {
    if grep -qE -- "$2" "$3"; then ok; else bad "$1: no line matching '$2' in: $(head -c 400 "$3")"; fi
}
# copy_model DST: a copy of $M whose files can be replaced one by one (the weights linked).
copy_model() {
    mkdir -p "$1"
    for cf in config.json generation_config.json tokenizer.model; do cp "$M/$cf" "$1/"; done
    ln -s "$M/model.safetensors" "$1/model.safetensors"
}

# ---- non-finite numbers: a NaN weight stops every command with one line, exit 1 ------------------
$POKE "$M" "$TMP/nan" model.layers.2.self_attn.q_proj.weight 5 1 nan || bad "poke nan"
NAN="$TMP/nan"
expect_error "nan greedy" 1 "logits are not finite at position" "$G3" -m "$NAN" -p hello -n 4 --temp 0 -t 1
expect_error "nan cdf" 1 "logits are not finite at position" "$G3" -m "$NAN" -p hello -n 4 -s 1 -t 1
expect_error "nan gumbel" 1 "logits are not finite at position" "$G3" -m "$NAN" -p hello -n 4 --sampler-mode gumbel -t 1
expect_error "nan json" 1 "logits are not finite at position" "$G3" -m "$NAN" -p hello -n 4 --output-format json -t 1
if [ -s "$TMP/out" ]; then bad "nan json printed a result: $(head -c 200 "$TMP/out")"; else ok; fi
# the position is that of the token whose logits they are: the last of 3 prompt ids
expect_error "nan eval" 1 "logits are not finite at position 2" "$G3" eval -m "$NAN" --tokens 2,3,4 --dump-logits "$TMP/l.bin" -t 1
if [ -e "$TMP/l.bin" ]; then bad "nan eval wrote logits"; else ok; fi
expect_error "nan bench" 1 "logits are not finite at position 7" "$G3" bench -m "$NAN" -p 8 -n 0 -r 1 -t 1
head -c 2000 README.md >"$TMP/text.txt"
expect_error "nan perplexity" 1 "logits are not finite at position" "$G3" perplexity -m "$NAN" -f "$TMP/text.txt" -c 32 --chunks 1 -t 1
printf 'hello\nagain\n' >"$TMP/two.txt"
expect_error "nan chat" 1 "logits are not finite at position" "$G3" chat -m "$NAN" -n 4 -t 1 <"$TMP/two.txt"
# --check-tensors finds it at load, naming the tensor and the element (BF16, and quantized blocks)
expect_error "check-tensors bf16" 1 "tensor model.layers.2.self_attn.q_proj.weight: element [0, 5] is not finite" \
    "$G3" -m "$NAN" -p hello -n 1 --check-tensors -t 2
expect_error "quantizing a NaN" 1 "tensor model.layers.2.self_attn.q_proj.weight: element [0, 5] is not finite (NaN or infinity): cannot be quantized to q8_0" \
    "$G3" -m "$NAN" -p hello -n 1 -q q8_0 -t 2
expect_error "quantize a NaN" 1 "cannot be quantized to q4_0" "$G3" quantize -m "$NAN" -o "$TMP/nan-q4" --type q4_0 -t 2
if [ -e "$TMP/nan-q4/model.safetensors" ]; then bad "quantize of a NaN wrote a model"; else ok; fi
"$G3" quantize -m "$M" -o "$TMP/q8" --type q8_0 -t 2 >/dev/null 2>&1 || bad "quantize q8_0"
$POKE "$TMP/q8" "$TMP/q8nan" model.layers.1.mlp.down_proj.weight $((3 * 34 * 6 + 34)) 1 f16nan || bad "poke q8"
for layout in none x8; do # the scale found where each layout keeps it
    expect_error "check-tensors q8_0 $layout" 1 "tensor model.layers.1.mlp.down_proj.weight: row 3, block 1: the q8_0 scale is not finite" \
        "$G3" -m "$TMP/q8nan" -p hello -n 1 --check-tensors --repack $layout -t 2
done
expect_ok "check-tensors clean" "$G3" -m "$M" -p hello -n 2 --check-tensors -t 2
# an infinity in a norm is refused at load, without --check-tensors
$POKE "$M" "$TMP/infnorm" model.layers.3.post_attention_layernorm.weight 7 1 inf || bad "poke inf"
expect_error "inf norm" 1 "tensor model.layers.3.post_attention_layernorm.weight: element 7 is inf" \
    "$G3" -m "$TMP/infnorm" -p hello -n 1 -t 1
# a config whose RoPE factor is a positive double but whose frequency overflows in float
copy_model "$TMP/rope"
sed 's/"rope_scaling": null/"rope_scaling": {"rope_type": "linear", "factor": 1e-40}/' "$M/config.json" >"$TMP/rope/config.json"
expect_error "rope overflow" 1 "RoPE frequency 0 is inf" "$G3" -m "$TMP/rope" -p hello -n 1 -t 1

# ---- vocabulary: more rows than pieces (real Gemma 3: 262,208 for 262,144) ------------------------
"$GEN" tiny "$TMP/wide0" --seed 5 --vocab 262208 --tokenizer models/tokenizer.model >/dev/null 2>&1 || bad "gen wide"
# the 64 rows without a piece get huge logits (+100 and -100 halves: one half wins whatever the
# hidden state's sign), so a sampler over all rows would always draw one of them
$POKE "$TMP/wide0" "$TMP/wide1" model.embed_tokens.weight $((262144 * 64)) $((32 * 64)) 100 || bad "poke wide"
$POKE "$TMP/wide1" "$TMP/wide" model.embed_tokens.weight $((262176 * 64)) $((32 * 64)) -100 || bad "poke wide 2"
rm -rf "$TMP/wide0" "$TMP/wide1"
for mode in "--temp 0" "-s 3" "-s 3 --sampler-mode gumbel"; do
    # shellcheck disable=SC2086
    "$G3" -m "$TMP/wide" -p hello -n 6 $mode -t 1 --ignore-eos --output-format json >"$TMP/wide.json" 2>"$TMP/wide.err"
    if [ $? -eq 0 ] && [ "$(json_get "$TMP/wide.json" "max(j['generated_ids']) < 262144 and len(j['generated_ids']) == 6 and len(j['text']) > 0")" = True ]; then ok
    else bad "wide vocab ($mode): $(head -c 300 "$TMP/wide.json") $(head -c 300 "$TMP/wide.err")"; fi
done
printf 'hello\n' | "$G3" chat -m "$TMP/wide" -n 6 --ignore-eos -s 1 -t 1 >"$TMP/wide.out" 2>"$TMP/wide.err"
if [ $? -eq 0 ] && [ "$(tr -d '\n' <"$TMP/wide.out" | wc -c)" -gt 0 ]; then ok; else bad "wide vocab chat: $(cat "$TMP/wide.err")"; fi
expect_error "bias beyond the pieces" 2 "-l: token 262150 is out of range [0, 262144)" \
    "$G3" -m "$TMP/wide" -p hello -n 1 -l 262150+1 -t 1
# fewer rows than the tokenizer's special ids: refused at load, both sizes named
copy_model "$TMP/narrow"
sed -e 's/"vocab_size": 262144/"vocab_size": 100/' -e 's/"eos_token_id": \[1, 106\]/"eos_token_id": 1/' "$M/config.json" >"$TMP/narrow/config.json"
"$GEN" tiny "$TMP/narrow-w" --seed 5 --vocab 100 >/dev/null 2>&1 && rm "$TMP/narrow/model.safetensors" &&
    cp "$TMP/narrow-w/model.safetensors" "$TMP/narrow/" || bad "gen narrow"
expect_error "narrow vocab" 1 "config.json vocab_size 100 is smaller than the tokenizer's (262144 pieces; <start_of_turn> is id 105)" \
    "$G3" -m "$TMP/narrow" -p hello -n 1 -t 1

# ---- NUL bytes: kept where bytes are taken, refused where the chat template takes text -----------
printf 'ab\000cd' >"$TMP/nul.txt"
expect_error "nul template" 1 "the prompt has a NUL byte at byte 2" "$G3" -m "$M" -f "$TMP/nul.txt" -n 1 -t 1
expect_ok "nul raw" "$G3" -m "$M" -f "$TMP/nul.txt" --raw -n 1 -t 1 --temp 0
"$G3" tokenize -m "$M" -f "$TMP/nul.txt" --pieces >"$TMP/nul.pieces" 2>&1
expect_in "nul tokenize keeps it" "<0x00>" "$TMP/nul.pieces"
printf 'ab\000cd\nhello\n' | "$G3" chat -m "$M" -n 2 -t 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_in "nul chat line" "the message has a NUL byte at byte 2: not sent" "$TMP/err"
if [ $rc -eq 1 ] && grep -q "1 of 2 messages were not answered" "$TMP/err"; then ok; else bad "nul chat: rc $rc $(cat "$TMP/err")"; fi

printf '/system be\000brief\nhello\n' | "$G3" chat --commands -m "$M" -n 2 -t 1 >"$TMP/out" 2>"$TMP/err"
expect_in "nul command" "the command has a NUL byte at byte 10: ignored" "$TMP/err"

# ---- files that are not regular files: read to EOF, or refused by name ----------------------------
"$G3" -m "$M" -p "Say hi" -n 8 -s 4 -t 1 >"$TMP/p.txt" 2>/dev/null
printf 'Say hi' | "$G3" -m "$M" -f - -n 8 -s 4 -t 1 >"$TMP/stdin.txt" 2>"$TMP/err"
if cmp -s "$TMP/p.txt" "$TMP/stdin.txt"; then ok; else bad "-f - differs from -p: $(cat "$TMP/err")"; fi
printf 'Say hi' | "$G3" -m "$M" -f /dev/stdin -n 8 -s 4 -t 1 >"$TMP/devstdin.txt" 2>"$TMP/err"
if cmp -s "$TMP/p.txt" "$TMP/devstdin.txt"; then ok; else bad "-f /dev/stdin differs from -p: $(cat "$TMP/err")"; fi
mkfifo "$TMP/fifo"
(printf 'Say hi' >"$TMP/fifo") &
"$G3" -m "$M" -f "$TMP/fifo" -n 8 -s 4 -t 1 >"$TMP/fifo.txt" 2>"$TMP/err"
wait
if cmp -s "$TMP/p.txt" "$TMP/fifo.txt"; then ok; else bad "-f FIFO differs from -p: $(cat "$TMP/err")"; fi
# /proc files report size 0 but have content: the prompt is not empty
"$G3" tokenize -m "$M" -f /proc/self/status >"$TMP/out" 2>"$TMP/err"
if [ "$(tr ',' '\n' <"$TMP/out" | wc -l)" -gt 20 ]; then ok; else bad "/proc file read as empty: $(head -c 200 "$TMP/out") $(cat "$TMP/err")"; fi
expect_error "-f directory" 1 "$TMP: is a directory, not a file" "$G3" -m "$M" -f "$TMP" -n 1
expect_error "-f /dev/zero" 1 "/dev/zero: is a character device, not a file" "$G3" -m "$M" -f /dev/zero -n 1
ln -s "$TMP/loop-b" "$TMP/loop-a" && ln -s "$TMP/loop-a" "$TMP/loop-b"
expect_error "-f loop" 1 "loop-a: cannot open: a loop of symbolic links" "$G3" -m "$M" -f "$TMP/loop-a" -n 1
for f in config.json tokenizer.model generation_config.json; do
    copy_model "$TMP/dir-$f"
    rm "$TMP/dir-$f/$f" && mkdir "$TMP/dir-$f/$f"
    expect_error "$f as directory" 1 "dir-$f/$f: is a directory, not a file" "$G3" -m "$TMP/dir-$f" -p hi -n 1 -t 1
done
expect_error "kld base directory" 1 "--kl-divergence-base: '$TMP' is a directory, not a file" \
    "$G3" perplexity -m "$M" -f "$TMP/text.txt" -c 32 --kl-divergence-base "$TMP" --kl-divergence -t 1
copy_model "$TMP/loop-cfg"
rm "$TMP/loop-cfg/tokenizer.model" && ln -s tokenizer.model "$TMP/loop-cfg/tokenizer.model"
expect_error "tokenizer loop" 1 "tokenizer.model: cannot open: a loop of symbolic links" "$G3" -m "$TMP/loop-cfg" -p hi -n 1 -t 1

# ---- KV cache: memory follows the tokens held; a -c that can never fit is refused before loading ---
copy_model "$TMP/long"
sed 's/"max_position_embeddings": 32768/"max_position_embeddings": 1048576/' "$M/config.json" >"$TMP/long/config.json"
peak_rss() { # peak_rss CTX: chat's /stats peak RSS in KiB after one short turn
    printf 'hello\n/stats\n' | "$G3" chat --commands -m "$TMP/long" -c "$1" -n 4 -t 1 --dry-penalty-last-n 64 2>&1 >/dev/null |
        grep "peak RSS" | sed 's/[^0-9]//g'
}
small=$(peak_rss 64)
large=$(peak_rss 1048576) # a bf16 cache of 64 MiB at this context: it must not be committed
if [ -n "$small" ] && [ -n "$large" ] && [ $((large - small)) -lt 16384 ]; then ok; else bad "peak RSS -c 64: $small KiB, -c 1048576: $large KiB"; fi
expect_ok "info kv" "$G3" info -m "$TMP/long" -c 1048576 --kv-type bf16
expect_in "info kv bytes" "^kv cache bf16 +ctx 1048576 +$(( (6 * 8 + 1048576) * 2 * 16 * 2 )) " "$TMP/out"
# refused from config.json alone: the weights here are not even a safetensors file
copy_model "$TMP/nokv"
sed 's/"max_position_embeddings": 32768/"max_position_embeddings": 1048576/' "$M/config.json" >"$TMP/nokv/config.json"
rm "$TMP/nokv/model.safetensors" && echo garbage >"$TMP/nokv/model.safetensors"
GEMMA3_MEM_AVAILABLE=50000000 expect_error "kv cannot fit" 2 "-c: 1048576 tokens need a KV cache of 0.07 GB (bf16), more than the 0.05 GB of memory available" \
    "$G3" -m "$TMP/nokv" -c 1048576 -p hi -n 1
GEMMA3_MEM_AVAILABLE=50000000 expect_error "kv cannot fit f32" 2 "KV cache of 0.13 GB (f32)" \
    "$G3" -m "$TMP/nokv" -c 1048576 --kv-type f32 -p hi -n 1

# ---- configs: strict JSON, generation_config.json in the command line's ranges ------------------------
copy_model "$TMP/dup"
sed 's/"hidden_size": 64,/"hidden_size": 64, "hidden_size": 128,/' "$M/config.json" >"$TMP/dup/config.json"
expect_error "duplicate key" 1 "dup/config.json: key 'hidden_size' appears twice" "$G3" -m "$TMP/dup" -p hi -n 1
copy_model "$TMP/trail"
{ cat "$M/config.json"; echo '{"vocab_size": 5}'; } >"$TMP/trail/config.json"
expect_error "trailing bytes" 1 "trail/config.json: bytes after the end of the JSON value" "$G3" -m "$TMP/trail" -p hi -n 1
copy_model "$TMP/gen"
echo '{"temperature": 500, "top_k": 64}' >"$TMP/gen/generation_config.json"
expect_error "gen config range" 1 "gen/generation_config.json: temperature: 500 is out of range [0, 100]" "$G3" -m "$TMP/gen" -p hi -n 1 -t 1
echo '{"top_k": -1}' >"$TMP/gen/generation_config.json"
expect_error "gen config top_k" 1 "generation_config.json: top_k: -1 is out of range [0, 2147483647]" "$G3" -m "$TMP/gen" -p hi -n 1 -t 1

# ---- chat from a pipe -----------------------------------------------------------------------------
# every line is a message: a line starting with / is sent, /save writes nothing
printf '/save %s\n' "$TMP/saved.json" | "$G3" chat -m "$M" -n 3 -t 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && [ ! -e "$TMP/saved.json" ] && [ -s "$TMP/out" ]; then ok; else bad "piped /save: rc $rc, $(cat "$TMP/err")"; fi
printf '/save %s\n/quit\n' "$TMP/saved.json" | "$G3" chat --commands -m "$M" -n 3 -t 1 >"$TMP/out" 2>"$TMP/err"
if [ $? -eq 0 ] && [ -s "$TMP/saved.json" ]; then ok; else bad "--commands /save: $(cat "$TMP/err")"; fi
# control bytes of the input are escaped when echoed
printf '/bad\033[2Jcmd\n' | "$G3" chat --commands -m "$M" -n 3 -t 1 >"$TMP/out" 2>"$TMP/err"
if grep -qF 'unknown command '"'"'/bad\x1b[2Jcmd'"'" "$TMP/err" && ! grep -q "$(printf '\033')" "$TMP/err"; then ok; else bad "control bytes echoed: $(od -c "$TMP/err" | head -5)"; fi
# a message that cannot fit says so, and the piped chat exits 1
long=$(python3 -c "print(' '.join(['word'] * 200))")
printf '%s\nhello\n' "$long" | "$G3" chat -m "$M" -c 64 -n 4 -t 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_in "too long" "the message is too long \\([0-9]+ tokens, context 64\\)" "$TMP/err"
if [ $rc -eq 1 ] && grep -q "1 of 2 messages were not answered" "$TMP/err"; then ok; else bad "too long: rc $rc, $(cat "$TMP/err")"; fi
if grep -q "context full (0 of" "$TMP/err"; then bad "too long said context full"; else ok; fi
# a message that fits, but not with the room a reply would like, is answered in what is left
mid=$(python3 -c "print(' '.join(['word'] * 50))")
printf '%s\n' "$mid" | "$G3" chat -m "$M" -c 64 -n 16 -s 1 -t 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && [ -s "$TMP/out" ] && ! grep -q "gemma3:" "$TMP/err"; then ok; else bad "fits without reserve: rc $rc, $(cat "$TMP/err")"; fi
# turn markers typed in the text: marker ids by default (as Hugging Face), text with the flag
"$G3" -m "$M" -p "a<end_of_turn>b" -n 1 -t 1 --output-format json >"$TMP/mk.json" 2>/dev/null
"$G3" -m "$M" -p "a<end_of_turn>b" -n 1 -t 1 --output-format json --markers-as-text >"$TMP/mk2.json" 2>/dev/null
if [ "$(json_get "$TMP/mk.json" "j['prompt_ids'].count(106)")" = 2 ]; then ok; else bad "markers default: $(json_get "$TMP/mk.json" "j['prompt_ids']")"; fi
if [ "$(json_get "$TMP/mk2.json" "j['prompt_ids'].count(106)")" = 1 ]; then ok; else bad "--markers-as-text: $(json_get "$TMP/mk2.json" "j['prompt_ids']")"; fi

# ---- bench: sizes checked against the context and each other, before loading --------------------
expect_error "bench nothing" 2 "bench: -p and -n are all 0: no test to run" "$G3" bench -m "$TMP/nokv" -p 0 -n 0
expect_error "bench small ctx" 2 "-c: 16 is smaller than the longest test (32 tokens of -p/-n)" "$G3" bench -m "$TMP/nokv" -c 16 -p 32 -n 8
expect_error "bench beyond the model" 2 "-p/-n: the longest test (40000 tokens) exceeds the model's max_position_embeddings 32768" \
    "$G3" bench -m "$M" -p 40000 -n 0
expect_ok "bench ctx" "$G3" bench -m "$M" -c 64 -p 16 -n 4 -r 1 -t 1

# ---- smaller -------------------------------------------------------------------------------------
expect_error "bias id" 2 "-l: token 300000 is out of range [0, 262144)" "$G3" -m "$M" -p hi -n 1 -l 300000+1 -t 1
expect_error "empty -m" 2 "-m: the model directory name is empty" "$G3" -m "" -p hi -n 1
expect_error "empty -m info" 2 "-m: the model directory name is empty" "$G3" info -m ""
expect_error "blank number" 2 "-n: ' 5' is not an integer" "$G3" -m "$M" -p hi -n " 5"
expect_error "blank float" 2 "--temp: ' 1' is not a number" "$G3" -m "$M" -p hi --temp " 1"
expect_error "blank seed" 2 "-s: ' 1' is not an integer" "$G3" -m "$M" -p hi -s " 1"
expect_error "blank ids" 2 "--prompt-ids: ' 2,3' is not a comma-separated list" "$G3" -m "$M" --prompt-ids " 2,3"
cpus=$(nproc 2>/dev/null || echo 1)
"$G3" -m "$M" -p hi -n 1 -t $((cpus + 1)) >/dev/null 2>"$TMP/err"
if [ $? -eq 0 ] && grep -q "warning: -t $((cpus + 1)) is more than the $cpus CPUs" "$TMP/err"; then ok; else bad "-t above the CPUs: $(cat "$TMP/err")"; fi
report
