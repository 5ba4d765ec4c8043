#!/bin/sh
# tests/test-cli-options.sh - the option tables, --help and README.md agree: every option a command
# prints in --help (generated from its tables) is documented in README.md, every option in
# README's tables is one a command accepts, and each spelling in --help parses (is not "unknown").
. tests/lib.sh
README=${README:-README.md}
cmds="generate chat bench info eval tokenize quantize perplexity"

# Every spelling of every option line of --help ("  -c, --ctx-size, --ctx N  ..." -> -c --ctx-size
# --ctx), one per line.
spellings() {
    "$G3" "$1" --help | sed -n 's/^ \{1,7\}\(-[^ ].*\)$/\1/p' | sed 's/^ *//; s/  .*//' |
        sed 's/ [A-Z][A-Z0-9_|()+-]*$//; s/ *$//' | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep '^-'
}

: >"$TMP/all"
for c in $cmds; do
    spellings "$c" >"$TMP/$c" || { bad "$c --help failed"; continue; }
    [ -s "$TMP/$c" ] || bad "$c --help lists no options"
    cat "$TMP/$c" >>"$TMP/all"
done
sort -u "$TMP/all" -o "$TMP/all"

# --help -> README: each spelling appears in a README table row's option cell.
grep '^| `-' "$README" | cut -d'`' -f2 >"$TMP/readme-cells"
while read -r flag; do
    if grep -qE -- "(^|, )$flag( |,|$)" "$TMP/readme-cells"; then ok; else bad "README.md does not document $flag"; fi
done <"$TMP/all"

# README -> --help: each spelling in a README option cell is one some command prints.
tr ',' '\n' <"$TMP/readme-cells" | sed 's/^ *//; s/ .*//' | grep '^-' | sort -u >"$TMP/readme-flags"
while read -r flag; do
    if grep -qxF -- "$flag" "$TMP/all"; then ok; else bad "README.md documents $flag, which no command takes"; fi
done <"$TMP/readme-flags"

# Each spelling is parsed by its command: never "unknown" (a value or a missing model may fail).
for c in $cmds; do
    while read -r flag; do
        "$G3" "$c" "$flag" 1 >/dev/null 2>"$TMP/err"
        if grep -qF -- "unknown flag '$flag'" "$TMP/err" || grep -qF -- "unknown option '$flag'" "$TMP/err"; then
            bad "$c $flag: $(cat "$TMP/err")"
        else
            ok
        fi
    done <"$TMP/$c"
done

# The tables' count: at least every flag the model and sampling groups had before the tables
for flag in -m -q -t -c -b --exact --kv-type --isa --mmap --no-mmap -v --temp --top-k --top-p \
    --min-p --seed --samplers --sampling-seq --sampler-mode --dry-sequence-breaker -l; do
    if grep -qxF -- "$flag" "$TMP/generate"; then ok; else bad "generate --help lacks $flag"; fi
done
report
