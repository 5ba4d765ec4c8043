#!/bin/sh
# tests/test-cli-options.sh - the option tables, --help, docs/cli.md and README.md agree: every
# option a command prints in --help (generated from its tables) is documented in docs/cli.md,
# every option in the tables of docs/cli.md and README.md is one a command accepts, and each
# spelling in --help parses (is not "unknown").
. tests/lib.sh
REFERENCE=${REFERENCE:-docs/cli.md}
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

# --help -> docs/cli.md: each spelling appears in a table row's option cell.
grep '^| `-' "$REFERENCE" | cut -d'`' -f2 >"$TMP/ref-cells"
while read -r flag; do
    if grep -qE -- "(^|, )$flag( |,|$)" "$TMP/ref-cells"; then ok; else bad "$REFERENCE does not document $flag"; fi
done <"$TMP/all"

# docs/cli.md and README -> --help: each spelling in an option cell is one some command prints.
for doc in "$REFERENCE" "$README"; do
    grep '^| `-' "$doc" | cut -d'`' -f2 | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep '^-' | sort -u >"$TMP/doc-flags"
    [ -s "$TMP/doc-flags" ] || bad "$doc has no option table"
    while read -r flag; do
        if grep -qxF -- "$flag" "$TMP/all"; then ok; else bad "$doc documents $flag, which no command takes"; fi
    done <"$TMP/doc-flags"
done

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

# The rows whose text is built from the library's lists (the samplers' names and letters, from
# their descriptors): docs/cli.md holds --help's text, so a sampler added shows in both.
help_of() { # the help text of the option line "$1" (spellings and value) in generate --help
    "$G3" generate --help | awk -v o="$1" '
        found { sub(/^ +/, ""); print; exit }
        { line = $0; sub(/^ +/, "", line) }
        index(line, o) == 1 && (length(line) == length(o) || substr(line, length(o) + 1, 2) == "  ") {
            rest = substr(line, length(o) + 1); sub(/^ +/, "", rest)
            if (rest != "") { print rest; exit }
            found = 1
        }'
}
for row in "--samplers LIST" "--sampling-seq, --sampler-seq LETTERS"; do
    want=$(help_of "$row")
    got=$(grep -F "| \`$row\` | " "$REFERENCE" | sed 's/^| `[^`]*` | //; s/ |$//')
    if [ -n "$want" ] && [ "$want" = "$got" ]; then ok; else bad "$REFERENCE's $row: '$got', --help: '$want'"; fi
done

# The tables' count: at least every flag the model and sampling groups had before the tables
for flag in -m -q -t -c -b --exact --kv-type --isa --mmap --no-mmap -v --temp --top-k --top-p \
    --min-p --seed --samplers --sampling-seq --sampler-mode --dry-sequence-breaker -l; do
    if grep -qxF -- "$flag" "$TMP/generate"; then ok; else bad "generate --help lacks $flag"; fi
done
report
