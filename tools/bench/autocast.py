#!/usr/bin/env python3
"""A GPT training step under bfloat16 autocast against the float32 step, kael and torch side by side.

    .venv/bin/python tools/bench/autocast.py                          # step times, 1 thread
    .venv/bin/python tools/bench/autocast.py --threads 2 --runs 5
    .venv/bin/python tools/bench/autocast.py --curve 200              # the loss curves, 200 steps
    .venv/bin/python tools/bench/autocast.py --profile                # kael's autocast step by op

Method
------
* The model is a nanoGPT-style nn.Module written once over `lib.nn` (`build(lib, ...)`; the
  `gpt` config: 4 layers, 4 heads, n_embd 256, block 256, batch 8, vocab 8192), AdamW; the
  same initial weights in both libraries.
* A step: forward and loss inside `lib.autocast("cpu", dtype=bfloat16)` (or without it, the
  float32 step), zero_grad, backward, optimizer step, all outside.
* Step times: after --warmup steps of each, --runs rounds in which each of the four
  (kael f32, kael bf16, torch f32, torch bf16) runs --steps steps; each figure is the median
  over the rounds of the time per step. The speed-ups are f32 / bf16 per library.
* --curve N: kael's float32 and autocast runs from the same weights over the same batches of a
  learnable sequence task (token i+1 = (a * token i + b) mod vocab per sequence) for N steps;
  prints the losses every N/10 steps and the largest relative difference |bf16 - f32| / f32,
  per step and over 10-step means.
* Report the machine's load (`uptime`) with the figures: on a shared machine they move.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import kael

CONFIGS = {
    "gpt": dict(n_layer=4, n_head=4, n_embd=256, block=256, batch=8, vocab=8192),
    "char": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=32, vocab=65),
}


def build(lib, n_layer, n_head, n_embd, block, vocab, **_):
    """A nanoGPT-style model over lib.nn: pre-LayerNorm blocks of causal self-attention
    (F.scaled_dot_product_attention) and a GELU MLP, a head tied to the token embedding;
    forward(idx, targets) returns the cross-entropy loss."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.c_attn, self.attn_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.c_fc, self.mlp_proj = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
            self.gelu = nn.GELU()

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.attn_proj(y)
            return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(lib.arange(0, idx.size(1), dtype=lib.long))
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def optimizer(lib, model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=3e-4, betas=(0.9, 0.95))


def make_models(cfg):
    torch.manual_seed(0)
    tmodel = build(torch, **cfg)
    for name, p in tmodel.named_parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, 0.0, 0.02)
    kmodel = build(kael, **cfg)
    kmodel.load_state_dict({n: kael.tensor(v.detach().numpy().copy()) for n, v in tmodel.state_dict().items()})
    return tmodel, kmodel


def batches(cfg, seed):
    """Sequences where each token follows from the one before (per-sequence a, b): learnable."""
    rng = np.random.default_rng(seed)
    v, b, t = cfg["vocab"], cfg["batch"], cfg["block"]
    while True:
        a = rng.integers(1, 8, size=(b, 1))
        c = rng.integers(0, v, size=(b, 1))
        x0 = rng.integers(0, v, size=(b, 1))
        seq = [x0]
        for _ in range(t):
            seq.append((seq[-1] * a + c) % v)
        seq = np.concatenate(seq, axis=1)
        yield seq[:, :-1].copy(), seq[:, 1:].copy()


def step_fn(lib, model, opt, idx, tgt, amp):
    def step():
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=amp):
            loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def timed(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def bench(cfg, threads, warmup, steps, runs):
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    idx, tgt = next(batches(cfg, 1))
    fns = {}
    for amp in (False, True):
        tmodel, kmodel = make_models(cfg)
        tag = "bf16" if amp else "f32"
        fns[f"kael {tag}"] = step_fn(kael, kmodel, optimizer(kael, kmodel), kael.tensor(idx), kael.tensor(tgt), amp)
        fns[f"torch {tag}"] = step_fn(torch, tmodel, optimizer(torch, tmodel), torch.tensor(idx), torch.tensor(tgt),
                                      amp)
    first = {name: float(fn().item()) for name, fn in fns.items()}
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(timed(fn, steps))
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"gpt config, threads={threads}, {runs} runs x {steps} steps, load: {os.getloadavg()}")
    for name in fns:
        print(f"  {name:10s} {med[name] * 1e3:9.1f} ms/step   (first-step loss {first[name]:.5f})")
    for lib in ("kael", "torch"):
        print(f"  {lib} f32/bf16 speed-up: {med[f'{lib} f32'] / med[f'{lib} bf16']:.2f}x")
    print(f"  kael bf16 / torch bf16: {med['kael bf16'] / med['torch bf16']:.2f}   "
          f"kael f32 / torch f32: {med['kael f32'] / med['torch f32']:.2f}")


def curve(cfg, n, threads):
    kael.set_num_threads(threads)
    losses = {}
    for amp in (False, True):
        _, kmodel = make_models(cfg)
        opt = optimizer(kael, kmodel)
        data = batches(cfg, 2)
        out = []
        for _ in range(n):
            x, y = next(data)
            out.append(float(step_fn(kael, kmodel, opt, kael.tensor(x), kael.tensor(y), amp)().item()))
        losses[amp] = np.array(out)
    f32, bf16 = losses[False], losses[True]
    for i in range(0, n, max(1, n // 10)):
        print(f"  step {i:4d}  f32 {f32[i]:.4f}  bf16 {bf16[i]:.4f}  rel {abs(bf16[i] - f32[i]) / f32[i]:.4f}")
    print(f"  step {n - 1:4d}  f32 {f32[-1]:.4f}  bf16 {bf16[-1]:.4f}")
    rel = np.abs(bf16 - f32) / f32
    w = 10
    mean = lambda a: a[: len(a) // w * w].reshape(-1, w).mean(1)  # noqa: E731
    rel_mean = np.abs(mean(bf16) - mean(f32)) / mean(f32)
    print(f"  largest relative difference: per step {rel.max():.4f} (step {rel.argmax()}), "
          f"10-step means {rel_mean.max():.4f}; load: {os.getloadavg()}")


def profile(cfg, threads, steps):
    kael.set_num_threads(threads)
    idx, tgt = next(batches(cfg, 1))
    _, kmodel = make_models(cfg)
    step = step_fn(kael, kmodel, optimizer(kael, kmodel), kael.tensor(idx), kael.tensor(tgt), True)
    for _ in range(2):
        step()
    timings = kael._C._profile_ops(lambda: [step() for _ in range(steps)], True)[1]
    rows = sorted(((n, c, s) for n, (c, s) in timings.items()), key=lambda r: -r[2])
    for name, calls, secs in rows[:30]:
        print(f"  {secs / steps * 1e3:8.2f} ms  {calls // steps:5d}x  {name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="gpt", choices=sorted(CONFIGS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--curve", type=int, default=0, metavar="N")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    cfg = CONFIGS[args.config]
    if args.curve:
        curve(cfg, args.curve, args.threads)
    elif args.profile:
        profile(cfg, args.threads, args.steps)
    else:
        bench(cfg, args.threads, args.warmup, args.steps, args.runs)


if __name__ == "__main__":
    main()
