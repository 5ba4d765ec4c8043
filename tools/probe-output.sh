#!/bin/sh
# tools/probe-output.sh - the hostile output probe of docs/reliability.md, rerunnable:
#   sh tools/probe-output.sh [GEMMA3] [FULLDIR]
# Every command with stdout on a full device, closed, on a full filesystem (FULLDIR: a small
# tmpfs, e.g. `mount -t tmpfs -o size=2m tmpfs DIR`, else skipped) and into `| head -c 1`; every
# file-writing flag pointed at a device node, a FIFO, a link to a descriptor, a symlink and a
# directory (and quantize -o FILE.gguf at each); inputs that are FIFOs with no writer; grammars of
# 100,000 rules and of 100,000 nested groups; Ctrl-C in perplexity and bench. Prints one markdown
# row per case: what, exit status, the stderr line, verdict.
# Device nodes are private (mknod in a scratch directory), never /dev itself. A FIFO's reader
# gives up after 30 s (a writer that replaced the FIFO leaves it waiting).
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
    [ $target = fifo ] && { timeout 30 cat "$T/fifo" >/dev/null & }
    row "\`eval --dump-logits $target\`" $want sh -c "\"$G3\" eval -m $M --tokens 2,100 --dump-logits \"$p\" >/dev/null"
    [ $target = fifo ] && { timeout 30 cat "$T/fifo" >/dev/null & }
    row "\`perplexity --kl-divergence-base $target\`" $want sh -c "\"$G3\" perplexity -m $M --tokens $TOKS -c 8 --kl-divergence-base \"$p\" >/dev/null"
    # a prompt cache is read back: anything but a regular file (or a link to one) is refused
    [ $target = link ] && pc=ok || pc=fail
    [ $target = link ] && { ln -s pc-real "$T/pc-link"; p=$T/pc-link; }
    row "\`generate --prompt-cache $target\`" $pc sh -c "\"$G3\" -m $M -p hi -n 1 --prompt-cache \"$p\" >/dev/null"
    [ $target = link ] && { [ -L "$T/pc-link" ] && [ -s "$T/pc-real" ] || echo "| prompt cache link replaced | - | - | WRONG |"; }
    wait
done
# quantize -o FILE.gguf: the same rule (a link named .gguf to each target)
for target in full null fifo stdout-link link; do
    ln -s "$target" "$T/$target.gguf"
    want=ok
    [ $target = full ] && want=fail
    [ $target = fifo ] && { timeout 30 cat "$T/fifo" >/dev/null & }
    row "\`quantize -o $target.gguf\`" $want sh -c "\"$G3\" quantize -m $M -o \"$T/$target.gguf\" --type q8_0 >/dev/null"
    wait
done
links=$(for target in full null fifo stdout-link link; do [ -L "$T/$target.gguf" ] || printf '%s.gguf ' $target; done)
echo "| the .gguf links still links after it | - | ${links:+replaced: }$links | $([ -z "$links" ] && echo ok || echo WRONG) |"
row "\`quantize -o DIR.gguf\`" fail sh -c "mkdir \"$T/d.gguf\" && \"$G3\" quantize -m $M -o \"$T/d.gguf\" --type q8_0"
for target in full fifo; do
    printf 'Hi\n/save %s\n' "$T/$target" >"$T/script"
    row "\`chat /save $target\`" fail sh -c "\"$G3\" chat -m $M -n 2 --commands <\"$T/script\" >/dev/null"
done
# inputs that are FIFOs with no writer: refused at once, never waited on (timeout 10: 124 = hung)
mkdir "$T/ff"
for f in config.json tokenizer.model generation_config.json model.safetensors; do
    cp "$M"/* "$T/ff/" && rm "$T/ff/$f" && mkfifo "$T/ff/$f"
    row "\`-m DIR\` with a FIFO as $f" fail timeout 10 "$G3" -m "$T/ff" -p hi -n 1
    rm -f "$T/ff"/*
done
mkfifo "$T/in-fifo"
row "\`perplexity --kl-divergence-base FIFO --kl-divergence\`" fail timeout 10 "$G3" perplexity -m $M --tokens $TOKS -c 8 --kl-divergence-base "$T/in-fifo" --kl-divergence
row "\`chat --resume FIFO\`" fail timeout 10 "$G3" chat -m $M --resume "$T/in-fifo"
printf '/load %s\n' "$T/in-fifo" >"$T/script"
row "\`chat /load FIFO\`" fail sh -c "timeout 10 \"$G3\" chat -m $M --commands <\"$T/script\" >/dev/null"
mkdir "$T/q" && cp "$M"/* "$T/q/" && rm "$T/q/generation_config.json" && mkfifo "$T/q/generation_config.json"
row "\`quantize\` of a checkpoint with a FIFO beside the weights" fail timeout 10 "$G3" quantize -m "$T/q" -o "$T/q8" --type q8_0
# grammars at scale (tools/gen-grammar.py): parsed and run, seconds in the row
for g in "chain 100000" "nest 100000"; do
    # shellcheck disable=SC2086
    python3 tools/gen-grammar.py $g >"$T/g.gbnf"
    t0=$(date +%s.%N)
    timeout 60 "$G3" -m $M -p hi -n 8 -s 1 --grammar-file "$T/g.gbnf" >/dev/null 2>"$T/err"
    rc=$?
    secs=$(echo "$(date +%s.%N) - $t0" | bc | sed 's/^\./0./' | cut -c1-4)
    line=$(grep '^gemma3:' "$T/err" | head -1 | cut -c1-110)
    echo "| \`generate --grammar-file\` $g ($(wc -c <"$T/g.gbnf") bytes): $secs s in all | $rc | $line | $([ $rc -eq 0 ] && echo ok || echo WRONG) |"
done
# Ctrl-C inside a pass of about 2 s (a 33M synthetic model, vocabulary 4096, 1 thread): stopped
# within 0.5 s, by SIGINT (tests/interrupt_run.py prints how long it took)
build/tools/gen-checkpoint tiny "$T/s" --seed 3 --vocab 4096 --hidden 512 --intermediate 2048 \
    --layers 8 --heads 8 --kv-heads 2 --head-dim 64 >/dev/null 2>&1
IDS=$(python3 -c "print(','.join(str(2 + (i * 37) % 4000) for i in range(12000)))")
mkdir "$T/kb"
for c in "perplexity;[1];--tokens $IDS -c 3000 -t 1" "perplexity --kl-divergence-base;[1];--tokens $IDS -c 3000 -t 1 --kl-divergence-base $T/kb/base.kld" \
    "bench;| gemma3;-p 2048 -n 0 -d 0,2048 -r 3 -t 1"; do
    name=${c%%;*} rest=${c#*;} ready=${rest%%;*} args=${rest#*;}
    sub=${name%% *}
    # shellcheck disable=SC2086
    took=$(python3 tests/interrupt_run.py "$ready" 0.3 0.5 "$T/o" "$T/e" -- "$G3" $sub -m "$T/s" $args)
    rc=$?
    line=$(grep '^gemma3:' "$T/e" | head -1 | sed "s|$T|T|g" | cut -c1-110)
    # ok: ended by SIGINT within 0.5 s, after a line saying what the figures printed cover
    echo "| Ctrl-C in \`$name\` ($took) | SIGINT | $line | $([ $rc -eq 0 ] && echo "$line" | grep -q interrupted && echo ok || echo WRONG) |"
done
python3 -c "print(' '.join('word%d' % i for i in range(900)))" >"$T/long.txt"
printf 'Hi\n' | "$G3" chat -m $M -t 2 -n 8 -s 5 >"$T/want" 2>/dev/null
took=$(python3 tests/interrupt_prefill.py "$T/long.txt" "$T/want" -- "$G3" chat -m $M -t 1 -n 8 -s 5)
rc=$?
echo "| Ctrl-C in a \`chat\` prefill ($(echo "$took" | head -1)) | - | [interrupted before the reply: the message is dropped] | $([ $rc -eq 0 ] && echo ok || echo WRONG) |"
echo "| KL base files left after the Ctrl-C | - | $(ls -A "$T/kb" | tr '\n' ' ') | $([ -z "$(ls -A "$T/kb")" ] && echo ok || echo WRONG) |"
kept=$( [ -c "$T/full" ] && [ -c "$T/null" ] && [ -p "$T/fifo" ] && [ -L "$T/link" ] && [ -L "$T/stdout-link" ] && echo yes || echo NO)
echo "| device nodes, FIFO and links still what they were | - | - | $kept |"
if [ -n "$FULLDIR" ]; then
    head -c 100000000 /dev/zero >"$FULLDIR/fill" 2>/dev/null
    row "\`eval --dump-logits full-tmpfs/x\`" fail sh -c "\"$G3\" eval -m $M --tokens 2,100 --dump-logits \"$FULLDIR/x\""
    left=$(ls "$FULLDIR" | grep -v '^fill$' | tr '\n' ' ')
    echo "| files left on the full tmpfs after it | - | ${left:-none} | $([ -z "$left" ] && echo ok || echo WRONG) |"
    rm -f "$FULLDIR/fill"
fi
