#!/usr/bin/env python3
"""GPT-2 small decoding speed: kael's KV-cache decoder against transformers' generate, and the
memory-bandwidth limit.

    .venv/bin/python tools/bench/gpt_decode.py                  # 1 and 2 threads, 3 runs each
    .venv/bin/python tools/bench/gpt_decode.py --threads 1 --runs 1 --tokens 50   # a quick look
    .venv/bin/python tools/bench/gpt_decode.py --markdown       # the table as Markdown

The model is GPT-2 small (124M parameters: vocab 50257, block 1024, 12 layers, 12 heads, 768
wide) with random weights (std 0.02, the LM head tied to wte), greedy decoding of --tokens new
tokens after a --prompt-token prompt. Rows:
  kael f32 b1     kael.GPT.generate, float32 weights, batch 1
  kael f32 b8     the same, batch 8 (aggregate tokens/s: 8 * tokens / time)
  kael bf16 b1    model.to(kael.bfloat16), batch 1; checked: at every step the token it chose has a
                  float32 logit (transformers, float32 weights) within bf16 tolerance of the largest
  hf f32 b1       transformers' GPT2LMHeadModel.generate(do_sample=False, use_cache=True), float32
  limit f32 b1    the streaming-read bandwidth (the best of 5 kael sums over 1.2 GB at the same
                  thread count) divided by the float32 parameter bytes: the tokens/s of a decoder
                  that reads every parameter once per token at that bandwidth (bf16: half the bytes)
Each (row, thread count) runs in a fresh process (no library's worker threads compete with
another's); a process warms up with one short generation, then times --runs generations and
reports their median. The greedy tokens of kael float32 are checked equal to transformers'.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

VOCAB, BLOCK, LAYERS, HEADS, WIDTH = 50257, 1024, 12, 12, 768


def weights():
    """Hugging Face's names and float32 NumPy arrays (Conv1D layout), drawn once from seed 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    c = WIDTH

    def normal(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    out = {"transformer.wte.weight": normal(VOCAB, c), "transformer.wpe.weight": normal(BLOCK, c)}
    for i in range(LAYERS):
        p = f"transformer.h.{i}."
        out[p + "ln_1.weight"] = np.ones(c, np.float32)
        out[p + "ln_1.bias"] = np.zeros(c, np.float32)
        out[p + "attn.c_attn.weight"] = normal(c, 3 * c)
        out[p + "attn.c_attn.bias"] = np.zeros(3 * c, np.float32)
        out[p + "attn.c_proj.weight"] = normal(c, c)
        out[p + "attn.c_proj.bias"] = np.zeros(c, np.float32)
        out[p + "ln_2.weight"] = np.ones(c, np.float32)
        out[p + "ln_2.bias"] = np.zeros(c, np.float32)
        out[p + "mlp.c_fc.weight"] = normal(c, 4 * c)
        out[p + "mlp.c_fc.bias"] = np.zeros(4 * c, np.float32)
        out[p + "mlp.c_proj.weight"] = normal(4 * c, c)
        out[p + "mlp.c_proj.bias"] = np.zeros(c, np.float32)
    out["transformer.ln_f.weight"] = np.ones(c, np.float32)
    out["transformer.ln_f.bias"] = np.zeros(c, np.float32)
    return out


def prompt(batch, length):
    import numpy as np

    return np.random.default_rng(1).integers(0, VOCAB, (batch, length), dtype=np.int64)


def hf_model(w):
    import torch
    import transformers

    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH)
    model = transformers.GPT2LMHeadModel(config).float().eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()}, strict=False)
    model.tie_weights()
    return model


def child(args):
    """One (row, thread count): prints a JSON line."""
    w = weights()
    result = {}
    if args.child == "bandwidth":
        import kael

        kael.set_num_threads(args.threads)
        a = kael.ones(300_000_000)  # 1.2 GB
        a.sum()
        best = min(timed(lambda: a.sum())[0] for _ in range(5))
        result["bandwidth"] = a.numel() * 4 / best
        result["param_bytes_f32"] = sum(v.nbytes for v in w.values())
    elif args.child == "hf":
        import torch

        torch.set_num_threads(args.threads)
        model = hf_model(w)
        idx = torch.from_numpy(prompt(1, args.prompt))
        kw = dict(do_sample=False, use_cache=True, pad_token_id=0, attention_mask=torch.ones_like(idx))
        with torch.no_grad():
            model.generate(idx, max_new_tokens=8, min_new_tokens=8, **kw)
            times = []
            for _ in range(args.runs):
                dt, out = timed(lambda: model.generate(idx, max_new_tokens=args.tokens, min_new_tokens=args.tokens, **kw))
                times.append(dt)
        result["tokens_per_s"] = args.tokens / statistics.median(times)
        result["tokens"] = out[0, args.prompt:].tolist()
    else:
        import kael

        kael.set_num_threads(args.threads)
        dtype, batch = args.child.split("-")
        batch = int(batch)
        model = kael.GPT(kael.GPTConfig(vocab_size=VOCAB, block_size=BLOCK, n_layer=LAYERS, n_head=HEADS,
                                        n_embd=WIDTH)).eval()
        model.load_state_dict({k: kael.tensor(v) for k, v in w.items() if k != "lm_head.weight"}, strict=False)
        if dtype == "bf16":
            model = model.to(kael.bfloat16)
        idx = kael.tensor(prompt(batch, args.prompt))
        model.generate(idx, 8, temperature=0)
        times = []
        for _ in range(args.runs):
            dt, out = timed(lambda: model.generate(idx, args.tokens, temperature=0))
            times.append(dt)
        result["tokens_per_s"] = batch * args.tokens / statistics.median(times)
        result["tokens"] = out[0, args.prompt:].tolist()
    print(json.dumps(result))


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def run_child(name, threads, args):
    cmd = [sys.executable, __file__, "--child", name, "--threads", str(threads), "--tokens", str(args.tokens),
           "--prompt", str(args.prompt), "--runs", str(args.runs)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def bf16_check(tokens, args):
    """The largest gap, over the steps, between the best float32 logit and that of the token the
    bfloat16 decoder chose, relative to the logits' spread at that step."""
    import torch

    model = hf_model(weights())
    seq = torch.cat([torch.from_numpy(prompt(1, args.prompt))[0], torch.tensor(tokens)])
    with torch.no_grad():
        logits = model(seq[None, :-1]).logits[0, args.prompt - 1:]
    chosen = logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
    gap = (logits.max(1).values - chosen) / (logits.max(1).values - logits.min(1).values)
    return float(gap.max())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.threads = args.threads[0]
        child(args)
        return
    rows = []
    for t in args.threads:
        bw = run_child("bandwidth", t, args)
        limit = bw["bandwidth"] / bw["param_bytes_f32"]
        f32 = run_child("f32-1", t, args)
        hf = run_child("hf", t, args)
        b8 = run_child("f32-8", t, args)
        bf16 = run_child("bf16-1", t, args)
        same = f32["tokens"] == hf["tokens"]
        gap = bf16_check(bf16["tokens"], args)
        rows.append((t, bw["bandwidth"] / 1e9, limit, f32["tokens_per_s"], hf["tokens_per_s"], b8["tokens_per_s"],
                     bf16["tokens_per_s"], same, gap))
    head = ("threads", "GB/s", "limit f32 tok/s", "kael f32 b1", "% of limit", "hf f32 b1", "kael/hf", "kael f32 b8",
            "b8/b1", "kael bf16 b1", "bf16/f32", "bf16/hf", "greedy = hf", "bf16 worst gap")
    lines = []
    for t, gbs, limit, k1, h1, k8, kb, same, gap in rows:
        lines.append((t, f"{gbs:.1f}", f"{limit:.1f}", f"{k1:.1f}", f"{100 * k1 / limit:.0f}%", f"{h1:.1f}",
                      f"{k1 / h1:.2f}x", f"{k8:.1f}", f"{k8 / k1:.2f}x", f"{kb:.1f}", f"{kb / k1:.2f}x",
                      f"{kb / h1:.2f}x", "yes" if same else "NO", f"{gap:.4f}"))
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in lines:
            print("| " + " | ".join(str(x) for x in line) + " |")
    else:
        for h, *vals in zip(head, *lines):
            print(f"{h:>16} " + " ".join(f"{str(v):>10}" for v in vals))


if __name__ == "__main__":
    main()
