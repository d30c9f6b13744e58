#!/usr/bin/env python3
"""float32 convolution forward + backward, kael and torch side by side.

    .venv/bin/python tools/bench/conv.py                 # 1 and 2 threads, both workloads
    .venv/bin/python tools/bench/conv.py --threads 1 --runs 9

Workloads
---------
* resnet: one ResNet-style 3x3 layer, conv2d N=8, 64 -> 64 channels, 56x56, padding 1, no bias:
  forward, then backward of out.sum() (input and weight gradients).
* lenet: a LeNet-5 training step, batch 64 of 1x28x28: conv 1->6 5x5 (pad 2), relu, max_pool 2,
  conv 6->16 5x5, relu, max_pool 2, linears 400->120->84->10, cross_entropy, backward, SGD step.

Method: each library runs in a process of its own that imports only it, as a program does: torch
ships its own GNU OpenMP under the same soname as the one oneDNN uses, so in one process the
first library loaded decides the other's OpenMP (torch's spinning threads then take kael's CPUs
at 2 threads, or kael's sleeping ones slow torch's). The same weights and inputs (NumPy, seeded)
in both; after --warmup calls, --runs rounds each timing --steps calls; the figure is the median
over the rounds of the time per call. The two processes run one after the other, the pair
repeated --pairs times (the figure: the median of the per-process medians). Ratio = torch time /
kael time (above 1: kael faster). Report the machine's load (`uptime`) with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def resnet_case(lib, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    w = (rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05)
    xt, wt = lib.tensor(x).requires_grad_(), lib.tensor(w).requires_grad_()
    F = lib.nn.functional

    def step():
        xt.grad = None
        wt.grad = None
        F.conv2d(xt, wt, None, 1, 1).sum().backward()
    return step


def lenet_case(lib, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    nn = lib.nn
    m = nn.ModuleDict(dict(c1=nn.Conv2d(1, 6, 5, padding=2), c2=nn.Conv2d(6, 16, 5), f1=nn.Linear(400, 120),
                           f2=nn.Linear(120, 84), f3=nn.Linear(84, 10)))
    init = np.random.default_rng(seed + 1)
    m.load_state_dict({k: lib.tensor((init.standard_normal(tuple(v.shape)) * 0.1).astype(np.float32))
                       for k, v in m.state_dict().items()})
    F, xt, yt = nn.functional, lib.tensor(x), lib.tensor(y)
    opt = lib.optim.SGD(m.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        h = F.max_pool2d(F.relu(m["c1"](xt)), 2)
        h = F.max_pool2d(F.relu(m["c2"](h)), 2)
        h = F.relu(m["f1"](h.flatten(1)))
        h = F.relu(m["f2"](h))
        F.cross_entropy(m["f3"](h), yt).backward()
        opt.step()
    return step


CASES = {"resnet": ("resnet 3x3 64->64 56x56 N=8", resnet_case), "lenet": ("lenet step, batch 64", lenet_case)}


def timed(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def worker(lib_name, case, threads, args):
    """Runs in its own process: prints the median time per call of one library."""
    if lib_name == "torch":
        import torch as lib
    else:
        import kael as lib
    lib.set_num_threads(threads)
    step = CASES[case][1](lib)
    for _ in range(args.warmup):
        step()
    times = [timed(step, args.steps) for _ in range(args.runs)]
    print(json.dumps({"median": statistics.median(times)}))


def run_worker(lib_name, case, threads, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib_name, "--only", case, "--threads", str(threads),
           "--runs", str(args.runs), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--only", choices=sorted(CASES), default=None)
    p.add_argument("--worker", choices=["kael", "torch"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.only, args.threads[0], args)
        return
    print(f"load average {os.getloadavg()[0]:.2f} at start; each library in its own process")
    for threads in args.threads:
        for case in CASES:
            if args.only not in (None, case):
                continue
            ks, ts = [], []
            for _ in range(args.pairs):
                ks.append(run_worker("kael", case, threads, args))
                ts.append(run_worker("torch", case, threads, args))
            k, t = statistics.median(ks), statistics.median(ts)
            print(f"{CASES[case][0]:<28} threads={threads}  kael {k * 1e3:8.2f} ms  torch {t * 1e3:8.2f} ms  "
                  f"torch/kael {t / k:5.2f}", flush=True)


if __name__ == "__main__":
    main()
