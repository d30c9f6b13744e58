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
    # one number and one tensor bound: torch reads a 0-d tensor bound as a number (its parser's
    # Scalar takes 0-d tensors) and raises TypeError for a tensor with dims
    for lo, hi in itertools.product(BOUNDS, BOUNDS):
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


BOUND_DTYPES = ["int8", "int16", "int64", "uint8", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("self_dtype", BOUND_DTYPES)
def test_clamp_tensor_promotes_self_min_and_max_together(self_dtype):
    # kael promoted pairwise (clamp_min, then clamp_max): an int64 self with a 0-d float64 min
    # and a float16 max gave float64, torch float16 (one result type over the three).
    values = {"self": [0, 3, 100, 250], "min": 2, "max": [7.5, 2049, 60, 300]}
    for min_dtype, max_dtype in itertools.product(BOUND_DTYPES, BOUND_DTYPES):
        for min_0d, max_0d, self_0d in itertools.product((True, False), (True, False), (False, True)):
            def make(lib):
                x = lib.tensor(values["self"][1] if self_0d else values["self"]).to(getattr(lib, self_dtype))
                lo = lib.tensor(values["min"] if min_0d else [values["min"]] * 4).to(getattr(lib, min_dtype))
                hi = lib.tensor(values["max"][2] if max_0d else values["max"]).to(getattr(lib, max_dtype))
                return lib.clamp(x, lo, hi)
            r = _same(make)
            if r is not None:
                check(*r, atol=0, rtol=0)


MIXED = {
    "float64_0d_max": lambda lib, x: lib.clamp(x, 1, lib.tensor(2.5, dtype=lib.float64)),
    "float_0d_min": lambda lib, x: lib.clamp(x, lib.tensor(1.5), 7),
    "keywords": lambda lib, x: lib.clamp(x, min=1, max=lib.tensor(7)),
    "bool_0d_method": lambda lib, x: x.clamp(lib.tensor(True), 3),
    "half_self": lambda lib, x: lib.clamp(x.to(lib.float16), 1, lib.tensor(7.5, dtype=lib.float64)),
    "min_above_max": lambda lib, x: lib.clamp(x, 2, lib.tensor(1.0)),
    "nan_0d": lambda lib, x: lib.clamp(x.to(lib.float32), lib.tensor(math.nan), 2),
    # TypeError in both: a bound with dims next to a number, a number as self
    "row_max": lambda lib, x: lib.clamp(x, 1, lib.ones(3)),
    "row_min": lambda lib, x: lib.clamp(x, lib.ones(3), 2),
    "one_element_row": lambda lib, x: lib.clamp(x, 1, lib.ones(1)),
    "number_self": lambda lib, x: lib.clamp(2.0, lib.zeros(2), lib.ones(2)),
}


@pytest.mark.parametrize("case", list(MIXED))
def test_clamp_takes_a_number_and_a_0d_tensor_bound_as_torch_does(case):
    # kael raised TypeError for clamp(t, 1, tensor); torch reads a 0-d tensor bound as a number
    # when the other bound is one (an int64 tensor with a float64 0-d bound becomes float32).
    r = _same(lambda lib: MIXED[case](lib, lib.tensor([0, 5, 9])))
    if r is not None:
        check(*r, atol=0, rtol=0)
    if case in ("row_max", "row_min", "one_element_row", "number_self"):
        with pytest.raises(TypeError, match="invalid combination of arguments"):
            MIXED[case](kael, kael.tensor([0, 5, 9]))
