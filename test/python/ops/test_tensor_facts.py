"""The ops that return a bool or an int (is_nonzero, is_same_size, is_floating_point, is_signed,
is_complex, is_conj, is_neg, numel, get_device): registry entries with a plain value result (a
Python bool or int), compared with torch, and seen by a Python key like any op."""
import math

import pytest
import torch

import kael
from helpers import logging_subclass

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
FACTS = ["is_floating_point", "is_signed", "is_complex", "is_conj", "is_neg", "numel", "get_device"]
METHODS = ["is_signed", "is_complex", "is_conj", "is_neg", "get_device", "is_nonzero", "is_same_size",
           "is_floating_point", "numel"]


def outcome(call):
    try:
        r = call()
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return ("raise", RuntimeError if isinstance(e, RuntimeError) else type(e))
    return (type(r), r)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 3), (1, 1, 1)])
def test_facts_are_torchs(dtype, shape):
    for name in FACTS:
        want = outcome(lambda: getattr(torch, name)(torch.zeros(shape, dtype=getattr(torch, dtype))))
        got = outcome(lambda: getattr(kael, name)(kael.zeros(shape, dtype=getattr(kael, dtype))))
        assert got == want, name
    for name in METHODS:
        other = () if name != "is_same_size" else (None,)
        for lib in (torch, kael):
            assert hasattr(lib.Tensor, name), (lib.__name__, name)
        if other:
            continue
        want = outcome(lambda: getattr(torch.zeros(shape, dtype=getattr(torch, dtype)), name)())
        got = outcome(lambda: getattr(kael.zeros(shape, dtype=getattr(kael, dtype)), name)())
        assert got == want, name


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, math.nan, math.inf, 3, 0, True, False])
@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (0,), (2,), (2, 1)])
def test_is_nonzero(value, shape):
    for dtype in ("float32", "int64", "bool", "bfloat16"):
        if dtype != "float32" and isinstance(value, float) and not math.isfinite(value):
            continue

        def make(lib):
            return lib.full(shape, value, dtype=getattr(lib, dtype))
        assert outcome(lambda: kael.is_nonzero(make(kael))) == outcome(lambda: torch.is_nonzero(make(torch)))
        assert outcome(lambda: make(kael).is_nonzero()) == outcome(lambda: make(torch).is_nonzero())


@pytest.mark.parametrize("a,b", [((), ()), ((2, 3), (2, 3)), ((2, 3), (3, 2)), ((0,), (0, 1)), ((1,), ())])
def test_is_same_size(a, b):
    assert kael.is_same_size(kael.ones(a), kael.zeros(b, dtype=kael.int8)) == torch.is_same_size(
        torch.ones(a), torch.zeros(b, dtype=torch.int8))
    assert kael.ones(a).is_same_size(kael.ones(b)) == torch.ones(a).is_same_size(torch.ones(b))


@pytest.mark.parametrize("name", FACTS + ["is_nonzero"])
@pytest.mark.parametrize("bad", [3, 2.5, [1.0], None, "x"])
def test_non_tensors_are_type_errors(name, bad):
    with pytest.raises(TypeError):
        getattr(torch, name)(bad)
    with pytest.raises(TypeError):
        getattr(kael, name)(bad)


def test_results_are_plain_python_values():
    x = kael.ones(2, 3)
    assert type(kael.numel(x)) is int and type(kael.get_device(x)) is int
    assert kael.is_nonzero(kael.ones(1)) is True and kael.is_same_size(x, x) is True and x.is_neg() is False


def test_a_python_key_sees_them():
    seen = []
    x = kael.ones(1).as_subclass(logging_subclass(seen))
    assert kael.numel(x) == 1 and x.is_nonzero() is True and kael.is_signed(x) and x.get_device() == -1
    assert {"numel", "is_nonzero", "is_signed", "get_device"} <= set(seen)
