# tests/test-cli-llama.sh - the command line as llama.cpp users type it: UTF-8 typed at a terminal,
# escapes in -p, chat -p, stop strings, --in-prefix/--in-suffix, --version, accepted GPU flags,
# "did you mean", and bench as llama-bench. Runs on the bundled models/wordnet-gemma.
. tests/lib.sh
M=models/wordnet-gemma
[ -f "$M/model.safetensors" ] || { echo "no $M"; exit 77; }
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed by this suite"; report; exit 1; }
json_get() { # json_get FILE PYTHON_EXPR(j)
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- UTF-8 typed at a terminal reaches the tokenizer byte for byte, whatever the locale ---------
for env_locale in "LANG=C.UTF-8" "LANG=" "LC_ALL=C"; do
    rm -f "$TMP/u.json"
    if env $env_locale python3 tests/chat_driver.py utf8 "$TMP/u.json" -- "$G3" chat -m "$M" -n 1 -s 1 -t 1 \
        >"$TMP/u.out" 2>&1; then
        got=$(python3 -c "
import json,sys
sys.argv=['x']; exec(open('tests/chat_driver.py').read().split('def wait_exit')[0])
j=json.load(open('$TMP/u.json'))
users=[t['text'] for t in j['turns'] if t['role']=='user']
print('same' if users==UTF8_MESSAGES else 'typed %r, got %r' % (UTF8_MESSAGES, users))")
        if [ "$got" = same ]; then ok; else bad "chat at a terminal ($env_locale): $got"; fi
    else
        bad "utf8 pty chat ($env_locale): $(tail -c 600 "$TMP/u.out")"
    fi
done

# ---- -p processes escapes by default (llama.cpp's -e); --no-escape takes the text as typed --------
ids() { "$G3" -m "$M" -n 1 -s 1 -t 1 --output-format json "$@" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_ids"])'; }
tab=$(printf 'a\tb\\"c\nd')
want=$(ids -p "$tab" --no-escape)
got=$(ids -p 'a\tb\\"c\nd')
if [ -n "$want" ] && [ "$got" = "$want" ]; then ok; else bad "-p 'a\\tb\\\\\"c\\nd' gave $got, a real tab and newline give $want"; fi
got=$(ids -p 'a\x09b\\"c\x0ad')
if [ "$got" = "$want" ]; then ok; else bad "-p with \\x09 and \\x0a gave $got, want $want"; fi
got=$(ids -p 'a\tb' --no-escape)
lit=$(ids -p 'a\tb' -e --no-escape)
bs=$(ids -p 'a\\tb')
if [ "$got" = "$lit" ] && [ "$got" = "$bs" ] && [ "$got" != "$(ids -p "$(printf 'a\tb')")" ]; then ok; else bad "--no-escape: $got, \\\\t escaped: $bs"; fi

# ---- stop strings: matched on the text across token boundaries, not printed ------------------------
"$G3" -m "$M" -p 'Define "tree".' -n 40 -s 1 -t 1 >"$TMP/full.txt" 2>/dev/null
full=$(cat "$TMP/full.txt")
"$G3" -m "$M" -p 'Define "tree".' -n 40 -s 1 -t 1 --ignore-eos --output-format json >"$TMP/full.json" 2>/dev/null
for stop in 's a no' 'noun:' ' long st'; do
    want=$(python3 -c 'import sys; t=open(sys.argv[1]).read().rstrip("\n"); print(t[:t.index(sys.argv[2])] if sys.argv[2] in t else "NOT IN " + t)' "$TMP/full.txt" "$stop")
    "$G3" -m "$M" -p 'Define "tree".' -n 40 -s 1 -t 1 --stop "$stop" >"$TMP/s.txt" 2>/dev/null
    if [ "$(cat "$TMP/s.txt")" = "$want" ]; then ok; else bad "--stop '$stop' printed '$(cat "$TMP/s.txt")', want '$want'"; fi
    "$G3" -m "$M" -p 'Define "tree".' -n 40 -s 1 -t 1 --stop nothing-like-it -r "$stop" --output-format json >"$TMP/s.json" 2>/dev/null
    if [ "$(json_get "$TMP/s.json" "j['text']")" = "$want" ] && [ "$(json_get "$TMP/s.json" "j['stop_reason']")" = stop_string ]; then ok; else bad "-r '$stop' json: $(head -c 300 "$TMP/s.json")"; fi
done
# a stop string's beginning held back at the end is printed when the reply ends without it
"$G3" -m "$M" -p 'Define "tree".' -n 40 -s 1 -t 1 --stop "${full##* }XYZ" >"$TMP/s.txt" 2>/dev/null
if [ "$(cat "$TMP/s.txt")" = "$full" ] && [ -n "$full" ]; then ok; else bad "held-back tail: '$(cat "$TMP/s.txt")' != '$full'"; fi
# (--ignore-eos above: where the sampled reply ends early, as on some ISA tables, it must still end at the limit)
if [ "$(json_get "$TMP/full.json" "j['stop_reason']")" = limit ]; then ok; else bad "no --stop: stop_reason $(json_get "$TMP/full.json" "j['stop_reason']")"; fi
expect_error "--stop ''" 2 "--stop: the stop string is empty" "$G3" -m "$M" -p x --stop ''

# ---- chat -p (a first message), -st, -r, --in-prefix, --in-suffix ----------------------------------
"$G3" chat -m "$M" -p 'Define "tree".' -st -n 40 -s 1 -t 1 </dev/null >"$TMP/c.txt" 2>"$TMP/c.err"
if [ "$(cat "$TMP/c.txt")" = "$full" ]; then ok; else bad "chat -p -st: '$(cat "$TMP/c.txt")' != '$full' ($(cat "$TMP/c.err"))"; fi
printf 'Define "bank".\n' | "$G3" chat -m "$M" -p 'Define "tree".' -r 'noun:' -n 40 -s 1 -t 1 >"$TMP/c.txt" 2>"$TMP/c.err"
if [ "$(head -n 1 "$TMP/c.txt")" = '"tree" is a ' ] && [ "$(wc -l <"$TMP/c.txt")" -eq 2 ]; then ok; else bad "chat -p then stdin with -r: $(cat "$TMP/c.txt")"; fi
expect_error "chat -st without -p" 2 "-st: needs -p" "$G3" chat -m "$M" -st
printf 'tree\n/save %s\n' "$TMP/pre.json" | "$G3" chat --commands -m "$M" --in-prefix 'Define "' --in-suffix '".\n' -n 4 -s 1 -t 1 >/dev/null 2>&1
if [ "$(json_get "$TMP/pre.json" "repr(j['turns'][0]['text'])")" = "'Define \"tree\".\\n'" ]; then ok; else bad "--in-prefix/--in-suffix: $(json_get "$TMP/pre.json" "repr(j['turns'][0]['text'])")"; fi

# ---- --version ---------------------------------------------------------------------------------
"$G3" --version >"$TMP/v.txt" 2>&1
if grep -q '^gemma3 version [0-9.]* (build [0-9]*, commit [0-9a-z]*)$' "$TMP/v.txt" && grep -q '^built with ' "$TMP/v.txt" &&
    grep -q '^kernel tables this CPU runs: scalar' "$TMP/v.txt"; then ok; else bad "--version: $(cat "$TMP/v.txt")"; fi
# the commit make recorded when it built the binary (HEAD then; a later commit needs a rebuild)
commit=$(cut -d' ' -f1 "$G3_BUILD/build-info" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null)
if [ -z "$commit" ] || grep -q "commit $commit" "$TMP/v.txt"; then ok; else bad "--version does not name the built commit $commit: $(head -n 1 "$TMP/v.txt")"; fi

# ---- llama.cpp's GPU/NUMA flags: accepted, one note each, the output unchanged; --mlock; --quiet --
"$G3" -m "$M" -p 'Define "tree".' -n 12 -s 1 -t 1 >"$TMP/plain.txt" 2>/dev/null
"$G3" -m "$M" -p 'Define "tree".' -n 12 -s 1 -t 1 -ngl 99 -fa -mg 0 --numa distribute -sm none -ts 1,0 \
    -dev none -nkvo --mlock --log-disable >"$TMP/gpu.txt" 2>"$TMP/gpu.err"
rc=$?
notes=$(grep -c '^gemma3: note: .* ignored: ' "$TMP/gpu.err")
others=$(grep -v '^gemma3: note: \|^gemma3: warning: --mlock' "$TMP/gpu.err" | wc -l)
if [ $rc -eq 0 ] && cmp -s "$TMP/plain.txt" "$TMP/gpu.txt" && [ "$notes" -eq 8 ] && [ "$others" -eq 0 ]; then ok; else
    bad "GPU flags: rc $rc, $notes notes, $others other stderr lines: $(head -c 400 "$TMP/gpu.err")"; fi
"$G3" -m "$M" -p 'Define "tree".' -n 12 -s 1 -t 1 -fa on --quiet >"$TMP/gpu.txt" 2>"$TMP/gpu.err"
if cmp -s "$TMP/plain.txt" "$TMP/gpu.txt" && [ "$(wc -l <"$TMP/gpu.err")" -eq 1 ]; then ok; else bad "-fa on --quiet: $(cat "$TMP/gpu.err")"; fi
"$G3" -m "$M" -p 'Define "tree".' -n 4 -s 1 -t 1 -q bf16 >/dev/null 2>"$TMP/loud.err"
if grep -q 'generated:' "$TMP/loud.err"; then ok; else bad "no summary without --quiet"; fi
for c in bench perplexity eval; do
    "$G3" $c -ngl 99 -fa 1 >/dev/null 2>"$TMP/e.err"
    if grep -q "unknown flag\|unknown option" "$TMP/e.err"; then bad "$c refuses -ngl/-fa: $(cat "$TMP/e.err")"; else ok; fi
done

# ---- "did you mean" ----------------------------------------------------------------------------
expect_error "--tmep" 2 "unknown flag '--tmep' (see gemma3 --help); did you mean --temp?" "$G3" -m "$M" -p x --tmep 0
expect_error "chat --in-prefx" 2 "did you mean --in-prefix?" "$G3" chat -m "$M" --in-prefx a
expect_error "bench --n-promt" 2 "did you mean --n-prompt?" "$G3" bench -m "$M" --n-promt 5
expect_error "--zzzzz" 2 "unknown flag '--zzzzz' (see gemma3 --help)" "$G3" -m "$M" --zzzzz
if grep -q 'did you mean' "$TMP/err"; then bad "--zzzzz got a suggestion: $(cat "$TMP/err")"; else ok; fi

# ---- bench as llama-bench: several -m, lists, -pg, -d; every combination one row ------------------
mkdir -p "$TMP/it's \"two\""
M2="$TMP/it's \"two\""
for f in "$M"/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$M2/"; done
"$G3" bench -m "$M" -m "$M2" -q bf16,q8_0 -ctk bf16,f32 -b 4,8 -p 8 -n 2 -pg 4,2 -d 0,8 -r 1 -t 1 -o jsonl \
    >"$TMP/b.jsonl" 2>"$TMP/b.err"
rc=$?
got=$(python3 - "$TMP/b.jsonl" "$M" "$M2" "$commit" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = {(r["model_filename"], r["weight_type"], r["type_k"], r["n_batch"], r["test"]) for r in rows}
want = {(m, q, k, b, t + d) for m in sys.argv[2:4] for q in ("bf16", "q8_0") for k in ("bf16", "f32")
        for b in (4, 8) for t in ("pp8", "tg2", "pp4+tg2") for d in ("", " @ d8")}
problems = []
if len(rows) != 96 or keys != want: problems.append("%d rows; missing %s; extra %s" % (len(rows), sorted(want - keys)[:3], sorted(keys - want)[:3]))
for r in rows:
    if r["n_depth"] != (8 if "@ d8" in r["test"] else 0): problems.append("n_depth %r of %s" % (r["n_depth"], r["test"]))
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["test_time"]): problems.append("test_time " + r["test_time"])
    if r["backends"] != "CPU" or not isinstance(r["build_number"], int) or not isinstance(r["cpu_info"], str): problems.append("fields")
    if sys.argv[4] and r["build_commit"] != sys.argv[4]: problems.append("build_commit " + r["build_commit"])
    if not (r["avg_ts"] > 0 and r["n_prompt"] + r["n_gen"] > 0 and len(r["samples_ns"]) == 1 and len(r["samples_ts"]) == 1): problems.append("times")
print("; ".join(sorted(set(problems))[:4]) or "ok")
PY
)
if [ $rc -eq 0 ] && [ "$got" = ok ]; then ok; else bad "bench combinations: rc $rc: $got $(head -c 300 "$TMP/b.err")"; fi
# CSV and SQL quote what they hold: the second model's name has quotes and a space
"$G3" bench -m "$M" -m "$M2" -p 8 -n 0 -r 1 -t 1 -o csv >"$TMP/b.csv" 2>/dev/null
"$G3" bench -m "$M" -m "$M2" -p 8 -n 0 -r 1 -t 1 -o sql >"$TMP/b.sql" 2>/dev/null
"$G3" bench -m "$M" -m "$M2" -p 8 -n 0 -r 1 -t 1 -o json >"$TMP/b.json" 2>/dev/null
got=$(python3 - "$TMP/b.csv" "$TMP/b.sql" "$TMP/b.json" "$M2" <<'PY'
import csv, json, sqlite3, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
db = sqlite3.connect(":memory:"); db.executescript(open(sys.argv[2]).read())
sql = [r[0] for r in db.execute("SELECT model_filename FROM llama_bench WHERE test = 'pp8' AND n_depth = 0")]
js = [r["model_filename"] for r in json.load(open(sys.argv[3]))]
want = [rows[0]["model_filename"], sys.argv[4]]
print("ok" if [r["model_filename"] for r in rows] == want and sql == want and js == want and rows[0]["test"] == "pp8" else "csv %s sql %s json %s" % ([r["model_filename"] for r in rows], sql, js))
PY
)
if [ "$got" = ok ]; then ok; else bad "bench csv/sql/json quoting: $got"; fi
expect_error "bench -c below depth" 2 "-c: 16 is smaller than the longest test (24 tokens of -p/-n)" "$G3" bench -m "$M" -c 16 -p 8 -n 0 -d 16
expect_error "bench -pg" 2 "-pg: '8' is not PP,TG" "$G3" bench -m "$M" -pg 8
expect_error "bench -q" 2 "-q: 'q5' is not one of" "$G3" bench -m "$M" -q bf16,q5
expect_error "bench -ctk" 2 "-ctk: 'f16' is not one of f32, bf16" "$G3" bench -m "$M" -ctk f16

report
