"""The gradients of layer_norm (and standardize) and gelu against PyTorch's autograd: the fused
kernels (create_graph=False) and the composites of registered ops (create_graph=True); for
layer_norm with and without weight and bias, several normalised dims, non-contiguous inputs, the
floating dtypes."""
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, check, make_pair, rand_torch, to_kael


def grads_of(lib, x, shape, w, b, g, create_graph=False):
    leaves = [t for t in (x, w, b) if t is not None]
    if lib is torch:
        out = TF.layer_norm(x, shape, w, b, 1e-5)
        return torch.autograd.grad(out, leaves, g)
    out = KF.layer_norm(x, shape, w, b, 1e-5)
    return kael.autograd.grad(out, leaves, g, create_graph=create_graph)


CASES = [((7, 33), (33,)), ((2048, 128), (128,)), ((3, 4, 5), (4, 5)), ((2, 3, 17), (2, 3, 17)), ((5, 1), (1,))]


@pytest.mark.parametrize("create_graph", [False, True], ids=["fused", "composite"])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("xshape,nshape", CASES, ids=str)
def test_grads_match_torch(xshape, nshape, affine, create_graph):
    for dtype, atol in (("float64", None), ("float32", 1e-5)):
        x = rand_torch(xshape, dtype)
        g = rand_torch(xshape, dtype)
        w = rand_torch(nshape, dtype) if affine != "none" else None
        b = rand_torch(nshape, dtype) if affine == "both" else None
        tl = [t.double().requires_grad_() if t is not None else None for t in (x, w, b)]
        want = [t.to(x.dtype) for t in grads_of(torch, *tl[:1], nshape, tl[1], tl[2], g.double())]
        kl = [to_kael(t).requires_grad_() if t is not None else None for t in (x, w, b)]
        got = grads_of(kael, kl[0], nshape, kl[1], kl[2], to_kael(g), create_graph)
        assert len(got) == len(want)
        for kg, tg in zip(got, want):
            scale = max(1.0, tg.double().abs().max().item())
            check(kg, tg, atol=None if atol is None else atol * scale)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_dtypes(dtype):
    x = rand_torch((40, 24), dtype)
    g = rand_torch((40, 24), dtype)
    w, b = rand_torch((24,), dtype), rand_torch((24,), dtype)
    # the half types: kael computes in float32 and rounds once
    compute = torch.float32 if dtype in ("float16", "bfloat16") else torch.float64
    tl = [t.to(compute).requires_grad_() for t in (x, w, b)]
    want = [t.to(x.dtype) for t in grads_of(torch, tl[0], (24,), tl[1], tl[2], g.to(compute))]
    kl = [to_kael(t).requires_grad_() for t in (x, w, b)]
    got = grads_of(kael, kl[0], (24,), kl[1], kl[2], to_kael(g))
    for kg, tg in zip(got, want):
        scale = max(1.0, tg.double().abs().max().item())
        check(kg, tg, atol=1e-5 * scale if dtype == "float32" else None)


@pytest.mark.parametrize("layout", ["T", "transpose", "step", "expand"])
def test_non_contiguous(layout):
    shape = (6, 10)
    x = make_pair(shape, "float64", layout)
    g = make_pair(shape, "float64", layout)
    w = rand_torch((10,), "float64")
    x.k.requires_grad_()
    kw = to_kael(w).requires_grad_()
    got = kael.autograd.grad(KF.layer_norm(x.k, (10,), kw, None), [x.k, kw], g.k)
    tx, tw = x.t.detach().clone().requires_grad_(), w.clone().requires_grad_()
    want = torch.autograd.grad(TF.layer_norm(tx, (10,), tw, None), [tx, tw], g.t)
    for kg, tg in zip(got, want):
        check(kg, tg)


def test_standardize_grad():
    x = rand_torch((9, 21), "float64")
    g = rand_torch((9, 21), "float64")
    kx = to_kael(x).requires_grad_()
    for create_graph in (False, True):
        (got,) = kael.autograd.grad(kael.standardize(kx, [21]), [kx], to_kael(g), create_graph=create_graph)
        tx = x.clone().requires_grad_()
        (want,) = torch.autograd.grad(TF.layer_norm(tx, (21,)), [tx], g)
        check(got, want)


def test_layer_norm_module_trains_like_torch():
    tl = torch.nn.LayerNorm(16)
    kl = kael.nn.LayerNorm(16)
    with torch.no_grad():
        tl.weight.copy_(torch.randn(16))
        tl.bias.copy_(torch.randn(16))
    kl.load_state_dict({k: to_kael(v) for k, v in tl.state_dict().items()})
    x = torch.randn(4, 5, 16)
    (tl(x) ** 2).sum().backward()
    (kl(to_kael(x)) ** 2).sum().backward()
    check(kl.weight.grad, tl.weight.grad, atol=1e-4)
    check(kl.bias.grad, tl.bias.grad, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contig", "T"])
def test_gelu_grad(dtype, layout):
    x = make_pair((300, 257), dtype, layout)  # above the parallel grain
    g = rand_torch((300, 257), dtype)
    x.k.requires_grad_()
    tx = x.t.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(TF.gelu(tx), [tx], g)
    # contiguous: the fused kernel; transposed: grad * _gelu_grad(self) (gelu has no double
    # backward, so create_graph=True is not an option here)
    (got,) = kael.autograd.grad(KF.gelu(x.k), [x.k], to_kael(g))
    check(got, want)

