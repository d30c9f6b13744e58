#!/usr/bin/env python3
"""Throughput of reductions and scans, kael against PyTorch, side by side.

    .venv/bin/python tools/bench/reductions.py                 # 1 and 2 threads, 16M float32
    .venv/bin/python tools/bench/reductions.py --threads 1 --repeat 21 --cases logsumexp

Each case runs once per repeat in each library, the libraries alternating (their order
rotates every repeat) so machine noise hits both alike; the figure is the median time per
call and the GB/s it implies (bytes of input read once). The ratio is kael's throughput over
torch's (above 1: kael is faster).

Before each timed call the script sleeps `--settle` seconds (default 0.02), as throughput.py
does, so that torch's OpenMP workers, which spin for a while after each parallel region, hold no
core when the next call starts. After such a pause (or a torch call) kael's 2-thread calls can
run at nearly their 1-thread speed on a small VM, where back-to-back calls scale: the woken
worker thread shares a core with the calling thread for a while (docs/performance.md, "Four
rows a sweep").
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import kael

N = 1 << 24  # 16M elements

CASES = {
    # name: (function of (lib, x), input shape)
    "logsumexp": (lambda lib, x: lib.logsumexp(x, 0), (N,)),
    "logsumexp_rows": (lambda lib, x: lib.logsumexp(x, 1), (N // 1024, 1024)),
    "logsumexp_cols": (lambda lib, x: lib.logsumexp(x, 0), (1024, N // 1024)),
    "sum": (lambda lib, x: lib.sum(x), (N,)),
    "amax": (lambda lib, x: lib.amax(x), (N,)),
    "prod": (lambda lib, x: lib.prod(x), (N,)),
    "argmax": (lambda lib, x: lib.argmax(x), (N,)),
    "norm": (lambda lib, x: lib.norm(x), (N,)),
    "var": (lambda lib, x: lib.var(x), (N,)),
    "all": (lambda lib, x: lib.all(x), (N,)),
    # along the last dim with indices (Note [First extreme in blocks]): rows of a vocabulary
    "argmax_rows": (lambda lib, x: lib.argmax(x, 1), (N // 50257, 50257)),
    "max_dim_rows": (lambda lib, x: lib.max(x, 1), (N // 50257, 50257)),
    # over the outer dim (Note [Reduction tiles], Note [Columns in blocks]): a square matrix, and a
    # tall one of 2 columns
    "amax_cols": (lambda lib, x: lib.amax(x, 0), (4096, N // 4096)),
    "prod_cols": (lambda lib, x: lib.prod(x, 0), (4096, N // 4096)),
    "argmax_cols": (lambda lib, x: lib.argmax(x, 0), (4096, N // 4096)),
    "all_cols": (lambda lib, x: lib.all(x, 0), (4096, N // 4096)),
    "norm_cols": (lambda lib, x: lib.norm(x, 2, 0), (4096, N // 4096)),
    "max_dim_tall": (lambda lib, x: lib.max(x, 0), (N // 2, 2)),
    "norm_tall": (lambda lib, x: lib.norm(x, 2, 0), (N // 2, 2)),
    "sum_tall": (lambda lib, x: lib.sum(x, 0), (N // 2, 2)),
    # by steps down the columns (Note [Columns in blocks] in cpu/reduce_engine.h)
    "norm_mid": (lambda lib, x: lib.norm(x, 2, 1), (64, N // 64 // 256, 256)),
    "max_dim_mid": (lambda lib, x: lib.max(x, 1), (64, N // 64 // 256, 256)),
    "all_tall": (lambda lib, x: lib.all(x, 0), (N // 4, 4)),
    # column sums (Note [Column sums] in cpu/reduce.cpp): wide, narrow, and over the middle dim
    "sum_cols": (lambda lib, x: lib.sum(x, 0), (4096, N // 4096)),
    "sum_tall4": (lambda lib, x: lib.sum(x, 0), (N // 4, 4)),
    "sum_tall16": (lambda lib, x: lib.sum(x, 0), (N // 16, 16)),
    "mean_mid": (lambda lib, x: lib.mean(x, 1), (64, N // 64 // 256, 256)),
    "sum_short": (lambda lib, x: lib.sum(x, 1), (N // 2, 2)),
    "amax_tall": (lambda lib, x: lib.amax(x, 0), (N // 2, 2)),
    "cumsum": (lambda lib, x: lib.cumsum(x, 1), (N // 1024, 1024)),
    "argsort_rows": (lambda lib, x: lib.argsort(x, 1), (N // 1024 // 4, 1024)),
}


def measure(case, threads, repeat, settle):
    fn, shape = CASES[case]
    t = torch.rand(shape) * 2 - 1 + 1.0 / 16  # values near 1 in magnitude: products stay finite
    if case.startswith("prod"):
        t = 1 + (torch.rand(shape) - 0.5) * 1e-6
    k = kael.tensor(t.numpy())
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    libs = [("torch", torch, t), ("kael", kael, k)]
    times = {name: [] for name, _, _ in libs}
    for _, lib, x in libs:  # warm-up
        fn(lib, x)
    for r in range(repeat):
        order = libs if r % 2 == 0 else libs[::-1]
        for name, lib, x in order:
            if settle:
                time.sleep(settle)
            start = time.perf_counter()
            fn(lib, x)
            times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(v) for name, v in times.items()}
    gbs = {name: t.numel() * t.element_size() / s / 1e9 for name, s in med.items()}
    return med, gbs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--settle", type=float, default=0.02,
                    help="seconds to sleep before each timed call (torch's OpenMP workers spin after a region)")
    args = ap.parse_args()
    print(f"| case | threads | torch ms | kael ms | torch GB/s | kael GB/s | kael/torch |")
    print(f"|---|---|---|---|---|---|---|")
    for case in args.cases:
        for threads in args.threads:
            med, gbs = measure(case, threads, args.repeat, max(0.0, args.settle))
            print(f"| {case} | {threads} | {med['torch'] * 1e3:.2f} | {med['kael'] * 1e3:.2f} | "
                  f"{gbs['torch']:.1f} | {gbs['kael']:.1f} | {med['torch'] / med['kael']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
