#!/usr/bin/env python3
"""Batch normalization and per-channel pointwise ops, kael and torch side by side.

    .venv/bin/python tools/bench/batch_norm.py                 # 1 thread
    .venv/bin/python tools/bench/batch_norm.py --threads 2 --runs 9

Workloads, float32, for a U-Net-sized activation (N=8, C=8, 32x32) and a ResNet-sized one
(N=8, C=64, 32x32), each row-major (NCHW) and channels-last (NHWC):
* bn forward: nn.BatchNorm2d in training mode (statistics, output, running statistics);
* bn fwd+bwd: the same, then backward of (y * g).sum() into the input, weight and bias;
* x * w per channel: x times a (1, C, 1, 1) tensor;
* where(mask, x, 0-d): where with a 0-d tensor as the other operand.

Method: the same inputs in both libraries; after warm-up calls, --runs rounds alternating kael
and torch, each timing --calls calls; the figure is the median over the rounds of the time per
call. Ratio = kael time / torch time (below 1: kael faster). Report the machine's load
(`uptime`) with the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import kael


def timed(fn, calls):
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls


def workloads(lib, shape, channels_last):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal(shape).astype(np.float32))
    g = lib.tensor(rng.standard_normal(shape).astype(np.float32))
    if channels_last:
        x = x.contiguous(memory_format=lib.channels_last)
        g = g.contiguous(memory_format=lib.channels_last)
    w = lib.tensor(rng.standard_normal((1, shape[1], 1, 1)).astype(np.float32))
    zero = lib.tensor(np.float32(0.0))
    mask = x > 0
    bn = lib.nn.BatchNorm2d(shape[1])
    xr = x.clone().requires_grad_()

    def fwd_bwd():
        (bn(xr) * g).sum().backward()

    return {
        "bn forward": lambda: bn(x),
        "bn fwd+bwd": fwd_bwd,
        "x * w per channel": lambda: x * w,
        "where(mask, x, 0-d)": lambda: lib.where(mask, x, zero),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--calls", type=int, default=50)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    kael.set_num_threads(args.threads)
    print(f"threads={args.threads}, median of {args.runs} rounds of {args.calls} calls; load average "
          f"{os.getloadavg()[0]:.2f} at start")
    print(f"{'workload':24s} {'shape':18s} {'layout':14s} {'kael us':>9s} {'torch us':>9s} {'kael/torch':>10s}")
    for shape in [(8, 8, 32, 32), (8, 64, 32, 32)]:
        for cl in (False, True):
            k, t = workloads(kael, shape, cl), workloads(torch, shape, cl)
            for name in k:
                for fn in (k[name], t[name]):
                    timed(fn, 3)
                ks, ts = [], []
                for _ in range(args.runs):
                    ks.append(timed(k[name], args.calls))
                    ts.append(timed(t[name], args.calls))
                km, tm = statistics.median(ks) * 1e6, statistics.median(ts) * 1e6
                print(f"{name:24s} {str(shape):18s} {'channels-last' if cl else 'row-major':14s} {km:9.1f} {tm:9.1f} "
                      f"{km / tm:10.2f}")


if __name__ == "__main__":
    main()
