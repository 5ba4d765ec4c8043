# tests/test-cli.sh - the gemma3 command end to end (generate, chat, bench, flags) on a small
# synthetic checkpoint with the real Gemma 3 tokenizer.
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
[ -x "$GEN" ] || { echo "no $GEN"; exit 77; }
M="$TMP/tiny"
"$GEN" tiny "$M" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint tiny"; report; exit 1; }
# python3 reads the JSON outputs and drives the pseudo-terminal (.ci/run installs it)
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed by this suite"; report; exit 1; }
have_python=1

json_get() { # json_get FILE PYTHON_EXPR(j)
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- generate: reproducible byte for byte, for any thread count ----------------------------
"$G3" -m "$M" -p "Hello there" -n 24 -s 123 -t 1 >"$TMP/a.txt" 2>"$TMP/a.err"
rc_a=$?
"$G3" -m "$M" -p "Hello there" -n 24 -s 123 -t 2 >"$TMP/b.txt" 2>"$TMP/b.err"
rc_b=$?
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] && cmp -s "$TMP/a.txt" "$TMP/b.txt" && [ -s "$TMP/a.txt" ]; then ok; else bad "seeded generation differs between runs (rc $rc_a $rc_b)"; fi
"$G3" -m "$M" -p "Hello there" -n 24 -s 124 -t 1 >"$TMP/c.txt" 2>/dev/null
if cmp -s "$TMP/a.txt" "$TMP/c.txt"; then bad "seeds 123 and 124 gave the same text"; else ok; fi
for what in "prompt:" "generated:" "seed: 123" "isa:" "load:"; do
    if grep -q "$what" "$TMP/a.err"; then ok; else bad "summary lacks '$what': $(cat "$TMP/a.err")"; fi
done

# ---- generate --output-format json ----------------------------------------------------------
if [ $have_python -eq 1 ]; then
    "$G3" -m "$M" -p "Hello there" -n 24 -s 123 --output-format json >"$TMP/g.json" 2>"$TMP/g.err"
    if [ "$(json_get "$TMP/g.json" "j['seed']")" = 123 ]; then ok; else bad "json seed: $(cat "$TMP/g.json" "$TMP/g.err")"; fi
    n=$(json_get "$TMP/g.json" "len(j['generated_ids'])")
    if [ "$n" -ge 1 ] && [ "$n" -le 24 ]; then ok; else bad "json generated_ids length $n"; fi
    # the streamed text is the decoded generated ids
    json_get "$TMP/g.json" "j['text']" >"$TMP/g.txt"
    if cmp -s "$TMP/g.txt" "$TMP/a.txt"; then ok; else bad "json text differs from streamed text"; fi
    for k in prompt_ids timings stop_reason; do
        if json_get "$TMP/g.json" "'$k' in j" | grep -q True; then ok; else bad "json lacks $k"; fi
    done
    # --prompt-ids: used as given
    ids=$(json_get "$TMP/g.json" "','.join(map(str, j['prompt_ids']))")
    "$G3" -m "$M" --prompt-ids "$ids" -n 24 -s 123 --output-format json >"$TMP/h.json" 2>/dev/null
    if [ "$(json_get "$TMP/h.json" "j['generated_ids']")" = "$(json_get "$TMP/g.json" "j['generated_ids']")" ]; then ok; else bad "--prompt-ids of the templated prompt generated other tokens"; fi
    # the default prompt is wrapped in the chat template, --raw is not
    if [ "$(json_get "$TMP/g.json" "j['prompt_ids'][:2]")" = "[2, 105]" ]; then ok; else bad "templated prompt does not start <bos><start_of_turn>"; fi
    "$G3" -m "$M" -p "Hello there" -n 4 -s 1 --raw --output-format json >"$TMP/r.json" 2>/dev/null
    if [ "$(json_get "$TMP/r.json" "j['prompt_ids'][0]==2 and 105 not in j['prompt_ids']")" = True ]; then ok; else bad "--raw prompt ids: $(cat "$TMP/r.json")"; fi
fi

# ---- -f FILE reads the prompt -----------------------------------------------------------------
printf 'Hello there' >"$TMP/prompt.txt"
"$G3" -m "$M" -f "$TMP/prompt.txt" -n 24 -s 123 -t 1 >"$TMP/f.txt" 2>/dev/null
if cmp -s "$TMP/f.txt" "$TMP/a.txt"; then ok; else bad "-f gave other text than -p"; fi

# ---- chat through stdin == one long prompt holding both turns ---------------------------------
printf 'Hi\nHow are you?\n/save %s\n/quit\n' "$TMP/chat.json" |
    "$G3" chat --commands -m "$M" -n 12 -s 42 -t 2 >"$TMP/chat.out" 2>"$TMP/chat.err"
if [ $? -eq 0 ]; then ok; else bad "chat via stdin failed: $(cat "$TMP/chat.err")"; fi
if [ $have_python -eq 1 ] && [ -s "$TMP/chat.json" ]; then
    if [ "$(json_get "$TMP/chat.json" "len(j['turns'])")" = 4 ]; then ok; else bad "chat transcript has $(json_get "$TMP/chat.json" "len(j['turns'])") turns"; fi
    long=$(json_get "$TMP/chat.json" "','.join(str(i) for t in j['turns'][:3] for i in t['ids'])")
    "$G3" -m "$M" --prompt-ids "$long" -n 12 -s 42 -t 1 --output-format json >"$TMP/long.json" 2>/dev/null
    want=$(json_get "$TMP/chat.json" "j['turns'][3]['ids']")
    got=$(json_get "$TMP/long.json" "j['generated_ids']")
    if [ "$want" = "$got" ] && [ "$want" != "[]" ]; then ok; else bad "chat turn 2 reply $want != long-prompt reply $got"; fi
    # the first turn is the chat template: <bos><start_of_turn>user\n
    if [ "$(json_get "$TMP/chat.json" "j['turns'][0]['ids'][:2]")" = "[2, 105]" ]; then ok; else bad "first chat turn ids"; fi
    # a later turn closes the previous reply with <end_of_turn>\n, with no second <bos>
    if [ "$(json_get "$TMP/chat.json" "j['turns'][2]['ids'][0]==106 and 2 not in j['turns'][2]['ids']")" = True ]; then ok; else bad "second turn ids: $(json_get "$TMP/chat.json" "j['turns'][2]['ids']")"; fi
elif [ $have_python -eq 1 ]; then
    bad "chat /save wrote nothing"
fi

# ---- chat through a pseudo-terminal, with Ctrl-C mid-reply -----------------------------------
if [ $have_python -eq 1 ]; then
    if python3 tests/chat_driver.py turns "$TMP/pty.json" -- "$G3" chat -m "$M" -n 12 -s 42 -t 2 >"$TMP/pty.out" 2>&1; then
        ok
        # the first two turns reproduce the stdin chat exactly
        a=$(json_get "$TMP/pty.json" "[t['ids'] for t in j['turns'][:4]]")
        b=$(json_get "$TMP/chat.json" "[t['ids'] for t in j['turns'][:4]]")
        if [ "$a" = "$b" ]; then ok; else bad "pty chat tokens differ from stdin chat"; fi
    else
        bad "pty chat: $(tail -c 600 "$TMP/pty.out")"
    fi
    if python3 tests/chat_driver.py interrupt -- "$G3" chat -m "$M" -n -1 -c 4096 -s 5 -t 1 >"$TMP/pty2.out" 2>&1; then
        ok
    else
        bad "pty chat with Ctrl-C: $(tail -c 600 "$TMP/pty2.out")"
    fi
fi

# ---- SIGINT mid-reply through a pipe returns to the prompt ------------------------------------
mkfifo "$TMP/fifo"
"$G3" chat --commands -m "$M" -n -1 -c 4096 -s 5 -t 1 <"$TMP/fifo" >"$TMP/int.out" 2>"$TMP/int.err" &
pid=$!
exec 9>"$TMP/fifo"
printf 'Write forever\n' >&9
sleep 1
kill -INT $pid 2>/dev/null
sleep 0.3
printf '/stats\n/quit\n' >&9
exec 9>&-
wait $pid
rc=$?
if [ $rc -eq 0 ] && grep -q "interrupted" "$TMP/int.err" && grep -q "context:" "$TMP/int.err"; then ok; else bad "SIGINT mid-reply: rc $rc, $(cat "$TMP/int.err")"; fi

# ---- bench -o json ---------------------------------------------------------------------------
"$G3" bench -m "$M" -p 16 -n 4 -r 2 -t 1,2 -o json >"$TMP/bench.json" 2>"$TMP/bench.err"
if [ $? -eq 0 ]; then ok; else bad "bench failed: $(cat "$TMP/bench.err")"; fi
if [ $have_python -eq 1 ]; then
    check='len(j)==4 and all(all(k in r for k in ("test","n_prompt","n_gen","n_threads","avg_ts","stddev_ts")) and r["avg_ts"]>0 for r in j) and [r["test"] for r in j]==["pp16","tg4","pp16","tg4"]'
    if [ "$(json_get "$TMP/bench.json" "$check")" = True ]; then ok; else bad "bench json: $(cat "$TMP/bench.json")"; fi
fi
"$G3" bench -m "$M" -p 16 -n 4 -r 2 >"$TMP/bench.md" 2>&1
if grep -q "| *pp16 *|" "$TMP/bench.md" && grep -q "| *tg4 *|" "$TMP/bench.md"; then ok; else bad "bench table: $(cat "$TMP/bench.md")"; fi
"$G3" bench -m "$M" -p 16 -n 4 -r 2 -o csv >"$TMP/bench.csv" 2>&1
if [ "$(wc -l <"$TMP/bench.csv")" -eq 3 ]; then ok; else bad "bench csv: $(cat "$TMP/bench.csv")"; fi
# model_type as llama-bench writes it: a Gemma 3 of 18 layers is llama.cpp's "270M" whatever its
# parameter count; a depth llama.cpp does not name goes by the parameters (tiny: 17M)
"$GEN" tiny "$TMP/tiny18" --layers 18 --fill zero --tokenizer models/tokenizer.model >/dev/null 2>&1 &&
    "$G3" bench -m "$TMP/tiny18" -p 0 -n 1 -r 1 -o csv 2>&1 | grep -q '^"gemma3 270M BF16",' && ok ||
    bad "bench model_type of an 18-layer model: $("$G3" bench -m "$TMP/tiny18" -p 0 -n 1 -r 1 -o csv 2>&1)"
grep -q '^"gemma3 17M BF16",' "$TMP/bench.csv" && ok || bad "bench model_type of tiny: $(cat "$TMP/bench.csv")"
expect_error "bench missing model dir" 1 "$TMP/nope" "$G3" bench -m "$TMP/nope" -p 8 -n 0 -r 1

# ---- info --speed: prefill and decode tokens/s after the configuration -------------------------
"$G3" info -m "$M" --speed >"$TMP/speed" 2>&1
if grep -q "| *pp64 *|" "$TMP/speed" && grep -q "| *tg16 *|" "$TMP/speed" && grep -q "hidden" "$TMP/speed"; then ok; else bad "info --speed: $(cat "$TMP/speed")"; fi
expect_error "info speed json" 2 "--speed" "$G3" info -m "$M" --speed --json

# ---- invalid flags: one line naming the flag and range, exit 2 ---------------------------------
expect_error "temp -1" 2 "--temp" "$G3" -m "$M" -p hi --temp -1
expect_error "top-p 2" 2 "--top-p" "$G3" -m "$M" -p hi --top-p 2
expect_error "threads 0" 2 "-t" "$G3" -m "$M" -p hi -t 0
expect_error "unknown flag" 2 "--bogus" "$G3" -m "$M" -p hi --bogus
expect_error "missing -m" 2 "-m" "$G3" -p hi
expect_error "missing value" 2 "-n" "$G3" -m "$M" -p hi -n
expect_error "n-predict range" 2 "-n" "$G3" -m "$M" -p hi -n -5
expect_error "ctx 0" 2 "-c" "$G3" -m "$M" -p hi -c 0
expect_error "kv type" 2 "--kv-type" "$G3" -m "$M" -p hi --kv-type f8
expect_error "output format" 2 "--output-format" "$G3" -m "$M" -p hi --output-format xml
expect_error "chat temp" 2 "--temp" "$G3" chat -m "$M" --temp -1
expect_error "chat missing -m" 2 "-m" "$G3" chat
expect_error "bench threads" 2 "-t" "$G3" bench -m "$M" -t 0
expect_error "bench output" 2 "-o" "$G3" bench -m "$M" -o xml
expect_error "bench missing -m" 2 "-m" "$G3" bench
expect_error "bench reps" 2 "-r" "$G3" bench -m "$M" -r 0
expect_error "unknown command" 2 "frobnicate" "$G3" frobnicate
expect_error "prompt too long" 1 "context" "$G3" -m "$M" -p "one two three four five six seven eight nine ten" -c 8

# ---- --help for every subcommand --------------------------------------------------------------
for c in generate chat bench info tokenize eval; do
    if "$G3" $c --help >"$TMP/help" 2>&1 && grep -q "usage" "$TMP/help"; then ok; else bad "$c --help"; fi
done
report
