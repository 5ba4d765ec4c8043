#!/usr/bin/env python3
"""mutation.py - mutation testing: does the suite catch what it claims to? (make mutation)

    python3 tools/mutation.py [LIST] [NAME...]

Reads the mutations in LIST (default tests/mutations.txt), copies the tracked tree into a scratch
directory (build/mutation/tree), builds it once and runs every suite the list names there
unmutated (they must pass: otherwise a "kill" would mean nothing). Then, one mutation at a time,
replaces the one occurrence of `search` in `file` by `replace`, rebuilds incrementally, runs the
mutation's suites through tests/run.sh (each run under a timeout: a hang counts as a kill, and is
marked so), and puts the file back. Prints KILLED or SURVIVED per mutation and the score; exits 1
unless every mutation was killed. NAME... runs only those mutations.

The list's format, one block per mutation:

    [name]
    file = sampling.c
    search = if (cum >= target) {
    replace = if (cum > target) {
    suites = test-sampling            (C suites by name, shell suites as test-x.sh)

`search` must occur exactly once in the file (a stale mutation is an error, not a survivor);
\\n in search/replace is a newline. Lines starting with # are comments."""
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "build", "mutation")
TREE = os.path.join(SCRATCH, "tree")
TIMEOUT = int(os.environ.get("MUTATION_TIMEOUT", "600"))


def parse(path):
    muts, cur = [], None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                cur = {"name": line[1:-1], "line": n}
                muts.append(cur)
                continue
            key, sep, val = line.partition(" = ")
            if not sep or cur is None or key not in ("file", "search", "replace", "suites"):
                sys.exit(f"{path}:{n}: expected '[name]' or 'key = value' "
                         "(file, search, replace, suites)")
            cur[key] = val.replace("\\n", "\n") if key in ("search", "replace") else val
    for m in muts:
        for key in ("file", "search", "replace", "suites"):
            if key not in m:
                sys.exit(f"{path}:{m['line']}: [{m['name']}] has no {key}")
        m["suites"] = m["suites"].split()
    return muts


def sh(cmd, timeout=None, log=None):
    """Runs cmd in the scratch tree; returns (exit status, timed out)."""
    try:
        r = subprocess.run(cmd, cwd=TREE, shell=True, stdout=log or subprocess.DEVNULL,
                           stderr=subprocess.STDOUT, timeout=timeout, start_new_session=True)
        return r.returncode, False
    except subprocess.TimeoutExpired:
        return 124, True


def targets(suites):
    c = [f"build/tests/{s}" for s in suites if not s.endswith(".sh")]
    return "all " + " ".join(c)


def run_suites(suites, log):
    return sh(f'SUITES="{" ".join(suites)}" BUILD=build sh tests/run.sh', timeout=TIMEOUT, log=log)


def main():
    args = sys.argv[1:]
    lst = os.path.join(ROOT, "tests", "mutations.txt")
    if args and os.path.isfile(args[0]):
        lst = args.pop(0)
    muts = parse(lst)
    if args:
        muts = [m for m in muts if m["name"] in args]
        if not muts:
            sys.exit("no such mutation")
    for m in muts:
        with open(os.path.join(ROOT, m["file"])) as f:
            k = f.read().count(m["search"])
        if k != 1:
            sys.exit(f"[{m['name']}]: search text occurs {k} times in {m['file']} (must be once)")

    # the scratch copy: tracked and untracked-but-not-ignored files
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    os.makedirs(TREE, exist_ok=True)
    for rel in filter(None, files):
        src, dst = os.path.join(ROOT, rel), os.path.join(TREE, rel)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst) or open(src, "rb").read() != open(dst, "rb").read():
            # a changed file gets the time of the copy, not its own: objects the scratch build
            # made after its edit would otherwise look newer and stay stale
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
    log_dir = os.path.join(SCRATCH, "logs")
    os.makedirs(log_dir, exist_ok=True)
    jobs = os.environ.get("MUTATION_JOBS", "2")
    make = f"make -j{jobs} WERROR=0"

    all_suites = sorted({s for m in muts for s in m["suites"]})
    print(f"mutation: {len(muts)} mutations, baseline build and suites: {' '.join(all_suites)}",
          flush=True)
    with open(os.path.join(log_dir, "baseline.log"), "w") as log:
        rc, _ = sh(f"{make} {targets(all_suites)}", log=log)
        if rc == 0:
            rc, to = run_suites(all_suites, log)
    if rc != 0:
        sys.exit(f"mutation: the unmutated tree fails (see {log_dir}/baseline.log)")

    killed, survived = [], []
    for i, m in enumerate(muts, 1):
        path = os.path.join(TREE, m["file"])
        with open(path) as f:
            orig = f.read()
        t0 = time.time()
        how = ""
        try:
            with open(path, "w") as f:
                f.write(orig.replace(m["search"], m["replace"], 1))
            with open(os.path.join(log_dir, m["name"] + ".log"), "w") as log:
                rc, _ = sh(f"{make} {targets(m['suites'])}", log=log)
                if rc != 0:
                    sys.exit(f"[{m['name']}]: the mutant does not build (see {log.name}); "
                             "a mutation must compile")
                rc, to = run_suites(m["suites"], log)
                how = " (timeout)" if to else ""
        finally:
            with open(path, "w") as f:
                f.write(orig)
        status = "KILLED  " if rc != 0 else "SURVIVED"
        (killed if rc != 0 else survived).append(m["name"])
        print(f"{i:3d} {status} {m['name']:<34} {m['file']:<16} {' '.join(m['suites'])}"
              f"{how} ({time.time() - t0:.0f}s)", flush=True)
    sh(f"{make} {targets(all_suites)}")  # leave the scratch build unmutated
    n = len(muts)
    print(f"mutation score: {len(killed)}/{n} killed ({100.0 * len(killed) / n:.0f}%)")
    if survived:
        print("survived: " + " ".join(survived))
    return 0 if not survived else 1


if __name__ == "__main__":
    sys.exit(main())
