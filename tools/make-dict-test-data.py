#!/usr/bin/env python3
"""make-dict-test-data.py - the held-out inputs of the wordnet-gemma fidelity tests, from the
corpus of tools/make-dict-corpus.py and the model's tokenizer.model (SentencePiece itself).

    tools/make-dict-test-data.py CORPUS_DIR TOKENIZER.model OUT_DIR

writes into OUT_DIR (tests/data/wordnet-gemma/):
  heldout.txt          the first PPL_DOCS held-out plain documents (the perplexity text)
  heldout.ids          SentencePiece's ids of heldout.txt (no <bos>), comma-separated
  prompts.json         N_PLAIN plain prompts ("word (pos):" of held-out entries after the
                       perplexity text, <bos> first) and N_CHAT chat prompts (the first question
                       of held-out conversations, in Gemma 3's chat format), each {name, text, ids}
  chat.json            a multi-turn conversation for the chat-template comparison
  chat_template.jinja  Gemma 3's chat template (copied from --template)
  words.txt            the lowercase words used at least MIN_WORD_COUNT times in the training
                       text (the chat test's dictionary)
tools/train-dict-model.py then adds refs.json (transformers' outputs) on the GPU machine.
Needs python3-sentencepiece (Debian).
"""
import collections
import json
import os
import re
import sys

import sentencepiece as spm

PPL_DOCS = 60
N_PLAIN = 24
N_CHAT = 6
MIN_WORD_COUNT = 40
TEMPLATE = "/work/shared/tokenizer/chat_template.jinja"

CONVERSATION = [
    {"role": "system", "content": "You are a dictionary. Answer briefly."},
    {"role": "user", "content": 'What does "harbor" mean?'},
    {"role": "assistant",
     "content": '"harbor" is a noun: a sheltered port where ships can take on or discharge cargo.'},
    {"role": "user", "content": '  Use "lantern" in a sentence.\n'},
    {"role": "assistant", "content": "He carried a lantern into the dark cellar.  "},
    {"role": "user", "content": 'What is another word for "happy"?'},
]


def write(path, text):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: make-dict-test-data.py CORPUS_DIR TOKENIZER.model OUT_DIR [TEMPLATE]")
    corpus, tok, out = sys.argv[1:4]
    template = sys.argv[4] if len(sys.argv) == 5 else TEMPLATE
    sp = spm.SentencePieceProcessor(model_file=tok)
    os.makedirs(out, exist_ok=True)
    docs = open(os.path.join(corpus, "heldout-plain.txt"), encoding="utf-8").read().split("\n\n")
    text = "\n\n".join(docs[:PPL_DOCS]) + "\n"
    write(os.path.join(out, "heldout.txt"), text)
    write(os.path.join(out, "heldout.ids"), ",".join(map(str, sp.encode(text))) + "\n")

    prompts = []
    entries = [e for d in docs[PPL_DOCS:] for e in d.split("\n") if "): " in e]
    step = len(entries) // N_PLAIN
    for i in range(N_PLAIN):
        e = entries[i * step]
        head = e[:e.index("): ") + 2]
        prompts.append({"name": "plain-%02d" % i, "text": head, "ids": [2] + sp.encode(head)})
    chats = open(os.path.join(corpus, "heldout-chat.txt"), encoding="utf-8").read().split("\f\n")
    step = len(chats) // N_CHAT
    for i in range(N_CHAT):
        first = chats[i * step].split("<start_of_turn>model\n")[0] + "<start_of_turn>model\n"
        prompts.append({"name": "chat-%02d" % i, "text": first, "ids": [2] + sp.encode(first)})
    write(os.path.join(out, "prompts.json"), json.dumps(prompts, indent=1, ensure_ascii=False))
    write(os.path.join(out, "chat.json"), json.dumps(CONVERSATION, indent=1, ensure_ascii=False))
    write(os.path.join(out, "chat_template.jinja"), open(template, encoding="utf-8").read())

    counts = collections.Counter()
    for name in ("train-plain.txt", "train-chat.txt"):
        for w in re.findall(r"[A-Za-z]+", open(os.path.join(corpus, name), encoding="utf-8").read()):
            counts[w.lower()] += 1
    words = sorted(w for w, n in counts.items() if n >= MIN_WORD_COUNT)
    write(os.path.join(out, "words.txt"), "\n".join(words) + "\n")
    print("%s: %d perplexity tokens, %d prompts, %d words"
          % (out, len(sp.encode(text)) + 1, len(prompts), len(words)))


if __name__ == "__main__":
    main()
