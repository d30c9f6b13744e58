"""Conversions and comparisons users reach for daily, against PyTorch: to(dtype) between every
pair of dtypes (rounding and saturation), the dtype methods, isclose/allclose/equal,
linspace/logspace."""
import math
import warnings

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, FLOAT_NAMES, check, compare, to_kael, to_torch

NAN, INF = math.nan, math.inf
VALUES = [0.0, -0.0, 0.4, 0.5, 0.6, 1.5, 2.5, -0.5, -1.7, 127.0, 128.0, 255.0, 256.0, -129.0, 65504.0, 65520.0,
          1e10, -1e10, 3.5e38, 1e-40, NAN, INF, -INF]


def _source(lib, src):
    if src in FLOAT_NAMES:
        return lib.tensor(VALUES, dtype=lib.float64).to(getattr(lib, src))
    if src == "bool":
        return lib.tensor([True, False, True])
    info = torch.iinfo(getattr(torch, src))
    return lib.tensor([0, 1, -1, 127, 128, 255, 256, -129, info.max, info.min], dtype=lib.int64).to(
        getattr(lib, src)) if src != "uint8" else lib.tensor([0, 1, 127, 128, 255], dtype=lib.uint8)


def _defined(src, dst, t):
    """Elements whose conversion C++ (and so torch) defines: a float beyond an integer dtype's
    range, NaN or inf converted to an integer is undefined, and torch's answer is the CPU's."""
    if src in FLOAT_NAMES and dst not in FLOAT_NAMES and dst != "bool":
        info = torch.iinfo(getattr(torch, dst))
        return torch.isfinite(t.double()) & (t.double() > float(info.min) - 1) & (t.double() < float(info.max) + 1)
    return torch.ones(t.shape, dtype=torch.bool)


def _same_values(k, t, keep):
    """k (kael) equals t (torch) exactly in dtype, shape and the kept values (NaN where NaN)."""
    assert k.dtype is getattr(kael, str(t.dtype).split(".")[-1]) and k.shape == tuple(t.shape)
    torch.testing.assert_close(to_torch(k)[keep], t[keep], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("src", DTYPE_NAMES)
@pytest.mark.parametrize("dst", DTYPE_NAMES)
def test_to_dtype_every_pair(src, dst):
    t_in, k_in = _source(torch, src), _source(kael, src)
    check(k_in, t_in)
    _same_values(k_in.to(getattr(kael, dst)), t_in.to(getattr(torch, dst)), _defined(src, dst, t_in))


METHOD_DTYPES = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16", "int": "int32",
                 "long": "int64", "bool": "bool"}


@pytest.mark.parametrize("src", DTYPE_NAMES)
def test_dtype_methods(src):
    for method, dst in METHOD_DTYPES.items():
        t_in, k_in = _source(torch, src), _source(kael, src)
        _same_values(getattr(k_in, method)(), getattr(t_in, method)(), _defined(src, dst, t_in))
    x = kael.ones(2)
    assert x.float() is x and x.to(kael.float32) is x


# ---------------------------------------------------------------- isclose, allclose, equal

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_isclose_matches_torch(dtype):
    def pair(lib):
        if dtype in FLOAT_NAMES:
            a = lib.tensor([1.0, 1.0, NAN, NAN, INF, INF, -INF, 0.0, 100.0, 1e-9]).to(getattr(lib, dtype))
            b = lib.tensor([1.0, 1.00001, NAN, 1.0, INF, -INF, 1.0, 1e-9, 100.001, 0.0]).to(getattr(lib, dtype))
        elif dtype == "bool":
            a, b = lib.tensor([True, False, True]), lib.tensor([True, True, False])
        else:
            a = lib.tensor([0, 1, 2, 100, 101]).to(getattr(lib, dtype))
            b = lib.tensor([0, 2, 2, 101, 100]).to(getattr(lib, dtype))
        return a, b
    for kw in [{}, {"equal_nan": True}, {"rtol": 0.0, "atol": 0.0}, {"rtol": 0.01}, {"atol": 1.0},
               {"rtol": 0.1, "atol": 0.5, "equal_nan": True}]:
        ta, tb = pair(torch)
        ka, kb = pair(kael)
        check(kael.isclose(ka, kb, **kw), torch.isclose(ta, tb, **kw))
        check(ka.isclose(kb, **kw), ta.isclose(tb, **kw))
        assert kael.allclose(ka, kb, **kw) is torch.allclose(ta, tb, **kw)
        assert ka.allclose(kb, **kw) is ta.allclose(tb, **kw)
    compare(lambda lib, a, b: lib.isclose(a, b), ((4, 5), dtype, "T"), ((5,), dtype))


def test_isclose_errors():
    with pytest.raises(RuntimeError, match="isclose: expected both tensors to have the same dtype"):
        kael.isclose(kael.ones(2), kael.ones(2, dtype=kael.float64))
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero, but got -1"):
        kael.isclose(kael.ones(2), kael.ones(2), rtol=-1)
    with pytest.raises(TypeError):
        kael.isclose(kael.ones(2), 1.0)
    with pytest.raises(RuntimeError, match="not broadcastable"):  # as torch's
        kael.allclose(kael.ones(2), kael.ones(3))


def test_equal_matches_torch():
    cases = [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 3.0]), ([NAN], [NAN]), ([], []), ([[1.0, 2.0]], [1.0, 2.0])]
    for a, b in cases:
        assert kael.equal(kael.tensor(a), kael.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))
        assert kael.tensor(a).equal(kael.tensor(b)) is torch.tensor(a).equal(torch.tensor(b))
    assert kael.equal(kael.tensor([1]), kael.tensor([1.0])) is torch.equal(torch.tensor([1]), torch.tensor([1.0]))
    with pytest.raises(TypeError):
        kael.equal(kael.ones(1), [1.0])


# ---------------------------------------------------------------- linspace, logspace

SPACED_DTYPES = [d for d in DTYPE_NAMES if d != "bool"]


@pytest.mark.parametrize("dtype", SPACED_DTYPES + [None])
def test_linspace_matches_torch(dtype):
    kw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    kk = {} if dtype is None else {"dtype": getattr(kael, dtype)}
    for start, end, steps in [(0, 10, 4), (0, 1, 5), (-3.5, 7.25, 11), (2, 2, 1), (0, 1, 0), (10, -10, 7),
                              (0, 100, 1001), (-0.5, 10.5, 3), (1, 5, 2)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                t = torch.linspace(start, end, steps, **kw)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    kael.linspace(start, end, steps, **kk)
                continue
        check(kael.linspace(start, end, steps, **kk), t)


@pytest.mark.parametrize("dtype", SPACED_DTYPES + [None])
def test_logspace_matches_torch(dtype):
    kw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    kk = {} if dtype is None else {"dtype": getattr(kael, dtype)}
    for start, end, steps, base in [(0, 3, 4, 10.0), (0, 1, 3, 2.0), (-1, 1, 3, 10.0), (0, 2, 5, 3.0), (1, 1, 1, 10.0),
                                    (0, 1, 0, 10.0), (-2, 2, 9, 0.5)]:
        if dtype == "uint8" and start < 0:
            continue  # torch converts -1 to uint8 unchecked (255) and then overflows a cast: undefined
        t = torch.logspace(start, end, steps, base, **kw)
        check(kael.logspace(start, end, steps, base, **kk), t)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_logspace_integer_values_beyond_the_dtype(dtype):
    # Values past the dtype's range convert as torch's kernel does (x86's truncation, then the
    # low bits), with no undefined float -> integer conversion (the sanitizer run checks that);
    # a single step fills through the checked conversion, so a value that does not fit raises.
    tt, kt = getattr(torch, dtype), getattr(kael, dtype)
    for start, end, steps, base in [(0, 3, 4, 10.0), (0, 30, 3, 10.0), (0, 1, 3, float("nan")), (0, 2.5, 2, 2.0),
                                    (0, 400, 2, 2.0), (-300, 1, 2, 2.0), (0, 1e39, 2, 1.0)]:
        try:
            expected = torch.logspace(start, end, steps, base, dtype=tt)
        except RuntimeError:  # an exponent that does not fit the dtype
            with pytest.raises(RuntimeError, match="logspace: value .* cannot be converted to type"):
                kael.logspace(start, end, steps, base, dtype=kt)
        else:
            check(kael.logspace(start, end, steps, base, dtype=kt), expected)
    for start, base in [(3, 10.0), (30, 10.0), (0.5, 10.0), (-1, 10.0)]:
        try:
            expected = torch.logspace(start, start, 1, base, dtype=tt)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="cannot be converted to type"):
                kael.logspace(start, start, 1, base, dtype=kt)
        else:
            check(kael.logspace(start, start, 1, base, dtype=kt), expected)


def test_logspace_float_exponents_beyond_the_dtype_raise_like_torch():
    for dtype, end in [("float16", 1e5), ("bfloat16", 1e39), ("float32", 1e39)]:
        with pytest.raises(RuntimeError, match="cannot be converted to type"):
            torch.logspace(0, end, 2, 1.0, dtype=getattr(torch, dtype))
        with pytest.raises(RuntimeError, match="logspace: value .* cannot be converted to type"):
            kael.logspace(0, end, 2, 1.0, dtype=getattr(kael, dtype))


def test_linspace_errors_and_specials():
    with pytest.raises(RuntimeError, match="linspace: number of steps must be non-negative"):
        kael.linspace(0, 1, -1)
    with pytest.raises(RuntimeError, match="linspace: not implemented for dtype bool"):
        kael.linspace(0, 1, 5, dtype=kael.bool)
    check(kael.linspace(0, INF, 3), torch.linspace(0, INF, 3))
    assert kael.linspace(0, 1, 5).dtype is kael.float32
