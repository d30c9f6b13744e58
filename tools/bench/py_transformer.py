#!/usr/bin/env python3
"""A plain nanoGPT-style nn.Module program's training step, the same code run in torch and kael.

    .venv/bin/python tools/bench/py_transformer.py                      # both configs, 1 and 2 threads
    .venv/bin/python tools/bench/py_transformer.py --config char --threads 1 --runs 9
    .venv/bin/python tools/bench/py_transformer.py --config gpt --profile kael   # kael's time by op
    .venv/bin/python tools/bench/py_transformer.py --config gpt --profile torch  # torch's, by op

Method
------
* The model is written once (`build(lib, ...)` below) over `lib.nn` and `lib.nn.functional`, as
  a user would write it for torch: token and position Embeddings, Blocks of LayerNorm ->
  CausalSelfAttention (Linear(C, 3C), split, view/transpose to heads,
  F.scaled_dot_product_attention(is_causal=True), transpose/contiguous/view, Linear, Dropout)
  and LayerNorm -> MLP (Linear, GELU, Linear, Dropout), a final LayerNorm, a Linear head tied to
  the token embedding; loss F.cross_entropy; optimizer AdamW (lr 3e-4, weight decay 0.1 on the
  matrices). No fused op is called by name. Dropout p=0.0 (the modules are still called).
* kael's model gets torch's initial weights through load_state_dict.
* A step: forward, loss, zero_grad(set_to_none=True), backward, optimizer step.
* Configs: `gpt` (4 layers, 4 heads, n_embd 256, block 256, batch 8, vocab 8192) and `char`
  (4 layers, 4 heads, n_embd 128, block 64, batch 32, vocab 65).
* One process; kael.set_num_threads(n) and torch.set_num_threads(n). Each library does
  `--warmup` steps, then `--runs` timed runs alternating between libraries (so machine noise
  hits both alike); a run is `--steps` steps and reports the time per step. Each cell is the
  median of the runs; the ratio is kael / torch (below 1: kael faster).
* `--clock wall` (default) times elapsed seconds; `--clock cpu` the process's CPU seconds
  divided by the thread count (the work's own cost on a machine shared with other work; torch's
  OpenMP threads spin while they wait, which this counts too).
* The first step's losses are printed side by side (they agree to float32 rounding).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch

import kael

CONFIGS = {
    "gpt": dict(n_layer=4, n_head=4, n_embd=256, block=256, batch=8, vocab=8192),
    "char": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=32, vocab=65),
}


def build(lib, n_layer, n_head, n_embd, block, vocab, dropout=0.0, **_):
    nn = lib.nn
    F = lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.resid_dropout = nn.Dropout(dropout)
            self.n_head = n_head
            self.n_embd = n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, n_embd),
                wpe=nn.Embedding(block, n_embd),
                drop=nn.Dropout(dropout),
                h=nn.ModuleList([Block() for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            ))
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = lib.arange(0, t, dtype=lib.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for blk in self.transformer.h:
                x = blk(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def optimizer(lib, model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=3e-4, betas=(0.9, 0.95))


def make_steps(cfg):
    torch.manual_seed(0)
    tmodel = build(torch, **cfg)
    for name, p in tmodel.named_parameters():  # nanoGPT's init
        if p.dim() >= 2:
            torch.nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * cfg["n_layer"]) if name.endswith("c_proj.weight")
                                                 else 1.0))
        else:
            torch.nn.init.zeros_(p) if name.endswith("bias") and "ln" not in name else None
    kmodel = build(kael, **cfg)
    kmodel.load_state_dict({n: kael.tensor(v.detach().numpy().copy()) for n, v in tmodel.state_dict().items()})
    tmodel.train()
    kmodel.train()
    topt, kopt = optimizer(torch, tmodel), optimizer(kael, kmodel)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["block"]), generator=g)
    tgt = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["block"]), generator=g)
    kidx, ktgt = kael.tensor(idx.numpy().copy()), kael.tensor(tgt.numpy().copy())

    def tstep():
        loss = tmodel(idx, tgt)
        topt.zero_grad(set_to_none=True)
        loss.backward()
        topt.step()
        return loss

    def kstep():
        loss = kmodel(kidx, ktgt)
        kopt.zero_grad(set_to_none=True)
        loss.backward()
        kopt.step()
        return loss

    return {"torch": tstep, "kael": kstep}


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter
_divisor = 1


def timed(step, steps):
    t0 = _clock()
    for _ in range(steps):
        step()
    return (_clock() - t0) / steps / _divisor


def bench(cfg_name, threads, warmup, steps, runs, clock):
    global _clock, _divisor
    _clock = CLOCK[clock]
    _divisor = threads if clock == "cpu" else 1
    cfg = CONFIGS[cfg_name]
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    fns = make_steps(cfg)
    first = {name: float(fn().item()) for name, fn in fns.items()}
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(timed(fn, steps))
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"{cfg_name:5s} threads={threads}  torch {med['torch'] * 1e3:8.2f} ms  kael {med['kael'] * 1e3:8.2f} ms  "
          f"kael/torch {med['kael'] / med['torch']:.3f}   (first-step loss torch {first['torch']:.6f} "
          f"kael {first['kael']:.6f})", flush=True)


def profile(cfg_name, which, threads, steps):
    cfg = CONFIGS[cfg_name]
    torch.set_num_threads(threads)
    kael.set_num_threads(threads)
    fns = make_steps(cfg)
    step = fns[which]
    for _ in range(3):
        step()
    total = timed(step, steps)
    if which == "kael":
        timings = kael._C._profile_ops(lambda: [step() for _ in range(steps)], False)[1]
        rows = sorted(((n, c, s) for n, (c, s) in timings.items()), key=lambda r: -r[2])
    else:
        with torch.autograd.profiler.profile() as prof:
            for _ in range(steps):
                step()
        rows = sorted(((e.key, e.count, e.self_cpu_time_total / 1e6) for e in prof.key_averages()),
                      key=lambda r: -r[2])
    print(f"{which} {cfg_name} step {total * 1e3:.2f} ms at {threads} thread(s); by op (ms per step, calls per step)"
          + (" (torch: self time)" if which == "torch" else ""))
    acc = 0.0
    for name, calls, seconds in rows[:45]:
        acc += seconds / steps
        print(f"  {name:60s} {seconds / steps * 1e3:8.2f} {calls // steps:6d}")
    print(f"  {'(sum of the rows shown)':60s} {acc * 1e3:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", nargs="+", default=["char", "gpt"], choices=sorted(CONFIGS))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--clock", choices=sorted(CLOCK), default="wall")
    ap.add_argument("--profile", choices=["kael", "torch"])
    args = ap.parse_args()
    if args.profile:
        profile(args.config[0], args.profile, args.threads[0], args.steps)
        return
    print(f"nanoGPT-style training step, float32, {args.clock} clock, median of {args.runs} runs of "
          f"{args.steps} steps; "
          f"load average {os.getloadavg()[0]:.2f} at start")
    for cfg_name in args.config:
        print(f"  {cfg_name}: {CONFIGS[cfg_name]}")
        for threads in args.threads:
            bench(cfg_name, threads, args.warmup, args.steps, args.runs, args.clock)


if __name__ == "__main__":
    main()
