"""kthvalue, nanmedian, nanquantile, histc, signbit, copysign, positive, dist, atleast_3d,
hsplit/vsplit/dsplit, is_floating_point, vander, Tensor.unfold, sum_to_size, fill_diagonal_,
renorm: each against torch (values, dtypes, shapes, exception classes; gradients where torch
has them)."""
import math

import numpy as np
import pytest
import torch

import kael
from helpers import check
from test_oracle_regressions import same

NAN = math.nan
RNG = np.random.default_rng(11)
NORMAL = RNG.standard_normal(500).tolist()
UNIFORM = RNG.uniform(0.01, 0.99, 300).tolist()
M = RNG.standard_normal((4, 6)).round(3).tolist()
M_NAN = [[3.0, NAN, 1.0, 2.0, 7.0], [NAN, 5.0, 4.0, NAN, 4.5], [5.0, 4.0, 0.5, 1.0, -1.0]]


@pytest.mark.parametrize("call", [
    lambda lib: lib.kthvalue(lib.tensor(M), 2),
    lambda lib: lib.kthvalue(lib.tensor(M), 1, 0),
    lambda lib: lib.kthvalue(lib.tensor(M), 4, 0, True),
    lambda lib: lib.tensor(M).kthvalue(6, dim=-1),
    lambda lib: lib.kthvalue(lib.tensor([3.0, 1.0, NAN, 2.0]), 4),
    lambda lib: lib.kthvalue(lib.tensor([3.0, 1.0, NAN, 2.0]), 3),
    lambda lib: lib.kthvalue(lib.tensor([5, -2, 9, 0]), 2),
    lambda lib: lib.kthvalue(lib.tensor(2.5), 1),
    lambda lib: lib.kthvalue(lib.tensor([3.0, 1.0]), 0),
    lambda lib: lib.kthvalue(lib.tensor([3.0, 1.0]), 3),
    lambda lib: lib.kthvalue(lib.tensor(M), 1, 2),
], ids=["dim -1", "dim 0", "keepdim", "method", "nan largest", "below nan", "int", "0-d", "k 0", "k past", "bad dim"])
def test_kthvalue(call):
    same(call)


def test_kthvalue_named_fields_and_gradient():
    for lib in (kael, torch):
        r = lib.kthvalue(lib.tensor([[4.0, 1.0, 3.0]]), 2)
        assert r.values.tolist() == [3.0] and r.indices.tolist() == [2]
        assert type(r).__name__ == "kthvalue"
    kx = kael.tensor(M, requires_grad=True)
    tx = torch.tensor(M, requires_grad=True)
    kael.kthvalue(kx, 3, 1)[0].sum().backward()
    torch.kthvalue(tx, 3, 1)[0].sum().backward()
    check(kx.grad, tx.grad)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nanmedian(lib.tensor(M_NAN)),
    lambda lib: lib.nanmedian(lib.tensor(M_NAN), 1),
    lambda lib: lib.nanmedian(lib.tensor(M_NAN), 0, keepdim=True).values,
    lambda lib: lib.tensor(M_NAN).nanmedian(-1),
    lambda lib: lib.nanmedian(lib.tensor(M)),
    lambda lib: lib.nanmedian(lib.tensor(M), 0),
    lambda lib: lib.nanmedian(lib.tensor([NAN, NAN])),
    lambda lib: lib.nanmedian(lib.tensor([[NAN, NAN], [1.0, NAN]]), 1).values,
    lambda lib: lib.nanmedian(lib.tensor([4, 1, 3, 2])),
    lambda lib: lib.nanmedian(lib.tensor([4, 1, 3, 2]), 0),
    lambda lib: lib.nanmedian(lib.zeros(2, 0), 1),
], ids=["all", "dim 1", "dim 0 keepdim", "method", "no nan", "no nan dim", "all nan", "all-nan row values", "int",
        "int dim", "empty dim"])
def test_nanmedian(call):
    same(call)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("call", [
    lambda lib, i: lib.nanquantile(lib.tensor(M_NAN), 0.4, interpolation=i),
    lambda lib, i: lib.nanquantile(lib.tensor(M_NAN), lib.tensor([0.0, 0.25, 0.5, 1.0]), dim=1, interpolation=i),
    lambda lib, i: lib.nanquantile(lib.tensor(M_NAN), 0.75, dim=0, keepdim=True, interpolation=i),
    lambda lib, i: lib.tensor(M_NAN).nanquantile(lib.tensor([0.3, 0.9]), dim=-1, keepdim=True, interpolation=i),
    lambda lib, i: lib.nanquantile(lib.tensor([[NAN, NAN], [1.0, 2.0]], dtype=lib.float64), 0.5, 1, interpolation=i),
    lambda lib, i: lib.nanquantile(lib.tensor(M), 0.6, dim=1, interpolation=i),
    lambda lib, i: lib.quantile(lib.tensor(M_NAN), 0.6, dim=1, interpolation=i),
])
def test_nanquantile(call, interpolation):
    same(lambda lib: call(lib, interpolation))


@pytest.mark.parametrize("call", [
    lambda lib: lib.nanquantile(lib.tensor([1, 2]), 0.5),
    lambda lib: lib.nanquantile(lib.tensor([1.0, 2.0]), 1.5),
    lambda lib: lib.nanquantile(lib.tensor([1.0, 2.0]), 0.5, interpolation="middle"),
])
def test_nanquantile_errors(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.histc(lib.tensor([1.0, 2.0, 1.0, 4.0]), bins=4, min=0, max=3),
    lambda lib: lib.histc(lib.tensor([2.0, 2.0]), bins=3),
    lambda lib: lib.histc(lib.tensor(NORMAL), bins=7, min=-2, max=2),
    lambda lib: lib.histc(lib.tensor(UNIFORM, dtype=lib.float64), bins=10),
    lambda lib: lib.histc(lib.tensor([NAN, 1.0, 3.0, math.inf]), bins=2, min=0, max=4),
    lambda lib: lib.tensor([0.5, 1.5]).histc(2, 0, 2),
    lambda lib: lib.histc(lib.tensor([1, 2]), bins=2),
    lambda lib: lib.histc(lib.tensor([1.0]), bins=2, min=3, max=1),
], ids=["small", "equal bounds", "normal", "float64 own range", "nan inf", "method", "int", "min above max"])
def test_histc(call):
    same(call)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_signbit_and_copysign_see_the_sign_bit(dtype):
    values = [-0.0, 0.0, -1.5, 2.0, NAN, -math.inf, math.inf]

    def x(lib):
        t = lib.tensor(values, dtype=getattr(lib, dtype))
        if dtype == "bfloat16":  # (torch's rounding to bfloat16 makes every NaN positive; kael keeps the bit)
            return lib.cat([t, lib.tensor([NAN, NAN], dtype=t.dtype)])
        return lib.cat([t, lib.tensor([0.0], dtype=t.dtype) / 0, -(lib.tensor([NAN], dtype=t.dtype))])

    same(lambda lib: lib.signbit(x(lib)))
    same(lambda lib: x(lib).signbit())
    same(lambda lib: lib.copysign(lib.ones(9, dtype=getattr(lib, dtype)) * 3, x(lib)))
    same(lambda lib: lib.signbit(lib.copysign(lib.tensor([NAN], dtype=getattr(lib, dtype)), lib.tensor([-1.0]))))
    same(lambda lib: lib.copysign(x(lib), -0.0))
    same(lambda lib: lib.copysign(x(lib), 2))


@pytest.mark.parametrize("call", [
    lambda lib: lib.signbit(lib.tensor([-3, 0, 4])),
    lambda lib: lib.signbit(lib.tensor([0, 200], dtype=lib.uint8)),
    lambda lib: lib.signbit(lib.tensor([True, False])),
    lambda lib: lib.signbit(lib.tensor(-2.5)),
    lambda lib: lib.copysign(lib.tensor([1, -2, 3]), lib.tensor([-1, 1, -1])),
    lambda lib: lib.copysign(lib.tensor([[1.0], [-2.0]]), lib.tensor([-1.0, 0.0, -0.0])),
    lambda lib: lib.copysign(lib.tensor([1.0, 2.0], dtype=lib.float16), lib.tensor([-1.0, 1.0], dtype=lib.float64)),
    lambda lib: lib.tensor([1.0, -2.0]).copysign_(lib.tensor([-1.0, -1.0])),
    lambda lib: lib.tensor([1, 2]).copysign_(lib.tensor([-1.0, 1.0])),
], ids=["int", "uint8", "bool", "0-d", "ints", "broadcast", "mixed floats", "in place", "in place int"])
def test_signbit_copysign_dtypes_and_errors(call):
    same(call)


def test_copysign_gradient():
    # torch: grad * result / self, 0 where self is 0; nothing flows to other
    kx, ky = kael.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True), kael.tensor([-1.0, 1.0, -1.0, 2.0], requires_grad=True)
    tx, ty = torch.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True), torch.tensor([-1.0, 1.0, -1.0, 2.0], requires_grad=True)
    (kael.copysign(kx, ky) * kael.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    (torch.copysign(tx, ty) * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    check(kx.grad, tx.grad)
    check(ky.grad, ty.grad)


@pytest.mark.parametrize("call", [
    lambda lib: lib.positive(lib.tensor([1.0, -2.0])),
    lambda lib: lib.tensor([3, -1]).positive(),
    lambda lib: lib.positive(lib.tensor([True])),
], ids=["positive", "positive method", "positive bool"])
def test_positive(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.dist(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 5.0])),
    lambda lib: lib.dist(lib.tensor(M), lib.tensor(M[0]), 1),
    lambda lib: lib.dist(lib.tensor(M), lib.zeros(6), math.inf),
    lambda lib: lib.tensor([1.0, 2.0]).dist(lib.tensor([0.0, 0.0]), 3),
], ids=["dist", "dist p1", "dist inf", "dist method"])
def test_dist(call):
    check(call(kael), call(torch))  # (a sum: float32's tolerance, the order of additions differs)


def test_is_floating_point():
    for lib in (kael, torch):
        assert lib.is_floating_point(lib.ones(1)) is True
        assert lib.is_floating_point(lib.ones(1, dtype=lib.bfloat16)) is True
        assert lib.is_floating_point(lib.ones(1, dtype=lib.int32)) is False


def test_positive_is_the_input():
    x = kael.ones(2)
    assert kael.positive(x) is x


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)])
def test_atleast_3d(shape):
    same(lambda lib: lib.atleast_3d(lib.zeros(shape)))
    same(lambda lib: lib.atleast_3d(lib.zeros(shape), lib.ones(2)))
    same(lambda lib: lib.atleast_3d([lib.zeros(shape)]))


@pytest.mark.parametrize("call", [
    lambda lib: lib.hsplit(lib.arange(12).reshape(3, 4), 2),
    lambda lib: lib.hsplit(lib.arange(6), 3),
    lambda lib: lib.hsplit(lib.arange(6), [1, 4]),
    lambda lib: lib.hsplit(lib.arange(6), 4),
    lambda lib: lib.hsplit(lib.tensor(1.0), 1),
    lambda lib: lib.vsplit(lib.arange(12).reshape(4, 3), 2),
    lambda lib: lib.vsplit(lib.arange(12).reshape(4, 3), [3]),
    lambda lib: lib.vsplit(lib.arange(6), 2),
    lambda lib: lib.dsplit(lib.arange(24).reshape(2, 3, 4), 2),
    lambda lib: lib.dsplit(lib.arange(24).reshape(2, 3, 4), [1, 2]),
    lambda lib: lib.dsplit(lib.arange(6).reshape(2, 3), 1),
    lambda lib: lib.arange(12).reshape(3, 4).hsplit(4),
], ids=["h", "h 1-d", "h indices", "h indivisible", "h 0-d", "v", "v indices", "v 1-d", "d", "d indices", "d 2-d",
        "method"])
def test_directional_splits(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.vander(lib.tensor([1, 2, 3])),
    lambda lib: lib.vander(lib.tensor([1, 2, 3]), 4),
    lambda lib: lib.vander(lib.tensor([1.5, -2.0]), increasing=True),
    lambda lib: lib.vander(lib.tensor([1.5, -2.0], dtype=lib.float64), N=0),
    lambda lib: lib.vander(lib.tensor([2, 3], dtype=lib.int32), 3),
    lambda lib: lib.vander(lib.tensor([True, False]), 3),
    lambda lib: lib.vander(lib.ones(2, 2)),
    lambda lib: lib.vander(lib.tensor([1.0]), -1),
], ids=["int", "N", "increasing", "N 0", "int32", "bool", "2-d", "negative N"])
def test_vander(call):
    same(call)


@pytest.mark.parametrize("args", [(0, 3, 2), (0, 2, 1), (1, 2, 2), (-1, 4, 3), (0, 0, 1), (1, 6, 1), (0, 5, 1),
                                  (1, 7, 1), (0, 2, 0), (2, 1, 1)])
def test_unfold(args):
    def call(lib):
        x = lib.arange(30.0).reshape(5, 6)
        return x.unfold(*args)
    same(call)
    try:
        kv, tv = kael.arange(30.0).reshape(5, 6).unfold(*args), torch.arange(30.0).reshape(5, 6).unfold(*args)
    except (RuntimeError, IndexError):
        return
    assert kv.stride() == tv.stride()


def test_unfold_is_a_view_with_a_gradient():
    kx, tx = kael.arange(8.0, requires_grad=True), torch.arange(8.0, requires_grad=True)
    (kx.unfold(0, 3, 2) ** 2).sum().backward()
    (tx.unfold(0, 3, 2) ** 2).sum().backward()
    check(kx.grad, tx.grad)
    base = kael.zeros(6)
    base.unfold(0, 2, 2)[1, 0] = 5.0
    assert base.tolist() == [0.0, 0.0, 5.0, 0.0, 0.0, 0.0]
    same(lambda lib: lib.arange(10.0).reshape(2, 5).t().unfold(0, 2, 3))
    same(lambda lib: lib.tensor(3.0).unfold(0, 1, 1))


@pytest.mark.parametrize("size", [(1, 3), (3,), (2, 1), (1, 1), (2, 3), ((1, 3),), (4, 3), (1, 2, 3)])
def test_sum_to_size(size):
    same(lambda lib: lib.arange(6.0).reshape(2, 3).sum_to_size(*size))


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(3, 3).fill_diagonal_(5.0),
    lambda lib: lib.zeros(3, 5).fill_diagonal_(2),
    lambda lib: lib.zeros(7, 3).fill_diagonal_(1.5),
    lambda lib: lib.zeros(7, 3).fill_diagonal_(1.5, wrap=True),
    lambda lib: lib.zeros(8, 2, dtype=lib.int64).fill_diagonal_(4, True),
    lambda lib: lib.zeros(3, 3, 3).fill_diagonal_(-1.0),
    lambda lib: lib.zeros(3, 3, 2).fill_diagonal_(-1.0),
    lambda lib: lib.zeros(3).fill_diagonal_(-1.0),
    lambda lib: lib.zeros(4, 4)[:, 1:].fill_diagonal_(9.0),
], ids=["square", "wide", "tall", "tall wrap", "int wrap", "cube", "unequal", "1-d", "view"])
def test_fill_diagonal_(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.renorm(lib.tensor([[1.0, 2.0], [3.0, 4.0]]), 2, 0, 3),
    lambda lib: lib.renorm(lib.tensor(M), 1, 1, 1.5),
    lambda lib: lib.tensor(M).renorm(3, -1, 0.5),
    lambda lib: lib.renorm(lib.tensor(M), 2, 0, 100.0),
    lambda lib: lib.renorm(lib.tensor([1.0, 2.0]), 2, 0, 1.0),
    lambda lib: lib.renorm(lib.tensor(M), -1, 0, 1.0),
], ids=["small", "p1 dim1", "method", "nothing to scale", "1-d", "negative p"])
def test_renorm(call):
    # (check: float32's default tolerance; the scale is maxnorm / (norm + 1e-7) in both)
    try:
        tr = call(torch)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            call(kael)
        return
    check(call(kael), tr)
