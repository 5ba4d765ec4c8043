# tests/test-chat-long.sh - a 200-turn chat in a small context: the oldest turns are dropped
# (--context-shift) again and again; it must run to the end, with no leak (the sanitizer build
# fails the run on one) and a flat peak memory.
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
[ -x "$GEN" ] || { echo "no $GEN"; exit 77; }
M="$TMP/tiny"
"$GEN" tiny "$M" --seed 3 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint"; report; exit 1; }
i=1
while [ $i -le 200 ]; do
    echo "Message number $i: tell me something new."
    [ $i -eq 50 ] && echo "/stats"
    i=$((i + 1))
done >"$TMP/in.txt"
echo "/stats" >>"$TMP/in.txt"
# The random model may well say a newline; the grammar keeps each reply on its one line, so the
# output's lines count the replies whatever the kernels' rounding makes it say.
ONE_LINE='root ::= [^\n]*'
# Under AddressSanitizer, freed memory waits in a quarantine (256 MB by default) before reuse,
# which grows the peak for reasons that are not ours: keep it small so the peak measures the chat.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" \
    "$G3" chat -m "$M" -c 128 -n 8 -s 9 -t 2 --context-shift --commands --grammar "$ONE_LINE" \
    <"$TMP/in.txt" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ]; then ok; else bad "200-turn chat exited $rc: $(tail -c 800 "$TMP/err")"; fi
drops=$(grep -c "dropped the oldest turns" "$TMP/err")
if [ "$drops" -ge 20 ]; then ok; else bad "expected many context drops, saw $drops"; fi
replies=$(wc -l <"$TMP/out")
if [ "$replies" -eq 200 ]; then ok; else bad "expected 200 reply lines, got $replies"; fi
rss50=$(grep "peak RSS" "$TMP/err" | head -n 1 | sed 's/[^0-9]//g')
rss200=$(grep "peak RSS" "$TMP/err" | tail -n 1 | sed 's/[^0-9]//g')
if [ -n "$rss50" ] && [ -n "$rss200" ] && [ $((rss200 - rss50)) -le 4096 ]; then ok; else bad "peak RSS grew from $rss50 KiB (turn 50) to $rss200 KiB (turn 200)"; fi
echo "peak RSS: turn 50 $rss50 KiB, turn 200 $rss200 KiB, $drops context drops"
report
