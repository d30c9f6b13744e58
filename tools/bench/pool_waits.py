#!/usr/bin/env python3
"""How kael's pool workers wait between regions (Note [Spinning before blocking] in
aten/include/kael/runtime/threads.h): the measurements test/python/runtime/test_threads.py made until
they moved here (on a loaded machine they vary with the load, so the tests check only what does
not: that an idle worker ends blocked and then uses no CPU).

    .venv/bin/python tools/bench/pool_waits.py              # each case 5 times
    .venv/bin/python tools/bench/pool_waits.py --runs 11

Each run is a fresh interpreter at 2 threads, regions of next to no work (the test hook's two
pieces of one element), so what the worker spends is waiting:

* `spin`: 300 regions back to back, the caller on all its CPUs (the workers kept off the one it
  runs on, so they spin up to 200 us before blocking): how many times the worker blocked (each
  region without the spin; 0-112 on the noisy 2-CPU virtual machine of docs/performance.md) and
  the CPU seconds it used.
* `idle`: the worker's CPU seconds in the 0.5 s that start 0.05 s after the last of 100 regions
  (the spin is bounded: about 0).
* `shared`: 300 regions with the caller bound to one CPU, which the workers share, so nobody
  spins: the worker's CPU seconds (spinning would take 0.05 s and more) and blocks.

Prints one line per case: the median, minimum and maximum over the runs. Needs 2 CPUs for
`spin` and `idle`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PRELUDE = r"""
import json, os, time
import kael
C = kael._C

def the_worker():
    [w] = [t for t in os.listdir("/proc/self/task") if open(f"/proc/self/task/{t}/comm").read().strip() == "kael-pool"]
    return w

def blocked(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split(":", 1)[1])

def cpu_seconds(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def back_to_back(regions):
    C._parallel_for_test(2, 1)
    w = the_worker()
    before = blocked(w), cpu_seconds(w)
    for _ in range(regions):
        C._parallel_for_test(2, 1)
    return blocked(w) - before[0], cpu_seconds(w) - before[1]
"""

CASES = {
    "spin": """
kael.set_num_threads(2)
blocks, cpu = back_to_back(300)
print(json.dumps({"blocks": blocks, "cpu_s": cpu}))
""",
    "idle": """
kael.set_num_threads(2)
back_to_back(100)
w = the_worker()
time.sleep(0.05)
before = cpu_seconds(w)
time.sleep(0.5)
print(json.dumps({"idle_cpu_s": cpu_seconds(w) - before}))
""",
    "shared": """
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
kael.set_num_threads(2)
blocks, cpu = back_to_back(300)
print(json.dumps({"blocks": blocks, "cpu_s": cpu}))
""",
}


def run(case):
    env = dict(os.environ)
    env.pop("KAEL_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", PRELUDE + CASES[case]], capture_output=True, text=True, env=env,
                         check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("note: fewer than 2 CPUs: the workers cannot keep off the caller's CPU, so nobody spins")
    for case in args.cases:
        results = [run(case) for _ in range(args.runs)]
        cells = []
        for key in results[0]:
            values = [r[key] for r in results]
            cells.append(f"{key} median {statistics.median(values):g} (min {min(values):g}, max {max(values):g})")
        print(f"{case:7s} {args.runs} runs: " + "; ".join(cells))


if __name__ == "__main__":
    main()
