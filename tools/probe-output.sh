#!/bin/sh
# tools/probe-output.sh - the hostile output probe of docs/reliability.md, rerunnable:
#   sh tools/probe-output.sh [GEMMA3] [FULLDIR]
# Every command with stdout on a full device, closed, on a full filesystem (FULLDIR: a small
# tmpfs, e.g. `mount -t tmpfs -o size=2m tmpfs DIR`, else skipped) and into `| head -c 1`; every
# file-writing flag pointed at a device node, a FIFO, a link to a descriptor, a symlink and a
# directory. Prints one markdown row per case: what, exit status, the stderr line, verdict.
# Device nodes are private (mknod in a scratch directory), never /dev itself.
G3=${1:-./build/gemma3}
FULLDIR=$2
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
build/tools/gen-checkpoint tiny "$T/m" --seed 7 --tokenizer models/tokenizer.model >/dev/null 2>&1 || exit 1
M=$T/m
mknod "$T/full" c 1 7 && mknod "$T/null" c 1 3 || exit 1
TOKS=$(seq -s, 100 140)
printf 'hello\n' >"$T/msg"

# row WHAT WANT(ok|fail) CMD...: runs CMD (stdin from $T/msg), prints | WHAT | exit | line | verdict |
row() {
    what=$1 want=$2
    shift 2
    "$@" <"$T/msg" 2>"$T/err"
    rc=$?
    line=$(grep '^gemma3:' "$T/err" | head -1 | sed "s|$T|T|g" | cut -c1-110)
    if [ "$want" = ok ]; then v=$([ $rc -eq 0 ] && echo ok || echo WRONG); else v=$([ $rc -ne 0 ] && [ -n "$line" ] && echo ok || echo WRONG); fi
    echo "| $what | $rc | ${line:-} | $v |"
}
echo "| case | exit | stderr | verdict |"
echo "|---|---|---|---|"
for c in "info -m $M" "tokenize -m $M -p hello" "generate -m $M -p hi -n 4 -s 1" \
    "generate -m $M -p hi -n 4 -s 1 --output-format json" "chat -m $M -n 4 -s 1" \
    "perplexity -m $M --tokens $TOKS -c 8" "bench -m $M -p 4 -n 2 -r 1" \
    "eval -m $M --tokens 2,100 --dump-logits /dev/fd/1" "--help"; do
    name=$(echo "$c" | sed "s|$M|M|g; s|$TOKS|100..140|")
    # shellcheck disable=SC2086
    row "\`$name > /dev/full\`" fail sh -c "\"$G3\" $c >\"$T/full\""
    # shellcheck disable=SC2086
    row "\`$name >&-\`" fail sh -c "\"$G3\" $c >&-"
    if [ -n "$FULLDIR" ]; then
        head -c 100000000 /dev/zero >"$FULLDIR/fill" 2>/dev/null
        # shellcheck disable=SC2086
        row "\`$name > full-tmpfs/out\`" fail sh -c "\"$G3\" $c >\"$FULLDIR/out\""
        rm -f "$FULLDIR/fill" "$FULLDIR/out"
    fi
    # shellcheck disable=SC2086
    row "\`$name \| head -c 1\`" ok sh -c "\"$G3\" $c | head -c 1 >/dev/null"
done
mkfifo "$T/fifo"
ln -s real "$T/link"
ln -s /proc/self/fd/1 "$T/stdout-link"
for target in full null fifo stdout-link link DIR; do
    p=$T/$target
    [ $target = DIR ] && p=$T
    want=ok
    case $target in full | DIR) want=fail ;; esac
    [ $target = fifo ] && { cat "$T/fifo" >/dev/null & }
    row "\`eval --dump-logits $target\`" $want sh -c "\"$G3\" eval -m $M --tokens 2,100 --dump-logits \"$p\" >/dev/null"
    [ $target = fifo ] && { cat "$T/fifo" >/dev/null & }
    row "\`perplexity --kl-divergence-base $target\`" $want sh -c "\"$G3\" perplexity -m $M --tokens $TOKS -c 8 --kl-divergence-base \"$p\" >/dev/null"
    # a prompt cache is read back: anything but a regular file (or a link to one) is refused
    [ $target = link ] && pc=ok || pc=fail
    [ $target = link ] && { ln -s pc-real "$T/pc-link"; p=$T/pc-link; }
    row "\`generate --prompt-cache $target\`" $pc sh -c "\"$G3\" -m $M -p hi -n 1 --prompt-cache \"$p\" >/dev/null"
    [ $target = link ] && { [ -L "$T/pc-link" ] && [ -s "$T/pc-real" ] || echo "| prompt cache link replaced | - | - | WRONG |"; }
    wait
done
for target in full fifo; do
    printf 'Hi\n/save %s\n' "$T/$target" >"$T/script"
    row "\`chat /save $target\`" fail sh -c "\"$G3\" chat -m $M -n 2 --commands <\"$T/script\" >/dev/null"
done
kept=$( [ -c "$T/full" ] && [ -c "$T/null" ] && [ -p "$T/fifo" ] && [ -L "$T/link" ] && [ -L "$T/stdout-link" ] && echo yes || echo NO)
echo "| device nodes, FIFO and links still what they were | - | - | $kept |"
if [ -n "$FULLDIR" ]; then
    head -c 100000000 /dev/zero >"$FULLDIR/fill" 2>/dev/null
    row "\`eval --dump-logits full-tmpfs/x\`" fail sh -c "\"$G3\" eval -m $M --tokens 2,100 --dump-logits \"$FULLDIR/x\""
    left=$(ls "$FULLDIR" | grep -v '^fill$' | tr '\n' ' ')
    echo "| files left on the full tmpfs after it | - | ${left:-none} | $([ -z "$left" ] && echo ok || echo WRONG) |"
    rm -f "$FULLDIR/fill"
fi
