#!/usr/bin/env python3
"""spec-table.py - speculative decoding beside plain decoding over a prompt set, alternated:
acceptance and tok/s of `gemma3 -md DRAFT` (or --lookup) and of the plain run, per --draft-max;
optionally llama.cpp's plain and speculative runs on the same pair in the same loop.

usage: tools/spec-table.py [-m models/wordnet-gemma] [-md models/wordnet-gemma-draft | --lookup]
           [--prompts tests/data/wordnet-gemma/prompts.json] [--draft-max 2,4,8] [-n 64]
           [--rounds 5] [-t 2] [--greedy | --sampled] [--gemma3 build/gemma3]
           [--llamacpp BINDIR --gguf MODEL.gguf DRAFT.gguf] [-- EXTRA GEMMA3 FLAGS]

Each prompt is generated once per configuration (plain, then speculative with each
--draft-max) in every round; the configurations of a prompt run back to back, in the reverse
order on every other prompt and round (A B C D, D C B A, ...), so that a machine whose speed
drifts moves all of them alike. --greedy is --temp 0; --sampled is the checkpoint's
generation_config.json (seed: the prompt's index + 1). gemma3 is given prompts.json's ids
(--prompt-ids, <bos> first); a speculative run must print the plain run's text (checked:
speculation changes no token). tok/s: the tokens generated over the seconds of generation (the
"generated:" line of the summary: the draft's work included, the load and the prompt not), summed
over the prompts, per round; the table gives the median over the rounds and the min-max, and the
median of the rounds' speculative/plain ratios. Acceptance is the same every round (a pure
function of the seeds; checked).

--llamacpp BINDIR adds llama.cpp (greedy only) on GGUF files of the pair (`gemma3 quantize -m DIR
-o F.gguf --type bf16` writes them): plain is `llama-completion -no-cnv --temp 0`, speculative
`llama-speculative-simple --spec-type draft-simple --spec-draft-n-max N` (BINDIR holds both),
each given prompts.json's text (it tokenizes it itself: <bos> added, special pieces parsed). Its
tok/s: the completion's eval line (the tokens after the first over their seconds) and
speculative-simple's "decoded N tokens in T seconds" (the draft's work included). Its speculative
texts are compared with its plain ones (up to the shorter: speculative-simple may run past -n by
a draft), and the prompts where they differ are counted: llama.cpp does not promise they agree."""
import argparse, json, re, statistics, subprocess, sys


def run(a, prompt, seed, draft_max):
    cmd = [a.gemma3, "-m", a.model, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(a.n),
           "-t", str(a.threads), "-s", str(seed)]
    if a.greedy:
        cmd += ["--temp", "0"]
    if draft_max:
        cmd += (["--lookup"] if a.lookup else ["-md", a.draft]) + ["--draft-max", str(draft_max)]
    cmd += a.extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-400:]))
    m = re.search(r"generated: +(\d+) tokens +([0-9.]+) tok/s", p.stderr)
    n, tps = int(m.group(1)), float(m.group(2))
    drafted = accepted = steps = 0
    if draft_max:
        m = re.search(r"drafted (\d+), accepted (\d+) \([^)]*\) in (\d+) steps", p.stderr)
        drafted, accepted, steps = map(int, m.groups())
    return p.stdout, n, 1000.0 * n / tps if n else 0.0, drafted, accepted, steps


def run_llamacpp(a, text, draft_max):
    if draft_max:
        cmd = [a.llamacpp + "/llama-speculative-simple", "-m", a.gguf[0], "-md", a.gguf[1], "-p", text,
               "-n", str(a.n), "--temp", "0", "-t", str(a.threads), "-td", str(a.threads),
               "--spec-type", "draft-simple", "--spec-draft-n-max", str(draft_max)]
    else:
        cmd = [a.llamacpp + "/llama-completion", "-m", a.gguf[0], "-p", text, "-n", str(a.n), "--temp", "0",
               "-t", str(a.threads), "-no-cnv", "--no-display-prompt"]
    for _ in range(10):  # its log is written by a thread: the last lines are now and then lost
        p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            sys.exit("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-400:]))
        if draft_max:
            m = re.search(r"decoded +(\d+) tokens in +([0-9.]+) seconds", p.stderr)
            d = re.search(r"n_drafted = (\d+)", p.stderr)
            ac = re.search(r"n_accept += (\d+)", p.stderr)
            if m and d and ac:
                out = p.stdout.strip("\n")
                out = out[out.find(text) + len(text):] if text in out else out
                return out.strip(), int(m.group(1)), 1000 * float(m.group(2)), int(d.group(1)), int(ac.group(1)), 0
        else:
            m = re.search(r" eval time = +([0-9.]+) ms / +(\d+) runs", p.stderr)
            if m:
                out = p.stdout.strip()
                out = out[:-len("[end of text]")].strip() if out.endswith("[end of text]") else out
                return out, int(m.group(2)), float(m.group(1)), 0, 0, 0
    sys.exit("%s: no timing line in its log" % " ".join(cmd))


def same_text(a, b):
    """llama-speculative-simple may run past -n by up to a draft: the shorter text must begin the longer."""
    return a.startswith(b) or b.startswith(a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", dest="model", default="models/wordnet-gemma")
    ap.add_argument("-md", dest="draft", default="models/wordnet-gemma-draft")
    ap.add_argument("--lookup", action="store_true")
    ap.add_argument("--prompts", default="tests/data/wordnet-gemma/prompts.json")
    ap.add_argument("--draft-max", default="2,4,8")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-t", dest="threads", type=int, default=2)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--greedy", action="store_true")
    g.add_argument("--sampled", action="store_true")
    ap.add_argument("--gemma3", default="build/gemma3")
    ap.add_argument("--llamacpp", metavar="BINDIR")
    ap.add_argument("--gguf", nargs=2, metavar=("MODEL", "DRAFT"))
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    if a.llamacpp and not (a.greedy and a.gguf and not a.lookup):
        sys.exit("--llamacpp: greedy only (--greedy), a draft model only, and --gguf MODEL DRAFT")
    prompts = json.load(open(a.prompts))
    drafts = [int(x) for x in a.draft_max.split(",")]
    configs = [("gemma3", c) for c in [0] + drafts]
    if a.llamacpp:
        configs += [("llama.cpp", c) for c in [0] + drafts]
    tokens = {c: [0] * a.rounds for c in configs}
    ms = {c: [0.0] * a.rounds for c in configs}
    acc = {c: None for c in configs}
    differs = {c: 0 for c in configs}
    for r in range(a.rounds):
        stats = {c: [0, 0, 0] for c in configs}
        for i, prompt in enumerate(prompts):
            order = configs if (r + i) % 2 == 0 else configs[::-1]
            out = {}
            for c in order:
                out[c], n, t, d, ac, st = (run(a, prompt["ids"], i + 1, c[1]) if c[0] == "gemma3" else
                                           run_llamacpp(a, prompt["text"], c[1]))
                tokens[c][r] += n
                ms[c][r] += t
                stats[c] = [stats[c][0] + d, stats[c][1] + ac, stats[c][2] + st]
            for c in configs:
                plain = out[(c[0], 0)]
                if c[0] == "llama.cpp":
                    if r == 0 and not same_text(out[c], plain):
                        differs[c] += 1
                elif out[c] != plain:
                    sys.exit("prompt %d, --draft-max %d: the speculative text differs from the plain run's" % (i, c[1]))
        for c in configs:
            if acc[c] is None:
                acc[c] = stats[c]
            elif acc[c] != stats[c] and c[0] == "gemma3":
                sys.exit("--draft-max %d: acceptance differs between rounds: %s vs %s" % (c[1], acc[c], stats[c]))
        print("round %d: %s" % (r + 1, ", ".join("%s %s %.0f tok/s" % (c[0], c[1] or "plain",
                                                                     1000 * tokens[c][r] / ms[c][r])
                                                 for c in configs)), file=sys.stderr, flush=True)
    print("%d prompts, %s, -n %d, -t %d, %s, %d rounds; gemma3 generated %d tokens per configuration"
          % (len(prompts), "temperature 0" if a.greedy else "generation_config sampling", a.n, a.threads,
             "n-gram lookup" if a.lookup else a.draft, a.rounds, tokens[configs[0]][0]))
    if a.llamacpp:
        print("llama.cpp (%s, %s): speculative texts unlike its plain ones: %s" % (
            a.llamacpp, " and ".join(a.gguf), ", ".join("--draft-max %d: %d of %d" % (c[1], differs[c], len(prompts))
                                                      for c in configs if c[0] == "llama.cpp" and c[1])))
    print()
    print("| engine | --draft-max | drafted | accepted | acceptance | verifications | tok/s median (min-max) | vs plain |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in configs:
        tps = [1000 * tokens[c][r] / ms[c][r] for r in range(a.rounds)]
        plain = [1000 * tokens[(c[0], 0)][r] / ms[(c[0], 0)][r] for r in range(a.rounds)]
        ratio = statistics.median(tps[r] / plain[r] for r in range(a.rounds))
        d, ac, st = acc[c]
        print("| %s | %s | %s | %s | %s | %s | %.0f (%.0f-%.0f) | %s |"
              % (c[0], c[1] or "plain", d if c[1] else "", ac if c[1] else "",
                 "%.1f%%" % (100 * ac / d) if c[1] and d else "", st if c[1] and st else "",
                 statistics.median(tps), min(tps), max(tps), "%.2fx" % ratio if c[1] else ""))


if __name__ == "__main__":
    main()
