#!/usr/bin/env python3
"""make-dict-corpus.py - English training text for the bundled dictionary model (models/wordnet-gemma).

Reads WordNet 3.0 (Debian package wordnet-base, /usr/share/wordnet/data.{noun,verb,adj,adv}) and
writes, into OUTDIR:

  train-plain.txt   dictionary entries, one per line, in documents of ENTRIES_PER_DOC entries
                    separated by a blank line ("word (noun): gloss. Example: ...")
  train-chat.txt    Gemma 3 chat conversations (1-3 question/answer turns each), separated by a
                    line holding only "\\f" (the training script splits on it): a user asks what a
                    word means, for a sentence using it or for another word for it; the model
                    answers from the gloss, the examples and the synonyms
  heldout-plain.txt the held-out synsets' entries, in the same form as train-plain.txt
  heldout-chat.txt  the held-out synsets' conversations
  spm-input.txt     the text the tokenizer is trained on (training plain + chat text, markers
                    written as the user-defined pieces)

A synset is held out when md5("pos offset") mod 100 < HELDOUT_PERCENT, so the split depends on
nothing but WordNet itself; training never sees a held-out gloss (a word can still appear in
another synset's entry, as in any dictionary). Deterministic: the same WordNet gives the same files.

usage: tools/make-dict-corpus.py OUTDIR [--wordnet DIR]
"""
import argparse
import hashlib
import os
import random
import re
import sys

HELDOUT_PERCENT = 3
ENTRIES_PER_DOC = 8
POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
FILES = ["data.noun", "data.verb", "data.adj", "data.adv"]


def parse_data_line(line):
    """One synset: (pos, offset, words, definition, examples) or None for the licence header."""
    if line.startswith("  "):
        return None
    head, _, gloss = line.partition(" | ")
    f = head.split()
    offset, pos, n_words = f[0], f[2], int(f[3], 16)
    words = []
    for i in range(n_words):
        w = f[4 + 2 * i]
        w = re.sub(r"\((a|p|ip)\)$", "", w)  # adjective position markers
        words.append(w.replace("_", " "))
    gloss = gloss.strip()
    parts = re.split(r';\s*(?=")', gloss)
    definition = parts[0].strip().rstrip(";").strip()
    examples = []
    for p in parts[1:]:
        p = p.strip().rstrip(";").strip()
        m = re.match(r'^"(.*)"$', p)
        examples.append(m.group(1).strip() if m else p)
    return pos, offset, words, definition, [e for e in examples if e]


def held_out(pos, offset):
    h = hashlib.md5(("%s %s" % (pos, offset)).encode()).digest()
    return int.from_bytes(h[:4], "little") % 100 < HELDOUT_PERCENT


def sentence(s):
    """An example as a sentence: capital first letter, closing punctuation."""
    s = s.strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    if s[-1] not in ".!?\"'":
        s += "."
    return s


def plain_entry(pos, words, definition, examples):
    text = "%s (%s): %s." % (words[0], POS_NAME[pos], definition)
    if len(words) > 1:
        text += " Synonyms: %s." % ", ".join(words[1:])
    for e in examples:
        text += ' Example: "%s"' % e
    return text


def meaning_answer(pos, word, definition, examples, synonyms):
    if pos == "v":
        a = "To %s is to %s." % (word, definition)
    elif pos == "n":
        a = '"%s" is a noun: %s.' % (word, definition)
    else:
        a = '"%s" is %s meaning %s.' % (word, "an adjective" if pos in "as" else "an adverb",
                                         definition)
    if examples:
        a += ' For example: "%s"' % sentence(examples[0])
    if synonyms:
        a += " Other words for it: %s." % ", ".join(synonyms)
    return a


MEANING_QUESTIONS = ['What does "{w}" mean?', 'What is the meaning of the word "{w}"?',
                     'Define "{w}".', 'What does the word "{w}" mean?', 'Explain "{w}".']
SENTENCE_QUESTIONS = ['Use "{w}" in a sentence.', 'Give me an example with "{w}".',
                      'Can you use the word "{w}" in a sentence?']
SYNONYM_QUESTIONS = ['What is another word for "{w}"?', 'Give me a synonym of "{w}".']


def qa_pairs(rng, pos, words, definition, examples):
    """The question/answer pairs one synset can give."""
    w = words[0]
    pairs = [(rng.choice(MEANING_QUESTIONS).format(w=w),
              meaning_answer(pos, w, definition, examples, words[1:]))]
    uses = [e for e in examples if w.lower() in e.lower()]
    if uses:
        pairs.append((rng.choice(SENTENCE_QUESTIONS).format(w=w), sentence(uses[0])))
    if len(words) > 1:
        others = ", ".join('"%s"' % x for x in words[1:])
        pairs.append((rng.choice(SYNONYM_QUESTIONS).format(w=w),
                      'Another word for "%s" is %s.' % (w, others)))
    return pairs


def conversation(turns):
    return "".join("<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n%s<end_of_turn>\n"
                   % (q, a) for q, a in turns)


def build(synsets, rng):
    """(plain documents, chat conversations) of a list of synsets."""
    entries = [plain_entry(pos, words, d, ex) for pos, _, words, d, ex in synsets]
    docs = ["\n".join(entries[i:i + ENTRIES_PER_DOC])
            for i in range(0, len(entries), ENTRIES_PER_DOC)]
    pairs = []
    for pos, _, words, d, ex in synsets:
        pairs.extend(qa_pairs(rng, pos, words, d, ex))
    rng.shuffle(pairs)
    chats = []
    i = 0
    while i < len(pairs):
        n = rng.choice([1, 2, 2, 3])
        chats.append(conversation(pairs[i:i + n]))
        i += n
    return docs, chats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    a = ap.parse_args()
    train, heldout = [], []
    for name in FILES:
        path = os.path.join(a.wordnet, name)
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as e:
            sys.exit("make-dict-corpus: %s: %s (apt-get install wordnet-base)" % (path, e.strerror))
        for line in lines:
            s = parse_data_line(line)
            if s is None or not s[3]:
                continue
            (heldout if held_out(s[0], s[1]) else train).append(s)
    rng = random.Random(15)
    train_docs, train_chats = build(train, rng)
    held_docs, held_chats = build(heldout, rng)
    os.makedirs(a.outdir, exist_ok=True)

    def write(name, text):
        tmp = os.path.join(a.outdir, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(a.outdir, name))

    write("train-plain.txt", "\n\n".join(train_docs) + "\n")
    write("train-chat.txt", "\f\n".join(train_chats))
    write("heldout-plain.txt", "\n\n".join(held_docs) + "\n")
    write("heldout-chat.txt", "\f\n".join(held_chats))
    write("spm-input.txt", "\n".join(train_docs) + "\n" + "".join(train_chats))
    print("synsets: %d train, %d held out; %d plain documents, %d conversations"
          % (len(train), len(heldout), len(train_docs), len(train_chats)))


if __name__ == "__main__":
    main()
