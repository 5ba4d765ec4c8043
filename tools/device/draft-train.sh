#!/bin/bash
# tools/device/draft-train.sh - trains the bundled model's draft (models/wordnet-gemma-draft) on
# the device machine's GPU, in the background, so that a CPU phase of threads-run.sh (builds,
# checkpoints) can run beside it. Run from the repository root there.
# Needs .dev/draft-stream/heldout.u16 and train.u16.xz (carried, git-ignored; xz keeps the tree
# that travels under its limit), made here by
#   python3 tools/make-dict-corpus.py /tmp/corpus
#   python3 tools/make-draft-stream.py /tmp/corpus models/wordnet-gemma/tokenizer.model .dev/draft-stream
#   xz -6 .dev/draft-stream/train.u16
# Usage: tools/device/draft-train.sh start NAME [train-draft-model.py flags]   (log: /tmp/draft-NAME.log)
#        tools/device/draft-train.sh wait NAME...   (copies each model and its log to $OUT/NAME/)
case $1 in
  start)
    name=$2; shift 2
    [ -f .dev/draft-stream/train.u16 ] || xz -dk .dev/draft-stream/train.u16.xz || exit 1
    nohup python3 tools/train-draft-model.py .dev/draft-stream /tmp/draft-$name "$@" \
        >/tmp/draft-$name.log 2>&1 &
    echo "training $name: $*" ;;
  wait)
    shift
    for name in "$@"; do
      while ! grep -q -E '^saved|Traceback' /tmp/draft-$name.log 2>/dev/null; do sleep 2; done
      mkdir -p $OUT/$name && cp /tmp/draft-$name.log $OUT/$name/train.log
      cp /tmp/draft-$name/* $OUT/$name/ 2>/dev/null
      tail -4 /tmp/draft-$name.log
    done ;;
esac
