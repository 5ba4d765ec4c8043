#!/bin/sh
# test-tokenize-cli.sh - gemma3 tokenize: ids, pieces, flags, --jsonl against reference ids, errors.
. tests/lib.sh
M=models/tokenizer.model
CASES=tests/data/tokenizer/public-cases.jsonl

# expect_out NAME EXPECTED CMD...: the command exits 0 and prints exactly EXPECTED.
expect_out() {
    name=$1 want=$2
    shift 2
    got=$("$@" 2>"$TMP/err")
    rc=$?
    if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(head -c 300 "$TMP/err")"
    elif [ "$got" != "$want" ]; then bad "$name: got '$got', expected '$want'"
    else ok; fi
}

expect_out "ids" "[9259, 1902]" $G3 tokenize -m $M -p "Hello world"
expect_out "model dir" "[9259, 1902]" $G3 tokenize -m models -p "Hello world"
expect_out "bos" "[2, 9259, 1902]" $G3 tokenize -m models --bos -p "Hello world"
expect_out "user-defined always" "[105, 2364]" $G3 tokenize -m models -p "<start_of_turn>user"
expect_out "parse special" "[1, 2]" $G3 tokenize -m models --parse-special -p "<eos><bos>"
expect_out "no parse special" "[236820, 211827, 236813]" $G3 tokenize -m models -p "<eos>"
expect_out "pieces" "$(printf "  9259 -> 'Hello'\n   138 -> '\342\226\201\342\226\201'\n 12392 -> 'world'")" \
    $G3 tokenize -m models --pieces -p "Hello  world"
printf 'Hello world' >"$TMP/in.txt"
expect_out "file" "[9259, 1902]" $G3 tokenize -m models -f "$TMP/in.txt"
expect_out "stdin" "[9259, 1902]" sh -c "printf 'Hello world' | $G3 tokenize -m models"
expect_out "stdin newline kept" "[9259, 1902, 107]" sh -c "echo 'Hello world' | $G3 tokenize -m models"
expect_out "empty" "[]" $G3 tokenize -m models -p ""
expect_ok "help" $G3 tokenize --help
grep -q -- "--jsonl" "$TMP/out" && ok || bad "help lacks --jsonl"

# --jsonl round trip over a slice of the public cases: the ids must equal the reference ids
head -n 300 $CASES >"$TMP/slice.jsonl"
if $G3 tokenize -m models --parse-special --jsonl -f "$TMP/slice.jsonl" >"$TMP/got.jsonl" 2>"$TMP/err"; then
    sed 's/^.*"ids": *\(\[[^]]*\]\).*$/\1/' "$TMP/slice.jsonl" | tr -d ' ' >"$TMP/want.ids"
    sed 's/^{"ids": *\(\[[^]]*\]\)}$/\1/' "$TMP/got.jsonl" | tr -d ' ' >"$TMP/got.ids"
    n=$(wc -l <"$TMP/got.ids")
    if [ "$n" -ne 300 ]; then bad "jsonl: $n output lines, expected 300"
    elif cmp -s "$TMP/want.ids" "$TMP/got.ids"; then ok
    else bad "jsonl: ids differ: $(diff "$TMP/want.ids" "$TMP/got.ids" | head -c 300)"; fi
else
    bad "jsonl: exit $?: $(head -c 300 "$TMP/err")"
fi
expect_out "jsonl stdin" '{"ids": [9259, 1902]}
{"ids": [0]}' sh -c "printf '{\"x\": [1, {\"text\": 2}], \"text\": \"Hello world\"}\n\n{\"text\": \"<pad>\"}\n' | $G3 tokenize -m models --jsonl --parse-special"

# errors: bad flags exit 2, bad files exit 1, one line each
expect_error "unknown flag" 2 "unknown option '--frobnicate'" $G3 tokenize -m models --frobnicate
expect_error "no model" 2 "-m MODEL_DIR_OR_FILE is required" $G3 tokenize -p hi
expect_error "missing value" 2 "-p: missing value" $G3 tokenize -m models -p
expect_error "-p and -f" 2 "exclusive" $G3 tokenize -m models -p a -f b
expect_error "jsonl pieces" 2 "--pieces" $G3 tokenize -m models --jsonl --pieces
expect_error "missing model" 1 "$TMP/none.model" $G3 tokenize -m "$TMP/none.model" -p hi
expect_error "dir without model" 1 "$TMP/tokenizer.model" $G3 tokenize -m "$TMP" -p hi
expect_error "missing input" 1 "$TMP/none.txt" $G3 tokenize -m models -f "$TMP/none.txt"
printf '\012\200\001' >"$TMP/bad.model"
expect_error "malformed model" 1 "$TMP/bad.model" $G3 tokenize -m "$TMP/bad.model" -p hi
printf '{"text": "ok"}\n{"txt": "no"}\n' >"$TMP/bad.jsonl"
expect_error "bad jsonl" 1 "bad.jsonl:2" $G3 tokenize -m models --jsonl -f "$TMP/bad.jsonl"
report
