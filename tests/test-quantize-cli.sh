#!/bin/sh
# tests/test-quantize-cli.sh - the quantized-weights command line: `gemma3 quantize` writes a
# directory that loads in place and generates exactly what quantizing at load generates; info,
# bench and the summary name the weight type; bad input is one line and the right exit code.
. tests/lib.sh
GEN=$G3_BUILD/tools/gen-checkpoint
[ -x "$GEN" ] || { echo "no $GEN"; exit 77; }
M=$TMP/tiny
"$GEN" tiny "$M" --seed 11 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint"; report; exit 1; }

ids() { sed -n 's/.*"generated_ids":\[\([0-9,]*\)\].*/\1/p' "$1"; }
for type in q8_0 q4_0; do
    Q=$TMP/$type
    if "$G3" quantize -m "$M" -o "$Q" --type "$type" -t 2 2>"$TMP/err"; then ok; else bad "quantize $type: $(cat "$TMP/err")"; fi
    for f in config.json generation_config.json tokenizer.model model.safetensors; do
        [ -f "$Q/$f" ] && ok || bad "$type: $f not written"
    done
    ls "$Q" | grep -q tmp && bad "$type: a temporary file was left" || ok
    "$G3" info -m "$Q" >"$TMP/info" 2>&1 && grep -q "weight type: *$type" "$TMP/info" && ok || bad "$type: info lacks the weight type: $(cat "$TMP/info")"
    # quantized once == quantized at load, for any thread count
    "$G3" -m "$Q" -p "Hello there" -n 12 -s 3 -t 1 --output-format json >"$TMP/a.json" 2>/dev/null
    "$G3" -m "$M" -q "$type" -p "Hello there" -n 12 -s 3 -t 2 --output-format json >"$TMP/b.json" 2>/dev/null
    a=$(ids "$TMP/a.json") b=$(ids "$TMP/b.json")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "$type: loaded ($a) and quantized at load ($b) differ"; fi
    grep -q "\"weight_type\":\"$type\"" "$TMP/b.json" && ok || bad "$type: json lacks weight_type"
    # each layout: the directory repacked (x8) or used in place (none) == quantized at load
    for layout in x8 none; do
        "$G3" -m "$Q" --repack $layout -p "Hello there" -n 12 -s 3 -t 1 --output-format json >"$TMP/a.json" 2>"$TMP/a.err"
        "$G3" -m "$M" -q "$type" --repack $layout -p "Hello there" -n 12 -s 3 -t 2 --output-format json >"$TMP/b.json" 2>/dev/null
        a=$(ids "$TMP/a.json") b=$(ids "$TMP/b.json")
        if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "$type $layout: loaded ($a) and quantized at load ($b) differ"; fi
        want=$layout; [ $layout = none ] && want=rows
        grep -q "\"weight_layout\":\"$want\"" "$TMP/a.json" && grep -q "\"weight_layout\":\"$want\"" "$TMP/b.json" &&
            ok || bad "$type $layout: json weight_layout: $(head -c 300 "$TMP/a.json")"
        "$G3" -m "$Q" --repack $layout -p hi -n 1 -t 2 -v >/dev/null 2>"$TMP/v.err"
        if [ $layout = x8 ]; then
            grep -q "repacked the $type weights into the x8 layout" "$TMP/v.err" && grep -q "(x8 layout)" "$TMP/v.err" &&
                ok || bad "$type x8: -v lacks the repack: $(cat "$TMP/v.err")"
        else
            grep -q "repack" "$TMP/v.err" && bad "$type none: repacked: $(cat "$TMP/v.err")" || ok
        fi
    done
    "$G3" bench -m "$Q" -p 8 -n 2 -r 1 -t 1 -o json >"$TMP/bench.json" 2>&1 &&
        grep -q "\"model_type\": \"gemma3 [0-9]*M $(echo "$type" | tr a-z A-Z)\"" "$TMP/bench.json" && ok ||
        bad "$type: bench model_type: $(head -c 300 "$TMP/bench.json")"
done

# refusals: one line, exit 1 for a bad file, 2 for a bad flag
expect_error "requantize" 1 "cannot be loaded as q8_0" "$G3" -m "$TMP/q4_0" -q q8_0 -p hi -n 1
expect_error "bad -q" 2 "-q" "$G3" -m "$M" -q q3_k -p hi -n 1
expect_error "bad --repack" 2 "--repack: 'x4' is not one of auto, none, x8" "$G3" -m "$M" -q q4_0 --repack x4 -p hi -n 1
expect_error "bad --type" 2 "--type" "$G3" quantize -m "$M" -o "$TMP/x" --type bf16
expect_error "quantize without -o" 2 "-o" "$G3" quantize -m "$M" --type q4_0
expect_error "quantize a quantized dir" 1 "q4_0" "$G3" quantize -m "$TMP/q4_0" -o "$TMP/y" --type q8_0
cp -r "$TMP/q4_0" "$TMP/trunc"
size=$(wc -c <"$TMP/trunc/model.safetensors")
head -c $((size - 100)) "$TMP/q4_0/model.safetensors" >"$TMP/trunc/model.safetensors"
expect_error "truncated quantized file" 1 "model.safetensors" "$G3" -m "$TMP/trunc" -p hi -n 1
cp -r "$TMP/q4_0" "$TMP/unknown"
sed 's/"gemma3.quant":"q4_0"/"gemma3.quant":"q4_9"/' "$TMP/q4_0/model.safetensors" >"$TMP/unknown/model.safetensors"
expect_error "unknown quant type" 1 "q4_9" "$G3" -m "$TMP/unknown" -p hi -n 1
cp -r "$TMP/q4_0" "$TMP/other"
sed 's/"gemma3.quant":"q4_0"/"gemma3.quant":"q8_0"/' "$TMP/q4_0/model.safetensors" >"$TMP/other/model.safetensors"
expect_error "metadata disagrees with the sizes" 1 "tensor" "$G3" -m "$TMP/other" -p hi -n 1
report
