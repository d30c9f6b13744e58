"""The aliases and Python-level composites of kael/_composites.py, each against torch."""
import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import kael
from helpers import logging_subclass
from test_oracle_regressions import outcome, same

ALIASES = ["multiply", "subtract", "divide", "true_divide", "negative", "absolute", "greater", "greater_equal",
           "less", "less_equal", "not_equal", "clip", "arctan2", "fix", "arccos", "arcsin", "arctan"]
UNARY = {"negative", "absolute", "fix", "arccos", "arcsin", "arctan"}


@pytest.mark.parametrize("name", ALIASES)
def test_aliases(name):
    def args(lib):
        x = lib.tensor([[-0.75, 0.5], [0.25, -0.125]])
        if name in UNARY:
            return (x,)
        if name == "clip":
            return (x, -0.5, 0.3)
        return (x, lib.tensor([0.5, -0.25]))
    same(lambda lib: getattr(lib, name)(*args(lib)))
    same(lambda lib: getattr(args(lib)[0], name)(*args(lib)[1:]))
    if hasattr(torch.Tensor, name + "_"):
        def in_place(lib):
            a = args(lib)
            r = getattr(a[0], name + "_")(*a[1:])
            assert r is a[0]
            return r
        same(in_place)
    # the same function object as the original, so a mistake names the original op
    with pytest.raises(TypeError):
        getattr(kael, name)(object())


def test_more_aliases():
    same(lambda lib: lib.concat([lib.ones(2), lib.zeros(3)]))
    same(lambda lib: lib.concatenate([lib.ones(2, 1), lib.zeros(2, 2)], 1))
    for lib in (torch, kael):
        t = lib.zeros(2, 3, 4)
        assert t.ndimension() == 3 and t.nelement() == 24 and lib.numel(t) == 24


def test_as_views():
    for lib in (torch, kael):
        x = lib.arange(6.0)
        v = x.view_as(lib.zeros(2, 3))
        v[0, 0] = 9.0
        assert x[0].item() == 9.0 and tuple(v.shape) == (2, 3)
        assert tuple(x.reshape_as(lib.zeros(3, 2)).shape) == (3, 2)
        assert x.type_as(lib.zeros(1, dtype=lib.int32)).dtype == lib.int32
        b = lib.broadcast_to(lib.tensor([1.0, 2.0]), (3, -1))
        assert tuple(b.shape) == (3, 2) and b.stride() == (0, 1)
        assert tuple(lib.tensor([1.0]).broadcast_to((2, 2)).shape) == (2, 2)
    assert tuple(kael.broadcast_shapes((2, 1), (3,), 1)) == tuple(torch.broadcast_shapes((2, 1), (3,), 1))
    with pytest.raises(RuntimeError):
        kael.broadcast_shapes((2,), (3,))
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes((2,), (3,))


@pytest.mark.parametrize("call", [
    lambda lib: lib.mm(lib.ones(2, 3), lib.ones(3, 4)),
    lambda lib: lib.ones(2, 3).mm(lib.ones(3, 4, dtype=lib.float64)),
    lambda lib: lib.mm(lib.ones(3), lib.ones(3, 4)),
    lambda lib: lib.mm(lib.ones(2, 3), lib.ones(4, 4)),
    lambda lib: lib.mv(lib.arange(6.0).reshape(2, 3), lib.tensor([1.0, -1.0, 2.0])),
    lambda lib: lib.mv(lib.ones(2, 3), lib.ones(3, 1)),
    lambda lib: lib.dot(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([4.0, -5.0, 6.0])),
    lambda lib: lib.dot(lib.tensor([1, 2, 3]), lib.tensor([4, -5, 6])),
    lambda lib: lib.dot(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0, 3.0])),
    lambda lib: lib.dot(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0], dtype=lib.float64)),
    lambda lib: lib.dot(lib.ones(2, 2), lib.ones(2)),
    lambda lib: lib.outer(lib.tensor([1.0, 2.0]), lib.tensor([3, 4, 5])),
    lambda lib: lib.tensor([1, 2]).outer(lib.tensor([3, 4, 5])),
    lambda lib: lib.tensor([1, 2]).ger(lib.tensor([3, 4, 5])),
    lambda lib: lib.trace(lib.arange(12.0).reshape(3, 4)),
    lambda lib: lib.trace(lib.arange(12).reshape(4, 3)),
    lambda lib: lib.arange(9, dtype=lib.uint8).reshape(3, 3).trace(),
    lambda lib: lib.trace(lib.ones(3)),
], ids=["mm", "mm-dtypes", "mm-1d", "mm-shapes", "mv", "mv-2d", "dot", "dot-int", "dot-sizes", "dot-dtypes",
        "dot-2d", "outer", "outer-int", "ger", "trace", "trace-int", "trace-uint8", "trace-1d"])
def test_products(call):
    same(call)


def grads(lib, fn, *arrays):
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *leaves)
    out.backward(lib.ones_like(out))
    return [x.grad.tolist() for x in leaves]


def test_product_gradients():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4) - 3
    v = np.array([1.0, -2.0, 0.5])
    for fn, args in [(lambda lib, x, y: lib.mm(x, y), (a, b)), (lambda lib, x, y: lib.mv(x, y), (a, v)),
                     (lambda lib, x, y: lib.dot(x, y), (v, v * 2)), (lambda lib, x, y: lib.outer(x, y), (v, v)),
                     (lambda lib, x: lib.trace(x), (b,))]:
        assert grads(kael, fn, *args) == grads(torch, fn, *args)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("case", ["float", "broadcast", "value", "float64", "int", "int-value-float"])
def test_addcmul_addcdiv(op, case):
    def call(lib):
        x = lib.tensor([1.0, -2.0, 3.0])
        t1, t2 = lib.tensor([0.5, 1.5, -2.0]), lib.tensor([3.0, -0.25, 7.0])
        kw = {}
        if case == "broadcast":
            x = lib.tensor([[1.0], [2.0]])
        elif case == "value":
            kw = {"value": -0.3}
        elif case == "float64":
            t2 = t2.double()
        elif case == "int":
            x, t1, t2 = lib.tensor([1, 2, 3]), lib.tensor([4, 5, 6]), lib.tensor([1, 2, 3])
        elif case == "int-value-float":
            x, t1, t2 = lib.tensor([1, 2, 3]), lib.tensor([4, 5, 6]), lib.tensor([1, 2, 3])
            kw = {"value": 0.5}
        return getattr(lib, op)(x, t1, t2, **kw)
    same(call)


@pytest.mark.parametrize("op", ["addcmul_", "addcdiv_"])
def test_addcmul_addcdiv_in_place(op):
    def call(lib):
        x = lib.tensor([1.0, -2.0, 3.0])
        r = getattr(x, op)(lib.tensor([0.5, 1.5, -2.0]), lib.tensor([3.0, -0.25, 7.0]), value=2)
        assert r is x
        return x
    same(call)
    for lib in (torch, kael):
        x = lib.tensor([1.0, 2.0])
        with pytest.raises((RuntimeError, ValueError)):
            getattr(x, op)(lib.ones(2, 2), lib.ones(2))
        assert x.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("op", ["nansum", "nanmean"])
@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"dim": 1, "keepdim": True}, {"dim": (0, 1)}, {"dtype": "float64"}])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_nan_reductions(op, kw, dtype):
    def call(lib):
        x = lib.tensor([[1.0, float("nan"), 3.0], [float("nan"), float("nan"), 0.5]])
        if dtype == "int64":
            x = lib.tensor([[1, 2, 3], [4, 5, 6]])
        else:
            x = x.to(getattr(lib, dtype))
        k = dict(kw)
        if "dtype" in k:
            k["dtype"] = getattr(lib, k["dtype"])
        return getattr(lib, op)(x, **k)
    same(call)


@pytest.mark.parametrize("op", ["hstack", "vstack"])
@pytest.mark.parametrize("shapes", [[(3,), (2,)], [(2, 3), (2, 1)], [(), ()], [(2,), (2,)], [(1, 2), (3, 2)]], ids=str)
def test_stacking(op, shapes):
    call = lambda lib: getattr(lib, op)([lib.arange(float(np.prod(s))).reshape(s) for s in shapes])  # noqa: E731
    same(call)  # sizes that do not fit: torch's RuntimeError


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_meshgrid(indexing, n):
    same(lambda lib: list(lib.meshgrid(*[lib.arange(float(k + 2)) for k in range(n)], indexing=indexing)))
    same(lambda lib: list(lib.meshgrid([lib.tensor(5.0), lib.arange(3.0)], indexing=indexing)))


def test_meshgrid_gives_views():
    # (its warning without indexing=, once per process as torch's: test_varargs_composites.py)
    for lib in (torch, kael):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a, b = lib.meshgrid(lib.arange(2.0), lib.arange(3.0))
        assert a.stride() == (1, 0) and b.stride() == (0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kael.meshgrid(kael.arange(2.0), indexing="ij")


@pytest.mark.parametrize("call", [
    lambda lib: lib.diff(lib.tensor([1.0, 4.0, 9.0, 16.0])),
    lambda lib: lib.diff(lib.tensor([1, 4, 9, 16]), n=2),
    lambda lib: lib.diff(lib.arange(12.0).reshape(3, 4) ** 2, dim=0),
    lambda lib: lib.diff(lib.tensor([True, False, False, True])),
    lambda lib: lib.diff(lib.tensor([1.0, 3.0]), prepend=lib.tensor([0.0]), append=lib.tensor([10.0, 20.0])),
    lambda lib: lib.diff(lib.tensor([1.0, 3.0]), n=5),
    lambda lib: lib.diff(lib.tensor(1.0)),
    lambda lib: lib.tensor([1.0, 4.0]).diff(),
], ids=["1d", "n2", "dim0", "bool", "prepend-append", "n-past-size", "0-d", "method"])
def test_diff(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]), 2),
    lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]), 3, dim=1),
    lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]), lib.tensor([1, 2]), dim=0),
    lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]), lib.tensor([0, 3]), dim=-1),
    lambda lib: lib.repeat_interleave(lib.tensor([2, 0, 1])),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(2),
    lambda lib: lib.repeat_interleave(lib.ones(2, 3), lib.tensor([1, 2, 3]), dim=0),
    lambda lib: lib.repeat_interleave(lib.ones(2), lib.tensor([1, -1]), dim=0),
    lambda lib: lib.repeat_interleave(lib.ones(2), -1),
], ids=["int", "int-dim", "tensor", "tensor-neg-dim", "counts", "method", "wrong-size", "negative", "negative-int"])
def test_repeat_interleave(call):
    same(call)


def test_repeat_interleave_gradient_and_gqa_shape():
    x = np.arange(6.0).reshape(1, 2, 3)
    fn = lambda lib, t: lib.repeat_interleave(t, 3, dim=1) * lib.arange(18.0).reshape(1, 6, 3)  # noqa: E731
    assert grads(kael, fn, x) == grads(torch, fn, x)


@pytest.mark.parametrize("args", [(3, 3), (4, 3, 1), (3, 5, -1), (0, 3), (5, 2, 10), (3, 3, -10)], ids=str)
def test_triangle_indices(args):
    same(lambda lib: lib.tril_indices(*args))
    same(lambda lib: lib.triu_indices(*args))
    same(lambda lib: lib.tril_indices(*args, dtype=lib.int32))


@pytest.mark.parametrize("op", ["isposinf", "isneginf"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
def test_infinities(op, dtype):
    def call(lib):
        x = lib.tensor([1.0, float("inf"), -float("inf"), float("nan")])
        x = x.to(getattr(lib, dtype)) if dtype not in ("int64", "bool") else lib.tensor([1, 0, 2]).to(getattr(lib, dtype))
        return getattr(lib, op)(x)
    same(call)


@pytest.mark.parametrize("op", ["flipud", "fliplr"])
def test_flips(op):
    same(lambda lib: getattr(lib, op)(lib.arange(6.0).reshape(2, 3)))
    same(lambda lib: getattr(lib, op)(lib.arange(3.0)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_finfo(dtype):
    k, t = kael.finfo(getattr(kael, dtype)), torch.finfo(getattr(torch, dtype))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(k, attr) == getattr(t, attr), attr
    assert kael.finfo().eps == torch.finfo().eps
    # in use: the most negative mask value of attention code
    assert kael.full((2,), kael.finfo(getattr(kael, dtype)).min, dtype=getattr(kael, dtype)).tolist() == \
        torch.full((2,), torch.finfo(getattr(torch, dtype)).min, dtype=getattr(torch, dtype)).tolist()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(dtype):
    k, t = kael.iinfo(getattr(kael, dtype)), torch.iinfo(getattr(torch, dtype))
    assert (k.bits, k.min, k.max, k.dtype) == (t.bits, t.min, t.max, t.dtype)


def test_dtype_info_errors_and_default_dtype():
    with pytest.raises(TypeError):
        kael.finfo(kael.int32)
    with pytest.raises(TypeError):
        kael.iinfo(kael.float32)
    assert kael.get_default_dtype() is kael.float32 and torch.get_default_dtype() is torch.float32


def test_python_methods_honour_kael_function_overrides():
    seen = []
    x = kael.ones(2, 2).as_subclass(logging_subclass(seen))
    x.mm(kael.ones(2, 2))
    assert "mm" in seen


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("call", [
    lambda lib: lib.logaddexp(lib.tensor([-INF, INF, 1.0, -INF, NAN, INF, 100.0]),
                              lib.tensor([-INF, INF, 2.0, 3.0, 1.0, -INF, -100.0])),
    lambda lib: lib.logaddexp2(lib.tensor([-INF, INF, 1.0, -INF, 30.0]), lib.tensor([-INF, INF, 2.0, 3.0, -4.0])),
    lambda lib: lib.logaddexp(lib.tensor([1, 2]), lib.tensor([3, 4])),
    lambda lib: lib.logaddexp(lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([[0.5], [-3.0]])),
    lambda lib: lib.xlogy(lib.tensor([0.0, 0.0, 1.0, 2.0, 0.0, 0.0]), lib.tensor([0.0, NAN, 0.0, 3.0, -1.0, INF])),
    lambda lib: lib.xlogy(lib.tensor([0, 1, 2]), 3),
    lambda lib: lib.xlogy(2, lib.tensor([0, 1, 2])),
    lambda lib: lib.tensor([0.0, 1.5]).xlogy(lib.tensor([0.0, 2.0])),
    lambda lib: lib.hypot(lib.tensor([3.0, -5.0, 0.0]), lib.tensor([4.0, 12.0, 0.0])),
    lambda lib: lib.hypot(lib.tensor([3, 4]), lib.tensor([4, 3])),
    lambda lib: lib.logit(lib.tensor([0.0, 0.25, 0.5, 1.0])),
    lambda lib: lib.logit(lib.tensor([0.0, 0.25, 1.0]), eps=0.1),
    lambda lib: lib.logit(lib.tensor([0, 1])),
    lambda lib: lib.sinc(lib.tensor([0.0, 0.5, 1.0, -2.5])),
    lambda lib: lib.sinc(lib.tensor([0, 1])),
    lambda lib: lib.deg2rad(lib.tensor([180.0, -90.0])),
    lambda lib: lib.deg2rad(lib.tensor([180, 90])),
    lambda lib: lib.rad2deg(lib.tensor([3.0, -1.0], dtype=lib.float64)),
    lambda lib: lib.heaviside(lib.tensor([-1.0, 0.0, 2.0]), lib.tensor([0.5])),
    lambda lib: lib.heaviside(lib.tensor([-1, 0, 2]), lib.tensor([7])),
    lambda lib: lib.heaviside(lib.tensor([-1.0, 0.0, 2.0]), lib.tensor([7])),
    lambda lib: lib.heaviside(lib.tensor([-1.0, 0.0, 2.0]), 0.5),
    lambda lib: lib.heaviside(lib.tensor([NAN, -0.0, True]), lib.tensor([3.0])),
    lambda lib: lib.heaviside(lib.tensor([True, False]), lib.tensor([True])),
    lambda lib: lib.float_power(lib.tensor([2, 3]), 2),
    lambda lib: lib.tensor([2.0, 3.0]).float_power(lib.tensor([0.5, -1.0])),
], ids=["logaddexp", "logaddexp2", "logaddexp-int", "logaddexp-broadcast", "xlogy", "xlogy-int", "xlogy-number",
        "xlogy-method", "hypot", "hypot-int", "logit", "logit-eps", "logit-int", "sinc", "sinc-int", "deg2rad",
        "deg2rad-int", "rad2deg", "heaviside", "heaviside-int", "heaviside-dtypes", "heaviside-number",
        "heaviside-nan", "heaviside-bool", "float_power",
        "float_power-tensor"])
def test_pointwise_composites(call):
    want, got = outcome(torch, call), outcome(kael, call)
    if want[0] == "ok" and got[0] == "ok" and want[1] in ("float32", "float64"):
        assert got[:3] == want[:3]
        tol = 1e-6 if want[1] == "float32" else 1e-12
        np.testing.assert_allclose(np.array(got[3], dtype=float), np.array(want[3], dtype=float), rtol=tol,
                                   atol=tol)
    else:
        assert got == want


def test_pointwise_composite_gradients():
    a, b = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, 3.0])
    for fn in [lambda lib, x, y: lib.logaddexp(x, y), lambda lib, x, y: lib.xlogy(x, y),
               lambda lib, x, y: lib.hypot(x, y)]:
        got, want = grads(kael, fn, a, b), grads(torch, fn, a, b)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda lib: lib.take(lib.tensor([[1, 2], [3, 4]]), lib.tensor([[0, -1], [3, 2]])),
    lambda lib: lib.take(lib.tensor([[1, 2], [3, 4]]), lib.tensor([4])),
    lambda lib: lib.take(lib.tensor([[1, 2], [3, 4]]), lib.tensor([-5])),
    lambda lib: lib.tensor([1.0, 2.0]).take(lib.tensor([], dtype=lib.int64)),
    lambda lib: list(lib.tensor_split(lib.arange(7), 3)),
    lambda lib: list(lib.tensor_split(lib.arange(12).reshape(3, 4), [1, 3], dim=1)),
    lambda lib: list(lib.tensor_split(lib.arange(5), [-2, 10, 1])),
    lambda lib: list(lib.arange(4).tensor_split(6)),
    lambda lib: lib.rot90(lib.arange(6).reshape(2, 3)),
    lambda lib: lib.rot90(lib.arange(6).reshape(2, 3), 2),
    lambda lib: lib.rot90(lib.arange(6).reshape(2, 3), -1),
    lambda lib: lib.rot90(lib.arange(24).reshape(2, 3, 4), 1, [2, 0]),
    lambda lib: lib.median(lib.tensor([3.0, 1.0, 2.0, 4.0])),
    lambda lib: lib.median(lib.tensor([3, 1, 2])),
    lambda lib: lib.median(lib.tensor([3.0, NAN, 2.0])),
    lambda lib: list(lib.median(lib.tensor([[3.0, 1.0, 2.0, 4.0], [1.0, NAN, 0.0, 0.5]]), dim=1)),
    lambda lib: list(lib.median(lib.tensor([[3, 1, 2], [9, 7, 8]]), 0, keepdim=True)),
    lambda lib: list(lib.tensor([[5.0, 1.0, 9.0]]).median(-1)),
    lambda lib: lib.tensordot(lib.arange(24.0).reshape(2, 3, 4), lib.arange(12.0).reshape(3, 4), dims=2),
    lambda lib: lib.tensordot(lib.arange(24.0).reshape(2, 3, 4), lib.arange(8.0).reshape(4, 2), dims=1),
    lambda lib: lib.tensordot(lib.arange(24.0).reshape(2, 3, 4), lib.arange(6.0).reshape(3, 2),
                              dims=([1], [0])),
    lambda lib: lib.tensordot(lib.arange(24.0).reshape(2, 3, 4), lib.arange(24.0).reshape(4, 3, 2),
                              dims=([1, 2], [1, 0])),
    lambda lib: lib.tensordot(lib.ones(2, 3), lib.ones(4, 2), dims=([0], [1])),
    lambda lib: lib.tensordot(lib.ones(2, 3), lib.ones(4, 2), dims=([1], [0])),
], ids=["take", "take-high", "take-low", "take-empty", "split-n", "split-idx", "split-odd-idx", "split-many",
        "rot90", "rot90-2", "rot90-neg", "rot90-dims", "median", "median-int", "median-nan", "median-dim",
        "median-keepdim", "median-method", "tensordot-2", "tensordot-1", "tensordot-pairs", "tensordot-pairs2",
        "tensordot-ok", "tensordot-mismatch"])
def test_indexing_and_reductions(call):
    same(call)


def test_median_returns_named_fields():
    r = kael.median(kael.tensor([[3.0, 1.0, 2.0]]), 1)
    assert r.values.tolist() == [2.0] and r.indices.tolist() == [2]
    assert type(r).__name__ == "median"


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, float("inf")])
def test_cdist(p):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 4, 3))
    got = kael.cdist(kael.tensor(a), kael.tensor(b), p=p).numpy()
    want = torch.cdist(torch.tensor(a), torch.tensor(b), p=p).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError):
        kael.cdist(kael.ones(2, 3), kael.ones(2, 4))


X23 = [[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]]


@pytest.mark.parametrize("call", [
    lambda lib: list(lib.var_mean(lib.tensor(X23), 1)),
    lambda lib: list(lib.std_mean(lib.tensor(X23), dim=0, correction=0, keepdim=True)),
    lambda lib: list(lib.std_mean(lib.tensor(X23))),
    lambda lib: list(lib.aminmax(lib.tensor(X23), dim=0)),
    lambda lib: list(lib.aminmax(lib.tensor([[3, 1], [2, 9]]))),
    lambda lib: list(lib.tensor(X23).aminmax(dim=-1, keepdim=True)),
    lambda lib: lib.msort(lib.tensor(X23).t()),
    lambda lib: lib.quantile(lib.tensor([1.0, 2.0, 3.0, 4.0]), 0.4),
    lambda lib: lib.quantile(lib.tensor([4.0, 1.0, 3.0, 2.0]), lib.tensor([0.0, 0.25, 0.5, 1.0])),
    lambda lib: lib.quantile(lib.tensor(X23), 0.5, dim=1),
    lambda lib: lib.quantile(lib.tensor(X23), lib.tensor([0.1, 0.9]), dim=0, keepdim=True),
    lambda lib: lib.quantile(lib.tensor(X23), 0.3, keepdim=True),
    lambda lib: lib.quantile(lib.tensor([1.0, float("nan"), 2.0]), 0.5),
    lambda lib: lib.quantile(lib.tensor([1.0, 2.0]), 1.5),
    lambda lib: lib.quantile(lib.tensor([1, 2]), 0.5),
    lambda lib: lib.cov(lib.tensor(X23)),
    lambda lib: lib.cov(lib.tensor([1.0, 4.0, 2.0]), correction=0),
    lambda lib: lib.corrcoef(lib.tensor([[1.0, 2.0, 4.0], [2.0, 1.0, 0.5], [3.0, 3.0, 3.5]])),
    lambda lib: lib.trapezoid(lib.tensor([1.0, 2.0, 3.0])),
    lambda lib: lib.trapezoid(lib.tensor(X23), dx=0.5),
    lambda lib: lib.trapezoid(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([0.0, 1.0, 3.0])),
    lambda lib: lib.trapz(lib.tensor(X23), dim=0),
], ids=["var_mean", "std_mean", "std_mean-all", "aminmax", "aminmax-all", "aminmax-method", "msort", "quantile",
        "quantile-tensor", "quantile-dim", "quantile-dim-keep", "quantile-keep", "quantile-nan", "quantile-q-range",
        "quantile-int", "cov", "cov-1d", "corrcoef", "trapezoid", "trapezoid-dx", "trapezoid-x", "trapz"])
def test_statistics(call):
    want, got = outcome(torch, call), outcome(kael, call)
    flat = lambda o: o if isinstance(o, list) else [o]  # noqa: E731
    for g, w in zip(flat(got), flat(want)):
        assert g[:3] == w[:3]
        if w[0] == "ok" and w[1].startswith("float"):
            np.testing.assert_allclose(np.array(g[3], dtype=float), np.array(w[3], dtype=float), rtol=1e-6,
                                       atol=1e-6)
        else:
            assert g == w


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolations(interpolation):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 7))
    for q in (0.0, 0.1, 0.5, 0.55, 1.0):
        got = kael.quantile(kael.tensor(x), q, dim=1, interpolation=interpolation).numpy()
        want = torch.quantile(torch.tensor(x), q, dim=1, interpolation=interpolation).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda lib: lib.ravel(lib.arange(6).reshape(2, 3).t()),
    lambda lib: lib.column_stack([lib.arange(3), lib.arange(6).reshape(3, 2)]),
    lambda lib: lib.row_stack([lib.arange(3), lib.arange(3)]),
    lambda lib: lib.dstack([lib.arange(3), lib.arange(3)]),
    lambda lib: lib.dstack([lib.ones(2, 2), lib.zeros(2, 2)]),
    lambda lib: lib.kron(lib.tensor([[1, 2], [3, 4]]), lib.tensor([[0, 1], [1, 0]])),
    lambda lib: lib.kron(lib.tensor([1.0, 2.0]), lib.ones(2, 3)),
    lambda lib: lib.inner(lib.arange(6.0).reshape(2, 3), lib.arange(9.0).reshape(3, 3)),
    lambda lib: lib.inner(lib.tensor(2.0), lib.arange(3.0)),
    lambda lib: lib.inner(lib.ones(2), lib.ones(3)),
    lambda lib: lib.vdot(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])),
    lambda lib: lib.block_diag(lib.ones(2, 2), lib.tensor([[5]]), lib.tensor(7.0), lib.tensor([1, 2])),
    lambda lib: lib.cartesian_prod(lib.tensor([1, 2]), lib.tensor([3, 4, 5])),
    lambda lib: lib.cartesian_prod(lib.tensor([1, 2])),
    lambda lib: lib.cross(lib.tensor([[1.0, 0.0, 0.0], [1.0, 2.0, 3.0]]), lib.tensor([[0.0, 1.0, 0.0]]), dim=1),
    lambda lib: lib.cross(lib.arange(6.0).reshape(3, 2), lib.ones(3, 2), dim=0),
    lambda lib: lib.isin(lib.tensor([1, 2, 3, 5]), lib.tensor([2, 5, 9])),
    lambda lib: lib.isin(lib.tensor([[1.0, 2.0], [3.0, 5.0]]), lib.tensor([5.0]), invert=True),
    lambda lib: lib.isin(lib.tensor([1, 2, 3]), 2),
    lambda lib: lib.isin(lib.tensor([1, 2, 3]), lib.tensor([], dtype=lib.int64)),
    lambda lib: lib.ldexp(lib.tensor([1.0, 2.0]), lib.tensor([3, -4])),
    lambda lib: lib.ldexp(lib.tensor([1, 2]), lib.tensor([3, 4])),
], ids=["ravel", "column_stack", "row_stack", "dstack-1d", "dstack-2d", "kron", "kron-dims", "inner", "inner-0d",
        "inner-mismatch", "vdot", "block_diag", "cartesian_prod", "cartesian_prod-1", "cross", "cross-dim0",
        "isin", "isin-invert", "isin-number", "isin-empty", "ldexp", "ldexp-int"])
def test_combining_and_predicates(call):
    same(call)


CROSS_WARNINGS = r"""
import json, sys, warnings
import torch, kael
counts = {}
for lib in (torch, kael):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            r = lib.cross(lib.tensor([[1.0, 0.0, 0.0]]), lib.tensor([[0.0, 1.0, 0.0]]))
            assert r.tolist() == [[0.0, 0.0, 1.0]]
        lib.cross(lib.ones(3), lib.ones(3), dim=0)
    counts[lib.__name__] = [(x.category.__name__, "dim" in str(x.message)) for x in w]
print(json.dumps(counts))
"""


def test_cross_without_dim_warns_once_per_process_as_torch():
    # torch warns once per process (TORCH_WARN_ONCE), so the check runs in a fresh interpreter
    out = subprocess.run([sys.executable, "-c", CROSS_WARNINGS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["torch"] == [["UserWarning", True]]
    assert counts["kael"] == counts["torch"]


@pytest.mark.parametrize("shapes,dim", [
    (((), (3,)), None),        # the default dim is input's own first dim of size 3: none in a 0-d input
    (((3,), (2, 3)), None),    # inputs of different ranks are refused before broadcasting
    (((2, 3), (3,)), 1),
    (((4, 3), (1, 3)), None),  # same rank: broadcast
    (((3, 4), (3, 1)), None),
    (((2, 3), (2, 3)), -1),
    (((2, 3), (2, 3)), 2),     # out of range: IndexError
    (((2, 2), (2, 2)), 1),     # no length 3 there
])
def test_cross_shapes_as_torch(shapes, dim):
    def call(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = lib.arange(float(math.prod(shapes[0]))).reshape(shapes[0])
            return lib.cross(a, lib.ones(shapes[1]) * 2.0, dim=dim) if dim is not None else lib.cross(a, lib.ones(shapes[1]))
    same(call)


def test_predicates():
    for lib in (torch, kael):
        assert lib.is_nonzero(lib.tensor([2.0])) is True and lib.is_nonzero(lib.tensor(0)) is False
        with pytest.raises(RuntimeError):
            lib.is_nonzero(lib.tensor([1, 2]))
        assert lib.is_same_size(lib.ones(2, 3), lib.zeros(2, 3)) and not lib.ones(2).is_same_size(lib.ones(3))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("case", ["ties-nan", "int", "bool", "2d-dim0", "2d-dim1", "0-d", "empty", "long"])
def test_cumulative_extremes(op, case):
    def call(lib):
        x = {
            "ties-nan": lambda: lib.tensor([1.0, 3.0, 3.0, 2.0, NAN, 5.0, NAN, -INF]),
            "int": lambda: lib.tensor([3, 1, 1, 2, 0, 7]),
            "bool": lambda: lib.tensor([True, False, True, False]),
            "2d-dim0": lambda: lib.tensor([[1.0, 5.0], [3.0, 2.0], [3.0, 9.0]]),
            "2d-dim1": lambda: lib.tensor([[1.0, 5.0, 5.0, 0.0], [3.0, 2.0, 4.0, 4.0]]),
            "0-d": lambda: lib.tensor(2.5),
            "empty": lambda: lib.zeros(0, 3),
            "long": lambda: lib.tensor([float((i * 37) % 11) for i in range(40)]),
        }[case]()
        dim = 1 if case == "2d-dim1" else 0
        return list(getattr(lib, op)(x, dim))
    same(call)


def test_cumulative_extremes_gradient():
    x = np.array([[1.0, 3.0, 2.0, 5.0], [4.0, 1.0, 6.0, 0.5]])
    fn = lambda lib, t: lib.cummax(t, 1).values * lib.arange(8.0).reshape(2, 4)  # noqa: E731
    assert grads(kael, fn, x) == grads(torch, fn, x)


@pytest.mark.parametrize("call", [
    lambda lib: lib.logcumsumexp(lib.tensor([0.0, 1.0, -INF, INF, 2.0]), 0),
    lambda lib: lib.logcumsumexp(lib.tensor([[0.0, 100.0, -3.0], [1.0, 2.0, 3.0]]), 1),
    lambda lib: lib.logcumsumexp(lib.tensor([[0.0, 100.0], [-50.0, 2.0]], dtype=lib.float64), 0),
    lambda lib: lib.tensor([1.0, 2.0, 3.0]).logcumsumexp(-1),
], ids=["inf", "dim1", "float64", "method"])
def test_logcumsumexp(call):
    want, got = outcome(torch, call), outcome(kael, call)
    assert got[:3] == want[:3]
    np.testing.assert_allclose(np.array(got[3], dtype=float), np.array(want[3], dtype=float), rtol=1e-6)


@pytest.mark.parametrize("case", ["1d", "broadcast-mask", "short-source", "int", "non-bool-mask"])
def test_masked_scatter(case):
    def call(lib):
        x = lib.zeros(2, 3)
        mask = lib.tensor([[True, False, True], [False, True, True]])
        src = lib.arange(10.0, 20.0)
        if case == "broadcast-mask":
            mask = lib.tensor([True, False, True])
        elif case == "short-source":
            src = lib.tensor([1.0])
        elif case == "int":
            x, src = lib.zeros(2, 3, dtype=lib.int64), lib.arange(10, 20)
        elif case == "non-bool-mask":
            mask = mask.to(lib.uint8)
        out = x.masked_scatter(mask, src)
        y = x.clone()
        assert y.masked_scatter_(mask, src) is y
        assert y.tolist() == out.tolist()
        return out
    same(call)


def test_in_place_products():
    for name, args in [("addmm_", lambda lib: (lib.arange(6.0).reshape(2, 3), lib.ones(3, 3))),
                       ("baddbmm_", lambda lib: (lib.ones(2, 2, 3), lib.ones(2, 3, 3)))]:
        def call(lib, name=name, args=args):
            x = lib.ones(2, 3) if name == "addmm_" else lib.ones(2, 2, 3)
            assert getattr(x, name)(*args(lib), beta=0.5, alpha=2.0) is x
            return x
        same(call)


@pytest.mark.parametrize("name,kw,check_stats", [
    ("exponential_", {"lambd": 2.0}, lambda v: abs(v.mean() - 0.5) < 0.02 and v.min() >= 0),
    ("log_normal_", {"mean": 0.0, "std": 0.5}, lambda v: abs(np.log(v).mean()) < 0.02 and v.min() > 0),
    ("cauchy_", {"median": 1.0, "sigma": 2.0}, lambda v: abs(np.median(v) - 1.0) < 0.1),
    ("geometric_", {"p": 0.25}, lambda v: abs(v.mean() - 4.0) < 0.15 and v.min() >= 1 and (v == np.round(v)).all()),
])
def test_random_fills(name, kw, check_stats):
    kael.manual_seed(9)
    x = kael.empty(20000)
    assert getattr(x, name)(**kw) is x
    assert check_stats(x.numpy().astype(np.float64))
    kael.manual_seed(9)
    assert kael.equal(getattr(kael.empty(20000), name)(**kw), x)
    g = kael.Generator()
    g.manual_seed(1)
    a = getattr(kael.empty(10, dtype=kael.float64), name)(**kw, generator=g)
    assert a.dtype == kael.float64
    # torch's checks of the parameters
    bad = {"exponential_": {"lambd": -1.0}, "log_normal_": {"std": 0.0}, "geometric_": {"p": 1.5}}.get(name)
    if bad:
        for lib in (torch, kael):
            with pytest.raises(RuntimeError):
                getattr(lib.empty(3), name)(**bad)
