#!/usr/bin/env python3
"""make-draft-stream.py - the training token stream of the bundled model's draft
(models/wordnet-gemma-draft), tokenized here by gemma3's own tokenizer (which matches
SentencePiece id for id) so that the training machine needs neither sentencepiece nor the corpus.

usage: tools/make-draft-stream.py CORPUS TOKENIZER_MODEL OUTDIR [--gemma3 build/gemma3] [--seed 1]
CORPUS is tools/make-dict-corpus.py's output. Writes OUTDIR/train.u16 and OUTDIR/heldout.u16:
little-endian uint16 ids, documents as tools/train-dict-model.py streams them (plain documents
split on blank lines as <bos> text <eos>, conversations split on form feeds as <bos> chat,
shuffled with the seed)."""
import argparse, array, json, os, random, subprocess, sys

BOS, EOS = 2, 1


def encode(gemma3, tokenizer, path, sep):
    docs = [d for d in open(path, encoding="utf-8").read().split(sep) if d.strip()]
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs)
    out = subprocess.run([gemma3, "tokenize", "-m", tokenizer, "--jsonl"], input=lines.encode(),
                         stdout=subprocess.PIPE, check=True).stdout.decode().splitlines()
    assert len(out) == len(docs), (path, len(out), len(docs))
    return [json.loads(l)["ids"] for l in out]


def stream(gemma3, tokenizer, corpus, plain, chat, seed):
    docs = [[BOS] + d + [EOS] for d in encode(gemma3, tokenizer, os.path.join(corpus, plain), "\n\n")]
    docs += [[BOS] + d for d in encode(gemma3, tokenizer, os.path.join(corpus, chat), "\f\n")]
    random.Random(seed).shuffle(docs)
    a = array.array("H", (t for d in docs for t in d))
    if sys.byteorder != "little":
        a.byteswap()
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--gemma3", default="build/gemma3")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, plain, chat in (("train", "train-plain.txt", "train-chat.txt"),
                              ("heldout", "heldout-plain.txt", "heldout-chat.txt")):
        s = stream(a.gemma3, a.tokenizer, a.corpus, plain, chat, a.seed)
        with open(os.path.join(a.out, name + ".u16"), "wb") as f:
            s.tofile(f)
        print("%s: %d tokens" % (name, len(s)))


if __name__ == "__main__":
    main()
