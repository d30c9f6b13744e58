#!/usr/bin/env python3
"""An LSTM language-model training step, kael and torch side by side.

    nice -n 5 .venv/bin/python tools/bench/rnn.py                    # 1 and 2 threads
    nice -n 5 .venv/bin/python tools/bench/rnn.py --threads 1 --runs 9 --steps 10
    nice -n 5 .venv/bin/python tools/bench/rnn.py --parts            # forward / backward / step apart

Method
------
* The model (the PyTorch word-language-model example's shape): Embedding(10000, 256), a
  2-layer LSTM of 256 hidden units, dropout 0 (so both libraries do the same arithmetic), a
  Linear(256, 10000) decoder; input (35, 20) tokens (seq 35, batch 20, time-major), targets
  the same shape; loss cross_entropy over the 700 predictions; SGD(lr=0.1) step. The same
  initial weights in both libraries; the step also runs the hidden state detached from the
  last step's (truncated BPTT, as the example does).
* A step: zero_grad, forward, loss, backward, optimizer step.
* After --warmup steps of each, --runs rounds in which kael and torch each run --steps steps
  (alternating, so a change of load touches both); each figure is the median over the rounds
  of the time per step. The ratio is torch's time / kael's (above 1: kael is faster).
* The losses of the first step are printed for both (they must agree) .
* Report the machine's load (`uptime`) with the figures: on a shared machine they move.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import kael

VOCAB, EMB, HID, LAYERS, SEQ, BATCH = 10000, 256, 256, 2, 35, 20


def build(lib):
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(VOCAB, EMB)
            self.rnn = nn.LSTM(EMB, HID, LAYERS)
            self.decoder = nn.Linear(HID, VOCAB)

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(out.reshape(-1, HID)), hidden

    return LM()


def make_models():
    torch.manual_seed(0)
    tm = build(torch)
    km = build(kael)
    km.load_state_dict({n: kael.tensor(v.detach().numpy().copy()) for n, v in tm.state_dict().items()})
    return tm, km


def runner(lib, model, data, targets):
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    F = lib.nn.functional
    state = {"hidden": (lib.zeros(LAYERS, BATCH, HID), lib.zeros(LAYERS, BATCH, HID))}

    def step():
        h, c = state["hidden"]
        opt.zero_grad()
        logits, (h, c) = model(data, (h.detach(), c.detach()))
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        opt.step()
        state["hidden"] = (h, c)
        return loss

    return step


def timed(step, n):
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def parts(lib, model, data, targets, n):
    """Median seconds of forward+loss, backward and the optimizer step."""
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    F = lib.nn.functional
    hidden = (lib.zeros(LAYERS, BATCH, HID), lib.zeros(LAYERS, BATCH, HID))
    fw, bw, st = [], [], []
    for _ in range(n):
        opt.zero_grad()
        t0 = time.perf_counter()
        logits, _ = model(data, hidden)
        loss = F.cross_entropy(logits, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        fw.append(t1 - t0)
        bw.append(t2 - t1)
        st.append(t3 - t2)
    return statistics.median(fw), statistics.median(bw), statistics.median(st)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--parts", action="store_true", help="time forward, backward and the step apart")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, size=(SEQ, BATCH))
    y = rng.integers(0, VOCAB, size=(SEQ * BATCH,))
    tdata, ttarg = torch.tensor(x), torch.tensor(y)
    kdata, ktarg = kael.tensor(x), kael.tensor(y)

    tm, km = make_models()
    lt = runner(torch, tm, tdata, ttarg)()
    lk = runner(kael, km, kdata, ktarg)()
    print(f"first-step loss: torch {lt.item():.6f}  kael {lk.item():.6f}")

    for threads in args.threads:
        torch.set_num_threads(threads)
        kael.set_num_threads(threads)
        tm, km = make_models()
        ts, ks = runner(torch, tm, tdata, ttarg), runner(kael, km, kdata, ktarg)
        for _ in range(args.warmup):
            ts()
            ks()
        tt, kt = [], []
        for _ in range(args.runs):
            tt.append(timed(ts, args.steps))
            kt.append(timed(ks, args.steps))
        t, k = statistics.median(tt), statistics.median(kt)
        print(f"threads={threads}: torch {t * 1e3:8.2f} ms/step  kael {k * 1e3:8.2f} ms/step  "
              f"torch/kael {t / k:5.2f}")
        if args.parts:
            for name, lib, model, d, tg in (("torch", torch, tm, tdata, ttarg), ("kael", kael, km, kdata, ktarg)):
                f, b, s = parts(lib, model, d, tg, args.runs * args.steps)
                print(f"  {name}: forward+loss {f * 1e3:7.2f} ms  backward {b * 1e3:7.2f} ms  step {s * 1e3:6.2f} ms")


if __name__ == "__main__":
    main()
