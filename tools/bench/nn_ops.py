#!/usr/bin/env python3
"""Throughput of the neural-network ops, kael against PyTorch side by side, at 1 and 2 threads.

    .venv/bin/python tools/bench/nn_ops.py              # full run
    .venv/bin/python tools/bench/nn_ops.py --quick      # fewer repeats
    .venv/bin/python tools/bench/nn_ops.py --markdown   # table for docs/performance.md

Cases: softmax, log_softmax and layer norm over (4096, 1024) float32; cross-entropy losses over
(N, 50257) classes; matmul and linear (64, 512) x (512, 512); attention with 8 heads, 1024
tokens, 64 dims (plus the causal variant). Each cell is the median of R runs after a warm-up;
runs alternate between the libraries so machine noise hits both. The ratio is torch's time over
kael's (above 1: kael is faster). Results are checked against torch before timing. --min reports
the fastest run instead of the median.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF


def to_kael(t):
    return kael.tensor(t.numpy())


def cases(ce_rows):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 1024, generator=g)
    w, b = torch.randn(1024, generator=g), torch.randn(1024, generator=g)
    logits = torch.randn(ce_rows, 50257, generator=g)
    target = torch.randint(0, 50257, (ce_rows,), generator=g)
    a, m = torch.randn(64, 512, generator=g), torch.randn(512, 512, generator=g)
    q, k, v = (torch.randn(1, 8, 1024, 64, generator=g) for _ in range(3))
    kx, kw, kb, kl, kt, ka, km = map(to_kael, (x, w, b, logits, target, a, m))
    kq, kk, kv = map(to_kael, (q, k, v))
    yield ("softmax (4096, 1024)", lambda: torch.softmax(x, -1), lambda: kael.softmax(kx, -1))
    yield ("log_softmax (4096, 1024)", lambda: torch.log_softmax(x, -1), lambda: kael.log_softmax(kx, -1))
    yield ("layer_norm (4096, 1024)", lambda: TF.layer_norm(x, (1024,), w, b), lambda: KF.layer_norm(kx, (1024,), kw, kb))
    yield (f"cross_entropy ({ce_rows}, 50257)", lambda: TF.cross_entropy(logits, target, reduction="none"),
           lambda: kael.cross_entropy_losses(kl, kt))
    yield ("matmul (64,512)x(512,512)", lambda: a @ m, lambda: ka @ km)
    yield ("linear (64,512)x(512,512)^T", lambda: TF.linear(a, m), lambda: KF.linear(ka, km))
    yield ("attention 8x1024x64", lambda: TF.scaled_dot_product_attention(q, k, v),
           lambda: KF.scaled_dot_product_attention(kq, kk, kv))
    yield ("attention 8x1024x64 causal", lambda: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda: KF.scaled_dot_product_attention(kq, kk, kv, is_causal=True))


def time_once(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def measure(tfn, kfn, repeats, stat):
    tfn(), kfn()
    # calibrate: about 20 ms per timed run
    inner = max(1, int(0.02 / max(time_once(tfn, 1), 1e-7)))
    tt, kt = [], []
    for r in range(repeats):
        order = [(tfn, tt), (kfn, kt)] if r % 2 == 0 else [(kfn, kt), (tfn, tt)]
        for fn, out in order:
            out.append(time_once(fn, inner))
    return stat(tt), stat(kt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ce-rows", type=int, default=1024)
    ap.add_argument("--min", action="store_true", help="report the fastest run instead of the median (on a loaded "
                    "machine the fastest is the least disturbed)")
    args = ap.parse_args()
    repeats = 5 if args.quick else 15
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        kael.set_num_threads(threads)
        for name, tfn, kfn in cases(args.ce_rows):
            torch.testing.assert_close(torch.tensor(kfn().tolist()), tfn(), rtol=1e-4, atol=1e-4)
            t, k = measure(tfn, kfn, repeats, min if args.min else statistics.median)
            rows.append((name, threads, t, k))
    if args.markdown:
        print("| case | threads | torch ms | kael ms | torch/kael |")
        print("|---|---|---|---|---|")
        for name, th, t, k in rows:
            print(f"| {name} | {th} | {t * 1e3:.3f} | {k * 1e3:.3f} | {t / k:.2f}x |")
    else:
        print(f"{'case':34} {'thr':>3} {'torch ms':>10} {'kael ms':>10} {'torch/kael':>10}")
        for name, th, t, k in rows:
            print(f"{name:34} {th:>3} {t * 1e3:>10.3f} {k * 1e3:>10.3f} {t / k:>9.2f}x")


if __name__ == "__main__":
    main()
