#!/bin/sh
# tests/test-speculative-cli.sh - speculative decoding from the command line: generate and chat
# with --lookup and with a draft model (-md, -qd; the trained draft models/wordnet-gemma-draft
# too) print exactly what plain decoding prints (same
# seed and flags), also with a saved prompt cache and on a synthetic checkpoint with a sliding
# window of 8 (the rings wrap while drafts are rejected); bench's --draft rows; chat's /save and
# /load; the refusals (a draft with another vocabulary, a draft larger than the model,
# --draft-max 0) in one line each.
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
M=models/wordnet-gemma
W=$TMP/window8
"$GEN" tiny "$W" --seed 3 --window 8 --tokenizer $M/tokenizer.model --vocab 4096 >/dev/null 2>&1 &&
"$GEN" tiny "$TMP/other-vocab" --seed 4 --tokenizer models/tokenizer.model >/dev/null 2>&1 &&
"$GEN" tiny "$TMP/big" --seed 5 --tokenizer $M/tokenizer.model --vocab 4096 --hidden 512 \
    --intermediate 2048 --layers 8 >/dev/null 2>&1 || { bad "gen-checkpoint"; report; exit 1; }

P='dog: a domestic animal. cat: a domestic animal. dog: a'
# same NAME MODEL FLAGS -- SPEC_FLAGS: generate's stdout with SPEC_FLAGS == without
same() {
    name=$1 model=$2
    shift 2
    plain=
    while [ "$1" != "--" ]; do plain="$plain $1"; shift; done
    shift
    # shellcheck disable=SC2086
    "$G3" -m "$model" -t 2 -n 40 $plain -p "$P" >"$TMP/ref" 2>/dev/null || bad "$name: plain run failed"
    # shellcheck disable=SC2086
    if "$G3" -m "$model" -t 2 -n 40 $plain -p "$P" "$@" >"$TMP/got" 2>"$TMP/err"; then
        if cmp -s "$TMP/ref" "$TMP/got"; then ok; else bad "$name: output differs from plain decoding"; fi
    else
        bad "$name: exit $?: $(head -c 300 "$TMP/err")"
    fi
}

for s in 1 2 3; do
    same "lookup greedy seed $s" $M --temp 0 -s $s -- --lookup
    same "lookup default seed $s" $M -s $s -- --spec-type ngram-simple
    same "lookup penalties seed $s" $M -s $s --repeat-penalty 1.3 --dry-multiplier 0.8 -- --lookup --draft-max 4
    same "draft q8_0 seed $s" $M -s $s --mirostat 2 -- -md $M -qd q8_0 --draft-max 5
    same "draft q4_0 seed $s" $M -s $s --sampler-mode gumbel -- -md $M -qd q4_0 --draft-p-min 0.3
    same "window 8 lookup seed $s" "$W" -s $s --temp 0.5 -- --lookup --draft-max 6 --no-spec-adaptive
    same "window 8 draft seed $s" "$W" -s $s --temp 0 --raw -- -md "$W" -qd q4_0 -td 1
    same "trained draft seed $s" $M -s $s -- -md models/wordnet-gemma-draft --draft-max 4
done
grep -q '^speculative: draft model | drafted [1-9]' "$TMP/err" && ok || bad "stats line: $(tail -n 2 "$TMP/err")"

# a prompt cache saved by a speculative run serves a plain one, and the reverse
"$G3" -m $M -t 2 -n 30 -s 9 -p "$P" >"$TMP/ref" 2>/dev/null
"$G3" -m $M -t 2 -n 30 -s 9 -p "$P" --lookup --prompt-cache "$TMP/pc" --prompt-cache-all >"$TMP/a" 2>/dev/null
"$G3" -m $M -t 2 -n 30 -s 9 -p "$P" --prompt-cache "$TMP/pc" --prompt-cache-ro >"$TMP/b" 2>/dev/null
cmp -s "$TMP/ref" "$TMP/a" && cmp -s "$TMP/ref" "$TMP/b" && ok || bad "prompt cache with --lookup differs"

# chat: two turns piped, with the draft and without
printf 'What does "dog" mean?\nAnd "cat"?\n' >"$TMP/turns"
"$G3" chat -m $M -t 2 -n 30 -s 4 <"$TMP/turns" >"$TMP/chat-ref" 2>/dev/null
"$G3" chat -m $M -t 2 -n 30 -s 4 -md $M -qd q8_0 <"$TMP/turns" >"$TMP/chat-got" 2>/dev/null
cmp -s "$TMP/chat-ref" "$TMP/chat-got" && ok || bad "chat with -md differs from plain"

# chat's saved state: written by a speculative chat, loaded by a plain one and by a speculative one
printf 'What does "dog" mean?\n/save %s\nAnd "cat"?\n' "$TMP/s.state" >"$TMP/save-turns"
printf '/load %s\nAnd "cat"?\n' "$TMP/s.state" >"$TMP/load-turns"
"$G3" chat -m $M -t 2 -n 30 -s 4 <"$TMP/save-turns" >"$TMP/save-ref" 2>/dev/null
"$G3" chat -m $M -t 2 -n 30 -s 4 --lookup <"$TMP/save-turns" >"$TMP/save-got" 2>/dev/null
"$G3" chat -m $M -t 2 -n 30 -s 4 <"$TMP/load-turns" >"$TMP/load-ref" 2>/dev/null
"$G3" chat -m $M -t 2 -n 30 -s 4 -md $M -qd q8_0 <"$TMP/load-turns" >"$TMP/load-got" 2>/dev/null
cmp -s "$TMP/save-ref" "$TMP/save-got" && cmp -s "$TMP/load-ref" "$TMP/load-got" && [ -s "$TMP/load-got" ] &&
    ok || bad "chat /save and /load with speculative decoding differ from plain"

# bench: a --draft column, accepted counts
"$G3" bench -m "$W" --lookup --draft 0,4 -p 0 -n 32 -r 1 -t 2 >"$TMP/bench" 2>&1 || bad "bench --draft: $(tail -n 2 "$TMP/bench")"
grep -q '| draft |' "$TMP/bench" && grep -qE '\| +4 \| +[0-9]+/[0-9]+ [0-9]+% \|' "$TMP/bench" && ok || bad "bench rows: $(cat "$TMP/bench")"
"$G3" bench -m "$W" --lookup --draft 4 -p 0 -n 16 -r 1 -t 2 -o jsonl >"$TMP/jsonl" 2>&1
grep -q '"n_draft": 4, "n_drafted": [1-9][0-9]*, "n_accepted": [0-9]*, "acceptance"' "$TMP/jsonl" && ok || bad "bench jsonl: $(head -c 300 "$TMP/jsonl")"

expect_error "draft of another vocabulary" 2 "the draft's vocabulary" "$G3" -m $M -md "$TMP/other-vocab" -p hi -n 2
expect_error "draft larger than the model" 2 "is larger than the model" "$G3" -m $M -md "$TMP/big" -p hi -n 2
expect_error "draft-max 0" 2 "--draft-max" "$G3" -m $M --lookup --draft-max 0 -p hi -n 2
expect_error "bench --draft without a drafter" 2 "needs a drafter" "$G3" bench -m $M --draft 4
report
