#!/bin/sh
# tests/test-perplexity.sh - `gemma3 perplexity`: its numbers against an independent computation
# from `gemma3 eval --all-logits` (Python, 1e-4 relative; --exact, default and -q q8_0), -b not
# changing them, the KL-divergence base file (a run against its own base: KL exactly 0, 100% same
# top token), and one-line errors for bad input (exit 2 for flags, 1 for files and texts).
. tests/lib.sh
GOLD=tests/data/golden
M=$GOLD/tiny-causal
tokens_of() { sed -n '/"tokens"/,/]/p' "$1" | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/'; }
TOKS=$(tokens_of $GOLD/tiny-causal.json)
C=16

# ref_ppl MODE_FLAGS...: recomputes llama-perplexity's numbers from eval logits: each chunk of
# $C tokens with <bos> first, positions C/2 .. C-2 scored on the next token. Prints the running
# estimates and "final PPL SE".
ref_ppl() {
    echo "$TOKS" | tr ',' '\n' >"$TMP/ids"
    n=$(wc -l <"$TMP/ids")
    chunks=$((n / C))
    i=0
    while [ $i -lt $chunks ]; do
        ids=$(sed -n "$((i * C + 2)),$(((i + 1) * C))p" "$TMP/ids" | tr '\n' ',' | sed 's/,$//')
        "$G3" eval -m $M --tokens "2,$ids" --all-logits --dump-logits "$TMP/ref$i" "$@" ||
            { bad "eval chunk $i"; return; }
        i=$((i + 1))
    done
    python3 - "$TMP" "$chunks" "$C" 4096 <<'EOF'
import math, struct, sys
tmp, chunks, c, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ids = [int(x) for x in open(tmp + "/ids").read().split()]
nll = nll2 = 0.0
count = 0
for k in range(chunks):
    data = open("%s/ref%d" % (tmp, k), "rb").read()
    rows = struct.unpack("<%df" % (len(data) // 4), data)
    for j in range(c // 2, c - 1):
        row = rows[j * V:(j + 1) * V]
        m = max(row)
        lse = m + math.log(sum(math.exp(x - m) for x in row))
        v = lse - row[ids[k * c + j + 1]]
        nll += v
        nll2 += v * v
        count += 1
    print("chunk %d %.10g" % (k + 1, math.exp(nll / count)))
mean = nll / count
var = nll2 / count - mean * mean
print("final %.10g %.10g" % (math.exp(mean), math.exp(mean) * math.sqrt(var / (count - 1))))
EOF
}

# close NAME A B: |A - B| <= 1e-4 * |B|
close() {
    if awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(a != "" && d <= 1e-4 * b) }'; then
        ok
    else
        bad "$1: $2 vs reference $3"
    fi
}

# check_against_ref NAME OUT REF: the [i] estimates and the final line agree with the reference
check_against_ref() {
    for k in 1 2; do
        got=$(sed -n "s/.*\[$k\]\([0-9.]*\),.*/\1/p" "$2")
        close "$1 [$k]" "$got" "$(sed -n "s/^chunk $k //p" "$3")"
    done
    close "$1 PPL" "$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$2")" "$(awk '/^final/ { print $2 }' "$3")"
    close "$1 SE" "$(sed -n 's/^Final estimate: .* +\/- \([0-9.]*\)$/\1/p' "$2")" "$(awk '/^final/ { print $3 }' "$3")"
}

for mode in --exact --kv-type=bf16 --quant=q8_0; do
    flags=$(echo "$mode" | tr '=' ' ')
    # shellcheck disable=SC2086
    ref_ppl -t 2 $flags >"$TMP/ref.txt"
    # shellcheck disable=SC2086
    expect_ok "perplexity $mode" $G3 perplexity -m $M --tokens "$TOKS" -c $C -t 2 $flags
    cp "$TMP/out" "$TMP/ppl.txt"
    check_against_ref "$mode" "$TMP/ppl.txt" "$TMP/ref.txt"
    echo "$mode: $(grep Final "$TMP/ppl.txt") (reference: $(grep final "$TMP/ref.txt"))"
done

# -b splits each chunk's forward call; the numbers are the same bytes
$G3 perplexity -m $M --tokens "$TOKS" -c $C -t 2 >"$TMP/b0" 2>/dev/null
$G3 perplexity -m $M --tokens "$TOKS" -c $C -t 3 -b 5 >"$TMP/b5" 2>/dev/null
if [ -s "$TMP/b0" ] && cmp -s "$TMP/b0" "$TMP/b5"; then ok; else bad "-b 5 -t 3 changed the output"; fi
# a plain run scores without holding the logits (the LM head in strips of the vocabulary), a run
# saving a base file from whole rows of logits: the same bytes, in every mode and weight type
for flags in "" "--exact" "-q q8_0" "-q q4_0"; do
    # shellcheck disable=SC2086
    $G3 perplexity -m $M --tokens "$TOKS" -c $C -t 2 $flags >"$TMP/p1" 2>/dev/null
    # shellcheck disable=SC2086
    $G3 perplexity -m $M --tokens "$TOKS" -c $C -t 3 $flags --kl-divergence-base "$TMP/pb.kld" >"$TMP/p2" 2>/dev/null
    if [ -s "$TMP/p1" ] && cmp -s "$TMP/p1" "$TMP/p2"; then ok; else bad "plain vs base run ($flags): $(cat "$TMP/p1") / $(cat "$TMP/p2")"; fi
done
# --chunks 1 stops after the first estimate
$G3 perplexity -m $M --tokens "$TOKS" -c $C --chunks 1 >"$TMP/c1" 2>/dev/null
if grep -q '^\[1\][0-9.]*,$' "$TMP/c1"; then ok; else bad "--chunks 1: $(cat "$TMP/c1")"; fi
# progress goes to stderr
$G3 perplexity -m $M --tokens "$TOKS" -c $C >/dev/null 2>"$TMP/err"
if grep -q "seconds per pass" "$TMP/err"; then ok; else bad "no progress on stderr: $(cat "$TMP/err")"; fi

# the base file: its size is the header, the tokens and 2 chunks x 7 rows x 4096 floats
B=$TMP/base.kld
expect_ok "save base" $G3 perplexity -m $M --tokens "$TOKS" -c $C -t 2 --kl-divergence-base "$B"
s=$(wc -c <"$B")
if [ "$s" -eq $((40 + 32 * 4 + 14 * 4096 * 4)) ]; then ok; else bad "base file is $s bytes"; fi
if [ ! -e "$B.tmp" ]; then ok; else bad "base file's temporary left behind"; fi
# a run against its own base: KL exactly 0, same top token everywhere, same PPL
expect_ok "self compare" $G3 perplexity -m $M --kl-divergence-base "$B" --kl-divergence -t 3 -b 4
cp "$TMP/out" "$TMP/self"
for line in "Mean    KLD:   0.000000 ±   0.000000" "Maximum KLD:   0.000000" "Minimum KLD:   0.000000" \
    "Same top p: 100.000 ± 0.000 %" "RMS Δp    :  0.000 ± 0.000 %" "Mean ln(PPL(Q)/PPL(base))     :   0.000000"; do
    if grep -qF -- "$line" "$TMP/self"; then ok; else bad "self compare lacks '$line'"; fi
done
# the same with the tokens given again
expect_ok "self compare with --tokens" $G3 perplexity -m $M --tokens "$TOKS" --kl-divergence-base "$B" --kl-divergence
# --exact against the default base: a small, positive divergence; every statistic printed
$G3 perplexity -m $M --kl-divergence-base "$B" --kl-divergence --exact >"$TMP/ex" 2>&1
kl=$(sed -n 's/^Mean    KLD: *\([0-9.e-]*\) .*/\1/p' "$TMP/ex")
if awk -v k="$kl" 'BEGIN { exit !(k != "" && k > 0 && k < 0.01) }'; then ok; else bad "--exact vs default KL '$kl'"; fi
for w in "Mean PPL(Q)" "Mean PPL(base)" "Median  KLD:" "99.0%   KLD:" "95.0%   KLD:" "90.0%   KLD:" \
    "Maximum KLD:" "RMS Δp    :" "Same top p:" "Maximum Δp:"; do
    if grep -qF -- "$w" "$TMP/ex"; then ok; else bad "KL output lacks '$w'"; fi
done

# every statistic beyond the mean against an independent computation: q4_0 against the default
# base on the trained model (peaked distributions: Δp of several %), recomputed in Python from
# the two runs' own base files (each row the log-softmax the comparison uses)
W="models/wordnet-gemma -f tests/data/ppl-sample.txt -c 64 --chunks 4" # 124 scored: an even count
$G3 perplexity -m $W --kl-divergence-base "$TMP/w.kld" >/dev/null 2>&1 || bad "wordnet base file"
$G3 perplexity -m $W --quant q4_0 --kl-divergence-base "$TMP/q8.kld" >/dev/null 2>&1 || bad "q4_0 base file"
$G3 perplexity -m models/wordnet-gemma --kl-divergence-base "$TMP/w.kld" --kl-divergence --quant q4_0 >"$TMP/q8.out" 2>&1
python3 - "$TMP/w.kld" "$TMP/q8.kld" "$TMP/q8.out" <<'EOF2' >"$TMP/q8.check" || bad "KL statistics: $(cat "$TMP/q8.check")"
import math, re, struct, sys
def load(path):
    b = open(path, 'rb').read()
    V, c, chunks = struct.unpack_from('<III', b, 12)
    n = struct.unpack_from('<Q', b, 24)[0]
    toks = struct.unpack_from('<%di' % n, b, 40)
    per = c - 1 - c // 2
    rows = struct.unpack_from('<%df' % (chunks * per * V), b, 40 + 4 * n)
    return V, c, chunks, per, toks, rows
V, c, chunks, per, toks, P = load(sys.argv[1])
_, _, _, _, _, Q = load(sys.argv[2])
kl, dp, same = [], [], 0
for k in range(chunks):
    for r in range(per):
        at = (k * per + r) * V
        lp, lq = P[at:at + V], Q[at:at + V]
        tok = toks[k * c + c // 2 + r + 1]
        kl.append(sum(math.exp(a) * (a - b) for a, b in zip(lp, lq)))
        dp.append(math.exp(lq[tok]) - math.exp(lp[tok]))
        same += lp.index(max(lp)) == lq.index(max(lq))
def pct(v, f):
    v = sorted(v); x = f * (len(v) - 1); i = int(x)
    return v[i] + (x - i) * (v[min(i + 1, len(v) - 1)] - v[i])
def med(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2] + v[n // 2 - 1]) / 2
out = open(sys.argv[3], encoding='utf-8').read()
want = {
    'Mean    KLD': (sum(kl) / len(kl), 1), 'Maximum KLD': (max(kl), 1), 'Minimum KLD': (min(kl), 1),
    'Median  KLD': (med(kl), 1), '99.0%   KLD': (pct(kl, .99), 1), '90.0%   KLD': (pct(kl, .9), 1),
    '10.0%   KLD': (pct(kl, .1), 1), 'Maximum Δp': (max(dp), 100), 'Minimum Δp': (min(dp), 100),
    'Median  Δp': (med(dp), 100), '95.0%   Δp': (pct(dp, .95), 100), '25.0%   Δp': (pct(dp, .25), 100),
    'RMS Δp    ': (math.sqrt(sum(d * d for d in dp) / len(dp)), 100),
    'Same top p': (same / len(kl), 100),
}
bad = 0
for label, (value, scale) in want.items():
    m = re.search(re.escape(label) + r': *(-?[0-9.]+)', out)
    tol = 1.5e-6 if scale == 1 else 1.5e-3
    if not m or abs(float(m.group(1)) - value * scale) > tol + 1e-4 * abs(value * scale):
        print('%s: printed %s, recomputed %.6f' % (label, m.group(1) if m else None, value * scale)); bad = 1
if max(kl) < 1e-2 or max(dp) - min(dp) < 1e-2:
    print('q4_0 against the default differs too little to test the statistics'); bad = 1
sys.exit(bad)
EOF2
[ -s "$TMP/q8.check" ] || ok

# bad base files: truncated, foreign, other tokens, other vocabulary, other -c
head -c 1000 "$B" >"$TMP/trunc"
expect_error "truncated base" 1 "truncated" $G3 perplexity -m $M --kl-divergence-base "$TMP/trunc" --kl-divergence
head -c 20 "$B" >"$TMP/trunc2"
expect_error "truncated header" 1 "truncated" $G3 perplexity -m $M --kl-divergence-base "$TMP/trunc2" --kl-divergence
cp "$B" "$TMP/long" && printf 'xx' >>"$TMP/long"
expect_error "overlong base" 1 "longer" $G3 perplexity -m $M --kl-divergence-base "$TMP/long" --kl-divergence
expect_error "foreign base" 1 "not a gemma3" $G3 perplexity -m $M --kl-divergence-base $GOLD/tiny-causal.logits.f32 --kl-divergence
OTHER=$(echo "$TOKS" | sed 's/^2,1273,/2,1274,/')
expect_error "other tokens" 1 "other tokens" $G3 perplexity -m $M --tokens "$OTHER" --kl-divergence-base "$B" --kl-divergence
expect_error "other vocab" 1 "vocabulary of 4096" $G3 perplexity -m $GOLD/tiny-mm --kl-divergence-base "$B" --kl-divergence
expect_error "other -c" 2 "-c: 32 differs" $G3 perplexity -m $M -c 32 --kl-divergence-base "$B" --kl-divergence
expect_error "missing base" 1 "no-such" $G3 perplexity -m $M --kl-divergence-base "$TMP/no-such" --kl-divergence
expect_error "unwritable base" 1 "--kl-divergence-base" $G3 perplexity -m $M --tokens "$TOKS" -c $C --kl-divergence-base "$TMP/no/dir/b"

# bad input: texts too short, -c too large or small, flags
expect_error "one token" 1 "1 token" $G3 perplexity -m $M --tokens 2
expect_error "shorter than a chunk" 1 "fewer than one chunk of -c 64" $G3 perplexity -m $M --tokens "$TOKS" -c 64
expect_error "default -c 512" 1 "fewer than one chunk of -c 512" $G3 perplexity -m $M --tokens "$TOKS"
expect_error "ctx > max" 2 "max_position_embeddings" $G3 perplexity -m $M --tokens "$TOKS" -c 40000
expect_error "ctx too small" 2 "-c: 3" $G3 perplexity -m $M --tokens "$TOKS" -c 3
expect_error "no input" 2 "-f FILE" $G3 perplexity -m $M
expect_error "no model" 2 "-m DIR" $G3 perplexity --tokens "$TOKS"
expect_error "both inputs" 2 "not both" $G3 perplexity -m $M --tokens 2 -f x
expect_error "kl without base" 2 "--kl-divergence-base" $G3 perplexity -m $M --tokens 2 --kl-divergence
expect_error "bad chunks" 2 "--chunks: '0'" $G3 perplexity -m $M --tokens "$TOKS" --chunks 0
expect_error "id >= vocab" 2 "out of range" $G3 perplexity -m $M --tokens 2,4096 -c 4
expect_error "no tokenizer" 1 "no tokenizer.model" $G3 perplexity -m $M -f "$B"

# texts through the tokenizer (a generated tiny checkpoint with the real tokenizer.model)
T=$TMP/tiny
"$G3_BUILD/tools/gen-checkpoint" tiny "$T" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1 || bad "gen-checkpoint"
: >"$TMP/empty.txt"
expect_error "empty text" 1 "gives 1 token" $G3 perplexity -m "$T" -f "$TMP/empty.txt" -c 8
printf 'The quick brown fox jumps over the lazy dog. ' >"$TMP/short.txt"
expect_error "text shorter than a chunk" 1 "fewer than one chunk" $G3 perplexity -m "$T" -f "$TMP/short.txt" -c 64
expect_error "missing text" 1 "no-such.txt" $G3 perplexity -m "$T" -f "$TMP/no-such.txt" -c 8
for i in 1 2 3 4; do cat "$TMP/short.txt"; done >"$TMP/text.txt"
expect_ok "text" $G3 perplexity -m "$T" -f "$TMP/text.txt" -c 16 -t 2
if grep -q '^Final estimate: PPL = [0-9.]* +/- [0-9.]*$' "$TMP/out"; then ok; else bad "text run: $(cat "$TMP/out")"; fi
expect_ok "help" $G3 perplexity --help
report
