"""The gradients of scaled_dot_product_attention against PyTorch's autograd.

With create_graph=False, kael computes the three gradients with one fused kernel that never
stores the (L, S) weights (Note [Attention backward] in aten/src/native/cpu/attention_backward.cpp);
with create_graph=True it composes registered ops (differentiable again). Both are checked
against torch: shapes at the edges of the 32 x 128 blocks and beyond one key block (the
two-pass path), broadcast batch dims, bool, float and broadcast masks, is_causal (square and
rectangular), fully masked rows, scale, the half types, non-contiguous inputs, dropout (with
the kernel's own keep mask, in torch), gradients of a subset of the inputs, 1 and 2 threads,
and the gradient of a floating attn_mask (broadcast masks summed back, dropout, a
float32 mask with half queries).
"""
import math

import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, check, make_pair, rand_torch, to_kael, to_torch

SHAPES = [  # (q, k, v)
    ((4, 8), (6, 8), (6, 8)),
    ((2, 5, 8), (2, 7, 8), (2, 7, 3)),
    ((2, 3, 10, 16), (2, 3, 10, 16), (2, 3, 10, 16)),
    ((1, 2, 33, 64), (1, 2, 130, 64), (1, 2, 130, 64)),  # two key blocks: the two-pass path
    ((2, 1, 5, 4), (1, 3, 6, 4), (2, 3, 6, 5)),  # broadcast batch dims: summed back
    ((3, 1, 8), (3, 1, 8), (3, 1, 8)),
    ((2, 40, 20), (2, 257, 20), (2, 257, 17)),  # three key blocks, Ev != E
    ((2, 4, 128, 32), (2, 4, 128, 32), (2, 4, 128, 32)),  # the charlm demo's heads
]


def torch_grads(q, k, v, g, compute=None, **kw):
    """torch's gradients for q, k, v (computed in `compute`'s dtype, then rounded to q's)."""
    dtype = q.dtype
    compute = compute or dtype
    leaves = [t.detach().to(compute).requires_grad_() for t in (q, k, v)]
    m = kw.get("attn_mask")
    if m is not None and m.dtype != torch.bool:
        kw = dict(kw, attn_mask=m.to(compute))
    out = TF.scaled_dot_product_attention(*leaves, **kw)
    out.backward(g.to(compute))
    return [t.grad.to(dtype) for t in leaves]


def kael_grads(q, k, v, g, create_graph=False, **kw):
    kkw = {key: (to_kael(val) if isinstance(val, torch.Tensor) else val) for key, val in kw.items()}
    leaves = [to_kael(t).requires_grad_() if isinstance(t, torch.Tensor) else t.requires_grad_() for t in (q, k, v)]
    out = KF.scaled_dot_product_attention(*leaves, **kkw)
    return kael.autograd.grad(out, leaves, to_kael(g), create_graph=create_graph)


def oracle(q, k, v, g, **kw):
    """torch's gradients in float64, rounded (float32, float64), or in float32 (the half types,
    which kael computes in float32 and rounds once)."""
    if q.dtype in (torch.float16, torch.bfloat16):
        return torch_grads(q, k, v, g, torch.float32, **kw)
    return torch_grads(q, k, v, g, torch.float64, **kw)


def out_shape(qs, ks, vs):
    batch = torch.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    return tuple(batch) + (qs[-2], vs[-1])


def check_grads(got, want, dtype, atol=None):
    for kg, tg in zip(got, want):
        # atol relative to the gradients' size: they are sums of up to S products
        scale = max(1.0, tg.double().abs().max().item())
        check(kg, tg, atol=None if atol is None else atol * scale)


@pytest.mark.parametrize("create_graph", [False, True], ids=["fused", "composite"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_grads_match_torch(shapes, create_graph):
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    check_grads(kael_grads(q, k, v, g, create_graph), oracle(q, k, v, g), "float64")
    q, k, v, g = (t.float() for t in (q, k, v, g))
    check_grads(kael_grads(q, k, v, g, create_graph), oracle(q, k, v, g), "float32", atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("causal", [False, True])
def test_dtypes(dtype, causal):
    shapes = ((2, 3, 37, 16), (2, 3, 37, 16), (2, 3, 37, 16))
    q, k, v = (rand_torch(s, dtype) for s in shapes)
    g = rand_torch(out_shape(*shapes), dtype)
    got = kael_grads(q, k, v, g, is_causal=causal)
    want = oracle(q, k, v, g, is_causal=causal)
    for kg, tg in zip(got, want):
        assert kg.dtype == getattr(kael, dtype)
    check_grads(got, want, dtype, atol=1e-5 if dtype == "float32" else None)


MASK_CASES = [
    # (q, k, v shapes, mask shape)
    (((2, 3, 10, 8), (2, 3, 14, 8), (2, 3, 14, 8)), (10, 14)),
    (((2, 3, 10, 8), (2, 3, 14, 8), (2, 3, 14, 8)), (2, 1, 10, 14)),
    (((2, 3, 10, 8), (2, 3, 14, 8), (2, 3, 14, 8)), (2, 3, 10, 14)),
    (((1, 2, 40, 8), (1, 2, 300, 8), (1, 2, 300, 6)), (40, 300)),  # two-pass path
]


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("shapes,mshape", MASK_CASES, ids=str)
def test_masks(shapes, mshape, kind):
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    if kind == "bool":
        mask = torch.rand(mshape) > 0.3
        mask[..., 0] = True  # no row fully masked (test_fully_masked_rows)
    else:
        mask = torch.randn(mshape, dtype=torch.float64)
    for create_graph in (False, True):
        check_grads(kael_grads(q, k, v, g, create_graph, attn_mask=mask), oracle(q, k, v, g, attn_mask=mask),
                    "float64")
    qf, kf, vf, gf = (t.float() for t in (q, k, v, g))
    mf = mask if kind == "bool" else mask.float()
    check_grads(kael_grads(qf, kf, vf, gf, attn_mask=mf), oracle(qf, kf, vf, gf, attn_mask=mf), "float32",
                atol=1e-5)


@pytest.mark.parametrize("L,S", [(7, 7), (12, 5), (5, 12), (200, 200), (40, 300), (300, 40)])
def test_causal(L, S):
    shapes = ((2, 2, L, 8), (2, 2, S, 8), (2, 2, S, 4))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    # torch's is_causal is the top-left aligned lower triangle, as kael's
    check_grads(kael_grads(q, k, v, g, is_causal=True), oracle(q, k, v, g, is_causal=True), "float64")


def test_scale():
    shapes = ((2, 9, 8), (2, 150, 8), (2, 150, 8))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    for scale in (0.05, 1.7):
        check_grads(kael_grads(q, k, v, g, scale=scale), oracle(q, k, v, g, scale=scale), "float64")


def test_fully_masked_rows_get_zero_gradients():
    shapes = ((2, 6, 8), (2, 140, 8), (2, 140, 8))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    mask = torch.rand(6, 140) > 0.5
    mask[1] = False  # row 1 sees no key
    mask[3, :] = False
    mask[3, 139] = True  # row 3 sees only a key of the second block
    gq, gk, gv = kael_grads(q, k, v, g, attn_mask=mask)
    want = oracle(q, k, v, g, attn_mask=mask)
    check_grads((gq, gk, gv), want, "float64")
    assert to_torch(gq)[:, 1].abs().max().item() == 0


@pytest.mark.parametrize("layout", ["T", "transpose", "step", "expand"])
def test_non_contiguous_inputs(layout):
    shape = (3, 16, 16)
    q, k, v = (make_pair(shape, "float64", layout) for _ in range(3))
    g = make_pair(shape, "float64", layout)
    leaves = [p.k for p in (q, k, v)]
    for t in leaves:
        t.requires_grad_()
    out = KF.scaled_dot_product_attention(*leaves, is_causal=True)
    got = kael.autograd.grad(out, leaves, g.k)
    check_grads(got, oracle(q.t, k.t, v.t, g.t, is_causal=True), "float64")


def test_subset_of_inputs_and_repeated_calls():
    shapes = ((2, 3, 20, 8), (2, 3, 20, 8), (2, 3, 20, 8))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    want = oracle(q, k, v, g)
    kq, kk, kv = (to_kael(t) for t in (q, k, v))
    kq.requires_grad_()
    kv.requires_grad_()  # key needs no gradient
    out = KF.scaled_dot_product_attention(kq, kk, kv)
    kg = to_kael(g)
    for inputs, expect in (([kv], [want[2]]), ([kq], [want[0]]), ([kq, kv], [want[0], want[2]]),
                           ([kv, kq], [want[2], want[0]])):
        got = kael.autograd.grad(out, inputs, kg, retain_graph=True)
        check_grads(got, expect, "float64")
    # the same graph, a different gradient of the same tensor object changed in place
    kg.mul_(2)
    got = kael.autograd.grad(out, [kq, kv], kg, retain_graph=True)
    check_grads(got, [want[0] * 2, want[2] * 2], "float64")
    # backward into .grad
    out.backward(kg)
    check_grads([kq.grad, kv.grad], [want[0] * 2, want[2] * 2], "float64")


def keep_mask(batch, L, S, p, seed):
    """The dropout factors (0 or 1 / (1 - p)) of the call after kael.manual_seed(seed) (as in
    test_attention_dropout.py: zero queries and keys weigh every key 1 / S)."""
    kael.manual_seed(seed)
    q = kael.zeros(*batch, L, 4, dtype=kael.float64)
    k = kael.zeros(*batch, S, 4, dtype=kael.float64)
    v = kael.eye(S, dtype=kael.float64).expand(*batch, S, S)
    return to_torch(KF.scaled_dot_product_attention(q, k, v, dropout_p=p)).double() * S


@pytest.mark.parametrize("shapes", [((2, 3, 10, 16), (2, 3, 10, 16), (2, 3, 10, 16)),
                                    ((1, 2, 33, 8), (1, 2, 200, 8), (1, 2, 200, 5))], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_dropout(shapes, causal):
    p = 0.3
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float64")
    qs, ks = shapes[0], shapes[1]
    factors = keep_mask(qs[:-2], qs[-2], ks[-2], p, seed=5)
    # torch: softmax(q k^T scale (+ causal)) times kael's factors, @ v
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    scores = leaves[0] @ leaves[1].mT / math.sqrt(qs[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(qs[-2], ks[-2], dtype=torch.bool).triu(1), float("-inf"))
    (torch.softmax(scores, -1) * factors @ leaves[2]).backward(g)
    want = [t.grad for t in leaves]
    # (with create_graph=True the composite path needs the dropout mask's derivative, which
    # _sdpa_dropout_mask does not have)
    kl = [to_kael(t).requires_grad_() for t in (q, k, v)]
    kael.manual_seed(5)
    out = KF.scaled_dot_product_attention(*kl, dropout_p=p, is_causal=causal)
    check_grads(kael.autograd.grad(out, kl, to_kael(g)), want, "float64")


def test_threads_give_the_same_gradients():
    shapes = ((4, 4, 70, 16), (4, 4, 160, 16), (4, 4, 160, 16))
    q, k, v = (rand_torch(s, "float32") for s in shapes)
    g = rand_torch(out_shape(*shapes), "float32")
    before = kael.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            kael.set_num_threads(n)
            results.append([to_torch(t) for t in kael_grads(q, k, v, g, is_causal=True)])
    finally:
        kael.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_double_backward_goes_through_the_composite():
    shapes = ((2, 5, 4), (2, 6, 4), (2, 6, 4))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    kq, kk, kv = (to_kael(t).requires_grad_() for t in (q, k, v))
    out = KF.scaled_dot_product_attention(kq, kk, kv)
    (gq,) = kael.autograd.grad(out.sum(), [kq], create_graph=True)
    (ggk,) = kael.autograd.grad(gq.pow(2).sum(), [kk])
    tq, tk, tv = (t.clone().requires_grad_() for t in (q, k, v))
    tout = TF.scaled_dot_product_attention(tq, tk, tv)
    (tgq,) = torch.autograd.grad(tout.sum(), [tq], create_graph=True)
    (tggk,) = torch.autograd.grad(tgq.pow(2).sum(), [tk])
    check(ggk, tggk)


def mask_grads(lib, q, k, v, m, g, which, create_graph=False, **kw):
    """The gradients of the inputs named by `which` (indices into q, k, v, m), m requiring grad."""
    conv = to_kael if lib is kael else (lambda t: t)
    leaves = [conv(t.detach().clone()).requires_grad_(i in which) for i, t in enumerate((q, k, v, m))]
    F = KF if lib is kael else TF
    out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3], **kw)
    return lib.autograd.grad(out, [leaves[i] for i in which], conv(g), create_graph=create_graph)


@pytest.mark.parametrize("create_graph", [False, True], ids=["fused", "composite"])
@pytest.mark.parametrize("shapes,mshape", MASK_CASES + [
    (((2, 3, 10, 8), (2, 3, 14, 8), (2, 3, 14, 8)), (1, 14)),  # one row for every query
    (((2, 3, 10, 8), (2, 3, 14, 8), (2, 3, 14, 8)), (3, 1, 1)),  # one number per head
    (((3, 70, 8), (3, 70, 8), (3, 70, 5)), (70, 70)),  # three query blocks
], ids=str)
def test_mask_gradient(shapes, mshape, create_graph):
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    m = torch.randn(mshape, dtype=torch.float64)
    g = rand_torch(out_shape(*shapes), "float64")
    for which in ([3], [0, 1, 2, 3], [2, 3]):
        got = mask_grads(kael, q, k, v, m, g, which, create_graph)
        want = mask_grads(torch, q, k, v, m, g, which)
        assert tuple(got[-1].shape) == mshape
        check_grads(got, want, "float64")


def test_mask_gradient_dtypes():
    shapes = ((2, 3, 37, 16), (2, 3, 37, 16), (2, 3, 37, 16))
    for qdtype, mdtype in (("float32", "float32"), ("float16", "float32"), ("bfloat16", "float32"),
                           ("float16", "float16")):
        q, k, v = (rand_torch(s, qdtype) for s in shapes)
        m = rand_torch((37, 37), mdtype)
        g = rand_torch(out_shape(*shapes), qdtype)
        (got,) = mask_grads(kael, q, k, v, m, g, [3])
        assert got.dtype == getattr(kael, mdtype)
        # torch computes the half types in float32 here (its math path), as kael does
        up = [t.float() for t in (q, k, v, m, g)]
        (want,) = mask_grads(torch, *up, [3])
        check(got, want.to(getattr(torch, mdtype)), atol=1e-5 if qdtype == mdtype == "float32" else None)


def test_mask_gradient_with_dropout():
    """The mask's gradient sees the forward pass's dropout factors (the kernel's keep mask)."""
    shapes = ((2, 6, 8), (2, 9, 8), (2, 9, 8))
    q, k, v = (rand_torch(s, "float64") for s in shapes)
    m = torch.randn(6, 9, dtype=torch.float64)
    g = rand_torch(out_shape(*shapes), "float64")
    kael.manual_seed(7)
    (got,) = mask_grads(kael, q, k, v, m, g, [3], dropout_p=0.3)
    kael.manual_seed(7)
    (composite,) = mask_grads(kael, q, k, v, m, g, [3], True, dropout_p=0.3)
    check(got, to_torch(composite.detach()))
    kael.manual_seed(7)
    (no_drop,) = mask_grads(kael, q, k, v, m, g, [3])
    assert not torch.allclose(to_torch(got), to_torch(no_drop))
