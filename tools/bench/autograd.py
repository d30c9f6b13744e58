#!/usr/bin/env python3
"""Autograd benchmark: kael vs PyTorch, side by side in one process at 1 thread.

    .venv/bin/python tools/bench/autograd.py            # default: 15 repeats
    .venv/bin/python tools/bench/autograd.py --quick    # fewer repeats

Cases (medians over repeats taken round-robin across the two libraries, so machine noise hits
both alike; each repeat times a batch of calls calibrated to ~20 ms):
  * tiny:  (a * b).sum().backward() for a, b of 4 elements that require grad;
  * mlp:   one forward + backward step of a 2-layer MLP 64 -> 64 -> 10 (tanh), batch 32, with a
           mean-squared-error loss, grads reset to None each step.
The ratio column is kael / torch (below 1: kael is faster; the target is at most 0.5).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kael  # noqa: E402


def make_cases(lib, rng):
    def t(a, grad=False):
        x = lib.tensor(a.astype(np.float32))
        return x.requires_grad_() if grad else x

    a = t(rng.standard_normal(4), True)
    b = t(rng.standard_normal(4), True)

    def tiny():
        a.grad = None
        b.grad = None
        (a * b).sum().backward()

    x = t(rng.standard_normal((32, 64)))
    y = t(rng.standard_normal((32, 10)))
    w1 = t(rng.standard_normal((64, 64)) * 0.1, True)
    b1 = t(np.zeros(64), True)
    w2 = t(rng.standard_normal((64, 10)) * 0.1, True)
    b2 = t(np.zeros(10), True)
    params = (w1, b1, w2, b2)

    def mlp():
        for p in params:
            p.grad = None
        h = (x @ w1 + b1).tanh()
        out = h @ w2 + b2
        ((out - y) ** 2).mean().backward()

    return {"tiny (a*b).sum().backward()": tiny, "mlp 64-64-10 b32 fwd+bwd": mlp}


def calibrate(fn, target=0.02):
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target or n >= 1 << 20:
            return n
        n = max(n * 2, int(n * target / max(dt, 1e-9)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else args.repeats
    torch.set_num_threads(1)
    kael.set_num_threads(1)
    libs = {"kael": make_cases(kael, np.random.default_rng(0)), "torch": make_cases(torch, np.random.default_rng(0))}
    names = list(libs["kael"])
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, 1 thread, {repeats} repeats (median)")
    print(f"{'case':32} {'kael':>12} {'torch':>12} {'kael/torch':>11}")
    for name in names:
        fns = {lib: libs[lib][name] for lib in libs}
        for fn in fns.values():
            fn()
        n = {lib: calibrate(fn) for lib, fn in fns.items()}
        times = {lib: [] for lib in fns}
        order = list(fns)
        for r in range(repeats):
            for lib in order[r % 2:] + order[:r % 2]:
                fn = fns[lib]
                t0 = time.perf_counter()
                for _ in range(n[lib]):
                    fn()
                times[lib].append((time.perf_counter() - t0) / n[lib])
        med = {lib: statistics.median(v) for lib, v in times.items()}
        print(f"{name:32} {med['kael'] * 1e6:10.2f}us {med['torch'] * 1e6:10.2f}us {med['kael'] / med['torch']:10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
