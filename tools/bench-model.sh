#!/bin/sh
# tools/bench-model.sh - end-to-end speed on a synthetic 1B-shaped checkpoint (real Gemma 3 1B
# shapes, seeded random BF16 weights), against the project's targets on these machines:
# decode at 85% of the memory-bandwidth limit, prefill of 512 tokens at 1.2x llama.cpp.
# BW_GBS is the machine's read bandwidth (GB/s; default 67, this machine kind's figure);
# the reference llama.cpp figures are those measured on the same machine kind.
BUILD=${BUILD:-build}
BW_GBS=${BW_GBS:-67}
LLAMA_TG=22
LLAMA_PP=279
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-3}
dir=$BUILD/bench-models/1b
if [ ! -f "$dir/config.json" ]; then
    echo "writing a synthetic 1b checkpoint to $dir (2 GB, once)"
    "$BUILD/tools/gen-checkpoint" 1b "$dir" --seed 1 --tokenizer models/tokenizer.model >/dev/null || exit 1
fi
out=$(mktemp)
"$BUILD/gemma3" bench -m "$dir" -p 512 -n 128 -r "$REPS" -t "$THREADS" -o json >"$out" || { rm -f "$out"; exit 1; }
python3 - "$out" "$BW_GBS" "$LLAMA_TG" "$LLAMA_PP" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
bw, llama_tg, llama_pp = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
size = rows[0]["model_size"]
limit = bw * 1e9 / size
print("| test | threads | t/s | target | ratio |")
print("| --- | ---: | ---: | --- | ---: |")
for r in rows:
    ts, sd = r["avg_ts"], r["stddev_ts"]
    if r["n_gen"]:
        print("| %s | %d | %.2f ± %.2f | 85%% of %.1f t/s bandwidth limit (%.1f t/s); llama.cpp %g | %.0f%% of limit, %.2fx llama.cpp |"
              % (r["test"], r["n_threads"], ts, sd, limit, 0.85 * limit, llama_tg, 100 * ts / limit, ts / llama_tg))
    else:
        print("| %s | %d | %.2f ± %.2f | 1.2x llama.cpp %g = %.0f t/s | %.2fx llama.cpp |"
              % (r["test"], r["n_threads"], ts, sd, llama_pp, 1.2 * llama_pp, ts / llama_pp))
print("(synthetic 1B-shaped checkpoint, %.2f GB of weights read per decoded token; bandwidth %g GB/s)" % (size / 1e9, bw))
PY
rm -f "$out"
