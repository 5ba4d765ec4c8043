#!/bin/sh
# make-models.sh - writes the synthetic checkpoint models/tiny (the `tiny` preset: H 64,
# 7 layers, window 8, the real 262144-piece tokenizer, seed 1) if it is not there yet.
# Used by `make models` (the bundled trained model, models/wordnet-gemma, is in git).
set -e
BUILD=${BUILD:-build}
out=models/tiny
if [ -f "$out/config.json" ] && [ -f "$out/model.safetensors" ] && [ -f "$out/tokenizer.model" ]; then
    echo "$out: already present"
    exit 0
fi
"$BUILD/tools/gen-checkpoint" tiny "$out" --seed 1 --tokenizer models/tokenizer.model
echo "$out: written (synthetic random weights, real tokenizer)"
