#!/usr/bin/env python3
"""Operators on mid-size tensors (256K-1M elements), kael against PyTorch, at 1 and 2 threads.

    .venv/bin/python tools/bench/midsize.py                    # every case, 1 and 2 threads
    .venv/bin/python tools/bench/midsize.py --threads 2 --cases add sum1

Such a call lasts tens of microseconds, above the grain at which kael's loops use the thread
pool (32768 elements), so at 2 threads what it costs to hand a chunk to a worker shows: a worker
blocked on a condition variable takes a system call and, on a virtual machine whose idle CPU has
halted, tens to hundreds of microseconds more to run, which is why kael's workers spin for a
while before they block (Note [Spinning before blocking] in aten/include/kael/runtime/threads.h).
The calls of a batch run back to back, as a training step issues them.

Each library runs a case in batches of --calls calls, the libraries alternating batch by batch
(--rounds rounds), with a pause of --settle seconds before each batch so that no library's idle
threads still hold a core (torch's OpenMP workers poll for a while after a region; see
throughput.py); a figure is the median over the rounds of the time per call, in microseconds.
The ratio is torch's time over kael's (above 1: kael is faster).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import kael

SHAPE = (512, 512)  # 1 MB of float32

CASES = {
    # name: function of (lib, x)
    "add": lambda lib, x: x + x,
    "exp": lambda lib, x: lib.exp(x),
    "sum1": lambda lib, x: x.sum(1),
    "sum0": lambda lib, x: x.sum(0),
    "amax1": lambda lib, x: x.amax(1),
    "softmax": lambda lib, x: lib.softmax(x, -1),
    "gelu": lambda lib, x: lib.nn.functional.gelu(x),
}


def measure(case, threads, calls, rounds, settle):
    fn = CASES[case]
    t = torch.randn(SHAPE)
    k = kael.tensor(t.numpy())
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    libs = [("torch", torch, t), ("kael", kael, k)]
    per_call = {name: [] for name, _, _ in libs}
    for _, lib, x in libs:  # warm-up: workers started, caches filled
        for _ in range(calls):
            fn(lib, x)
    for r in range(rounds):
        for name, lib, x in (libs if r % 2 == 0 else libs[::-1]):
            time.sleep(settle)
            start = time.perf_counter()
            for _ in range(calls):
                fn(lib, x)
            per_call[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(v) * 1e6 for name, v in per_call.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--settle", type=float, default=0.02)
    args = ap.parse_args()
    print(f"shape {SHAPE} float32; time per call in us, median of {args.rounds} rounds of {args.calls} calls")
    print("| case | threads | torch us | kael us | kael/torch |")
    print("|---|---:|---:|---:|---:|")
    for case in args.cases:
        for threads in args.threads:
            us = measure(case, threads, args.calls, args.rounds, args.settle)
            print(f"| {case} | {threads} | {us['torch']:.1f} | {us['kael']:.1f} | {us['torch'] / us['kael']:.2f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
