#!/bin/sh
# test-loader.sh - `gemma3 info` end to end: the golden checkpoints, generated checkpoints of every
# preset in every layout (sparse, sharded too) with exact parameter counts, and the bad-input
# table (exit code 1 and a one-line message naming the file and the problem; usage errors exit 2).
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"

# expect_out NAME PATTERN: the last command's stdout ($TMP/out) has a line matching PATTERN (grep -E).
expect_out() {
    if grep -qE -- "$2" "$TMP/out"; then ok; else bad "$1: no line matching '$2' in: $(head -c 600 "$TMP/out")"; fi
}

# Parameters of a Gemma 3 text model from its shapes (tied head counted once).
params() { # V H I L nH nKV hd
    V=$1 H=$2 I=$3 L=$4 NH=$5 NKV=$6 HD=$7
    echo $((V * H + L * (2 * NH * HD * H + 2 * NKV * HD * H + 3 * I * H + 4 * H + 2 * HD) + H))
}

# ---- golden checkpoints ---------------------------------------------------------------------
expect_ok "golden causal" "$G3" info -m tests/data/golden/tiny-causal
expect_out "golden causal arch" '^architecture: +Gemma3ForCausalLM$'
expect_out "golden causal prefix" 'text-only \(tensor prefix model\.\)'
expect_out "golden causal vocab" '^vocab_size: +4096$'
expect_out "golden causal kv heads" '^num_key_value_heads: +1$'
expect_out "golden causal window" '^sliding_window: +8$'
expect_out "golden causal rope" '^rope full: +theta 1e\+06, linear factor 1$'
expect_out "golden causal rope local" '^rope sliding: +theta 10000, linear factor 1$'
expect_out "golden causal layers" '^layer types: +SSSSSF S$'
expect_out "golden causal eos" 'bos / pad / eos: +2 / 0 / \[1, 106\]'
expect_out "golden causal params" "^parameters: +$(params 4096 64 192 7 4 1 16) "
expect_out "golden causal bytes" "^weight bytes: +$((2 * $(params 4096 64 192 7 4 1 16))) "
expect_ok "golden mm" "$G3" info -m tests/data/golden/tiny-mm
expect_out "golden mm arch" '^architecture: +Gemma3ForConditionalGeneration$'
expect_out "golden mm prefix" 'tensor prefix language_model\.model\.'
expect_out "golden mm rope" '^rope full: +theta 1e\+06, linear factor 8$'
expect_out "golden mm params" "^parameters: +$(params 4160 64 192 7 4 2 16) "
expect_ok "golden mm json" "$G3" info -m tests/data/golden/tiny-mm --json
expect_out "golden mm json params" "\"n_params\": $(params 4160 64 192 7 4 2 16),"
expect_out "golden mm json rope" '"rope_factor_full": 8,'

# KV cache: 6 sliding layers keep min(8, ctx) slots, 1 full layer ctx; K+V; nKV*hd per slot.
expect_ok "kv ctx 100" "$G3" info -m tests/data/golden/tiny-causal -c 100
expect_out "kv f32" "^kv cache f32 +ctx 100 +$(( (6 * 8 + 100) * 2 * 1 * 16 * 4 )) "
expect_out "kv bf16" "^kv cache bf16 +ctx 100 +$(( (6 * 8 + 100) * 2 * 1 * 16 * 2 )) "
expect_ok "kv ctx 4 bf16" "$G3" info -m tests/data/golden/tiny-causal -c 4 --kv-type bf16
expect_out "kv small ctx" "^kv cache bf16 +ctx 4 +$(( 7 * 4 * 2 * 16 * 2 )) "
if grep -q "kv cache f32" "$TMP/out"; then bad "--kv-type bf16 still prints f32"; else ok; fi
expect_ok "kv default ctx" "$G3" info -m tests/data/golden/tiny-causal --kv-type f32
expect_out "kv default ctx 4096" "^kv cache f32 +ctx 4096 +$(( (6 * 8 + 4096) * 2 * 16 * 4 )) "
expect_ok "help" "$G3" info --help
expect_out "help text" 'usage: gemma3 info -m DIR'

# ---- every preset, every layout (sparse files: no disk, no time) ------------------------------
check_preset() { # preset layout V H I L nH nKV hd [extra gen args]
    p=$1 layout=$2
    shift 2
    n=$(params "$1" "$2" "$3" "$4" "$5" "$6" "$7")
    shift 7
    d="$TMP/$p-$layout$*"
    d=$(echo "$d" | tr -d ' ')
    if ! "$GEN" "$p" "$d" --layout "$layout" --fill zero "$@" 2>"$TMP/err"; then
        bad "gen $p $layout: $(cat "$TMP/err")"
        return
    fi
    expect_ok "info $p $layout $*" "$G3" info -m "$d"
    expect_out "$p $layout params" "^parameters: +$n "
    expect_out "$p $layout bytes" "^weight bytes: +$((2 * n)) "
    rm -rf "$d"
}
for layout in causal mm mm-new; do
    check_preset 270m $layout 262144 640 2048 18 4 1 256
    check_preset 1b $layout 262144 1152 6912 26 4 1 256
    check_preset 4b $layout 262208 2560 10240 34 8 4 256
    check_preset 12b $layout 262208 3840 15360 48 16 8 256
    check_preset 27b $layout 262208 5376 21504 62 32 16 128
done
check_preset 27b mm 262208 5376 21504 62 32 16 128 --shards 7
check_preset 1b mm-new 262144 1152 6912 26 4 1 256 --shards 3
check_preset 4b causal 262208 2560 10240 34 8 4 256 --shards 2 --rope new

# the preset configs themselves: sizes that come from defaults (4B) or explicit keys (27B)
"$GEN" 27b "$TMP/27b" --fill zero && expect_ok "27b info" "$G3" info -m "$TMP/27b"
expect_out "27b qpas" '^query_pre_attn_scalar: 168$'
expect_out "27b head_dim" '^head_dim: +128$'
expect_out "27b rope" '^rope full: +theta 1e\+06, linear factor 8$'
expect_out "27b layers" '^layer types: +SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SSSSSF SS$'
expect_out "27b eos" 'eos: +2 / 0 / \[1, 106\]'
"$GEN" 4b "$TMP/4b" --fill zero && expect_ok "4b info" "$G3" info -m "$TMP/4b"
expect_out "4b heads (default)" '^num_attention_heads: +8$'
expect_out "4b vocab (default)" '^vocab_size: +262208$'
expect_out "4b max pos (default)" '^max_position: +131072$'
expect_out "4b window" '^sliding_window: +1024$'
expect_out "4b kv 4096" "^kv cache f32 +ctx 4096 +$(( (29 * 1024 + 5 * 4096) * 2 * 4 * 256 * 4 )) "
rm -rf "$TMP/27b" "$TMP/4b"

# ---- small random checkpoints: every layout, sharded, f32, untied, softcaps --------------------
NT=$(params 512 64 192 7 4 1 16)
for layout in causal mm mm-new; do
    for shards in 1 4; do
        d="$TMP/tiny-$layout-$shards"
        "$GEN" tiny "$d" --vocab 512 --layout $layout --shards $shards --seed 3
        expect_ok "tiny $layout shards $shards" "$G3" info -m "$d"
        expect_out "tiny $layout $shards params" "^parameters: +$NT "
    done
done
if cmp -s "$TMP/tiny-causal-1/model.safetensors" "$TMP/tiny-mm-1/model.safetensors"; then
    bad "causal and mm layouts wrote the same bytes"
else ok; fi
"$GEN" tiny "$TMP/again" --vocab 512 --seed 3
if cmp -s "$TMP/tiny-causal-1/model.safetensors" "$TMP/again/model.safetensors"; then ok; else bad "same seed, different bytes"; fi
"$GEN" tiny "$TMP/other" --vocab 512 --seed 4
if cmp -s "$TMP/tiny-causal-1/model.safetensors" "$TMP/other/model.safetensors"; then bad "seed ignored"; else ok; fi
"$GEN" tiny "$TMP/f32" --vocab 512 --dtype f32
expect_ok "tiny f32" "$G3" info -m "$TMP/f32"
expect_out "tiny f32 bytes" "^weight bytes: +$((4 * NT)) "
"$GEN" tiny "$TMP/untied" --vocab 512 --untied --layout mm
expect_ok "tiny untied" "$G3" info -m "$TMP/untied"
expect_out "untied params" "^parameters: +$((NT + 512 * 64)) "
expect_out "untied head" '^tied lm_head: +no$'
"$GEN" tiny-gqa "$TMP/gqa" --vocab 512 --attn-softcap 50 --final-softcap 30 --rope new
expect_ok "tiny-gqa" "$G3" info -m "$TMP/gqa"
expect_out "gqa kv heads" '^num_key_value_heads: +2$'
expect_out "gqa softcap" '^attn softcap: +50$'
expect_out "gqa final softcap" '^final softcap: +30$'
expect_out "gqa rope new" '^rope full: +theta 1e\+06, linear factor 8$'
expect_out "gqa prefix" 'tensor prefix language_model\.model\.'
"$GEN" tiny "$TMP/tok" --vocab 512 --tokenizer models/tokenizer.model
if cmp -s models/tokenizer.model "$TMP/tok/tokenizer.model"; then ok; else bad "--tokenizer not copied"; fi
if grep -q '"top_k": 64' "$TMP/tok/generation_config.json" && grep -q '"eos_token_id": \[1, 106\]' "$TMP/tok/generation_config.json"; then ok; else bad "generation_config.json"; fi
rm -rf "$TMP"/tiny-* "$TMP/again" "$TMP/other" "$TMP/tok"

# ---- bad input --------------------------------------------------------------------------------
expect_error "no -m" 2 "info: -m DIR is required" "$G3" info
expect_error "bad flag" 2 "info: unknown option '--frobnicate'" "$G3" info -m x --frobnicate
expect_error "bad ctx" 2 "-c: '0' is not an integer" "$G3" info -m x -c 0
expect_error "bad kv type" 2 "--kv-type: 'f16' is not f32 or bf16" "$G3" info -m x --kv-type f16
expect_error "ctx too big" 2 "-c: 40000 exceeds the model's max_position_embeddings 32768" \
    "$G3" info -m tests/data/golden/tiny-causal -c 40000
expect_error "missing dir" 1 "$TMP/nope/config.json: cannot open" "$G3" info -m "$TMP/nope"

B="$TMP/bad"
mkdir -p "$B"
cp tests/data/golden/tiny-causal/config.json "$B/"
expect_error "no safetensors" 1 "$B: no model.safetensors or model.safetensors.index.json" "$G3" info -m "$B"

# mkst FILE HEADER DATA_BYTES: a safetensors file with that header and zeroed data
mkst() {
    n=${#2}
    printf "\\$(printf %03o $((n & 255)))\\$(printf %03o $(((n >> 8) & 255)))\\000\\000\\000\\000\\000\\000" >"$1"
    printf '%s' "$2" >>"$1"
    head -c "$3" /dev/zero >>"$1"
}
F="$B/model.safetensors"
printf 'abc' >"$F"
expect_error "short file" 1 "$F: file is 3 bytes, too short for the 8-byte header length" "$G3" info -m "$B"
printf '\377\000\000\000\000\000\000\000{}' >"$F"
expect_error "header beyond file" 1 "$F: header length 255 is beyond the end of the file (10 bytes)" "$G3" info -m "$B"
mkst "$F" '{"a": [1,' 0
expect_error "header not json" 1 "$F: header is not valid JSON" "$G3" info -m "$B"
mkst "$F" '"hello"' 0
expect_error "header not object" 1 "$F: header is a string, not a JSON object" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF17","shape":[64],"data_offsets":[0,128]}}' 128
expect_error "unknown dtype" 1 "$F: tensor 'model.norm.weight': unknown dtype 'BF17'" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[-64],"data_offsets":[0,128]}}' 128
expect_error "negative shape" 1 "$F: tensor 'model.norm.weight': shape[0] = -64 is not a non-negative integer" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[6.4],"data_offsets":[0,128]}}' 128
expect_error "float shape" 1 "shape[0] = 6.4 is not a non-negative integer" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":"64","data_offsets":[0,128]}}' 128
expect_error "string shape" 1 "$F: tensor 'model.norm.weight': shape missing or not an array" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[128,0]}}' 128
expect_error "reversed offsets" 1 "$F: tensor 'model.norm.weight': data_offsets [128, 0] reversed" "$G3" info -m "$B"
mkst "$F" '{"a":{"dtype":"BF16","shape":[64],"data_offsets":[0,128]},"b":{"dtype":"BF16","shape":[64],"data_offsets":[64,192]}}' 192
expect_error "overlapping offsets" 1 "$F: tensor 'b' data_offsets [64, 192] overlap tensor 'a' [0, 128]" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[0,128]}}' 100
expect_error "offsets past end" 1 "$F: tensor 'model.norm.weight': data_offsets [0, 128] past the end of the data region (100 bytes)" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[0,10]}}' 10
expect_error "span mismatch" 1 "$F: tensor 'model.norm.weight': data_offsets [0, 10] span 10 bytes but shape [64] x BF16 needs 128" "$G3" info -m "$B"
mkst "$F" '{"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[0,128]},"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[128,256]}}' 256
expect_error "duplicate tensor" 1 "$F: duplicate tensor 'model.norm.weight'" "$G3" info -m "$B"
rm -f "$F"

# sharded: an index naming a shard that is not there
S="$TMP/sharded"
"$GEN" tiny "$S" --vocab 512 --shards 3
expect_ok "sharded ok" "$G3" info -m "$S"
rm "$S/model-00002-of-00003.safetensors"
expect_error "missing shard" 1 "$S/model.safetensors.index.json: shard 'model-00002-of-00003.safetensors'" "$G3" info -m "$S"
if [ -s "$TMP/out" ]; then bad "missing shard: stdout not empty"; else ok; fi
if grep -q "does not exist" "$TMP/err"; then ok; else bad "missing shard: $(cat "$TMP/err")"; fi

# config problems
C="$TMP/cfg"
"$GEN" tiny "$C" --vocab 512
cp "$C/config.json" "$TMP/config.good"
sed 's/"hidden_size": 64,//' "$TMP/config.good" >"$C/config.json"
expect_error "config missing key" 1 "$C/config.json: hidden_size: required key missing" "$G3" info -m "$C"
sed 's/"hidden_size": 64/"hidden_size": "64"/' "$TMP/config.good" >"$C/config.json"
expect_error "config wrong type" 1 "$C/config.json: hidden_size: expected an integer, got a string" "$G3" info -m "$C"
sed 's/"rope_scaling": null/"rope_scaling": {"rope_type": "yarn", "factor": 4}/' "$TMP/config.good" >"$C/config.json"
expect_error "config yarn" 1 "$C/config.json: rope_scaling.rope_type: 'yarn' is not supported" "$G3" info -m "$C"
sed 's/"gelu_pytorch_tanh"/"relu"/' "$TMP/config.good" >"$C/config.json"
expect_error "config activation" 1 "$C/config.json: hidden_activation: 'relu' is not supported" "$G3" info -m "$C"
printf '{"hidden_size": ' >"$C/config.json"
expect_error "config not json" 1 "$C/config.json: not valid JSON" "$G3" info -m "$C"

# tensors that do not match the config
"$GEN" tiny "$TMP/l2" --vocab 512 --layers 2 --pattern 2
"$GEN" tiny "$TMP/l3" --vocab 512 --layers 3 --pattern 2
cp "$TMP/l3/config.json" "$TMP/l2/config.json"
expect_error "missing tensor" 1 "$TMP/l2: tensor model.layers.2.input_layernorm.weight: missing (expected shape [64])" "$G3" info -m "$TMP/l2"
"$GEN" tiny "$TMP/i96" --vocab 512 --intermediate 96
cp "$C/../config.good" "$TMP/i96/config.json"
expect_error "wrong shape" 1 "$TMP/i96: tensor model.layers.0.mlp.gate_proj.weight: expected shape [192, 64], got [96, 64]" "$G3" info -m "$TMP/i96"
"$GEN" tiny "$TMP/v2" --vocab 256
cp "$TMP/config.good" "$TMP/v2/config.json"
expect_error "wrong vocab" 1 "$TMP/v2: tensor model.embed_tokens.weight: expected shape [512, 64], got [256, 64]" "$G3" info -m "$TMP/v2"
sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$TMP/config.good" >"$TMP/v2/config.json"
"$GEN" tiny "$TMP/v3" --vocab 512
cp "$TMP/v2/config.json" "$TMP/v3/config.json"
expect_error "untied, no head" 1 "$TMP/v3: tensor lm_head.weight: missing (expected shape [512, 64])" "$G3" info -m "$TMP/v3"
# a checkpoint of another layout's names: no embedding under any known prefix
mkst "$TMP/v3/model.safetensors" '{"foo.embed_tokens.weight":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}' 2
expect_error "no known prefix" 1 "$TMP/v3: tensor model.embed_tokens.weight: missing" "$G3" info -m "$TMP/v3"

report
