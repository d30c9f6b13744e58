"""Gradients through the pieces of a split tensor (split, chunk, slicing) against torch.

The engine lets a slice's backward add its piece into the gradient it already holds for the
sliced tensor, in place, when nothing else references that gradient (Note [Slice gradients
added in place] in kael/autograd/slice_grad_target.h). These tests check the sums, the cases
where it must not happen (hooks, shared gradients, create_graph, external memory) and that the
pieces' own gradients stay their own."""
import numpy as np
import pytest
import torch

import kael
from helpers import check, to_kael


def both(x):
    return x.clone().requires_grad_(), to_kael(x).requires_grad_()


def grads_equal(k, t, exact=False):
    if exact:
        check(k, t, atol=0, rtol=0)
    else:
        check(k, t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("how", ["split", "chunk", "split_sizes", "slices", "steps", "overlap", "unused", "dim0"])
def test_split_pieces(dtype, how):
    x = torch.randn(4, 9, 12, dtype=dtype)
    w = [torch.randn(4, 9, 12, dtype=dtype) for _ in range(3)]

    def pieces(lib, a):
        if how == "split":
            return a.split(4, dim=2)
        if how == "chunk":
            return a.chunk(3, dim=-1)
        if how == "split_sizes":
            return a.split([2, 7, 3], dim=2)
        if how == "slices":
            return a[:, :, :5], a[:, :, 5:8], a[:, :, 8:]
        if how == "steps":
            return a[:, :, ::3], a[:, :, 1::3], a[:, :, 2::3]
        if how == "overlap":
            return a[:, :, :7], a[:, :, 3:10], a[:, :, 6:]
        if how == "unused":
            p = a.split(4, dim=2)
            return p[0], p[2]
        if how == "dim0":
            return a[:1], a[1:3], a[3:]
        raise AssertionError(how)

    def loss(lib, a, ws):
        total = 0
        for i, p in enumerate(pieces(lib, a)):
            total = total + (p * ws[i][tuple(slice(0, s) for s in p.shape)] * (i + 2)).sum()
        return total

    tx, kx = both(x)
    loss(torch, tx, w).backward()
    loss(kael, kx, [to_kael(t) for t in w]).backward()
    grads_equal(kx.grad, tx.grad, exact=how != "overlap")


def test_qkv_heads_as_a_transformer_block():
    B, T, H, D = 2, 7, 2, 4
    x = torch.randn(B, T, 3 * H * D)
    g = torch.randn(B, T, H * D)

    def run(lib, a):
        F = lib.nn.functional
        q, k, v = a.split(H * D, dim=2)
        q, k, v = (z.view(B, T, H, D).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, T, H * D)

    tx, kx = both(x)
    run(torch, tx).backward(g)
    run(kael, kx).backward(to_kael(g))
    check(kx.grad, tx.grad)


def test_base_used_elsewhere_and_retained():
    x = torch.randn(5, 6, dtype=torch.float64)
    for lib, a in zip((torch, kael), both(x)):
        h = a * 3.0
        h.retain_grad()
        p, q = h.split(3, dim=1)
        (h.sin().sum() + (p * 2).sum() + (q * q).sum()).backward()
        if lib is torch:
            t_h, t_a = h.grad, a.grad
        else:
            check(h.grad, t_h)
            check(a.grad, t_a)


def test_piece_hooks_see_their_own_gradient():
    x = torch.randn(3, 8, dtype=torch.float64)
    seen = {}
    for lib, a in zip((torch, kael), both(x)):
        got = seen.setdefault(lib.__name__, {})
        p, q, r = a.split([2, 3, 3], dim=1)
        for name, t in (("p", p), ("q", q), ("r", r)):
            t.register_hook(lambda g, name=name, got=got: got.setdefault(name, g.clone()))
        h = a * 1.0
        h.register_hook(lambda g, got=got: got.setdefault("h", g.clone()))
        s1, s2 = h.split(4, dim=1)
        ((p * 2).sum() + (q * 3).sum() + (r * 4).sum() + (s1 * 5).sum() + (s2 * 6).sum()).backward()
        got["a"] = a.grad
    assert sorted(seen["kael"]) == sorted(seen["torch"]) == ["a", "h", "p", "q", "r"]
    for name, t in seen["torch"].items():
        check(seen["kael"][name], t)


def test_shared_gradient_is_not_modified():
    """h + z sends one gradient tensor to both of its inputs: it is h's gradient when h's
    pieces run their backward (the add ran first) and z's too, so a piece adding into it in place
    would change z's gradient."""
    x = torch.randn(4, 6, dtype=torch.float64)
    y = torch.randn(4, 6, dtype=torch.float64)
    c = torch.randn(4, 6, dtype=torch.float64)
    want = None
    for lib, (a, b) in zip((torch, kael), zip(both(x), both(y))):
        h = a * 2.0
        z = b * 3.0
        p, q = h.split(3, dim=1)
        s = h + z
        ((s * (c if lib is torch else to_kael(c))).sum() + (p * 5).sum() + (q * 7).sum()).backward()
        if lib is torch:
            want = (a.grad, b.grad)
        else:
            check(a.grad, want[0])
            check(b.grad, want[1])


def test_double_backward_through_pieces():
    x = torch.randn(3, 6, dtype=torch.float64)
    out = {}
    for lib, a in zip((torch, kael), both(x)):
        p, q = a.split(3, dim=1)
        y = (p ** 3).sum() + (q ** 2 * p).sum()
        (g,) = lib.autograd.grad(y, [a], create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), [a])
        out[lib.__name__] = (g, gg)
    check(out["kael"][0].detach(), out["torch"][0].detach())
    check(out["kael"][1], out["torch"][1])


def test_external_memory_gradient_is_left_alone():
    """A gradient whose memory kael did not allocate (from NumPy) is never added into in place."""
    arr = np.ones((2, 6), dtype=np.float64)
    before = arr.copy()

    class FromNumpy(kael.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            return kael.from_numpy(arr)

    a = kael.randn(2, 6, dtype=kael.float64, requires_grad=True)
    h = a * 1.0
    y = FromNumpy.apply(h)
    p, q = h.split(3, dim=1)
    (y.sum() + (p * 2).sum() + (q * 3).sum()).backward()
    assert np.array_equal(arr, before)
    want = np.ones((2, 6)) + np.concatenate([np.full((2, 3), 2.0), np.full((2, 3), 3.0)], axis=1)
    assert np.array_equal(a.grad.numpy(), want)
