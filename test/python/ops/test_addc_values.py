"""addcmul and addcdiv check their number `value` as torch's kernels do: against the type they
compute in (the result's dtype; float32 for float16 and bfloat16), for the functions, the
methods and the in-place methods (which leave self unchanged when they raise); bool tensors raise
NotImplementedError. Compared with torch over dtypes and values."""
import math

import numpy as np
import pytest
import torch

import kael

DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool"]
# (ints outside int64 are refused by kael's Scalar rule on every op, a known difference:
# docs/decisions/argument-parsing.md)
VALUES = [1, -1, 127, 128, -129, 255, 256, 2**31, 2**62, 1.5, 70000.0, 1e39, -1e39, math.inf, math.nan]


def _call(lib, fn, form, x, value):
    a = lib.tensor([2, 1], dtype=x.dtype)
    b = lib.tensor([1, 1], dtype=x.dtype)
    if form == "function":
        return getattr(lib, fn)(x, a, b, value=value)
    if form == "method":
        return getattr(x, fn)(a, b, value=value)
    return getattr(x, fn + "_")(a, b, value=value)


@pytest.mark.parametrize("form", ["function", "method", "inplace"])
@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
def test_value_checked_as_torch(fn, dtype, value, form):
    outcome = {}
    for lib in (torch, kael):
        x = lib.tensor([3, 1], dtype=getattr(lib, dtype))
        try:
            result = _call(lib, fn, form, x, value)
            outcome[lib.__name__] = ("ok", np.asarray(result.float().tolist(), dtype=np.float64))
        except Exception as e:  # noqa: BLE001 (the oracle decides the class)
            outcome[lib.__name__] = (type(e), None)
            if lib is kael and form == "inplace":
                assert x.tolist() == lib.tensor([3, 1], dtype=x.dtype).tolist(), "self written before raising"
    (tk, tv), (kk, kv) = outcome["torch"], outcome["kael"]
    assert kk == tk, f"torch {tk}, kael {kk}"
    if tk == "ok":
        np.testing.assert_allclose(kv, tv, rtol=1e-2 if dtype in ("float16", "bfloat16") else 1e-6, equal_nan=True)


def test_message_names_the_op_and_value():
    with pytest.raises(RuntimeError, match=r"^addcmul: value 128 cannot be converted to type kael.int8"):
        kael.addcmul(kael.zeros(2, dtype=kael.int8), kael.ones(2, dtype=kael.int8), kael.ones(2, dtype=kael.int8),
                     value=128)
