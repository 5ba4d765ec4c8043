#!/bin/sh
# tools/bench-omp.sh - the pthread pool build against the OpenMP build (make OPENMP=1), side by
# side (make bench-omp): prefill (ppN) and decode (tgN) on synthetic checkpoints of the real
# shapes, at each thread count, on a quiet machine and with a second process spinning on one core
# (a busy machine, where spin-waiting workers lose the core they wait for). The two builds run in
# turn, ROUNDS times, the first of the pair alternating, so that drifts in the machine's speed
# fall on both; the table gives each build's median t/s and the median of the per-round ratios.
#
#   POOL_BUILD=build OMP_BUILD=build/omp   the two builds' directories (each holds gemma3); make
#                                          bench-omp compares build/omp-pool, the pool built by
#                                          the OpenMP build's compiler (clang and gcc code differ)
#   MODELS=build/bench-models              checkpoints (written once to MODELS/SHAPE if missing)
#   SHAPES="270m 1b" TYPE=bf16             shapes, weight type (-q: quantized at load)
#   THREADS=1,2 LOADS="quiet busy"         thread counts, machine states
#   PP=128 TG=32 REPS=2 ROUNDS=3           test sizes, runs per process, process pairs per cell
POOL_BUILD=${POOL_BUILD:-build}
OMP_BUILD=${OMP_BUILD:-build/omp}
MODELS=${MODELS:-build/bench-models}
SHAPES=${SHAPES:-"270m 1b"}
TYPE=${TYPE:-bf16}
THREADS=${THREADS:-1,2}
LOADS=${LOADS:-"quiet busy"}
PP=${PP:-128}
TG=${TG:-32}
REPS=${REPS:-2}
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d) || exit 1
spinner=
stop_spinner() { [ -z "$spinner" ] || { kill "$spinner" 2>/dev/null; wait "$spinner" 2>/dev/null; spinner=; }; }
trap 'stop_spinner; rm -rf "$out"' EXIT
trap 'exit 1' INT TERM

for b in "$POOL_BUILD" "$OMP_BUILD"; do
    [ -x "$b/gemma3" ] || { echo "bench-omp: no $b/gemma3 (make, make OPENMP=1)"; exit 1; }
done
runtime=$(ldd "$OMP_BUILD/gemma3" 2>/dev/null | sed -n 's/^[[:space:]]*\(lib[g]*omp[^ ]*\) .*/\1/p' | head -n 1)
[ -n "$runtime" ] || { echo "bench-omp: $OMP_BUILD/gemma3 is not linked with an OpenMP runtime"; exit 1; }
if ldd "$POOL_BUILD/gemma3" 2>/dev/null | grep -q 'libgomp\|libomp'; then
    echo "bench-omp: $POOL_BUILD/gemma3 is an OpenMP build, not the pool"
    exit 1
fi

echo "pool: $POOL_BUILD/gemma3; OpenMP: $OMP_BUILD/gemma3 ($runtime$(env | grep '^OMP_\|^GOMP_\|^KMP_' | grep -v '^OMP_BUILD=' | tr '\n' ' ' | sed 's/ $//; s/^./, &/'))"
echo "$(getconf _NPROCESSORS_ONLN) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); -p $PP -n $TG -r $REPS -t $THREADS, $ROUNDS rounds"
for shape in $SHAPES; do
    dir=$MODELS/$shape
    if [ ! -f "$dir/config.json" ]; then
        echo "writing a synthetic $shape checkpoint to $dir (once)"
        build/tools/gen-checkpoint "$shape" "$dir" --seed 1 --tokenizer models/tokenizer.model >/dev/null || exit 1
    fi
    cat "$dir"/*.safetensors >/dev/null
    for load in $LOADS; do
        [ "$load" = busy ] && { sh -c 'while :; do :; done' & spinner=$!; }
        r=1
        while [ $r -le "$ROUNDS" ]; do
            order="pool omp"
            [ $((r % 2)) -eq 0 ] && order="omp pool"
            for which in $order; do
                b=$POOL_BUILD; [ "$which" = omp ] && b=$OMP_BUILD
                "$b/gemma3" bench -m "$dir" -q "$TYPE" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -o json \
                    >"$out/$shape-$load-$which-$r.json" || { echo "bench-omp: $b/gemma3 bench failed on $dir"; exit 1; }
            done
            r=$((r + 1))
        done
        stop_spinner
    done
done

python3 - "$out" "$SHAPES" "$LOADS" "$ROUNDS" <<'PY'
import json, os, statistics, sys
out, shapes, loads, rounds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
def runs(shape, load, which):
    """{(test, threads): [avg_ts of each round]} and the model's name"""
    res, name = {}, ""
    for r in range(1, rounds + 1):
        for row in json.load(open(os.path.join(out, "%s-%s-%s-%d.json" % (shape, load, which, r)))):
            res.setdefault((row["test"], row["n_threads"]), []).append(row["avg_ts"])
            name = row["model_type"]
    return res, name
print("| model | machine | test | threads | pool t/s | OpenMP t/s | OpenMP / pool | ratio range |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
for shape in shapes:
    for load in loads:
        pool, name = runs(shape, load, "pool")
        omp, _ = runs(shape, load, "omp")
        for key in sorted(pool, key=lambda k: (k[0][:2] != "pp", k[1])):
            ratios = [o / p for o, p in zip(omp[key], pool[key])]
            print("| %s | %s | %s | %d | %.2f | %.2f | %.3f | %.2f-%.2f |" % (
                name, load, key[0], key[1], statistics.median(pool[key]), statistics.median(omp[key]),
                statistics.median(ratios), min(ratios), max(ratios)))
print("(medians over %d rounds of one process per build, run in turn; busy: a shell loop spinning on one core)" % rounds)
PY
