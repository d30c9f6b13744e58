"""The ops of two results that moved from Python into the registry as CompositeImplicit entries
(aten/src/native/values_indices.cpp): kthvalue, median and nanmedian (all elements, and along a
dim), cummax, cummin, aminmax, var_mean and std_mean; and the gradients of a value picked from
all elements (max, min, median, nanmedian: PyTorch's evenly_distribute_backward) and of
amax/amin (PyTorch's scale_grad_by_count). Each against torch: the result's type and field
names, values, dtypes, shapes, exception classes and gradients."""
import math

import numpy as np
import pytest
import torch

import kael

NAN, INF = math.nan, math.inf
RNG = np.random.default_rng(20261207)
TIES = [[3.0, 1.0, 3.0, -0.0, 0.0, 1.0, 2.0], [NAN, 5.0, 4.0, NAN, 4.0, 5.0, 1.0], [2.0] * 7]
M3 = RNG.integers(-3, 4, (2, 4, 5)).astype(float).tolist()


def outcome(lib, call):
    """('raise', class) or (type name, fields, [(dtype, shape, values, signbits)...]) of the result."""
    try:
        r = call(lib)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return ("raise", (RuntimeError if isinstance(e, RuntimeError) else type(e)).__name__)
    parts = list(r) if isinstance(r, tuple) else [r]
    kind = type(r).__name__ if isinstance(r, tuple) else "Tensor"
    # a named tuple's fields (kael's have _fields; torch's structseq its n_fields names)
    fields = [f for f in ("values", "indices", "min", "max") if isinstance(r, tuple) and hasattr(type(r), f)]
    return (kind, tuple(fields), [(str(t.dtype).split(".")[1], list(t.shape), np.array(t.tolist(), dtype=np.float64))
                                  for t in parts])


def agree(call, rtol=1e-12):
    want, got = outcome(torch, call), outcome(kael, call)
    if want[0] == "raise":
        assert got == want
        return
    assert got[:2] == want[:2], (got[:2], want[:2])
    assert len(got[2]) == len(want[2])
    for (gd, gs, gv), (wd, ws, wv) in zip(got[2], want[2]):
        assert (gd, gs) == (wd, ws)
        np.testing.assert_allclose(gv, wv, rtol=rtol, atol=0, equal_nan=True)
        # -0.0 picked where torch picks it (a NaN's sign is not compared)
        np.testing.assert_array_equal(np.signbit(gv) & ~np.isnan(wv), np.signbit(wv) & ~np.isnan(wv))


DTYPES = ["float32", "float64", "int64", "int32", "uint8", "float16", "bfloat16"]


def data(lib, dtype, rows=TIES):
    rows = [[0.0 if math.isnan(v) and "int" in dtype else abs(v) if dtype == "uint8" else v for v in r] for r in rows]
    return lib.tensor(rows, dtype=getattr(lib, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1, 2, -3])
@pytest.mark.parametrize("keepdim", [False, True])
def test_selections_along_dim(dtype, dim, keepdim):
    for name in ("median", "nanmedian"):
        agree(lambda lib: getattr(lib, name)(data(lib, dtype), dim, keepdim))
        agree(lambda lib: getattr(data(lib, dtype), name)(dim=dim, keepdim=keepdim))
    for k in (1, 2, 3, 4, 8, 0):
        agree(lambda lib: lib.kthvalue(data(lib, dtype), k, dim, keepdim))
        agree(lambda lib: data(lib, dtype).kthvalue(k, dim=dim, keepdim=keepdim))


@pytest.mark.parametrize("dtype", DTYPES + ["bool", "int8", "int16"])
@pytest.mark.parametrize("shape", [(), (0,), (2, 0), (5,), (3, 7)])
def test_medians_of_all_elements(dtype, shape):
    def make(lib):
        x = data(lib, dtype) if dtype != "bool" else data(lib, "float32") > 1
        return x.flatten()[: math.prod(shape)].reshape(shape) if shape != (3, 7) else x
    for name in ("median", "nanmedian"):
        agree(lambda lib: getattr(lib, name)(make(lib)))
        agree(lambda lib: getattr(make(lib), name)())


@pytest.mark.parametrize("shape", [(), (1,), (0,), (3, 0)])
@pytest.mark.parametrize("dim", [0, -1, 1, 2])
def test_selections_of_small_inputs(shape, dim):
    for call in (lambda lib: lib.median(lib.ones(shape), dim), lambda lib: lib.nanmedian(lib.ones(shape), dim),
                 lambda lib: lib.kthvalue(lib.ones(shape), 1, dim), lambda lib: lib.cummax(lib.ones(shape), dim),
                 lambda lib: lib.cummin(lib.ones(shape), dim), lambda lib: lib.aminmax(lib.ones(shape), dim=dim)):
        agree(call)


@pytest.mark.parametrize("dtype", DTYPES + ["bool"])
@pytest.mark.parametrize("dim", [0, 1, -1, 2, -3])
def test_running_extremes(dtype, dim):
    def make(lib):
        return data(lib, dtype) if dtype != "bool" else data(lib, "float32") > 2
    for name in ("cummax", "cummin"):
        agree(lambda lib: getattr(lib, name)(make(lib), dim))
        agree(lambda lib: getattr(make(lib), name)(dim))
        agree(lambda lib: getattr(lib, name)(lib.tensor(M3, dtype=getattr(lib, "float64")), dim))


def test_running_extremes_are_new_tensors():
    x = kael.tensor([[1.0], [2.0]])
    values, indices = kael.cummax(x, 1)
    values.add_(10)
    indices.add_(1)
    assert x.tolist() == [[1.0], [2.0]] and indices.is_contiguous()


@pytest.mark.parametrize("dtype", DTYPES + ["bool"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_aminmax(dtype, dim, keepdim):
    agree(lambda lib: lib.aminmax(data(lib, dtype) if dtype != "bool" else data(lib, "float32") > 1, dim=dim,
                                  keepdim=keepdim))
    agree(lambda lib: data(lib, "float32").aminmax(dim=dim, keepdim=keepdim))
    agree(lambda lib: lib.aminmax(lib.zeros(0, 3), dim=dim, keepdim=keepdim))


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize("args,kwargs", [
    ((), {}), ((False,), {}), ((1,), {}), ((1, False, True), {}), (([0, 2],), {}), ((), {"dim": 1}),
    ((), {"dim": None, "correction": 0}), ((), {"dim": (0, 1), "correction": 2, "keepdim": True}),
    ((), {"correction": 1.5}), ((1,), {"unbiased": False}), ((3,), {}), ((), {"dim": -4}),
])
def test_var_mean_std_mean(name, args, kwargs):
    agree(lambda lib: getattr(lib, name)(lib.tensor(M3, dtype=lib.float64), *args, **kwargs), rtol=1e-14)
    agree(lambda lib: getattr(lib, name)(lib.tensor(M3, dtype=lib.int64), *args, **kwargs))
    assert not hasattr(kael.Tensor, name) and not hasattr(torch.Tensor, name)


def test_result_types():
    x = kael.tensor([[1.0, 2.0], [3.0, 4.0]])
    for r, name, fields in [(kael.median(x, 0), "median", ("values", "indices")),
                            (x.nanmedian(0), "nanmedian", ("values", "indices")),
                            (x.kthvalue(1), "kthvalue", ("values", "indices")),
                            (x.cummax(0), "cummax", ("values", "indices")),
                            (x.cummin(0), "cummin", ("values", "indices")),
                            (x.aminmax(), "aminmax", ("min", "max"))]:
        assert type(r) is getattr(kael.return_types, name) and r.n_fields == len(fields)
        assert [getattr(r, f) for f in fields] == list(r)
        assert type(r).__module__ == "kael.return_types"
    assert type(kael.var_mean(x)) is tuple and type(kael.std_mean(x, 0)) is tuple


# ---- gradients


def grads(lib, make, call, grad):
    x = make(lib).requires_grad_(True)
    out = call(lib, x)
    out = out[0] if isinstance(out, tuple) else out
    out.backward(lib.full(out.shape, grad, dtype=lib.float64))
    return np.array(x.grad.tolist())


TIE_ROWS = [[1.0, 3.0, 3.0, 3.0, 2.0], [NAN, 1.0, NAN, 0.0, 2.0], [5.0, 5.0, 5.0, 5.0, 5.0]]


@pytest.mark.parametrize("name", ["max", "min", "median", "nanmedian"])
@pytest.mark.parametrize("row", range(len(TIE_ROWS)))
@pytest.mark.parametrize("grad", [0.7, 1.0 / 3.0, -2.5, INF, NAN])
def test_gradient_of_a_picked_value_is_torchs(name, row, grad):
    """Shared evenly among the elements equal to the value (the NaN elements when it is NaN), 0
    elsewhere even for an infinite or NaN gradient: bit for bit torch's."""
    make = lambda lib: lib.tensor(TIE_ROWS[row], dtype=lib.float64)  # noqa: E731
    call = lambda lib, x: getattr(lib, name)(x)  # noqa: E731
    got, want = grads(kael, make, call, grad), grads(torch, make, call, grad)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("grad", [0.7, 0.1, 1.0 / 3.0, INF])
def test_gradient_of_amax_amin_is_torchs(name, grad):
    """(grad / count) * mask, as torch's scale_grad_by_count: bit for bit, NaN where torch has it."""
    make = lambda lib: lib.tensor([[1.0, 3.0, 3.0, 3.0, 2.0, 3.0, 3.0], [2.0] * 7], dtype=lib.float64)  # noqa: E731
    for dim in ([1], [0, 1], [0]):
        call = lambda lib, x: getattr(lib, name)(x, dim)  # noqa: E731
        np.testing.assert_array_equal(grads(kael, make, call, grad), grads(torch, make, call, grad))


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.kthvalue(x, 2, 1), lambda lib, x: lib.median(x, 0, True), lambda lib, x: lib.nanmedian(x, 1),
    lambda lib, x: lib.cummax(x, 1), lambda lib, x: lib.cummin(x, 0), lambda lib, x: lib.aminmax(x, dim=1).max,
    lambda lib, x: lib.var_mean(x, 1)[1] * lib.var_mean(x, 1)[0], lambda lib, x: lib.std_mean(x, correction=0)[0],
], ids=["kthvalue", "median", "nanmedian", "cummax", "cummin", "aminmax", "var_mean", "std_mean"])
def test_gradients(call):
    make = lambda lib: lib.tensor(M3[0], dtype=lib.float64)  # noqa: E731
    for lib_grad in (0.5, 1.25):
        np.testing.assert_allclose(grads(kael, make, call, lib_grad), grads(torch, make, call, lib_grad),
                                   rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shape,dim", [((3,), 0), ((3, 0), 0), ((3, 0), 1), ((0,), 0), ((2, 3), -1)])
def test_bool_has_no_order(shape, dim):
    """torch has no median or kthvalue kernel for bool (NotImplementedError, a RuntimeError), checked
    after dim's; the median of no elements is NaN as bool, true."""
    for call in (lambda lib: lib.median(lib.zeros(shape, dtype=lib.bool), dim),
                 lambda lib: lib.nanmedian(lib.zeros(shape, dtype=lib.bool), dim),
                 lambda lib: lib.kthvalue(lib.zeros(shape, dtype=lib.bool), 1, dim),
                 lambda lib: lib.kthvalue(lib.zeros(shape, dtype=lib.bool), 4, dim),
                 lambda lib: lib.median(lib.zeros(shape, dtype=lib.bool)),
                 lambda lib: lib.nanmedian(lib.zeros(shape, dtype=lib.bool))):
        agree(call)
