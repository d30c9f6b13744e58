"""clamp, clamp_ and their bounds as numbers, tensors or None, against PyTorch (clamp_min and
clamp_max themselves are pointwise registry entries, covered by test_pointwise_registry.py)."""
import itertools
import math

import pytest
import torch

import kael
from helpers import check

NAN = math.nan
BOUNDS = [None, 0, 2, -1.5, 0.5, NAN, True, "t0", "t_row", "t_nan"]
DTYPES = ["float32", "float64", "int64", "int32", "uint8", "float16", "bfloat16"]


def _values(lib, dtype):
    base = lib.tensor([[1.0, -3.0, 5.0], [0.25, 7.0, -0.5]])
    if dtype.startswith("float") or dtype == "bfloat16":
        base = lib.tensor([[1.0, NAN, 5.0], [0.25, 7.0, -0.5]])
    return base.to(getattr(lib, dtype))


def _bound(lib, b):
    if b == "t0":
        return lib.tensor(1.5)
    if b == "t_row":
        return lib.tensor([0.0, 2.0, 4.0])
    if b == "t_nan":
        return lib.tensor([NAN, 1.0, 1.0])
    return b


def _call(lib, fn, dtype, lo, hi):
    x = _values(lib, dtype)
    return fn(x, _bound(lib, lo), _bound(lib, hi)), x


def _same(make):
    try:
        t = make(torch)
    except Exception as e:  # noqa: BLE001 - torch refuses: kael must refuse with the same class
        with pytest.raises(RuntimeError if isinstance(e, RuntimeError) else type(e)):
            make(kael)
        return None
    return make(kael), t


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp_matches_torch(dtype):
    for lo, hi in itertools.product(BOUNDS, BOUNDS):
        if (isinstance(lo, str)) != (isinstance(hi, str)) and lo is not None and hi is not None:
            continue  # one number and one tensor bound: torch computes, kael raises TypeError (open, docs/hardening.md)
        for form in ("function", "method", "keywords"):
            def make(lib):
                x, l, h = _values(lib, dtype), _bound(lib, lo), _bound(lib, hi)
                if form == "function":
                    return lib.clamp(x, l, h)
                if form == "method":
                    return x.clamp(l, h)
                return lib.clamp(x, min=l, max=h)
            r = _same(make)
            if r is not None:
                check(*r)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp_in_place_matches_torch_and_leaves_self_alone_when_it_raises(dtype):
    numbers = [None, 0, 2, -1.5, 0.5, NAN, True]
    for lo, hi in itertools.product(numbers, numbers):
        kx, tx = _values(kael, dtype), _values(torch, dtype)
        before = kx.clone()
        try:
            tr = tx.clamp_(lo, hi)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(RuntimeError if isinstance(e, RuntimeError) else type(e)):
                kx.clamp_(lo, hi)
            check(kx, _values(torch, dtype))  # untouched
            continue
        kr = kx.clamp_(lo, hi)
        assert kr is kx and tr is tx
        check(kx, tx)
        assert before.shape == kx.shape


def test_clamp_without_bounds_raises_like_torch():
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        torch.clamp(torch.ones(2))
    with pytest.raises(RuntimeError, match="clamp: At least one of 'min' or 'max' must not be None"):
        kael.clamp(kael.ones(2))


def test_clamp_of_an_int_tensor_with_a_float_bound_promotes():
    check(kael.clamp(kael.arange(4), min=0.5), torch.clamp(torch.arange(4), min=0.5))
    check(kael.clamp(kael.arange(4), min=kael.tensor(1.5)), torch.clamp(torch.arange(4), min=torch.tensor(1.5)))
    x = kael.arange(4)
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.clamp_(0, 2.5)  # clamp_min_ alone would succeed: the cast check comes before any write
    assert x.tolist() == [0, 1, 2, 3]
