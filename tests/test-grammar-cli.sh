#!/bin/sh
# tests/test-grammar-cli.sh - constrained output through the gemma3 command: --grammar,
# --grammar-file, -j/--json-schema, --json-schema-file in generate and chat, on a small
# synthetic checkpoint with the real tokenizer. Malformed grammars and schemas: one line with
# SOURCE:LINE:COLUMN and what was expected, exit 2, before the model loads. Every reply that
# ended (stop_reason eos) is checked by an independent checker (Python's json module, regular
# expressions, a recursive-descent parser for arithmetic); chat constrains each reply.
. tests/lib.sh
GEN="$G3_BUILD/tools/gen-checkpoint"
[ -x "$GEN" ] || { echo "no $GEN"; exit 77; }
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed by this suite"; report; exit 1; }
M="$TMP/tiny"
"$GEN" tiny "$M" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1 || { bad "gen-checkpoint tiny"; report; exit 1; }

# ---- refusals: before the model loads (a missing model directory is never reached) -----------
expect_error "unclosed group" 2 "gemma3: --grammar:1:16: expected ')' to close the group" \
    "$G3" -m "$TMP/none" -p hi --grammar 'root ::= "a" (b'
printf 'root ::= item+\n\nitem ::= "- " [a-z+ "\\n"\n' >"$TMP/bad.gbnf"
expect_error "grammar file line:column" 2 "$TMP/bad.gbnf:3:15: unterminated character class" \
    "$G3" -m "$TMP/none" -p hi --grammar-file "$TMP/bad.gbnf"
expect_error "undefined rule" 2 "--grammar:1:14: undefined rule 'value'" \
    "$G3" -m "$TMP/none" -p hi --grammar 'root ::= "[" value "]"'
expect_error "never finishes" 2 "the grammar can never finish" \
    "$G3" -m "$TMP/none" -p hi --grammar 'root ::= "a" root'
expect_error "left recursion" 2 "rule 'expr' is left-recursive" \
    "$G3" -m "$TMP/none" -p hi --grammar 'root ::= expr
expr ::= expr "+" "1" | "1"'
expect_error "schema syntax" 2 "gemma3: --json-schema:2:21: expected valid JSON here" \
    "$G3" -m "$TMP/none" -p hi -j '{"type": "object",
 "properties": {"a" 1}}'
expect_error "schema keyword" 2 "'pattern' at /properties/id is not supported" \
    "$G3" -m "$TMP/none" -p hi --json-schema '{"properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}}}'
printf '{"type": "array",\n  "items": {"type": "intger"}}\n' >"$TMP/bad.json"
expect_error "schema file" 2 "$TMP/bad.json: unknown type 'intger' at /items" \
    "$G3" -m "$TMP/none" -p hi --json-schema-file "$TMP/bad.json"
expect_error "two constraints" 2 "give only one of" \
    "$G3" -m "$TMP/none" -p hi --grammar 'root ::= "a"' -j '{}'
expect_error "missing grammar file" 1 "$TMP/missing.gbnf: cannot open" \
    "$G3" -m "$TMP/none" -p hi --grammar-file "$TMP/missing.gbnf"
expect_error "chat refuses too" 2 "--grammar:1:10: undefined rule 'x'" \
    "$G3" chat -m "$TMP/none" --grammar 'root ::= x'

# ---- every ended reply parses with an independent checker --------------------------------------
cat >"$TMP/check.py" <<'EOF'
import json, re, sys
kind, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
t = d["text"]
if d["stop_reason"] != "eos":
    print("limit"); sys.exit(0)
M = r"(?:(?:[a-h]x)?[a-h][1-8](?:=[NBKQR])?|[NBKQR][a-h]?[1-8]?x?[a-h][1-8]|O-O(?:-O)?)[+#]?"
def arithmetic(s):  # root ::= (expr "=" ws term "\n")+, by recursive descent
    i = 0
    def ws():
        nonlocal i
        while i < len(s) and s[i] in " \t\n": i += 1
    def term():
        nonlocal i
        if i < len(s) and s[i] == "(":
            i += 1; ws(); expr()
            if s[i:i+1] != ")": raise ValueError(i)
            i += 1; ws(); return
        m = re.compile(r"[a-z][a-z0-9_]*|[0-9]+").match(s, i)
        if not m: raise ValueError(i)
        i = m.end(); ws()
    def expr():
        nonlocal i
        term()
        while i < len(s) and s[i] in "-+*/":
            i += 1; ws(); term()
    while True:
        expr()
        if s[i:i+1] != "=": raise ValueError(i)
        i += 1; ws(); term()
        if s[i-1:i] != "\n" and s[i:i+1] != "\n": raise ValueError(i)
        if s[i:i+1] == "\n": i += 1
        if i == len(s): return True
ok = {
    "json": lambda: isinstance(json.loads(t), dict),
    "json_arr": lambda: isinstance(json.loads(t), list),
    "list": lambda: re.fullmatch(r"(- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+", t) is not None,
    "chess": lambda: re.fullmatch(r"1\. %s %s\n([1-9][0-9]?\. %s %s\n)+" % (M, M, M, M), t) is not None,
    "arithmetic": lambda: arithmetic(t),
    "yesno": lambda: re.fullmatch(r"(yes|no)!", t) is not None,
    "user": lambda: (lambda j: set(j) == {"name", "age", "admin"} and isinstance(j["name"], str)
                     and len(j["name"]) <= 12 and type(j["age"]) is int and 0 <= j["age"] <= 120
                     and type(j["admin"]) is bool)(json.loads(t)),
}[kind]
try:
    good = ok()
except Exception as e:
    good = False
print("eos" if good else "BAD " + repr(t))
EOF

# the checker itself refuses a wrong reply
printf '{"text": "yes?", "stop_reason": "eos"}' >"$TMP/wrong.json"
case $(python3 "$TMP/check.py" yesno "$TMP/wrong.json") in BAD*) ok ;; *) bad "check.py accepts 'yes?'" ;; esac
cat >"$TMP/wrong.json" <<'EOF'
{"text": "{\"name\": \"x\", \"age\": 121, \"admin\": true}", "stop_reason": "eos"}
EOF
case $(python3 "$TMP/check.py" user "$TMP/wrong.json") in BAD*) ok ;; *) bad "check.py accepts age 121" ;; esac

# run KIND SEEDS ARGS...: generate once per seed; every ended reply must check; $ended counts
# the replies that ended
run() {
    kind=$1 seeds=$2
    shift 2
    ended=0
    for s in $seeds; do
        "$G3" -m "$M" -p "Write it" -s "$s" -n 100 --output-format json "$@" >"$TMP/r.json" 2>"$TMP/r.err" ||
            { bad "$kind seed $s: exit $?: $(head -c 300 "$TMP/r.err")"; continue; }
        v=$(python3 "$TMP/check.py" "$kind" "$TMP/r.json")
        case "$v" in
            eos) ok; ended=$((ended + 1)) ;;
            limit) ok ;;
            *) bad "$kind seed $s: $v" ;;
        esac
    done
}
NL=107+4 # "\n" made likely, so that lines end within -n
# whether a random model's reply ends within -n is chance (a kernel's rounding moves it): 8 seeds,
# so that a few end and get checked
for g in list chess arithmetic json json_arr; do
    run "$g" "1 2 3 4 5 6 7 8" --grammar-file "grammars/$g.gbnf" -l $NL
    case $g in
        list|chess) if [ "$ended" -ge 2 ]; then ok; else bad "$g: only $ended of 8 replies ended"; fi ;;
    esac
done
run yesno "1 2 3" --grammar 'root ::= ("yes" | "no") "!"'
if [ "$ended" -eq 3 ]; then ok; else bad "yes/no: $ended of 3 replies ended"; fi
run yesno "4" --grammar 'root ::= ("yes" | "no") "!"' --temp 0
if [ "$ended" -eq 1 ]; then ok; else bad "yes/no greedy did not end"; fi
# the README's JSON schema example: parsable JSON of the right shape
SCHEMA='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "admin": {"type": "boolean"}}, "required": ["name", "age", "admin"]}'
run user "1 2 3 4 5" -j "$SCHEMA"
if [ "$ended" -ge 4 ]; then ok; else bad "json schema: only $ended of 5 replies ended"; fi
printf '%s\n' "$SCHEMA" >"$TMP/user.json"
run user "6 7" --json-schema-file "$TMP/user.json" --sampler-mode gumbel
if [ "$ended" -ge 1 ]; then ok; else bad "json schema file: no reply ended"; fi

# a model with more logits than tokenizer pieces (262,208, as Gemma 3 4B): the sampler and the
# grammar cover the pieces only (ids past them cannot even be biased: -l refuses them)
"$GEN" tiny-gqa "$TMP/gqa" --seed 3 --tokenizer models/tokenizer.model >/dev/null 2>&1 || bad "gen-checkpoint tiny-gqa"
"$G3" -m "$TMP/gqa" -p "Write it" -s 1 -n 20 --output-format json --grammar 'root ::= ("yes" | "no") "!"' \
    >"$TMP/r.json" 2>"$TMP/r.err"
case $(python3 "$TMP/check.py" yesno "$TMP/r.json" 2>&1) in eos) ok ;; *) bad "tiny-gqa: $(cat "$TMP/r.json" "$TMP/r.err" | head -c 300)" ;; esac

# ---- a logit bias of -inf is never overridden by the grammar: with every id that can spell "a"
# banned ("a" and the byte piece <0x61>, id 238 + 0x61), nothing is left: one line, exit 1
A=$("$G3" tokenize -m "$M" -p a | tr -d '[]')
for temp in 1 0; do
    expect_error "grammar and bans (temp $temp)" 1 "no token is left" \
        "$G3" -m "$M" -p hi -n 5 --temp $temp --grammar 'root ::= "a"' -l "$A-inf" -l 335-inf
done
"$G3" -m "$M" -p hi -n 5 --output-format json --grammar 'root ::= "a" | "b"' -l "$A-inf" -l 335-inf \
    >"$TMP/r.json" 2>"$TMP/r.err"
if grep -q '"text":"b"' "$TMP/r.json"; then ok; else
    bad "bans leave b: $(cat "$TMP/r.json" "$TMP/r.err" | head -c 300)"; fi

# ---- chat: each reply under the grammar -----------------------------------------------------
printf 'Is it?\nReally?\nSure?\n' | "$G3" chat -m "$M" -s 3 -n 12 --grammar 'root ::= ("yes" | "no") "!"' \
    >"$TMP/chat.out" 2>"$TMP/chat.err"
if [ $? -eq 0 ] && [ "$(grep -cE '^(yes|no)!$' "$TMP/chat.out")" -eq 3 ]; then ok; else
    bad "chat replies: $(cat "$TMP/chat.out" "$TMP/chat.err" | head -c 400)"; fi
report
