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
  Without kael's max_pool2d (kael.nn.functional.max_pool2d) it says so and times the two
  convolutions alone.

Method: the same weights and inputs in both libraries; after --warmup calls each, --runs rounds
alternating kael and torch, each round timing --steps calls; the figure is the median over the
rounds of the time per call. Ratio = torch time / kael time (above 1: kael faster). Report the
machine's load (`uptime`) with the figures: on a shared machine they move.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import kael


def to_kael(t, requires_grad=False):
    out = kael.tensor(t.detach().numpy())
    return out.requires_grad_() if requires_grad else out


def resnet_case(lib, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    w = (rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05)
    if lib is torch:
        xt, wt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
        F = torch.nn.functional
    else:
        xt, wt = kael.tensor(x).requires_grad_(), kael.tensor(w).requires_grad_()
        F = kael.nn.functional

    def step():
        xt.grad = None
        wt.grad = None
        F.conv2d(xt, wt, None, 1, 1).sum().backward()
    return step


def lenet_case(lib, with_pool, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    torch.manual_seed(seed)
    tm = torch.nn.ModuleDict(dict(c1=torch.nn.Conv2d(1, 6, 5, padding=2), c2=torch.nn.Conv2d(6, 16, 5),
                                  f1=torch.nn.Linear(400, 120), f2=torch.nn.Linear(120, 84), f3=torch.nn.Linear(84, 10)))
    if lib is torch:
        m, F, xt, yt = tm, torch.nn.functional, torch.from_numpy(x), torch.from_numpy(y)
    else:
        m = kael.nn.ModuleDict(dict(c1=kael.nn.Conv2d(1, 6, 5, padding=2), c2=kael.nn.Conv2d(6, 16, 5),
                                    f1=kael.nn.Linear(400, 120), f2=kael.nn.Linear(120, 84),
                                    f3=kael.nn.Linear(84, 10)))
        m.load_state_dict({k: to_kael(v) for k, v in tm.state_dict().items()})
        F, xt, yt = kael.nn.functional, kael.tensor(x), kael.tensor(y)
    opt = lib.optim.SGD(m.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        h = F.relu(m["c1"](xt))
        if with_pool:
            h = F.max_pool2d(h, 2)
        h = F.relu(m["c2"](h))
        if with_pool:
            h = F.max_pool2d(h, 2)
            h = F.relu(m["f1"](h.flatten(1)))
            h = F.relu(m["f2"](h))
            loss = F.cross_entropy(m["f3"](h), yt)
        else:
            loss = h.sum()
        loss.backward()
        opt.step()
    return step


def timed(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def measure(name, make, threads, args):
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    ks, ts = make(kael), make(torch)
    for _ in range(args.warmup):
        ks()
        ts()
    kt, tt = [], []
    for _ in range(args.runs):
        kt.append(timed(ks, args.steps))
        tt.append(timed(ts, args.steps))
    k, t = statistics.median(kt), statistics.median(tt)
    print(f"{name:<28} threads={threads}  kael {k * 1e3:8.2f} ms  torch {t * 1e3:8.2f} ms  torch/kael {t / k:5.2f}",
          flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", choices=["resnet", "lenet"], default=None)
    args = p.parse_args()
    with_pool = hasattr(kael.nn.functional, "max_pool2d")
    if not with_pool:
        print("kael has no max_pool2d: the lenet figures are the two convolutions alone (relu, sum, SGD step)")
    for threads in args.threads:
        if args.only in (None, "resnet"):
            measure("resnet 3x3 64->64 56x56 N=8", resnet_case, threads, args)
        if args.only in (None, "lenet"):
            measure("lenet step, batch 64" if with_pool else "lenet convs, batch 64",
                    lambda lib: lenet_case(lib, with_pool), threads, args)


if __name__ == "__main__":
    main()
