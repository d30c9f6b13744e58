#!/usr/bin/env python3
"""One GPT-2 training step (forward, backward, AdamW step, zero_grad): kael vs PyTorch.

    .venv/bin/python tools/bench/gpt_train.py                 # 1 and 2 threads, 3 runs each
    .venv/bin/python tools/bench/gpt_train.py --threads 1 --runs 1 --steps 3   # a quick look
    .venv/bin/python tools/bench/gpt_train.py --markdown      # the table as Markdown
    .venv/bin/python tools/bench/gpt_train.py --profile kael  # kael's time by op (one process)

The model is GPT-2 with n_layer=4, n_head=4, n_embd=256, block_size=256, vocab_size=8192 (a
GPT-2 vocabulary of 50257 makes the LM head, one GEMM, most of the step; --vocab changes it),
batch 8 of full-length sequences, float32, dropout 0, AdamW(lr=3e-4, weight_decay=0.1). Three
implementations start from the same weights and batch:
  kael   _C._gpt_forward over kael.nn.Parameter leaves, kael.optim.AdamW;
  torch  a nanoGPT-style module (nn.Linear, F.scaled_dot_product_attention(is_causal=True),
         tanh GELU, tied LM head, F.cross_entropy) with torch.optim.AdamW, the faster of its
         default and fused=True forms (both are timed);
  hf     transformers' GPT2LMHeadModel (its default attention) with torch.optim.AdamW (default).
A run is one process per thread count holding every implementation: each warms up for --warmup
steps, then the implementations' steps alternate for --steps rounds (the order rotating each
round), so that the machine's load, which moves a lot on a shared machine, hits them alike; a
run's figure for an implementation is the median of its steps. The table shows the median of
the --runs runs' figures. The first step's loss of each is printed as a check that they compute
the same model. The ratio is kael / torch (the faster torch form); the CPU-time ratio compares
the process CPU time of the same steps (every thread's), which on a machine shared with other work
moves less than the wall-clock time (at 1 thread it is the step's own work; at 2 it also counts
the time a thread spins waiting for the other).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

N_LAYER, N_HEAD, N_EMBD, BLOCK, BATCH = 4, 4, 256, 256, 8
LR, WEIGHT_DECAY = 3e-4, 0.1


def initial_weights(vocab):
    """Hugging Face's parameter names and float32 NumPy arrays in its Conv1D layout, drawn as
    GPT-2 initialises them (std 0.02; the residual projections 0.02 / sqrt(2 n_layer))."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}

    def normal(shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    c = N_EMBD
    out["transformer.wte.weight"] = normal((vocab, c))
    out["transformer.wpe.weight"] = normal((BLOCK, c), 0.01)
    proj_std = 0.02 / (2 * N_LAYER) ** 0.5
    for i in range(N_LAYER):
        p = f"transformer.h.{i}."
        out[p + "ln_1.weight"] = np.ones(c, np.float32)
        out[p + "ln_1.bias"] = np.zeros(c, np.float32)
        out[p + "attn.c_attn.weight"] = normal((c, 3 * c))
        out[p + "attn.c_attn.bias"] = np.zeros(3 * c, np.float32)
        out[p + "attn.c_proj.weight"] = normal((c, c), proj_std)
        out[p + "attn.c_proj.bias"] = np.zeros(c, np.float32)
        out[p + "ln_2.weight"] = np.ones(c, np.float32)
        out[p + "ln_2.bias"] = np.zeros(c, np.float32)
        out[p + "mlp.c_fc.weight"] = normal((c, 4 * c))
        out[p + "mlp.c_fc.bias"] = np.zeros(4 * c, np.float32)
        out[p + "mlp.c_proj.weight"] = normal((4 * c, c), proj_std)
        out[p + "mlp.c_proj.bias"] = np.zeros(c, np.float32)
    out["transformer.ln_f.weight"] = np.ones(c, np.float32)
    out["transformer.ln_f.bias"] = np.zeros(c, np.float32)
    return out


def batch(vocab):
    import numpy as np

    rng = np.random.default_rng(1)
    data = rng.integers(0, vocab, (BATCH, BLOCK + 1))
    return data[:, :-1].copy(), data[:, 1:].copy()


# ---------------------------------------------------------------- the three implementations
def kael_step(vocab, threads):
    import kael
    from kael import _C

    kael.set_num_threads(threads)
    weights = initial_weights(vocab)
    config = (vocab, BLOCK, N_LAYER, N_HEAD, N_EMBD, 0.0, True, 1e-5)
    names = [n for n, _ in _C._gpt_parameters(config)]
    params = [kael.nn.Parameter(kael.tensor(weights[n])) for n in names]
    opt = kael.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)
    x, y = (kael.tensor(a) for a in batch(vocab))

    def step():
        _, loss = _C._gpt_forward(config, params, x, y, True)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def torch_nanogpt_step(vocab, threads, fused):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    weights = initial_weights(vocab)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(N_EMBD)
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD)
            self.ln_2 = nn.LayerNorm(N_EMBD)
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
            self.mlp_proj = nn.Linear(4 * N_EMBD, N_EMBD)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(N_EMBD, dim=2)
            q, k, v = (z.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, N_EMBD)
            self.wpe = nn.Embedding(BLOCK, N_EMBD)
            self.h = nn.ModuleList(Block() for _ in range(N_LAYER))
            self.ln_f = nn.LayerNorm(N_EMBD)

        def forward(self, idx, targets):
            pos = torch.arange(idx.size(1))
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    model = GPT()
    with torch.no_grad():
        def put(p, name, transpose=False):
            w = torch.from_numpy(weights[name])
            p.copy_(w.t() if transpose else w)

        put(model.wte.weight, "transformer.wte.weight")
        put(model.wpe.weight, "transformer.wpe.weight")
        for i, blk in enumerate(model.h):
            pre = f"transformer.h.{i}."
            for mod, hf in ((blk.ln_1, "ln_1"), (blk.ln_2, "ln_2")):
                put(mod.weight, pre + hf + ".weight")
                put(mod.bias, pre + hf + ".bias")
            for mod, hf in ((blk.c_attn, "attn.c_attn"), (blk.c_proj, "attn.c_proj"), (blk.c_fc, "mlp.c_fc"),
                            (blk.mlp_proj, "mlp.c_proj")):
                put(mod.weight, pre + hf + ".weight", transpose=True)
                put(mod.bias, pre + hf + ".bias")
        put(model.ln_f.weight, "transformer.ln_f.weight")
        put(model.ln_f.bias, "transformer.ln_f.bias")
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, fused=fused or None)
    x, y = (torch.from_numpy(a) for a in batch(vocab))

    def step():
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def hf_step(vocab, threads):
    import torch
    import torch.nn.functional as F
    import transformers

    torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    weights = initial_weights(vocab)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=BLOCK, n_embd=N_EMBD, n_layer=N_LAYER,
                                     n_head=N_HEAD, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config)
    model.train()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name]))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    x, y = (torch.from_numpy(a) for a in batch(vocab))

    def step():
        logits = model(x).logits
        loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


IMPLS = {
    "kael": kael_step,
    "torch": lambda v, t: torch_nanogpt_step(v, t, fused=False),
    "torch-fused": lambda v, t: torch_nanogpt_step(v, t, fused=True),
    "hf": hf_step,
}


def child(impls, vocab, threads, warmup, steps):
    """Runs in its own process: prints {impl: {"first_loss", "times"}} as JSON. The steps of the
    implementations alternate (the order rotating each round), so that a change of the machine's
    load hits all of them alike."""
    fns = {impl: IMPLS[impl](vocab, threads) for impl in impls}
    out = {}
    for impl, step in fns.items():
        out[impl] = {"first_loss": step(), "times": [], "cpu": []}
        for _ in range(warmup - 1):
            step()
    for r in range(steps):
        order = impls[r % len(impls):] + impls[:r % len(impls)]
        for impl in order:
            t0, c0 = time.perf_counter(), time.process_time()
            fns[impl]()
            out[impl]["times"].append(time.perf_counter() - t0)
            out[impl]["cpu"].append(time.process_time() - c0)
    print(json.dumps(out))


def run_child(impls, vocab, threads, warmup, steps):
    env = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[v] = str(threads)
    cmd = [sys.executable, __file__, "--child", *impls, "--vocab", str(vocab), "--threads", str(threads),
           "--warmup", str(warmup), "--steps", str(steps)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile_kael(vocab, threads, steps, shapes):
    """kael's step with every op timed: the time between entering an op at the dispatcher's
    Python key and leaving it (the ops below autograd, after composites decompose), summed by
    op over the steps, forward and backward together."""
    import kael
    from kael import _C

    step = kael_step(vocab, threads)
    step()
    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    total = (time.perf_counter() - t0) / steps
    timings = _C._profile_ops(lambda: [step() for _ in range(steps)], shapes)[1]
    rows = sorted(timings.items(), key=lambda kv: -kv[1][1])
    print(f"kael step {total * 1e3:.1f} ms at {threads} thread(s); by op (ms per step, calls per step):")
    acc = 0.0
    for name, (calls, seconds) in rows:
        acc += seconds / steps
        print(f"  {name:60s} {seconds / steps * 1e3:8.2f} {calls // steps:6d}")
    print(f"  {'(sum of ops)':60s} {acc * 1e3:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--impls", nargs="+", default=["kael", "torch", "torch-fused", "hf"], choices=sorted(IMPLS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--child", nargs="+", choices=sorted(IMPLS), help=argparse.SUPPRESS)
    ap.add_argument("--profile", choices=["kael"])
    ap.add_argument("--shapes", action="store_true", help="with --profile: by op and argument shapes")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.vocab, args.threads[0], args.warmup, args.steps)
        return
    if args.profile:
        profile_kael(args.vocab, args.threads[0], args.steps, args.shapes)
        return

    print(f"GPT-2 training step: n_layer={N_LAYER} n_head={N_HEAD} n_embd={N_EMBD} block_size={BLOCK} "
          f"vocab_size={args.vocab} batch={BATCH} float32; median of {args.runs} run(s), each the median of "
          f"{args.steps} steps after {args.warmup} warm-up steps; load average {os.getloadavg()[0]:.2f} at start")
    results, cpu_results = {}, {}
    for threads in args.threads:
        figures = {impl: [] for impl in args.impls}
        cpu = {impl: [] for impl in args.impls}
        losses = {}
        for _ in range(args.runs):
            res = run_child(args.impls, args.vocab, threads, args.warmup, args.steps)
            for impl in args.impls:
                figures[impl].append(statistics.median(res[impl]["times"]))
                cpu[impl].append(statistics.median(res[impl]["cpu"]))
                losses[impl] = res[impl]["first_loss"]
        results[threads] = {impl: statistics.median(v) for impl, v in figures.items()}
        cpu_results[threads] = {impl: statistics.median(v) for impl, v in cpu.items()}
        print(f"at {threads} thread(s): first-step losses " + ", ".join(f"{k} {v:.6f}" for k, v in losses.items())
              + "; each run's medians (ms) " + "; ".join(f"{k} " + " ".join(f"{t * 1e3:.0f}" for t in v)
                                                         for k, v in figures.items())
              + "; CPU time (ms, every thread of the process) " + "; ".join(
                  f"{k} " + " ".join(f"{t * 1e3:.0f}" for t in v) for k, v in cpu.items()))
    print(f"load average {os.getloadavg()[0]:.2f} at end")

    torch_impls = [i for i in ("torch", "torch-fused") if i in args.impls]
    ratio = bool(torch_impls) and "kael" in args.impls
    header = (["threads"] + [f"{i} (ms)" for i in args.impls]
              + (["kael / torch", "kael / torch, CPU time"] if ratio else []))
    rows = []
    for threads, res in results.items():
        row = [str(threads)] + [f"{res[i] * 1e3:.1f}" for i in args.impls]
        if ratio:
            best = min(torch_impls, key=lambda i: res[i])
            row.append(f"{res['kael'] / res[best]:.2f}")
            row.append(f"{cpu_results[threads]['kael'] / cpu_results[threads][best]:.2f}")
        rows.append(row)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for row in rows:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
