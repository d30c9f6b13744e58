"""addcmul and addcdiv check their number `value` as torch's kernels do: against the type they
compute in (the result's dtype; float32 for float16 and bfloat16), for the functions, the
methods and the in-place methods (which leave self unchanged when they raise); bool tensors raise
RuntimeError, where torch raises its subclass NotImplementedError (kael's dtype errors are
RuntimeErrors, docs/decisions/errors.md). Compared with torch over dtypes and values."""
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
    with pytest.raises(RuntimeError, match=r"addcmul: value 128 cannot be converted to type int8 without overflow"):
        kael.addcmul(kael.zeros(2, dtype=kael.int8), kael.ones(2, dtype=kael.int8), kael.ones(2, dtype=kael.int8),
                     value=128)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
def test_rounded_once_as_torch(fn, dtype):
    """One registry op computing in float32 for the half types and rounding once, as torch's
    kernel: the same bits as torch's on random values, broadcast and strided operands."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((64, 1)), rng.standard_normal((64, 300))
    c = rng.standard_normal((300,))
    c += np.sign(c) * 0.1
    for value in (1, 0.37, -2.5):
        got = {}
        for lib in (torch, kael):
            t = [lib.tensor(x).to(getattr(lib, dtype)) for x in (a, b, c)]
            got[lib.__name__] = getattr(lib, fn)(t[0], t[1][:, ::2], t[2][::2], value=value).double().numpy()
        np.testing.assert_array_equal(got["kael"], got["torch"])


def test_numbers_in_tensor_places_are_wrapped_numbers():
    """kael's pointwise ops take a number where torch takes only a tensor, as a wrapped number of
    the dtype the op computes in (torch's result with that 0-d tensor): so addcdiv's integer
    division check sees a float tensor2 for a number next to a float input; a list is no number."""
    f32, i64 = torch.tensor([2.0, -1.5]), torch.tensor([3, 5])
    cases = [("addcdiv", (f32, i64, -3)), ("addcdiv", (f32, -3, i64)), ("addcmul", (-3, f32, i64)),
             ("addcmul", (f32, 2, 7)), ("addcdiv", (i64, i64, 2.5))]
    for fn, args in cases:
        value = -3 if fn == "addcdiv" else 0.5
        wrapped = [a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.result_type(
            *[b for b in args if isinstance(b, torch.Tensor)][:1], a)) for a in args]
        expected = getattr(torch, fn)(*wrapped, value=value)
        got = getattr(kael, fn)(*[kael.tensor(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args],
                                value=value)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], (fn, args)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        kael.addcdiv(kael.tensor([1.0]), kael.tensor([3]), kael.tensor([2]))
    with pytest.raises(TypeError):
        kael.addcmul([1], kael.tensor(2.0), -1)
