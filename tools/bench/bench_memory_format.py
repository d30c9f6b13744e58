"""Memory-format conversions and the cost of the memory_format= wrappers, kael and torch side by side.

    nice -n 5 .venv/bin/python tools/bench/bench_memory_format.py

Prints the median of several runs for each case, in microseconds, and kael/torch."""
import statistics
import timeit

import numpy as np
import torch

import kael


def median_us(fn, number):
    return statistics.median(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main():
    data = np.random.default_rng(0).standard_normal((32, 64, 56, 56)).astype(np.float32)
    small = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    k, t = kael.tensor(data), torch.tensor(data)
    kcl, tcl = k.contiguous(memory_format=kael.channels_last), t.contiguous(memory_format=torch.channels_last)
    ks, ts = kael.tensor(small), torch.tensor(small)
    cases = [
        ("contiguous(channels_last) 32x64x56x56", lambda: k.contiguous(memory_format=kael.channels_last),
         lambda: t.contiguous(memory_format=torch.channels_last), 5),
        ("contiguous() of channels_last 32x64x56x56", lambda: kcl.contiguous(), lambda: tcl.contiguous(), 5),
        ("to(float64) of channels_last 32x64x56x56", lambda: kcl.to(kael.float64), lambda: tcl.to(torch.float64), 3),
        ("contiguous() 4x4 (call overhead)", lambda: ks.contiguous(), lambda: ts.contiguous(), 20000),
        ("to(float32) 4x4 (call overhead)", lambda: ks.to(kael.float32), lambda: ts.to(torch.float32), 20000),
        ("clone() 4x4 (call overhead)", lambda: ks.clone(), lambda: ts.clone(), 20000),
    ]
    print(f"{'case':45s} {'kael us':>10s} {'torch us':>10s} {'kael/torch':>10s}")
    for name, kf, tf, number in cases:
        kt, tt = median_us(kf, number), median_us(tf, number)
        print(f"{name:45s} {kt:10.2f} {tt:10.2f} {kt / tt:10.2f}")


if __name__ == "__main__":
    main()
