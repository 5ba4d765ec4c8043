#!/bin/sh
# tests/test-prompt-cache.sh - saved state from the command line, on a small synthetic checkpoint
# (sliding window 8): generate's --prompt-cache (reuse when the cached tokens begin the prompt,
# the summary line, -all, -ro, refusals) and chat's /save, /load and --resume. Every reuse must
# give exactly the output of a run without the cache (same seed; a repeat penalty makes the
# sampler's history matter too).
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
M=$TMP/tiny
M2=$TMP/tiny-other
"$GEN" tiny "$M" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint"; report; exit 1; }
"$GEN" tiny "$M2" --seed 8 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint"; report; exit 1; }

doc=$(seq 100 140 | paste -sd, -)     # 41 tokens: the rings of 8 wrapped five times
q=$(seq 900 905 | paste -sd, -)       # a 6-token question
run() { "$G3" -m "$M" -t 2 -n 8 -s 5 --repeat-penalty 1.5 "$@"; }

# same_as NAME IDS CACHE_ARGS...: output with the cache flags == output without; stderr in $TMP/err
same_as() {
    name=$1 ids=$2
    shift 2
    run --prompt-ids "$ids" >"$TMP/ref" 2>/dev/null || bad "$name: run without the cache failed"
    if run --prompt-ids "$ids" "$@" >"$TMP/got" 2>"$TMP/err"; then
        if cmp -s "$TMP/ref" "$TMP/got"; then ok; else bad "$name: output differs from a run without the cache"; fi
    else
        bad "$name: exit $?: $(head -c 300 "$TMP/err")"
    fi
}

# has NAME TEXT: the last stderr holds TEXT
has() {
    if grep -qF -- "$2" "$TMP/err"; then ok; else bad "$1: stderr lacks '$2': $(tail -n 2 "$TMP/err")"; fi
}

C=$TMP/doc.cache
# ---- generate: first run writes the cache ------------------------------------------------------
same_as "first run" "$doc" --prompt-cache "$C"
has "first run" "prompt cache: 0 of 41 tokens reused"
[ -s "$C" ] && ok || bad "first run wrote no cache"

# ---- the common case: the same document, a question after it ----------------------------------
same_as "doc + question" "$doc,$q" --prompt-cache "$C"
has "doc + question" "prompt cache: 41 of 47 tokens reused"
cp "$C" "$TMP/c47"
same_as "the same prompt again" "$doc,$q" --prompt-cache "$C"
has "the same prompt again" "prompt cache: 47 of 47 tokens reused"
cmp -s "$C" "$TMP/c47" && ok || bad "a fully reused cache was rewritten"

# ---- read-only: used, never written ------------------------------------------------------------
same_as "read-only" "$doc,$q,7,8,9" --prompt-cache "$C" --prompt-cache-ro
has "read-only" "prompt cache: 47 of 50 tokens reused"
cmp -s "$C" "$TMP/c47" && ok || bad "--prompt-cache-ro wrote the cache"

# ---- cut back: the same document, another question (the rings of 8 keep 512 more positions) ----
same_as "another question" "$doc,1,2,3" --prompt-cache "$C" --prompt-cache-ro
has "another question" "prompt cache: 41 of 44 tokens reused"
last_but_one=$(echo "$doc,$q" | cut -d, -f1-46)
same_as "one token back" "$last_but_one,33" --prompt-cache "$C" --prompt-cache-ro
has "one token back" "prompt cache: 46 of 47 tokens reused"
# ... but not further back than 8 + 512 positions: then the cache is reused only from its end
long=$(seq 1000 1599 | paste -sd, -)
same_as "long cache" "$long" --prompt-cache "$TMP/long.cache"
same_as "departs too early" "$(seq 1000 1049 | paste -sd, -),7" --prompt-cache "$TMP/long.cache" --prompt-cache-ro
has "departs too early" "prompt cache: 0 of 51 tokens reused (the cache's 600 tokens match only the prompt's first 50, and its sliding-window layers let it be cut back to 87 tokens at the least)"
same_as "departs late enough" "$(seq 1000 1086 | paste -sd, -),7" --prompt-cache "$TMP/long.cache" --prompt-cache-ro
has "departs late enough" "prompt cache: 87 of 88 tokens reused"
same_as "short cache" "100,101,102,103,104" --prompt-cache "$TMP/short.cache"
same_as "short cache, cut back" "100,101,102,7,8,9,10,11,12,13" --prompt-cache "$TMP/short.cache"
has "short cache, cut back" "prompt cache: 3 of 10 tokens reused"
same_as "prompt inside the cache" "100,101,102,103,104,105" --prompt-cache "$TMP/six.cache"
same_as "prompt inside the cache" "100,101,102,103" --prompt-cache "$TMP/six.cache"
has "prompt inside the cache" "prompt cache: 3 of 4 tokens reused" # the last one recomputed: its logits

# ---- --prompt-cache-all: the generated tokens are cached too -----------------------------------
run --prompt-ids "$doc" --prompt-cache "$TMP/all.cache" --prompt-cache-all --output-format json >"$TMP/all.json" 2>"$TMP/err" ||
    bad "--prompt-cache-all: $(cat "$TMP/err")"
gen=$(sed 's/.*"generated_ids":\[\([0-9,]*\)\].*/\1/' "$TMP/all.json")
if grep -q '"prompt_cache_reused":0' "$TMP/all.json" && [ -n "$gen" ]; then ok; else bad "json: $(cat "$TMP/all.json")"; fi
same_as "after --prompt-cache-all" "$doc,$gen" --prompt-cache "$TMP/all.cache" --prompt-cache-ro
has "after --prompt-cache-all" "prompt cache: 49 of 49 tokens reused"

# ---- a state identifies the model, not how its blocks lie in memory --------------------------------
"$G3" quantize -m "$M" -o "$TMP/q4" --type q4_0 -t 2 >/dev/null 2>&1 || bad "quantize q4_0"
"$G3" -m "$TMP/q4" -t 2 -n 2 --repack none --prompt-ids "$doc" --prompt-cache "$TMP/q4.cache" >/dev/null 2>&1 ||
    bad "q4_0 rows: saving the cache failed"
"$G3" -m "$TMP/q4" -t 2 -n 2 --repack x8 --prompt-ids "$doc,7" --prompt-cache "$TMP/q4.cache" >/dev/null 2>"$TMP/err" ||
    bad "q4_0 x8: $(cat "$TMP/err")"
has "rows cache in x8" "prompt cache: 41 of 42 tokens reused"

# ---- refusals: one line, exit 1 (2 for usage) ---------------------------------------------------
expect_error "other model" 1 "saved from another model: weights hash" \
    "$G3" -m "$M2" -t 2 -n 4 --prompt-ids "$doc" --prompt-cache "$C"
expect_error "other KV type" 1 "KV cache type bf16 in the file, f32 in this session" \
    "$G3" -m "$M" -t 2 -n 4 --kv-type f32 --prompt-ids "$doc" --prompt-cache "$C"
expect_error "smaller context" 1 "holds 47 tokens, more than this session's context of 45" \
    "$G3" -m "$M" -t 2 -n 4 -c 45 --prompt-ids "$doc" --prompt-cache "$C"
cp "$C" "$TMP/flipped"
printf '\377' | dd of="$TMP/flipped" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_error "flipped byte" 1 "payload checksum mismatch" \
    "$G3" -m "$M" -t 2 -n 4 --prompt-ids "$doc" --prompt-cache "$TMP/flipped"
head -c 3000 "$C" >"$TMP/cut"
expect_error "truncated" 1 "truncated" "$G3" -m "$M" -t 2 -n 4 --prompt-ids "$doc" --prompt-cache "$TMP/cut"
expect_error "unwritable" 1 "cannot create" \
    "$G3" -m "$M" -t 2 -n 4 --prompt-ids "$doc" --prompt-cache "$TMP/no-such-dir/c"
expect_error "-all alone" 2 "--prompt-cache-all: needs --prompt-cache FILE" \
    "$G3" -m "$M" --prompt-ids "$doc" --prompt-cache-all
expect_error "-ro alone" 2 "--prompt-cache-ro: needs --prompt-cache FILE" \
    "$G3" -m "$M" --prompt-ids "$doc" --prompt-cache-ro

# ---- chat: /save writes the state beside the transcript; --resume and /load continue ------------
chat() { "$G3" chat -m "$M" -t 2 -n 8 --repeat-penalty 1.5 --commands "$@"; }  # piped /commands need --commands
printf 'Hi\nHow are you?\n' | chat -s 42 >"$TMP/whole.out" 2>/dev/null || bad "chat in one go failed"
printf 'Hi\n/save %s\n' "$TMP/t.json" | chat -s 42 >/dev/null 2>"$TMP/err" || bad "chat /save failed"
has "/save" "the state (18 tokens) to $TMP/t.json.state"
[ -s "$TMP/t.json.state" ] && grep -q '"state":	"t.json.state"' "$TMP/t.json" && ok || bad "/save: no state beside the transcript"
# --resume without -s takes the transcript's seed
printf 'How are you?\n' | chat --resume "$TMP/t.json" >"$TMP/resumed.out" 2>"$TMP/err" || bad "--resume failed: $(cat "$TMP/err")"
has "--resume" "[loaded 2 turns from $TMP/t.json: 18 tokens in the context, nothing to prefill]"
tail -n 1 "$TMP/whole.out" >"$TMP/want"
if cmp -s "$TMP/want" "$TMP/resumed.out" && [ -s "$TMP/want" ]; then ok; else bad "--resume: second reply '$(cat "$TMP/resumed.out")' != '$(cat "$TMP/want")'"; fi
printf 'Something else\n/load %s\nHow are you?\n' "$TMP/t.json" | chat -s 42 >"$TMP/loaded.out" 2>"$TMP/err" ||
    bad "/load failed: $(cat "$TMP/err")"
tail -n 1 "$TMP/loaded.out" >"$TMP/got"
if cmp -s "$TMP/want" "$TMP/got"; then ok; else bad "/load: reply '$(cat "$TMP/got")' != '$(cat "$TMP/want")'"; fi
# a /load that fails leaves the conversation as it was
printf 'Hi\n/load %s\nHow are you?\n' "$TMP/no-such.json" | chat -s 42 >"$TMP/failed.out" 2>"$TMP/err"
has "/load of a missing file" "gemma3: /load: "
if cmp -s "$TMP/whole.out" "$TMP/failed.out"; then ok; else bad "a failed /load changed the conversation"; fi
expect_error "--resume, other model" 1 "saved from another model" \
    "$G3" chat -m "$M2" -t 2 --resume "$TMP/t.json"
expect_error "--resume, small context" 1 "holds 18 tokens, more than this session's context of 10" \
    "$G3" chat -m "$M" -t 2 -c 10 --resume "$TMP/t.json"
echo '{"turns": []}' >"$TMP/old.json"
expect_error "--resume, no state" 1 "no \"state\" file named" "$G3" chat -m "$M" -t 2 --resume "$TMP/old.json"
report
