#!/usr/bin/env python3
"""kael's thread pool on large operators: after a pause, and beside a busy loop.

    .venv/bin/python tools/bench/pool.py pause       # each call after a 20 ms pause
    .venv/bin/python tools/bench/pool.py busy        # calls back to back, a busy loop on one CPU
    .venv/bin/python tools/bench/pool.py quiet       # calls back to back, nothing else running

Four operators over 16M float32 at --threads threads (default 2): `out.copy_(a)`,
`kael.exp(a, out=out)`, `a.sum()` and `kael.logsumexp(a, 0)`; milliseconds per call, the median
of --calls measurements (a measurement is one call after a pause in `pause`, three calls back to
back otherwise). One line per run, to compare two builds of kael run by run (swap the built
`kael/_C*.so` between runs):

* `pause`: what a worker woken after a pause costs. On a virtual machine whose idle CPUs the
  host takes back, a woken worker may be queued on the caller's CPU (Note [Workers off the
  caller's CPU] in aten/include/kael/runtime/threads.h).
* `busy`: one CPU shared with a busy loop (a child process bound to the last CPU of this
  process's set, ended when the run ends): the thread there runs at about half speed, and the
  others take its pieces (Note [Pieces and stealing]).
* `quiet`: the reference, on an idle machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import kael

N = 16 * 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["pause", "busy", "quiet"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=25)
    ap.add_argument("--pause", type=float, default=0.02, help="seconds before each call in `pause`")
    args = ap.parse_args()

    a = kael.tensor(np.random.default_rng(0).standard_normal(N, dtype=np.float32))
    out = kael.empty_like(a)
    kael.set_num_threads(args.threads)
    ops = {"copy": lambda: out.copy_(a), "exp": lambda: kael.exp(a, out=out), "sum": lambda: a.sum(),
           "logsumexp": lambda: kael.logsumexp(a, 0)}
    busy = None
    if args.mode == "busy":
        cpu = max(os.sched_getaffinity(0))
        loop = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
        busy = subprocess.Popen([sys.executable, "-c", loop])
        time.sleep(0.2)
    try:
        cells = []
        for name, fn in ops.items():
            fn()  # warm-up: workers started
            times = []
            for _ in range(args.calls):
                if args.mode == "pause":
                    time.sleep(args.pause)
                    start = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - start)
                else:
                    start = time.perf_counter()
                    fn(), fn(), fn()
                    times.append((time.perf_counter() - start) / 3)
            cells.append(f"{name} {statistics.median(times) * 1e3:.2f}")
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    print(f"{args.mode}, {args.threads} threads, ms per call: " + "  ".join(cells))


if __name__ == "__main__":
    main()
