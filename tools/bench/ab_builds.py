#!/usr/bin/env python3
"""Two builds of kael side by side: per-call times of tiny ops and the time of large pointwise ops
and copies, to check that a change to the loop engine costs nothing at run time.

    .venv/bin/python tools/bench/ab_builds.py OLD NEW [--rounds 3] [--threads 1] [--cases exp 16M]

OLD and NEW are directories that each hold a `kael` package with its built `_C` (for example a
copy of the source tree's `kael/` taken before a change: `OLD=$(mktemp -d) && cp -r kael
"$OLD"/`). Each round runs the cases once in a process of each build, the two alternating, so
that machine noise hits both alike; a cell is the median over the rounds of each process's median
of 9 timeit batches (a batch lasts about 50 ms), and the ratio is NEW over OLD (below 1: NEW is
faster). The processes start in a temporary directory, so the source tree's `kael` is not the one
imported.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CASES = [
    # (name, statement, setup): a, b, m (a bool mask) and o (an output) are made by the setup
    ("a + b, 1 element", "a + b", "a = kael.ones(1); b = kael.ones(1)"),
    ("a + b, 100", "a + b", "a = kael.ones(100); b = kael.ones(100)"),
    ("a.add_(b), 1", "a.add_(b)", "a = kael.ones(1); b = kael.ones(1)"),
    ("a + 1.5, 100", "a + 1.5", "a = kael.ones(100)"),
    ("1.5 - a, 100", "1.5 - a", "a = kael.ones(100)"),
    ("a.exp(), 100", "a.exp()", "a = kael.ones(100)"),
    ("(1000, 3) + (3,)", "a + b", "a = kael.ones(1000, 3); b = kael.ones(3)"),
    ("(256, 256).t() + (256, 256)", "a + b", "a = kael.ones(256, 256).t(); b = kael.ones(256, 256)"),
    ("a + b, 8K bfloat16", "a + b",
     "a = kael.ones(8192, dtype=kael.bfloat16); b = kael.ones(8192, dtype=kael.bfloat16)"),
    ("a + b, 64K", "a + b", "a = kael.ones(65536); b = kael.ones(65536)"),
    ("exp, 1M", "a.exp()", "a = kael.randn(1 << 20)"),
    ("gelu, 1M", "kael.nn.functional.gelu(a)", "a = kael.randn(1 << 20)"),
    ("a + b, 1M int64", "a + b",
     "a = kael.ones(1 << 20, dtype=kael.int64); b = kael.ones(1 << 20, dtype=kael.int64)"),
    ("add(out=), 16M", "kael.add(a, b, out=o)", "a = kael.ones(1 << 24); b = kael.ones(1 << 24); o = kael.empty(1 << 24)"),
    ("where(m, a, b), 1M", "kael.where(m, a, b)", "a = kael.randn(1 << 20); b = kael.zeros(1 << 20); m = a > 0"),
    ("bool to float32, 1M", "m.float()", "m = kael.randn(1 << 20) > 0"),
    ("float64 to float32 copy_, 1M", "o.copy_(a)", "a = kael.randn(1 << 20, dtype=kael.float64); o = kael.empty(1 << 20)"),
    ("sum(0) of (4096, 256)", "a.sum(0)", "a = kael.randn(4096, 256)"),
    ("amax(1) of (4096, 256)", "a.amax(1)", "a = kael.randn(4096, 256)"),
    ("logsumexp(1) of (256, 4096)", "kael.logsumexp(a, 1)", "a = kael.randn(256, 4096)"),
]

CHILD = r"""
import json, statistics, sys, timeit
import kael
kael.set_num_threads(int(sys.argv[1]))
cases = json.loads(sys.argv[2])
out = {}
for name, stmt, setup in cases:
    g = {"kael": kael}
    exec(setup, g)
    t = timeit.Timer(stmt, globals=g)
    n, took = t.autorange()
    n = max(1, int(n * 0.05 / max(took, 1e-9)))
    out[name] = statistics.median(t.timeit(n) / n for _ in range(9))
print(json.dumps(out))
"""


def run_build(root: str, threads: int, cases: list) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(threads), json.dumps(cases)], cwd=cwd, env=env,
                              capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", nargs="*", help="only the cases whose name contains one of these")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.cases or any(k in c[0] for k in args.cases)]
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        runs["old"].append(run_build(args.old, args.threads, cases))
        runs["new"].append(run_build(args.new, args.threads, cases))
    print(f"| case ({args.threads} thread{'s' if args.threads > 1 else ''}) | old | new | new / old |")
    print("|---|---:|---:|---:|")
    for name, _, _ in cases:
        old = statistics.median(r[name] for r in runs["old"])
        new = statistics.median(r[name] for r in runs["new"])
        unit, scale = ("ns", 1e9) if old < 1e-5 else ("us", 1e6)
        print(f"| {name} | {old * scale:.1f} {unit} | {new * scale:.1f} {unit} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
