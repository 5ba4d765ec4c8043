#!/usr/bin/env python3
"""gen-grammar.py - GBNF grammars of a given size, for measuring the grammar parser and matcher
at scale (docs/grammar.md, "Limits and scale").

    python3 tools/gen-grammar.py KIND N > FILE.gbnf

KIND:
  chain      root ::= r0; rI ::= "x" rI+1 (tail references); matches x^N
  headchain  rI ::= rI+1 "x" (every reference pushes a frame); matches x^N
  nest       root ::= ((((... "a" ...)))), N groups deep
  alt        root ::= r0 | r1 | ... ; rI ::= "wI" (a wide alternation of rules)
  lits       root ::= "w0" | "w1" | ... (a wide alternation of literals)"""
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kind, n = sys.argv[1], int(sys.argv[2])
    w = sys.stdout.write
    if kind in ("chain", "headchain"):
        w("root ::= r0\n")
        step = 'r%d ::= "x" r%d\n' if kind == "chain" else 'r%d ::= r%d "x"\n'
        for i in range(n - 1):
            w(step % (i, i + 1))
        w('r%d ::= "x"\n' % (n - 1))
    elif kind == "nest":
        w("root ::= " + "(" * n + '"a"' + ")" * n + "\n")
    elif kind == "alt":
        w("root ::= " + " | ".join("r%d" % i for i in range(n)) + "\n")
        for i in range(n):
            w('r%d ::= "w%d"\n' % (i, i))
    elif kind == "lits":
        w("root ::= " + " | ".join('"w%d"' % i for i in range(n)) + "\n")
    else:
        sys.exit(__doc__)


main()
