#!/bin/sh
# tools/bench-model.sh - end-to-end speed (pp512, tg128) on synthetic checkpoints of the real
# Gemma 3 shapes (seeded random BF16 weights), for each weight type, against the memory-bandwidth
# limit measured in the same run and, when a llama.cpp build is given, against llama-bench on the
# same checkpoints in the same run.
#
#   SHAPES="270m 1b"         checkpoint shapes (written once to $BUILD/bench-models/SHAPE)
#   TYPES="bf16 q8_0 q4_0"   weight types (-q: Q8_0/Q4_0 quantized at load)
#   THREADS=2 REPS=3         threads and timed repetitions
#   LLAMA_BENCH=path         llama.cpp's llama-bench; it reads $BUILD/bench-models/SHAPE-TYPE.gguf,
#                            made by ../shared/tools/anchor-llamacpp.sh gguf $BUILD/bench-models/SHAPE
#
#   LOAD_MODES="auto mmap no-mmap"  load modes timed for the load rows (empty: none)
#   PPL=1                    also time a perplexity pass (-c 512 --chunks 2: 1,024 tokens of
#                            tests/data/ppl-sample.txt three times over) against pp512 (0: not)
#
# Decode reads every weight once per token, so bandwidth / weight bytes is the decode limit.
# The load rows time bringing the BF16 checkpoint in (gemma3 bench's load_s: reading, or mapping
# and faulting in) with the file in the page cache (warm) and, where /proc/sys/vm/drop_caches
# may be written (root), after dropping the page cache (cold).
BUILD=${BUILD:-build}
SHAPES=${SHAPES:-"270m 1b"}
TYPES=${TYPES:-"bf16 q8_0 q4_0"}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
LOAD_MODES=${LOAD_MODES-"auto mmap no-mmap"}
PPL=${PPL:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat tests/data/ppl-sample.txt tests/data/ppl-sample.txt tests/data/ppl-sample.txt >"$out/ppl.txt"

bw=$("$BUILD/tools/bench-kernels" --bandwidth "$THREADS") || { echo "bench-kernels --bandwidth failed"; exit 1; }
echo "memory read bandwidth, $THREADS threads, measured now: $bw GB/s"
for shape in $SHAPES; do
    dir=$BUILD/bench-models/$shape
    if [ ! -f "$dir/config.json" ]; then
        echo "writing a synthetic $shape checkpoint to $dir (once)"
        "$BUILD/tools/gen-checkpoint" "$shape" "$dir" --seed 1 --tokenizer models/tokenizer.model >/dev/null || exit 1
    fi
    for mode in $LOAD_MODES; do
        flag=; [ "$mode" = auto ] || flag=--$mode
        cat "$dir"/*.safetensors >/dev/null
        "$BUILD/gemma3" bench -m "$dir" $flag -p 0 -n 1 -r 1 -t "$THREADS" -o json \
            >"$out/$shape-load-$mode-warm.json" || exit 1
        if sync && echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then
            "$BUILD/gemma3" bench -m "$dir" $flag -p 0 -n 1 -r 1 -t "$THREADS" -o json \
                >"$out/$shape-load-$mode-cold.json" || exit 1
        fi
    done
    for type in $TYPES; do
        "$BUILD/gemma3" bench -m "$dir" -q "$type" -p 512 -n 128 -r "$REPS" -t "$THREADS" -o json \
            >"$out/$shape-$type.json" || exit 1
        if [ "$PPL" = 1 ]; then
            "$BUILD/gemma3" perplexity -m "$dir" -q "$type" -f "$out/ppl.txt" -c 512 --chunks 2 \
                -t "$THREADS" -v 2>&1 >/dev/null | sed -n 's/.*forward \([0-9.]*\) s, scoring \([0-9.]*\) s.*/\1 \2/p' \
                >"$out/$shape-$type.ppl" || exit 1
        fi
        gguf=$BUILD/bench-models/$shape-$type.gguf
        if [ -n "$LLAMA_BENCH" ] && [ -f "$gguf" ]; then
            "$LLAMA_BENCH" -m "$gguf" -p 512 -n 128 -r "$REPS" -t "$THREADS" -o json \
                >"$out/$shape-$type.llama.json" 2>/dev/null || echo "llama-bench failed on $gguf"
        fi
    done
done
python3 - "$out" "$bw" "$SHAPES" "$TYPES" "$LOAD_MODES" <<'PY'
import json, os, sys
out, bw, shapes, types, modes = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
def load(path):
    return {r["test"]: r for r in json.load(open(path))} if os.path.exists(path) else {}
def llama_rows(path):
    if not os.path.exists(path): return {}
    rows = {}
    for r in json.load(open(path)):
        rows["pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]] = r
    return rows
if modes:
    print("| model | load | page cache | mode chosen | seconds | GB/s |")
    print("| --- | --- | --- | --- | ---: | ---: |")
    for shape in shapes:
        for m in modes:
            for cache in ("warm", "cold"):
                p = os.path.join(out, "%s-load-%s-%s.json" % (shape, m, cache))
                if not os.path.exists(p): continue
                r = json.load(open(p))[0]
                gbs = r["load_bytes"] / 1e9 / r["load_s"] if r["load_s"] > 0 else 0
                print("| %s | %s | %s | %s | %.2f | %.2f |" % (r["model_type"], m, cache, r["load_mode"], r["load_s"], gbs))
    print()
print("| model | test | gemma3 t/s | llama.cpp t/s | vs llama.cpp | GB/s read | of the bandwidth limit |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for shape in shapes:
    for t in types:
        ours = load(os.path.join(out, "%s-%s.json" % (shape, t)))
        llama = llama_rows(os.path.join(out, "%s-%s.llama.json" % (shape, t)))
        for test in ("pp512", "tg128"):
            r = ours.get(test)
            if not r: continue
            l = llama.get(test)
            lt = "%.2f" % l["avg_ts"] if l else "-"
            ratio = "%.2fx" % (r["avg_ts"] / l["avg_ts"]) if l else "-"
            gbs = limit = ""
            if r["n_gen"]:
                gbs = "%.1f" % (r["avg_ts"] * r["model_size"] / 1e9)
                limit = "%.0f%% (%.1f t/s)" % (100 * r["avg_ts"] * r["model_size"] / (bw * 1e9), bw * 1e9 / r["model_size"])
            print("| %s (%s) | %s | %.2f ± %.2f | %s | %s | %s | %s |" % (r["model_type"], r["load_mode"], test, r["avg_ts"], r["stddev_ts"], lt, ratio, gbs, limit))
print("(synthetic checkpoints of the real shapes; Q8_0/Q4_0 quantized at load; bandwidth %.1f GB/s measured in this run)" % bw)
ppl = [(shape, t) for shape in shapes for t in types if os.path.exists(os.path.join(out, "%s-%s.ppl" % (shape, t)))]
if ppl:
    print()
    print("| model | perplexity pass, 1,024 tokens | t/s | pp512 t/s | of pp512 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for shape, t in ppl:
        fields = open(os.path.join(out, "%s-%s.ppl" % (shape, t))).read().split()
        r = load(os.path.join(out, "%s-%s.json" % (shape, t))).get("pp512")
        if len(fields) != 2 or not r: continue
        secs = float(fields[0]) + float(fields[1])
        print("| %s | %.3f s | %.1f | %.1f | %.0f%% |" % (r["model_type"], secs, 1024 / secs, r["avg_ts"], 100 * 1024 / secs / r["avg_ts"]))
PY
