#!/bin/sh
# tools/ppl-table.sh - the rows of docs/accuracy.md's table: what each speed choice costs in
# perplexity and in KL divergence from the more exact run, measured with gemma3 perplexity.
#
#   tools/ppl-table.sh NAME DIR C CHUNKS (-f TEXT | --tokens LIST) [model flags, e.g. -t 4]
#
# Bases (--kl-divergence-base): --exact (FP32 activations and cache), --kv-type f32 (BF16
# activations, FP32 cache) and the default (BF16 activations and cache, BF16 weights). Compared:
# default and --kv-type f32 against --exact, the default against --kv-type f32 (the BF16 cache
# alone), -q q8_0 and -q q4_0 against the default. The base files (1 MiB per scored position
# at Gemma's vocabulary) live in a temporary directory that is removed at the end.
set -e
G3=${G3:-build/gemma3}
[ $# -ge 6 ] || { echo "usage: $0 NAME DIR C CHUNKS -f TEXT|--tokens LIST [flags]" >&2; exit 2; }
name=$1 dir=$2 c=$3 chunks=$4 inflag=$5 input=$6
shift 6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# base FILE FLAGS...: saves a base file; prints its PPL
base() {
    f=$1
    shift
    "$G3" perplexity -m "$dir" "$inflag" "$input" -c "$c" --chunks "$chunks" \
        --kl-divergence-base "$tmp/$f" "$@" >"$tmp/$f.out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    sed -n 's/^Final estimate: PPL = \(.*\)$/\1/p' "$tmp/$f.out"
}

# stat LABEL: the value after "LABEL:" in the comparison's output, without its uncertainty
stat() { sed -n "s/^$1 *: *\([-0-9.]*\).*/\1/p" "$tmp/cmp" | head -n 1; }

# row RUN BASE_FILE BASE_LABEL FLAGS...: one table row comparing RUN with the base
row() {
    label=$1 b=$2 bl=$3
    shift 3
    "$G3" perplexity -m "$dir" --kl-divergence-base "$tmp/$b" --kl-divergence "$@" >"$tmp/cmp" \
        2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    printf '| %s | %s | %s | %s | %s | %s | %s | %s %% | %s %% |\n' "$name" "$label" "$bl" \
        "$(stat 'Mean PPL(Q)')" "$(stat 'Mean    KLD')" "$(stat '99.0%   KLD')" \
        "$(stat 'Maximum KLD')" "$(stat 'Same top p')" "$(stat 'RMS Δp    ')"
}

ppl_exact=$(base exact.kld --exact "$@")
ppl_kvf32=$(base kvf32.kld --kv-type f32 "$@")
ppl_default=$(base default.kld "$@")
echo "$name: PPL --exact $ppl_exact, --kv-type f32 $ppl_kvf32, default $ppl_default" >&2
row "default" exact.kld "--exact" "$@"
row "--kv-type f32" exact.kld "--exact" --kv-type f32 "$@"
row "default (bf16 cache)" kvf32.kld "--kv-type f32" "$@"
row "-q q8_0" default.kld "default (bf16)" -q q8_0 "$@"
row "-q q4_0" default.kld "default (bf16)" -q q4_0 "$@"
