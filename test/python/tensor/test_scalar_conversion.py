"""A Python number converted to a tensor's dtype is checked where PyTorch checks it (factories,
fill, __setitem__, alpha, arange, kael.tensor): NaN, inf and values out of range of an integer
dtype, and finite values beyond float32's range, raise RuntimeError; elsewhere (scalar operands
of pointwise ops) the number converts like a cast, as in PyTorch (see
Note [Conversions between dtypes])."""
import math

import pytest
import torch

import kael
from helpers import DTYPE_NAMES

NAN, INF = float("nan"), float("inf")
VALUES = [NAN, INF, -INF, 1e20, -1e20, 1e300, -1e300, 3.4e38, 3.5e38, 2.0 ** 63, -2.0 ** 63, 2.0 ** 63 - 1024,
          -2.0 ** 63 - 4096, 2 ** 63 - 1, -2 ** 63, 2.5, -1.5, 0.0, 300, -1, True, False]
OVERFLOW = "cannot be converted to type"


def result(fn, lib):
    try:
        return fn(lib), None
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return None, e


def same_as_torch(fn):
    t, terr = result(fn, torch)
    k, kerr = result(fn, kael)
    if terr is not None:
        assert kerr is not None, f"torch raised {terr!r}, kael gave {k}"
        assert type(kerr) is type(terr), (kerr, terr)
        if "without overflow" in str(terr):
            assert OVERFLOW in str(kerr) and "without overflow" in str(kerr), kerr
        return None
    assert kerr is None, f"kael raised {kerr!r}, torch gave {t}"
    assert len(k) == len(t) and all(a == b or (a != a and b != b) for a, b in zip(k, t)), (k, t)
    return k


def vid(v):
    return repr(v)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("value", VALUES, ids=vid)
def test_full(dtype, value):
    same_as_torch(lambda lib: lib.full((2,), value, dtype=getattr(lib, dtype)).tolist())


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("value", VALUES, ids=vid)
def test_full_like(dtype, value):
    same_as_torch(lambda lib: lib.full_like(lib.zeros(3, dtype=getattr(lib, dtype)), value).tolist())


def test_full_of_nan_as_int64_raises_like_torch():
    with pytest.raises(RuntimeError, match="full: value nan cannot be converted to type int64 without overflow"):
        kael.full((2,), NAN, dtype=kael.int64)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int64_t without overflow"):
        torch.full((2,), NAN, dtype=torch.int64)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("value", VALUES, ids=vid)
def test_setitem_number(dtype, value):
    def f(lib):
        x = lib.arange(4).to(getattr(lib, dtype))
        x[1:3] = value
        return x.tolist()
    same_as_torch(f)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("value", [NAN, INF, 1e20, 2.5, -1.5, 7], ids=vid)
def test_setitem_zero_dim_tensor(dtype, value):
    # PyTorch fills with the value of a 0-d source, converted like a copy (not checked)
    def f(lib):
        x = lib.arange(4).to(getattr(lib, dtype))
        x[1:3] = lib.tensor(value, dtype=lib.float64)
        return x.tolist()
    same_as_torch(f)


@pytest.mark.parametrize("value", [NAN, 1e20, -1e300, 2.0 ** 63], ids=vid)
def test_failed_setitem_leaves_tensor_untouched(value):
    x = kael.arange(4)
    version = x._version
    if value == 2.0 ** 63:  # converts (to INT64_MIN, as PyTorch on x86-64)
        x[0] = value
        assert x[0].item() == -2 ** 63
        return
    with pytest.raises(RuntimeError, match="index: value .* cannot be converted to type int64 without overflow"):
        x[1:] = value
    assert x.tolist() == [0, 1, 2, 3] and x._version == version


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("alpha", [1e300, -1e300, 3.5e38, NAN, INF, 2 ** 62, -2 ** 62, 3], ids=vid)
def test_alpha(op, dtype, alpha):
    # alpha is converted to the compute dtype with a check (float alpha with integers is an error)
    same_as_torch(lambda lib: getattr(lib, op)(lib.arange(3).to(getattr(lib, dtype)), lib.ones(3, dtype=getattr(
        lib, dtype)), alpha=alpha).tolist())


@pytest.mark.parametrize("variant", ["out", "inplace"])
def test_alpha_is_checked_before_out_is_written(variant):
    out = kael.arange(4.0)
    version = out._version
    with pytest.raises(RuntimeError, match="add: value 1e\\+300 cannot be converted to type float32 without overflow"):
        if variant == "out":
            kael.add(kael.ones(2, 3), 1.0, alpha=1e300, out=out)
        else:
            out.add_(1.0, alpha=1e300)
    assert out.shape == (4,) and out.tolist() == [0.0, 1.0, 2.0, 3.0] and out._version == version


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
@pytest.mark.parametrize("args", [(0, 1e20, 1e19), (0, 5, 1.5), (5.5, 0, -1.5), (-1e19, 0, 1e18), (0, INF, 1),
                                  (0, 3, 1), (0, 1e300, 1e299)], ids=str)
def test_arange_arguments(dtype, args):
    same_as_torch(lambda lib: lib.arange(*args, dtype=getattr(lib, dtype)).tolist()[:3])


def test_arange_step_truncated_to_zero_raises():
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        kael.arange(0, 5, 0.5, dtype=kael.int64)
    with pytest.raises(ValueError, match="step must be nonzero"):
        torch.arange(0, 5, 0.5, dtype=torch.int64)


@pytest.mark.parametrize("args", [(-2 ** 63, 2 ** 63 - 1, 2 ** 62), (2 ** 63 - 1, -2 ** 63, -2 ** 61),
                                  (-2 ** 63, 2 ** 63 - 1, 2 ** 63 - 1), (2 ** 63 - 3, 2 ** 63 - 1, 1)], ids=str)
def test_arange_over_the_whole_int64_range(args):
    # PyTorch's int64 size computation overflows here (it returns an empty tensor); Python's
    # range is the oracle.
    assert kael.arange(*args).tolist() == list(range(*args))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("value", [NAN, INF, 1e20, 1e39, 2.0 ** 63, -2.0 ** 63 - 4096, 2 ** 62, 2.5, -0.5], ids=vid)
def test_tensor_from_numbers(dtype, value):
    same_as_torch(lambda lib: lib.tensor([value, 1], dtype=getattr(lib, dtype)).tolist())


@pytest.mark.parametrize("expr", [
    lambda lib: lib.ones(2) + 1e300,        # the scalar operand is cast: inf
    lambda lib: lib.ones(2) * -1e300,
    lambda lib: lib.ones(2) < 1e300,
    lambda lib: lib.ones(2) == 1e300,
    lambda lib: lib.arange(2) == 2.5,
    lambda lib: lib.arange(2) + NAN,         # promotes to float
    lambda lib: lib.arange(2) * True,
    lambda lib: lib.tensor([True, False]) + 1e300,
    lambda lib: lib.ones(2).add_(1e300),
    lambda lib: lib.maximum(lib.arange(2), lib.tensor(1e300, dtype=lib.float64)),
], ids=range(10))
def test_scalar_operands_of_pointwise_ops_convert_like_casts(expr):
    k = same_as_torch(lambda lib: expr(lib).tolist())
    assert k is not None


def test_int64_min_from_two_to_the_63():
    # 2**63 passes PyTorch's range test (compared as a double) and converts like x86-64's cvttsd2si
    assert kael.full((1,), 2.0 ** 63, dtype=kael.int64).item() == -2 ** 63
    assert torch.full((1,), 2.0 ** 63, dtype=torch.int64).item() == -2 ** 63
    assert math.isinf(kael.full((1,), 1e39, dtype=kael.float64).item()) is False
