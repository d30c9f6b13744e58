#!/usr/bin/env python3
"""loss.backward() on a 3-layer MLP: kael vs PyTorch, in one process at 1 thread.

    .venv/bin/python tools/bench/backward_mlp.py              # 15 rounds of 200 calls per library
    .venv/bin/python tools/bench/backward_mlp.py --quick      # 5 rounds
    .venv/bin/python tools/bench/backward_mlp.py --markdown   # the table as Markdown

Only the backward call is timed: each call gets a fresh graph from a forward pass
(x -> Linear 64->64 -> tanh -> Linear 64->64 -> tanh -> Linear 64->10, batch 32, mean squared
error), run outside the timer, with every parameter's .grad reset to None. The rounds alternate
between the libraries (the order flips every round) so that machine noise hits both alike; the
reported figure is the median of all timed calls. The ratio column is kael / torch.
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

SIZES = (64, 64, 64, 10)
BATCH = 32


def make_step(lib, rng):
    """(forward, params): forward() builds the graph and returns the loss."""
    def t(a, grad=False):
        x = lib.tensor(a.astype(np.float32))
        return x.requires_grad_() if grad else x

    x = t(rng.standard_normal((BATCH, SIZES[0])))
    y = t(rng.standard_normal((BATCH, SIZES[-1])))
    params = []
    for n_in, n_out in zip(SIZES, SIZES[1:]):
        params.append(t(rng.standard_normal((n_in, n_out)) * 0.1, True))
        params.append(t(np.zeros(n_out), True))

    def forward():
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = h.tanh()
        return ((h - y) ** 2).mean()

    return forward, params


def time_backward(forward, params, calls):
    out = []
    for _ in range(calls):
        for p in params:
            p.grad = None
        loss = forward()
        t0 = time.perf_counter_ns()
        loss.backward()
        out.append(time.perf_counter_ns() - t0)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per library per round")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else args.rounds
    torch.set_num_threads(1)
    kael.set_num_threads(1)
    libs = {"kael": make_step(kael, np.random.default_rng(0)), "torch": make_step(torch, np.random.default_rng(0))}
    for forward, params in libs.values():  # warm-up
        time_backward(forward, params, 50)
    times = {name: [] for name in libs}
    for r in range(rounds):
        order = list(libs) if r % 2 == 0 else list(reversed(libs))
        for name in order:
            times[name] += time_backward(*libs[name], args.calls)
    med = {name: statistics.median(v) / 1000 for name, v in times.items()}
    label = f"loss.backward(), MLP {'-'.join(map(str, SIZES))} tanh, batch {BATCH}"
    n = rounds * args.calls
    if args.markdown:
        print("| case | kael µs | torch µs | kael/torch |")
        print("|---|---:|---:|---:|")
        print(f"| {label} | {med['kael']:.1f} | {med['torch']:.1f} | {med['kael'] / med['torch']:.2f} |")
    else:
        print(f"python {sys.version.split()[0]}, torch {torch.__version__}, 1 thread, median of {n} calls each")
        print(f"{label}: kael {med['kael']:.1f} µs, torch {med['torch']:.1f} µs, "
              f"kael/torch {med['kael'] / med['torch']:.2f}")


if __name__ == "__main__":
    main()
