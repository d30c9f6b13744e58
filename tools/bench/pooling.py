#!/usr/bin/env python3
"""float32 pooling forward + backward, kael and torch side by side.

    .venv/bin/python tools/bench/pooling.py                 # 1 and 2 threads, every case
    .venv/bin/python tools/bench/pooling.py --threads 1 --runs 9 --cases maxpool

Cases (input 8x64x112x112 float32, contiguous, requires_grad):
* maxpool: max_pool2d 3x3, stride 2, padding 1 (ResNet's stem pool), forward, then backward of
  out.sum().
* maxpool_fwd: the same forward alone.
* adaptive: adaptive_avg_pool2d to 1x1 (global average pooling), forward + backward.

Method: after --warmup calls each, --runs rounds alternating kael and torch, each round timing
--steps calls; the figure is the median over the rounds of the time per call. Ratio = torch
time / kael time (above 1: kael faster). Report the machine's load (`uptime`) with the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import kael

SHAPE = (8, 64, 112, 112)


def make_case(lib, name, seed=0):
    x = np.random.default_rng(seed).standard_normal(SHAPE, dtype=np.float32)
    if lib is torch:
        xt, F = torch.from_numpy(x).requires_grad_(name != "maxpool_fwd"), torch.nn.functional
    else:
        xt, F = kael.tensor(x).requires_grad_(name != "maxpool_fwd"), kael.nn.functional

    if name == "maxpool":
        def step():
            xt.grad = None
            F.max_pool2d(xt, 3, 2, 1).sum().backward()
    elif name == "maxpool_fwd":
        def step():
            F.max_pool2d(xt, 3, 2, 1)
    elif name == "adaptive":
        def step():
            xt.grad = None
            F.adaptive_avg_pool2d(xt, 1).sum().backward()
    else:
        raise SystemExit(f"unknown case {name}")
    return step


def check_same(name):
    """The forward results and the input gradients agree (a benchmark of wrong code is no use)."""
    x = np.random.default_rng(1).standard_normal((2, 3, 17, 19), dtype=np.float32)
    tx, kx = torch.from_numpy(x).requires_grad_(), kael.tensor(x).requires_grad_()
    if name.startswith("maxpool"):
        to, ko = torch.nn.functional.max_pool2d(tx, 3, 2, 1), kael.nn.functional.max_pool2d(kx, 3, 2, 1)
    else:
        to, ko = torch.nn.functional.adaptive_avg_pool2d(tx, 1), kael.nn.functional.adaptive_avg_pool2d(kx, 1)
    to.sum().backward()
    ko.sum().backward()
    np.testing.assert_allclose(np.array(ko.tolist()), to.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(kx.grad.tolist()), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def time_step(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def bench(name, threads, runs, steps, warmup):
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    ks, ts = make_case(kael, name), make_case(torch, name)
    for _ in range(warmup):
        ks()
        ts()
    kt, tt = [], []
    for _ in range(runs):
        kt.append(time_step(ks, steps))
        tt.append(time_step(ts, steps))
    return statistics.median(kt), statistics.median(tt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--cases", default="maxpool,maxpool_fwd,adaptive")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    cases = args.cases.split(",")
    for c in cases:
        check_same(c)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    print(f"input {'x'.join(map(str, SHAPE))} float32; median of {args.runs} rounds of {args.steps} calls")
    print(f"{'case':<14}{'threads':>8}{'kael ms':>10}{'torch ms':>10}{'torch/kael':>12}")
    for threads in args.threads:
        for c in cases:
            k, t = bench(c, threads, args.runs, args.steps, args.warmup)
            print(f"{c:<14}{threads:>8}{k * 1e3:>10.2f}{t * 1e3:>10.2f}{t / k:>12.2f}")


if __name__ == "__main__":
    main()
