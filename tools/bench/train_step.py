#!/usr/bin/env python3
"""One training step of the charlm demo's model, kael vs the same model in PyTorch, side by side.

    .venv/bin/python tools/bench/train_step.py                    # 1 and 2 threads, batch 16
    .venv/bin/python tools/bench/train_step.py --threads 1 --runs 9
    .venv/bin/python tools/bench/train_step.py --clock cpu        # CPU seconds / threads (loaded machine)

Method
------
* The model is kael.examples.charlm.CharTransformer (token and position embeddings, 4
  pre-norm TransformerEncoderLayers with d_model 128, 4 heads, feed-forward 512, GELU, a
  causal mask, a final LayerNorm, a linear head over the 65-character vocabulary) and the
  identical torch.nn model, with the same weights copied across; input batches of 16 windows
  of 128 characters.
* A step is: forward, cross-entropy loss, zero_grad, backward, AdamW step (weight decay on
  the matrices), as in the demo (without its gradient clipping, which neither library needs
  for the comparison).
* One process; each library does 3 warm-up steps, then `--runs` timed runs (default 7),
  alternating between libraries so machine noise hits both alike; a run is `--steps` steps
  (default 3) and reports the time per step. Each cell is the median of the runs.
* Threads: kael.set_num_threads(n) and torch.set_num_threads(n).
* `--clock wall` (default) times elapsed seconds; `--clock cpu` times the process's CPU
  seconds divided by the thread count (the work's own cost on a machine shared with other
  work).
* The losses of the first step are compared (they must agree to float32 rounding).
* Target (issue): kael's step time at most 0.8x PyTorch's, at 1 and 2 threads.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import kael
import kael.nn.functional as F
import kael.optim as optim
from kael.examples.charlm import CharTransformer

VOCAB = 65


class TorchCharTransformer(torch.nn.Module):
    def __init__(self, vocab_size, d_model=128, n_layers=4, n_heads=4, context=128):
        super().__init__()
        self.context = context
        self.token = torch.nn.Embedding(vocab_size, d_model)
        self.position = torch.nn.Embedding(context, d_model)
        self.layers = torch.nn.ModuleList([
            torch.nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.0,
                                             activation="gelu", batch_first=True, norm_first=True)
            for _ in range(n_layers)])
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab_size)
        self.register_buffer("causal_mask", torch.ones(context, context, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, idx):
        length = idx.size(1)
        x = self.token(idx) + self.position(torch.arange(length))
        mask = self.causal_mask[:length, :length]
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


def clock(kind):
    return time.perf_counter if kind == "wall" else time.process_time


def build(batch, context):
    kael.manual_seed(0)
    torch.manual_seed(0)
    tmodel = TorchCharTransformer(VOCAB, context=context)
    kmodel = CharTransformer(VOCAB, context=context)
    kmodel.load_state_dict({k: kael.tensor(v.numpy()) for k, v in tmodel.state_dict().items()})
    x = torch.randint(0, VOCAB, (batch, context))
    y = torch.randint(0, VOCAB, (batch, context))
    kx, ky = kael.tensor(x.numpy()), kael.tensor(y.numpy())

    def groups(model):
        named = list(model.named_parameters())
        return [{"params": [p for _, p in named if p.dim() >= 2], "weight_decay": 0.1},
                {"params": [p for _, p in named if p.dim() < 2], "weight_decay": 0.0}]

    topt = torch.optim.AdamW(groups(tmodel), lr=1e-3, foreach=False)
    kopt = optim.AdamW(groups(kmodel), lr=1e-3)

    def torch_step():
        logits = tmodel(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        topt.zero_grad()
        loss.backward()
        topt.step()
        return loss.item()

    def kael_step():
        logits = kmodel(kx)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ky.reshape(-1))
        kopt.zero_grad()
        loss.backward()
        kopt.step()
        return loss.item()

    return torch_step, kael_step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="steps per timed run")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args()
    tick = clock(args.clock)
    print(f"one training step (forward, backward, AdamW) of the charlm model, batch {args.batch}, "
          f"context {args.context}; median of {args.runs} runs of {args.steps} steps, {args.clock} clock")
    print(f"{'threads':>7} | {'torch ms':>9} | {'kael ms':>9} | {'kael/torch':>10}")
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        kael.set_num_threads(threads)
        torch_step, kael_step = build(args.batch, args.context)
        first_t, first_k = torch_step(), kael_step()
        if abs(first_t - first_k) > 1e-4 * abs(first_t):
            print(f"warning: first losses differ: torch {first_t:.6f}, kael {first_k:.6f}")
        for _ in range(2):
            torch_step()
            kael_step()
        times = {"torch": [], "kael": []}
        for _ in range(args.runs):
            for name, step in (("torch", torch_step), ("kael", kael_step)):
                start = tick()
                for _ in range(args.steps):
                    step()
                elapsed = tick() - start
                if args.clock == "cpu":
                    elapsed /= threads
                times[name].append(elapsed / args.steps * 1e3)
        t_ms, k_ms = statistics.median(times["torch"]), statistics.median(times["kael"])
        print(f"{threads:>7} | {t_ms:>9.1f} | {k_ms:>9.1f} | {k_ms / t_ms:>9.2f}x")


if __name__ == "__main__":
    main()
