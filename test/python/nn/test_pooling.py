"""Pooling, resampling, fold/unfold and channel dropout against torch: values, indices, gradients,
shapes, layouts, dtypes and exception classes."""
import math

import numpy as np
import warnings

import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn as nn
import kael.nn.functional as F
from helpers import check, to_kael, to_torch


def layout(t, kind):
    """(torch tensor, kael tensor) with the same values; kael's strided as `kind` says."""
    if kind == "contig":
        return t, to_kael(t)
    if kind == "channels_last":  # (N, C, H, W) stored as (N, H, W, C)
        return t, to_kael(t.permute(0, 2, 3, 1).contiguous()).permute(0, 3, 1, 2)
    if kind == "sliced":  # every other column of a wider tensor
        wide = torch.randn(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        wide[..., ::2] = t
        k = to_kael(wide)[..., ::2]
        assert not k.is_contiguous()
        return t, k
    raise AssertionError(kind)


def run(tfn, kfn, x, kind="contig", grad=True, atol=None, rtol=None, n_out=None):
    """Runs tfn on torch x and kfn on kael's copy (laid out as `kind`); compares every output and,
    when grad, the input's gradient for a random upstream gradient of the first output."""
    tx, kx = layout(x, kind)
    tx = tx.detach().requires_grad_(grad)
    if grad:
        kx.requires_grad_(True)
    tout = tfn(tx)
    kout = kfn(kx)
    touts = tout if isinstance(tout, tuple) else (tout,)
    kouts = kout if isinstance(kout, tuple) else (kout,)
    assert len(touts) == len(kouts)
    for ko, to in zip(kouts, touts):
        check(ko, to.detach(), atol=atol, rtol=rtol)
    if grad:
        g = torch.randn_like(touts[0])
        touts[0].backward(g)
        kouts[0].backward(to_kael(g))
        check(kx.grad, tx.grad, atol=atol, rtol=rtol)
    return kout, tout


def run_reduced(tfn, kfn, x):
    """float16/bfloat16: the forward against torch in the same dtype; the input's gradient against
    torch's float64 gradient rounded once to the dtype (kael accumulates gradients in float32 and
    rounds once, where torch's kernels add in the storage type)."""
    tx = x.detach().requires_grad_()
    kx = to_kael(x).requires_grad_()
    tout, kout = tfn(tx), kfn(kx)
    check(kout, tout.detach())
    g = torch.randn_like(tout)
    kout.backward(to_kael(g))
    t32 = x.detach().double().requires_grad_()
    tfn(t32).backward(g.double())
    check(kx.grad, t32.grad.to(x.dtype))


def raises_like(tfn, kfn, prefix=None):
    """Both raise, the same exception class; kael's message starts with the op name."""
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(Exception) as ke:
        kfn()
    assert type(ke.value).__name__ == type(te.value).__name__, (ke.value, te.value)
    if prefix:
        msg = str(ke.value)
        assert msg.startswith(prefix), msg


# ---------------------------------------------------------------- max pooling

MAX_CASES = [
    # kernel, stride, padding, dilation, ceil_mode, shape
    (2, None, 0, 1, False, (2, 3, 8, 8)),
    (3, 2, 1, 1, False, (2, 3, 9, 11)),  # overlapping windows, padding
    (3, 2, 1, 1, True, (1, 2, 10, 10)),  # ceil_mode, last window partly outside
    ((3, 2), (2, 1), (1, 0), (2, 1), False, (2, 2, 11, 7)),  # dilation, rectangular
    (3, 3, 1, 2, True, (1, 1, 13, 12)),  # dilation with ceil_mode and padding
    (2, 1, 1, 1, False, (3, 7, 6)),  # unbatched
    (5, 5, 0, 1, True, (1, 2, 7, 7)),  # ceil_mode window that starts inside, ends outside
]


@pytest.mark.parametrize("k,s,p,d,ceil,shape", MAX_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_max_pool2d_values_indices_grad(k, s, p, d, ceil, shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    run(lambda t: TF.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True),
        lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x)


@pytest.mark.parametrize("kind", ["channels_last", "sliced"])
def test_max_pool2d_layouts(kind):
    x = torch.randn(2, 3, 9, 10)
    run(lambda t: TF.max_pool2d(t, 3, 2, 1, return_indices=True),
        lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x, kind)


def test_max_pool2d_ties_pick_first():
    # many equal values (integers in a small range) in overlapping windows
    x = torch.randint(0, 3, (2, 2, 9, 9)).double()
    run(lambda t: TF.max_pool2d(t, 3, 1, 1, return_indices=True),
        lambda t: F.max_pool2d(t, 3, 1, 1, return_indices=True), x)
    x = torch.zeros(1, 1, 6, 6)
    run(lambda t: TF.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True),
        lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True), x)


def test_max_pool2d_nan_and_inf():
    x = torch.randn(1, 2, 8, 8)
    x[0, 0, 1, 1] = math.nan
    x[0, 0, 2, 3] = math.nan  # two NaNs in one window: torch keeps the later one
    x[0, 1, :4, :4] = -math.inf  # all -inf windows keep their first element
    x[0, 1, 5, 5] = math.inf
    run(lambda t: TF.max_pool2d(t, 3, 2, 1, return_indices=True),
        lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x, grad=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8])
def test_max_pool2d_dtypes(dtype):
    x = torch.randint(0, 100, (2, 3, 7, 7)).to(dtype)
    tout, tidx = TF.max_pool2d(x, 3, 2, 1, return_indices=True)
    kout, kidx = F.max_pool2d(to_kael(x), 3, 2, 1, return_indices=True)
    check(kout, tout)
    check(kidx, tidx)


def test_max_pool2d_half_grad():
    x = torch.randn(2, 3, 8, 8, dtype=torch.bfloat16)
    run(lambda t: TF.max_pool2d(t, 2), lambda t: F.max_pool2d(t, 2), x)


def test_max_pool2d_empty_batch():
    x = torch.randn(0, 3, 8, 8)
    run(lambda t: TF.max_pool2d(t, 2), lambda t: F.max_pool2d(t, 2), x, grad=False)


@pytest.mark.parametrize("k,s,p,d,ceil,shape", [(3, 2, 1, 1, False, (2, 3, 11)), (2, None, 0, 1, True, (3, 9)),
                                                 (3, 1, 1, 2, True, (1, 2, 12))])
def test_max_pool1d(k, s, p, d, ceil, shape):
    x = torch.randn(shape, dtype=torch.float64)
    run(lambda t: TF.max_pool1d(t, k, s, p, d, ceil_mode=ceil, return_indices=True),
        lambda t: F.max_pool1d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x)


def test_max_pool_double_backward():
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64)
    tx = x.clone().requires_grad_()
    kx = to_kael(x).requires_grad_()
    tg = torch.randn(1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    kg = to_kael(tg.detach()).requires_grad_()
    (tgx,) = torch.autograd.grad(TF.max_pool2d(tx, 3, 2, 1), tx, tg, create_graph=True)
    (kgx,) = kael.autograd.grad(F.max_pool2d(kx, 3, 2, 1), kx, kg, create_graph=True)
    check(kgx, tgx.detach())
    w = torch.randn(1, 2, 6, 6, dtype=torch.float64)
    (tgg,) = torch.autograd.grad((tgx * w).sum(), tg)
    (kgg,) = kael.autograd.grad((kgx * to_kael(w)).sum(), kg)
    check(kgg, tgg)


def test_max_pool_errors():
    x = torch.randn(1, 1, 5, 5)
    k = to_kael(x)
    cases = [
        (lambda F_, t: F_.max_pool2d(t, 2, padding=2), "max_pool2d"),
        (lambda F_, t: F_.max_pool2d(t[..., :2, :2], 3), "max_pool2d"),
        (lambda F_, t: F_.max_pool2d(t, 2, stride=0), "max_pool2d"),
        (lambda F_, t: F_.max_pool2d(t, 2, dilation=0), "max_pool2d"),
        (lambda F_, t: F_.max_pool2d(t.reshape(5, 5), 2), "max_pool2d"),
        (lambda F_, t: F_.max_pool2d(t.reshape(1, 1, 1, 5, 5), 2), "max_pool2d"),
        (lambda F_, t: F_.max_pool1d(t.reshape(25), 2), "max_pool1d"),
        (lambda F_, t: F_.max_pool1d(t.reshape(1, 25), 2, padding=2), "max_pool1d"),
        (lambda F_, t: F_.max_pool1d(t.reshape(1, 25)[:, :2], 3), "max_pool1d"),
    ]
    for fn, name in cases:
        raises_like(lambda: fn(TF, x), lambda: fn(F, k), name)
    raises_like(lambda: TF.max_pool2d(torch.randn(1, 0, 5, 5), 2), lambda: F.max_pool2d(kael.randn(1, 0, 5, 5), 2),
                "max_pool2d")


# ---------------------------------------------------------------- average pooling

AVG_CASES = [
    # kernel, stride, padding, ceil, count_include_pad, divisor_override, shape
    (2, None, 0, False, True, None, (2, 3, 8, 8)),
    (3, 2, 1, False, True, None, (2, 3, 9, 11)),
    (3, 2, 1, False, False, None, (2, 3, 9, 11)),
    (3, 2, 1, True, True, None, (1, 2, 10, 10)),
    (3, 2, 1, True, False, None, (1, 2, 10, 10)),
    ((3, 2), (2, 1), (1, 0), False, True, 5, (2, 2, 11, 7)),
    (2, 1, 1, True, True, None, (3, 7, 6)),
    (4, 3, 2, True, True, None, (1, 1, 9, 9)),  # windows partly over the right padding only
]


@pytest.mark.parametrize("k,s,p,ceil,cip,div,shape", AVG_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_avg_pool2d(k, s, p, ceil, cip, div, shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    run(lambda t: TF.avg_pool2d(t, k, s, p, ceil, cip, div), lambda t: F.avg_pool2d(t, k, s, p, ceil, cip, div), x)


@pytest.mark.parametrize("kind", ["channels_last", "sliced"])
def test_avg_pool2d_layouts(kind):
    run(lambda t: TF.avg_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 2, 1), torch.randn(2, 3, 9, 10), kind)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_avg_pool2d_reduced(dtype):
    run_reduced(lambda t: TF.avg_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 2, 1), torch.randn(2, 3, 9, 10).to(dtype))


def test_avg_pool2d_int64():
    x = torch.randint(-50, 50, (2, 3, 7, 7))
    check(F.avg_pool2d(to_kael(x), 3, 2, 1), TF.avg_pool2d(x, 3, 2, 1))


def test_avg_pool1d():
    x = torch.randn(2, 3, 11, dtype=torch.float64)
    run(lambda t: TF.avg_pool1d(t, 3, 2, 1, True, False), lambda t: F.avg_pool1d(t, 3, 2, 1, True, False), x)


def test_avg_pool_double_backward():
    x = torch.randn(1, 2, 7, 7, dtype=torch.float64)
    tx, kx = x.clone().requires_grad_(), to_kael(x).requires_grad_()
    tg = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    kg = to_kael(tg.detach()).requires_grad_()
    (tgx,) = torch.autograd.grad(TF.avg_pool2d(tx, 3, 2, 1, False, False), tx, tg, create_graph=True)
    (kgx,) = kael.autograd.grad(F.avg_pool2d(kx, 3, 2, 1, False, False), kx, kg, create_graph=True)
    w = torch.randn(1, 2, 7, 7, dtype=torch.float64)
    (tgg,) = torch.autograd.grad((tgx * w).sum(), tg)
    (kgg,) = kael.autograd.grad((kgx * to_kael(w)).sum(), kg)
    check(kgg, tgg)


def test_avg_pool_errors():
    x = torch.randn(1, 1, 5, 5)
    k = to_kael(x)
    for fn in [lambda F_, t: F_.avg_pool2d(t, 2, padding=2), lambda F_, t: F_.avg_pool2d(t[..., :2, :2], 3),
               lambda F_, t: F_.avg_pool2d(t, 2, divisor_override=0), lambda F_, t: F_.avg_pool2d(t, 2, stride=0),
               lambda F_, t: F_.avg_pool2d(t.reshape(25), 2), lambda F_, t: F_.avg_pool2d(t.reshape(5, 5), 2),
               lambda F_, t: F_.avg_pool2d(t.reshape(1, 1, 1, 5, 5), 2)]:
        raises_like(lambda: fn(TF, x), lambda: fn(F, k), "avg_pool2d")
    raises_like(lambda: TF.avg_pool1d(x.reshape(1, 25), 2, padding=2), lambda: F.avg_pool1d(k.reshape(1, 25), 2,
                                                                                             padding=2), "avg_pool1d")


# ---------------------------------------------------------------- adaptive pooling

ADAPTIVE_CASES = [((2, 3, 7, 9), (3, 4)), ((2, 3, 8, 8), 1), ((3, 5, 6), (4, None)), ((1, 2, 5, 5), (7, 9)),
                  ((1, 1, 10, 3), (3, 3))]


@pytest.mark.parametrize("shape,out", ADAPTIVE_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_avg_pool2d(shape, out, dtype):
    x = torch.randn(shape, dtype=dtype)
    run(lambda t: TF.adaptive_avg_pool2d(t, out), lambda t: F.adaptive_avg_pool2d(t, out), x)


@pytest.mark.parametrize("shape,out", ADAPTIVE_CASES)
def test_adaptive_max_pool2d(shape, out):
    x = torch.randn(shape, dtype=torch.float64)
    x.view(-1)[3] = math.nan
    run(lambda t: TF.adaptive_max_pool2d(t, out, return_indices=True),
        lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), torch.randn(shape, dtype=torch.float64))
    run(lambda t: TF.adaptive_max_pool2d(t, out, return_indices=True),
        lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x, grad=False)
    ties = torch.randint(0, 2, shape).double()
    run(lambda t: TF.adaptive_max_pool2d(t, out, return_indices=True),
        lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), ties)


@pytest.mark.parametrize("kind", ["channels_last", "sliced"])
def test_adaptive_layouts(kind):
    x = torch.randn(2, 3, 9, 10)
    run(lambda t: TF.adaptive_avg_pool2d(t, (4, 3)), lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x, kind)
    run(lambda t: TF.adaptive_max_pool2d(t, (4, 3), True), lambda t: F.adaptive_max_pool2d(t, (4, 3), True), x, kind)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_adaptive_reduced(dtype):
    x = torch.randn(2, 3, 9, 10).to(dtype)
    run_reduced(lambda t: TF.adaptive_avg_pool2d(t, 1), lambda t: F.adaptive_avg_pool2d(t, 1), x)
    run_reduced(lambda t: TF.adaptive_avg_pool2d(t, (4, 3)), lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x)
    run(lambda t: TF.adaptive_max_pool2d(t, 4, True), lambda t: F.adaptive_max_pool2d(t, 4, True), x, grad=False)
    run_reduced(lambda t: TF.adaptive_max_pool2d(t, 4), lambda t: F.adaptive_max_pool2d(t, 4), x)


def test_adaptive_avg_pool2d_global():
    """A 1x1 output is torch's mean over (H, W): same rounding on large planes, any rank."""
    x = torch.randn(2, 8, 112, 112) * 10 + 3
    run(lambda t: TF.adaptive_avg_pool2d(t, 1), lambda t: F.adaptive_avg_pool2d(t, (1, 1)), x)
    run(lambda t: TF.adaptive_avg_pool2d(t, 1), lambda t: F.adaptive_avg_pool2d(t, 1), torch.randn(5, 6))
    # the registered op itself is torch's kernel, _adaptive_avg_pool2d, which sums each window in order
    check(kael.adaptive_avg_pool2d(to_kael(x), (1, 1)), torch.ops.aten._adaptive_avg_pool2d(x, (1, 1)))


def test_adaptive_1d():
    x = torch.randn(2, 3, 11, dtype=torch.float64)
    run(lambda t: TF.adaptive_avg_pool1d(t, 4), lambda t: F.adaptive_avg_pool1d(t, 4), x)
    run(lambda t: TF.adaptive_max_pool1d(t, 4, True), lambda t: F.adaptive_max_pool1d(t, 4, True), x)


def test_adaptive_errors():
    x = torch.randn(5, 5)
    raises_like(lambda: TF.adaptive_avg_pool2d(x, 2), lambda: F.adaptive_avg_pool2d(to_kael(x), 2),
                "adaptive_avg_pool2d")
    raises_like(lambda: TF.adaptive_max_pool2d(x, 2), lambda: F.adaptive_max_pool2d(to_kael(x), 2),
                "adaptive_max_pool2d")
    for shape in [(1, 2, 0, 5), (2, 0, 5)]:
        raises_like(lambda: TF.adaptive_avg_pool2d(torch.randn(shape), 2),
                    lambda: F.adaptive_avg_pool2d(kael.randn(*shape), 2), "adaptive_avg_pool2d")
    raises_like(lambda: TF.adaptive_max_pool2d(torch.randn(1, 0, 5, 5), 2),
                lambda: F.adaptive_max_pool2d(kael.randn(1, 0, 5, 5), 2), "adaptive_max_pool2d")
    check(F.adaptive_avg_pool2d(kael.randn(1, 0, 5, 5), 2), TF.adaptive_avg_pool2d(torch.randn(1, 0, 5, 5), 2))
    x = torch.randint(0, 5, (1, 2, 4, 4))
    for name in ["adaptive_avg_pool2d", "adaptive_max_pool2d"]:
        raises_like(lambda: getattr(TF, name)(x, 2), lambda: getattr(F, name)(to_kael(x), 2), name)
    raises_like(lambda: TF.interpolate(x, scale_factor=2), lambda: F.interpolate(to_kael(x), scale_factor=2),
                "interpolate")
    for dt in [torch.int32, torch.uint8]:
        raises_like(lambda: TF.avg_pool2d(x.to(dt), 2), lambda: F.avg_pool2d(to_kael(x.to(dt)), 2), "avg_pool2d")
    raises_like(lambda: TF.max_pool2d(x.bool(), 2), lambda: F.max_pool2d(to_kael(x.bool()), 2), "max_pool2d")


# ---------------------------------------------------------------- unpooling


def test_max_unpool2d():
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    tout, tidx = TF.max_pool2d(x, 2, return_indices=True)
    kout, kidx = F.max_pool2d(to_kael(x), 2, return_indices=True)
    run(lambda t: TF.max_unpool2d(t, tidx, 2), lambda t: F.max_unpool2d(t, kidx, 2), tout)
    run(lambda t: TF.max_unpool2d(t, tidx, 2, output_size=(9, 9)),
        lambda t: F.max_unpool2d(t, kidx, 2, output_size=(9, 9)), tout)
    m_t, m_k = torch.nn.MaxUnpool2d(2), nn.MaxUnpool2d(2)
    assert repr(m_k) == repr(m_t)
    check(m_k(kout, kidx), m_t(tout, tidx))
    raises_like(lambda: TF.max_unpool2d(tout, tidx * 10, 2), lambda: F.max_unpool2d(kout, kidx * 10, 2),
                "max_unpool2d")


# ---------------------------------------------------------------- interpolate

NEAREST_CASES = [dict(size=(7, 9)), dict(size=4), dict(scale_factor=2), dict(scale_factor=1.7),
                 dict(scale_factor=(0.5, 2.3)), dict(scale_factor=1.7, recompute_scale_factor=True),
                 dict(size=(16, 3))]


@pytest.mark.parametrize("kw", NEAREST_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_interpolate_nearest(kw, dtype):
    x = torch.randn(2, 3, 5, 6, dtype=dtype)
    run(lambda t: TF.interpolate(t, mode="nearest", **kw), lambda t: F.interpolate(t, mode="nearest", **kw), x)


@pytest.mark.parametrize("kw", NEAREST_CASES)
def test_interpolate_nearest_exact(kw):
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    run(lambda t: TF.interpolate(t, mode="nearest-exact", **kw), lambda t: F.interpolate(t, mode="nearest-exact", **kw),
        x)
    run(lambda t: TF.interpolate(t, mode="nearest-exact", **kw), lambda t: F.interpolate(t, mode="nearest-exact", **kw),
        x.float(), "channels_last")


@pytest.mark.parametrize("kw", NEAREST_CASES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_interpolate_bilinear(kw, align_corners, dtype):
    x = torch.randn(2, 3, 5, 6, dtype=dtype)
    run(lambda t: TF.interpolate(t, mode="bilinear", align_corners=align_corners, **kw),
        lambda t: F.interpolate(t, mode="bilinear", align_corners=align_corners, **kw), x)


@pytest.mark.parametrize("kind", ["channels_last", "sliced"])
def test_interpolate_layouts(kind):
    x = torch.randn(2, 3, 5, 6)
    run(lambda t: TF.interpolate(t, scale_factor=1.5, mode="bilinear"),
        lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), x, kind)
    run(lambda t: TF.interpolate(t, size=(9, 4)), lambda t: F.interpolate(t, size=(9, 4)), x, kind)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_interpolate_reduced(dtype):
    x = torch.randn(2, 3, 5, 6).to(dtype)
    run(lambda t: TF.interpolate(t, scale_factor=2), lambda t: F.interpolate(t, scale_factor=2), x)
    run_reduced(lambda t: TF.interpolate(t, scale_factor=1.5), lambda t: F.interpolate(t, scale_factor=1.5), x)
    run_reduced(lambda t: TF.interpolate(t, size=(7, 11), mode="bilinear"),
        lambda t: F.interpolate(t, size=(7, 11), mode="bilinear"), x)


@pytest.mark.parametrize("mode,kw", [("nearest", dict(size=9)), ("nearest", dict(scale_factor=0.6)),
                                     ("linear", dict(size=9)), ("linear", dict(scale_factor=2.5, align_corners=True)),
                                     ("linear", dict(scale_factor=0.4)), ("area", dict(size=4)),
                                     ("area", dict(scale_factor=0.5)), ("nearest-exact", dict(size=4)),
                                     ("nearest-exact", dict(scale_factor=1.6))])
def test_interpolate_3d(mode, kw):
    x = torch.randn(2, 3, 7, dtype=torch.float64)
    run(lambda t: TF.interpolate(t, mode=mode, **kw), lambda t: F.interpolate(t, mode=mode, **kw), x)


def test_interpolate_area_2d():
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64)
    run(lambda t: TF.interpolate(t, size=(3, 4), mode="area"), lambda t: F.interpolate(t, size=(3, 4), mode="area"), x)


def test_interpolate_double_backward():
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64)
    for mode, ac in [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True)]:
        tx, kx = x.clone().requires_grad_(), to_kael(x).requires_grad_()
        tg = torch.randn(1, 2, 7, 8, dtype=torch.float64, requires_grad=True)
        kg = to_kael(tg.detach()).requires_grad_()
        (tgx,) = torch.autograd.grad(TF.interpolate(tx, (7, 8), mode=mode, align_corners=ac), tx, tg,
                                     create_graph=True)
        (kgx,) = kael.autograd.grad(F.interpolate(kx, (7, 8), mode=mode, align_corners=ac), kx, kg,
                                    create_graph=True)
        check(kgx, tgx.detach())
        w = torch.randn(1, 2, 4, 5, dtype=torch.float64)
        (tgg,) = torch.autograd.grad((tgx * w).sum(), tg)
        (kgg,) = kael.autograd.grad((kgx * to_kael(w)).sum(), kg)
        check(kgg, tgg)


def test_interpolate_errors():
    x = torch.randn(1, 1, 5, 5)
    k = to_kael(x)
    cases = [
        lambda F_, t: F_.interpolate(t, size=3, scale_factor=2),
        lambda F_, t: F_.interpolate(t),
        lambda F_, t: F_.interpolate(t, size=3, align_corners=True),
        lambda F_, t: F_.interpolate(t, size=3, mode="foo"),
        lambda F_, t: F_.interpolate(t.reshape(1, 1, 25), size=3, mode="bilinear"),
        lambda F_, t: F_.interpolate(t, size=3, mode="linear"),
        lambda F_, t: F_.interpolate(t.reshape(25), size=3),
        lambda F_, t: F_.interpolate(t, size=(3, 4, 5)),
        lambda F_, t: F_.interpolate(t, scale_factor=(2, 3, 4)),
        lambda F_, t: F_.interpolate(t, size=3, recompute_scale_factor=True),
    ]
    for fn in cases:
        raises_like(lambda: fn(TF, x), lambda: fn(F, k), "interpolate")
    raises_like(lambda: TF.interpolate(x, size=0), lambda: F.interpolate(k, size=0), "_upsample_nearest2d")
    raises_like(lambda: TF.interpolate(x, size=0, mode="bilinear"), lambda: F.interpolate(k, size=0, mode="bilinear"),
                "_upsample_bilinear2d")


# ---------------------------------------------------------------- unfold / fold

UNFOLD_CASES = [
    # kernel, dilation, padding, stride, shape
    (2, 1, 0, 1, (2, 3, 5, 6)),
    ((3, 2), (2, 1), (1, 2), (2, 3), (2, 2, 9, 8)),
    (3, 1, 1, 2, (3, 7, 7)),  # unbatched
    (1, 1, 0, 1, (1, 4, 3, 3)),
]


@pytest.mark.parametrize("k,d,p,s,shape", UNFOLD_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unfold(k, d, p, s, shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    run(lambda t: TF.unfold(t, k, d, p, s), lambda t: F.unfold(t, k, d, p, s), x)


@pytest.mark.parametrize("k,d,p,s,shape", UNFOLD_CASES)
def test_fold(k, d, p, s, shape):
    cols = TF.unfold(torch.randn(shape, dtype=torch.float64), k, d, p, s)
    out = shape[-2:]
    run(lambda t: TF.fold(t, out, k, d, p, s), lambda t: F.fold(t, out, k, d, p, s), cols)


@pytest.mark.parametrize("kind", ["sliced"])
def test_unfold_fold_layouts(kind):
    x = torch.randn(2, 3, 6, 7)
    run(lambda t: TF.unfold(t, 3, 1, 1, 2), lambda t: F.unfold(t, 3, 1, 1, 2), x, kind)
    cols = torch.randn(2, 12, 20)
    run(lambda t: TF.fold(t, (5, 6), 2), lambda t: F.fold(t, (5, 6), 2), cols, kind)


def test_unfold_fold_dtypes():
    x = torch.randint(0, 9, (1, 2, 4, 5))
    raises_like(lambda: TF.unfold(x, 2), lambda: F.unfold(to_kael(x), 2), "unfold")
    c = TF.unfold(x.double(), 2).long()
    raises_like(lambda: TF.fold(c, (4, 5), 2), lambda: F.fold(to_kael(c), (4, 5), 2), "fold")
    xb = torch.randn(1, 2, 4, 5).to(torch.bfloat16)
    run_reduced(lambda t: TF.unfold(t, 2, 1, 1, 1), lambda t: F.unfold(t, 2, 1, 1, 1), xb)


def test_unfold_fold_adjoint():
    """<unfold(x), y> == <x, fold(y)>, in kael alone, over overlapping blocks."""
    x = kael.randn(2, 3, 7, 8, dtype=kael.float64)
    y = kael.randn(2, 3 * 9, 16, dtype=kael.float64)
    lhs = (F.unfold(x, 3, 1, 1, 2) * y).sum().item()
    rhs = (x * F.fold(y, (7, 8), 3, 1, 1, 2)).sum().item()
    assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs))


def test_unfold_fold_errors():
    x = torch.randn(1, 2, 5, 5)
    k = to_kael(x)
    raises_like(lambda: TF.unfold(x, 6), lambda: F.unfold(k, 6), "im2col")
    raises_like(lambda: TF.unfold(x, 0), lambda: F.unfold(k, 0), "im2col")
    raises_like(lambda: TF.unfold(x, 2, padding=-1), lambda: F.unfold(k, 2, padding=-1), "im2col")
    raises_like(lambda: TF.unfold(x.reshape(50), 2), lambda: F.unfold(k.reshape(50), 2), "unfold")
    raises_like(lambda: TF.unfold(x.reshape(10, 5), 2), lambda: F.unfold(k.reshape(10, 5), 2), "unfold")
    raises_like(lambda: TF.unfold(x.reshape(1, 1, 2, 5, 5), 2), lambda: F.unfold(k.reshape(1, 1, 2, 5, 5), 2), "im2col")
    c = torch.randn(1, 8, 16)
    kc = to_kael(c)
    raises_like(lambda: TF.fold(c[:, :7], (5, 5), 2), lambda: F.fold(kc[:, :7], (5, 5), 2), "col2im")
    raises_like(lambda: TF.fold(c[..., :15], (5, 5), 2), lambda: F.fold(kc[..., :15], (5, 5), 2), "col2im")
    raises_like(lambda: TF.fold(c.reshape(128), (5, 5), 2), lambda: F.fold(kc.reshape(128), (5, 5), 2), "col2im")
    raises_like(lambda: TF.fold(c.reshape(1, 1, 8, 16), (5, 5), 2), lambda: F.fold(kc.reshape(1, 1, 8, 16), (5, 5), 2),
                "col2im")


# ---------------------------------------------------------------- channel dropout


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout2d_mask_distribution(p):
    x = kael.ones(40, 250, 3, 4)
    y = F.dropout2d(x, p)
    flat = y.reshape(40 * 250, 12)
    per_channel_max = flat.amax(1)
    per_channel_min = flat.amin(1)
    # whole channels: every element of a channel is the same (zero or 1 / (1 - p))
    assert (per_channel_max == per_channel_min).all().item()
    values = set(round(v, 5) for v in per_channel_max.tolist())
    assert values <= {0.0, round(1 / (1 - p), 5)}
    frac = (per_channel_max == 0).double().mean().item()
    sd = math.sqrt(p * (1 - p) / 10000)
    assert abs(frac - p) < 5 * sd
    assert F.dropout2d(x, p, training=False) is x


def test_dropout1d_mask_and_shapes():
    x = kael.ones(100, 80, 5)
    y = F.dropout1d(x, 0.3)
    rows = y.reshape(8000, 5)
    assert (rows.amax(1) == rows.amin(1)).all().item()
    frac = (rows.amax(1) == 0).double().mean().item()
    assert abs(frac - 0.3) < 5 * math.sqrt(0.3 * 0.7 / 8000)
    u = F.dropout1d(kael.ones(50, 4), 0.5)  # unbatched (C, L)
    assert u.shape == (50, 4)
    assert (u.amax(1) == u.amin(1)).all().item()
    with pytest.raises(RuntimeError, match="^dropout1d"):
        F.dropout1d(kael.ones(5), 0.5)
    with pytest.raises(ValueError):
        F.dropout1d(kael.ones(2, 5), 1.5)


def test_dropout2d_grad_and_inplace():
    x = kael.randn(4, 30, 3, 3, requires_grad=True)
    y = F.dropout2d(x, 0.5)
    y.backward(kael.ones_like(y))
    kept = (y != 0).double()
    check(x.grad, to_torch(kept.to(kael.float32) * 2.0))
    z = kael.ones(2, 20, 2, 2)
    r = F.dropout2d(z, 0.5, inplace=True)
    assert r is z
    assert set(round(v, 5) for v in z.reshape(-1).tolist()) <= {0.0, 2.0}
    check(F.dropout2d(kael.ones(2, 3, 2, 2), 1.0), torch.zeros(2, 3, 2, 2))


def test_dropout2d_warnings():
    for shape in [(3, 5, 5), (5, 5)]:
        with warnings.catch_warnings(record=True) as tw:
            warnings.simplefilter("always")
            TF.dropout2d(torch.randn(shape), 0.5)
        with warnings.catch_warnings(record=True) as kw:
            warnings.simplefilter("always")
            F.dropout2d(kael.randn(*shape), 0.5)
        assert [str(w.message) for w in kw] == [str(w.message) for w in tw]
        assert [w.category for w in kw] == [w.category for w in tw]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.dropout2d(kael.randn(2, 3, 4, 4), 0.5)


# ---------------------------------------------------------------- modules


def test_module_reprs():
    pairs = [
        lambda m: m.MaxPool2d(3), lambda m: m.MaxPool2d((3, 2), stride=1, padding=1, dilation=2, ceil_mode=True),
        lambda m: m.MaxPool1d(3), lambda m: m.AvgPool2d(3), lambda m: m.AvgPool2d(3, 2, 1, True, False, 4),
        lambda m: m.AvgPool1d(3), lambda m: m.AdaptiveAvgPool2d((2, None)), lambda m: m.AdaptiveAvgPool2d(1),
        lambda m: m.AdaptiveMaxPool2d(3), lambda m: m.AdaptiveAvgPool1d(3), lambda m: m.AdaptiveMaxPool1d(3),
        lambda m: m.Upsample(scale_factor=2), lambda m: m.Upsample(size=(3, 4), mode="bilinear"),
        lambda m: m.Upsample(scale_factor=(2, 3)), lambda m: m.UpsamplingNearest2d(scale_factor=2),
        lambda m: m.UpsamplingBilinear2d(size=3), lambda m: m.Unfold(2), lambda m: m.Unfold((2, 3), 2, 1, 2),
        lambda m: m.Fold(3, 2), lambda m: m.Fold((4, 5), (2, 3), 1, 1, 1), lambda m: m.Dropout2d(),
        lambda m: m.Dropout1d(0.3, inplace=True), lambda m: m.MaxUnpool2d(2), lambda m: m.MaxUnpool1d(3, 2),
    ]
    for make in pairs:
        assert repr(make(nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("make,shape", [
    (lambda m: m.MaxPool2d(3, 2, 1), (2, 3, 9, 9)),
    (lambda m: m.MaxPool2d(2, return_indices=True), (2, 3, 8, 8)),
    (lambda m: m.MaxPool1d(3, 2, ceil_mode=True), (2, 3, 10)),
    (lambda m: m.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 9, 9)),
    (lambda m: m.AvgPool1d(2), (2, 3, 10)),
    (lambda m: m.AdaptiveAvgPool2d((2, None)), (2, 3, 7, 9)),
    (lambda m: m.AdaptiveMaxPool2d(3, return_indices=True), (2, 3, 7, 9)),
    (lambda m: m.Upsample(scale_factor=2), (2, 3, 4, 5)),
    (lambda m: m.Upsample(size=(7, 3), mode="bilinear", align_corners=True), (2, 3, 4, 5)),
    (lambda m: m.UpsamplingNearest2d(size=(6, 6)), (2, 3, 4, 5)),
    (lambda m: m.UpsamplingBilinear2d(scale_factor=1.5), (2, 3, 4, 5)),
    (lambda m: m.Unfold(2, padding=1), (2, 3, 4, 5)),
    (lambda m: m.Fold((4, 5), 2), (2, 12, 12)),
])
def test_modules_forward(make, shape):
    x = torch.randn(shape, dtype=torch.float64)
    run(make(torch.nn), make(nn), x)


def test_dropout_modules_train_eval():
    m = nn.Dropout2d(0.5)
    x = kael.ones(8, 50, 2, 2)
    y = m(x)
    assert set(round(v, 5) for v in y.reshape(-1).tolist()) <= {0.0, 2.0}
    m.eval()
    assert m(x) is x
    d1 = nn.Dropout1d(0.5).eval()
    assert d1(x[0]) is x[0] or kael.equal(d1(x[0]), x[0])
    with pytest.raises(ValueError):
        nn.Dropout2d(1.5)


def test_exports():
    for name in ["MaxPool1d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Upsample", "Unfold",
                 "Fold", "Dropout1d", "Dropout2d", "UpsamplingNearest2d", "UpsamplingBilinear2d"]:
        assert name in nn.__all__ and hasattr(nn, name)
    for name in ["max_pool1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "interpolate",
                 "unfold", "fold", "dropout1d", "dropout2d"]:
        assert callable(getattr(F, name))


def test_large_pooling_calls_release_the_gil():
    from helpers import where_the_gil_was_released
    x = kael.randn(4, 16, 64, 64)
    where = where_the_gil_was_released(lambda: kael.max_pool2d_with_indices(x, (3, 3), (2, 2), (1, 1), (1, 1), False))
    assert where is not None and "max_pool2d_with_indices" in where.line
    where = where_the_gil_was_released(lambda: kael.avg_pool2d(x, (3, 3), (2, 2), (1, 1), False, True, None))
    assert where is not None and "avg_pool2d" in where.line
    small = kael.randn(1, 1, 4, 4)
    assert where_the_gil_was_released(lambda: kael.avg_pool2d(small, (2, 2), (2, 2), (0, 0), False, True, None),
                                      attempts=20) is None


# ---- channels-last max pooling: pooled where it lies, channels-last values, indices and gradient

CL_POOLS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=1, dilation=2, ceil_mode=True), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bfloat16"])
@pytest.mark.parametrize("args", CL_POOLS, ids=str)
def test_max_pool2d_channels_last(args, dtype):
    a = np.random.default_rng(0).standard_normal((2, 5, 9, 8)) * 3
    a[0, 1, 2, 2] = np.nan
    a[1, 2] = -np.inf  # a channel of -inf: every window keeps its first index
    a[0, 3, 0:4, 0:4] = 1.0  # ties: the first wins
    if dtype == "int32":
        a = np.nan_to_num(a, neginf=-5).round()
    res = {}
    for L in (torch, kael):
        x = L.tensor(a).to(getattr(L, dtype)).contiguous(memory_format=L.channels_last)
        floating = dtype in ("float32", "float64")
        if floating:
            x.requires_grad_()
        y, i = L.nn.functional.max_pool2d(x, return_indices=True, **args)
        grad = None
        if floating:
            g = L.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape))).to(y.dtype)
            y.backward(g.contiguous(memory_format=L.channels_last))
            grad = x.grad
        res[L.__name__] = (y, i, grad)
    (ky, ki, kg), (ty, ti, tg) = res["kael"], res["torch"]
    np.testing.assert_array_equal(ky.float().detach().numpy(), ty.float().detach().numpy())
    np.testing.assert_array_equal(ki.numpy(), ti.numpy())
    assert ky.stride() == ty.stride() and ki.stride() == ti.stride()
    if tg is not None:
        np.testing.assert_allclose(kg.numpy(), tg.numpy(), rtol=1e-12, atol=0)
        assert kg.stride() == tg.stride()


def test_max_pool2d_channels_last_gradient_from_row_major():
    # a row-major gradient for channels-last indices is laid out as them first
    a = np.random.default_rng(3).standard_normal((2, 4, 6, 6))
    grads = {}
    for L in (torch, kael):
        x = L.tensor(a).contiguous(memory_format=L.channels_last).requires_grad_()
        y = L.nn.functional.max_pool2d(x, 3, 1)
        y.backward(L.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape))))
        grads[L.__name__] = x.grad.numpy()
    np.testing.assert_array_equal(grads["kael"], grads["torch"])


# ---- channels-last bilinear interpolation: where the input lies, the planar loop's bits

CL_BILINEAR = [dict(scale_factor=2, align_corners=True), dict(size=(9, 13), align_corners=False),
               dict(scale_factor=0.5), dict(size=(7, 6))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("args", CL_BILINEAR, ids=str)
def test_bilinear_channels_last(args, dtype):
    a = np.random.default_rng(4).standard_normal((2, 5, 7, 6))
    g_shape, res = None, {}
    for L in (torch, kael):
        x = L.tensor(a).to(getattr(L, dtype)).contiguous(memory_format=L.channels_last).requires_grad_()
        y = L.nn.functional.interpolate(x, mode="bilinear", **args)
        g_shape = tuple(y.shape)
        y.backward(L.tensor(np.random.default_rng(5).standard_normal(g_shape)).to(y.dtype))
        res[L.__name__] = (y, x.grad)
    (ky, kg), (ty, tg) = res["kael"], res["torch"]
    assert ky.stride() == ty.stride() and kg.stride() == tg.stride()
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(kg.numpy(), tg.numpy(), **tol)
    # the same bits as the row-major (planar) loop
    xr = kael.tensor(a).to(getattr(kael, dtype)).requires_grad_()
    yr = kael.nn.functional.interpolate(xr, mode="bilinear", **args)
    yr.backward(kael.tensor(np.random.default_rng(5).standard_normal(g_shape)).to(yr.dtype))
    np.testing.assert_array_equal(ky.detach().numpy(), yr.detach().numpy())
    np.testing.assert_array_equal(kg.numpy(), xr.grad.numpy())


# ---- every pooling and resampling op keeps a channels-last input's layout, as torch
# (Note [Channels-last results] in aten/src/native/cpu/pooling.cpp): values, the result's
# strides, and the strides of the gradient autograd.grad returns (no leaf's layout rule applies)

CL_SWEEP = {
    "max_pool2d": lambda F, x: F.max_pool2d(x, 3, 2, 1),
    "max_pool2d_indices": lambda F, x: F.max_pool2d(x, 2, return_indices=True)[1],
    "avg_pool2d": lambda F, x: F.avg_pool2d(x, 3, 2, 1),
    "avg_pool2d_ceil_divisor": lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3),
    "adaptive_avg_pool2d": lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)),
    "adaptive_avg_pool2d_1": lambda F, x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_max_pool2d": lambda F, x: F.adaptive_max_pool2d(x, (4, 3)),
    "adaptive_max_pool2d_indices": lambda F, x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True)[1],
    "nearest": lambda F, x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "nearest_size": lambda F, x: F.interpolate(x, size=(5, 11), mode="nearest"),
    "nearest_exact": lambda F, x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
    "area": lambda F, x: F.interpolate(x, size=(3, 5), mode="area"),
    "bilinear": lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CL_SWEEP))
def test_channels_last_layout_sweep(name, dtype):
    a = np.random.default_rng(7).standard_normal((2, 5, 7, 9))
    res = {}
    for L in (torch, kael):
        x = L.tensor(a).to(getattr(L, dtype)).contiguous(memory_format=L.channels_last).requires_grad_()
        y = CL_SWEEP[name](L.nn.functional, x)
        grad = None
        if y.dtype != L.int64:
            g = L.tensor(np.random.default_rng(8).standard_normal(tuple(y.shape))).to(y.dtype)
            grad, = L.autograd.grad(y, x, g.contiguous(memory_format=L.channels_last))
        res[L.__name__] = (y.detach(), grad)
    (ky, kg), (ty, tg) = res["kael"], res["torch"]
    assert ky.stride() == ty.stride(), (ky.stride(), ty.stride())
    tol = {"float32": 1e-6, "float64": 1e-13, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(ky.double().numpy(), ty.double().numpy(), rtol=tol, atol=tol)
    if tg is not None:
        assert kg.stride() == tg.stride(), (kg.stride(), tg.stride())
        np.testing.assert_allclose(kg.double().numpy(), tg.double().numpy(), rtol=tol, atol=tol)
