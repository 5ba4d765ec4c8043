#!/bin/sh
# tools/bench-threads.sh - thread scaling: decode (tgN) and prefill (ppN) of GGUF files at several
# thread counts, beside the memory-read bandwidth probe and the pool's fork/join latency at the
# same count, and (LLAMA_BENCH) llama-bench on the same file in the same run. Engines and
# llama-bench take turns test by test, ROUNDS times, so a slow minute of a shared machine falls
# on both; the table gives the mean of the rounds and their spread.
#
#   SHAPES="1b"                 synthetic checkpoints of these shapes (gen-checkpoint, seed 1)
#   TYPES="q4_0 q8_0"           quantized once to $BUILD/bench-models/SHAPE-TYPE.gguf by `gemma3 quantize`
#   THREADS="1 2 4 8 16"        counts above the machine's CPUs are left out; the CPU count is added
#   N_PROMPT=512 N_GEN=128 REPS=2 ROUNDS=2
#   ENGINES="gemma3=build/gemma3"  label=binary pairs (say, a build of another commit beside it)
#   LLAMA_BENCH=path            llama.cpp's llama-bench
#
# Decode reads every weight once per token: a decode's share of the probe's bandwidth is
# t/s x file size / bandwidth. The probe is a plain vectorised sum (bench-kernels --bandwidth).
BUILD=${BUILD:-build}
SHAPES=${SHAPES:-1b}
TYPES=${TYPES:-"q4_0 q8_0"}
THREADS=${THREADS:-"1 2 4 8 16"}
N_PROMPT=${N_PROMPT:-512}
N_GEN=${N_GEN:-128}
REPS=${REPS:-2}
ROUNDS=${ROUNDS:-2}
ENGINES=${ENGINES:-"gemma3=$BUILD/gemma3"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

n_cpus=$(nproc)
counts=
for t in $THREADS $n_cpus; do
    [ "$t" -le "$n_cpus" ] || continue
    case " $counts " in *" $t "*) ;; *) counts="$counts $t" ;; esac
done

for t in $counts; do
    echo "$t $("$BUILD/tools/bench-kernels" --bandwidth "$t") $("$BUILD/tools/bench-kernels" --pool "$t")" \
        >>"$out/probe" || exit 1
done
for shape in $SHAPES; do
    dir=$BUILD/bench-models/$shape
    for type in $TYPES; do
        gguf=$BUILD/bench-models/$shape-$type.gguf
        [ -f "$gguf" ] && continue
        if [ ! -f "$dir/config.json" ]; then
            "$BUILD/tools/gen-checkpoint" "$shape" "$dir" --seed 1 --tokenizer models/tokenizer.model \
                >/dev/null || exit 1
        fi
        "$BUILD/gemma3" quantize -m "$dir" -o "$gguf" --type "$type" >/dev/null || exit 1
    done
    for type in $TYPES; do
        gguf=$BUILD/bench-models/$shape-$type.gguf
        for t in $counts; do
            for round in $(seq "$ROUNDS"); do
                for e in $ENGINES; do
                    "${e#*=}" bench -m "$gguf" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -t "$t" -o json \
                        >"$out/$shape-$type-$t-${e%%=*}-$round.json" 2>/dev/null || echo "${e%%=*} failed on $gguf"
                done
                if [ -n "$LLAMA_BENCH" ]; then
                    "$LLAMA_BENCH" -m "$gguf" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -t "$t" -o json \
                        >"$out/$shape-$type-$t-llama.cpp-$round.json" 2>/dev/null || echo "llama-bench failed on $gguf"
                fi
            done
        done
    done
done

labels=
for e in $ENGINES; do labels="$labels ${e%%=*}"; done
[ -n "$LLAMA_BENCH" ] && labels="$labels llama.cpp"
python3 - "$out" "$SHAPES" "$TYPES" "$counts" "$labels" "$N_PROMPT" "$N_GEN" <<'PY'
import json, os, statistics, sys
out, shapes, types, counts, labels = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
pp, tg = "pp" + sys.argv[6], "tg" + sys.argv[7]
probe = {}
for line in open(os.path.join(out, "probe")):
    t, bw, pool = line.split()
    probe[t] = (float(bw), float(pool))

def rates(shape, typ, t, label):
    """{test: [t/s of each round]} and the file size."""
    got, size, r = {}, 0, 1
    while os.path.exists(p := os.path.join(out, "%s-%s-%s-%s-%d.json" % (shape, typ, t, label, r))):
        try: rows = json.load(open(p))
        except ValueError: rows = []
        for row in rows:
            test = row.get("test") or ("pp%d" % row["n_prompt"] if row["n_prompt"] else "tg%d" % row["n_gen"])
            got.setdefault(test, []).append(row["avg_ts"])
            size = row.get("model_size", size)
        r += 1
    return got, size

def cell(v):
    if not v: return "-"
    return "%.1f" % statistics.mean(v) + (" ±%.0f%%" % (100 * (max(v) - min(v)) / 2 / statistics.mean(v)) if len(v) > 1 else "")

head = "| model | threads | bandwidth GB/s | fork/join us |"
for l in labels: head += " %s %s | %s %s | %s of bw |" % (l, tg, l, pp, l)
if len(labels) > 1:
    for l in labels[1:]: head += " %s/%s %s | %s/%s %s |" % (labels[0], l, tg, labels[0], l, pp)
print(head)
print("|" + " --- |" * (head.count("|") - 1))
for shape in shapes:
    for typ in types:
        for t in counts:
            bw, pool = probe[t]
            row = "| %s %s | %s | %.1f | %.2f |" % (shape, typ, t, bw, pool)
            mean = {}
            for l in labels:
                got, size = rates(shape, typ, t, l)
                mean[l] = {k: statistics.mean(v) for k, v in got.items()}
                share = "%.0f%%" % (100 * mean[l][tg] * size / (bw * 1e9)) if tg in mean[l] and size else "-"
                row += " %s | %s | %s |" % (cell(got.get(tg)), cell(got.get(pp)), share)
            for l in labels[1:]:
                for test in (tg, pp):
                    a, b = mean[labels[0]].get(test), mean[l].get(test)
                    row += " %s |" % ("%.2fx" % (a / b) if a and b else "-")
            print(row)
print("(synthetic checkpoints of the real shapes, quantized by gemma3 quantize; mean of the rounds, ± half their range)")
PY
