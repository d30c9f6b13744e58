"""PyTorch's autograd tutorial (pytorch/tutorials, beginner_source/basics/autogradqs_tutorial.py),
its statements spelled out here, run with kael in place of torch: it prints what torch prints
(with the same weights, copied in), but for the name of the loss's node: kael's
binary_cross_entropy_with_logits is composite (kael.nn.functional, written with maximum as the
chapter says), so its last node is the mean's (docs/decisions/autograd.md)."""
import contextlib
import io
import re

import numpy as np
import torch

import kael


def run(L):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rng = np.random.default_rng(0)
        x = L.ones(5)
        y = L.zeros(3)
        w = L.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
        b = L.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
        z = L.matmul(x, w) + b
        loss = L.nn.functional.binary_cross_entropy_with_logits(z, y)
        print(f"Gradient function for z = {z.grad_fn}")
        print(f"Gradient function for loss = {loss.grad_fn}")
        loss.backward()
        print(w.grad)
        print(b.grad)
        z = L.matmul(x, w) + b
        print(z.requires_grad)
        with L.no_grad():
            z = L.matmul(x, w) + b
        print(z.requires_grad)
        z = L.matmul(x, w) + b
        z_det = z.detach()
        print(z_det.requires_grad)
        inp = L.eye(4, 5, requires_grad=True)
        out_ = (inp + 1).pow(2).t()
        out_.backward(L.ones_like(out_), retain_graph=True)
        print(f"First call\n{inp.grad}")
        out_.backward(L.ones_like(out_), retain_graph=True)
        print(f"\nSecond call\n{inp.grad}")
        inp.grad.zero_()
        out_.backward(L.ones_like(out_), retain_graph=True)
        print(f"\nCall after zeroing gradients\n{inp.grad}")
    return re.sub(r" at 0x[0-9a-f]+", " at 0x", out.getvalue())


def test_autograd_tutorial_prints_what_torch_prints():
    k, t = run(kael), run(torch)
    t = t.replace("<BinaryCrossEntropyWithLogitsBackward0 object", "<MeanBackward0 object")
    assert k == t
