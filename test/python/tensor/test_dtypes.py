"""Dtypes against torch: names, promotion (the whole table, scalars, 0-d tensors, can_cast),
16-bit float conversions bit for bit, integer semantics, reductions and matmul in 16-bit floats.
"""
import math
import operator
import struct

import numpy as np
import pytest
import torch

import kael
from helpers import (BUFFER_NAMES, DTYPE_NAMES, FLOAT_NAMES, HALF_NAMES, INT_NAMES, NUMERIC_NAMES, check, compare,
                     enums, kdtype, tdtype, to_kael)

# Every spelling torch gives these dtypes (torch.half, torch.int, ...): kael has the same names.
TORCH_NAMES = ["bool", "uint8", "int8", "int16", "short", "int32", "int", "int64", "long", "float16", "half",
               "bfloat16", "float32", "float", "float64", "double"]


# ------------------------------------------------------------------ names ---
def test_dtype_list_comes_from_codegen():
    assert DTYPE_NAMES == list(enums.DTYPE_NAMES)
    assert set(DTYPE_NAMES) == {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                "float32", "float64"}


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_dtype_names_as_torch(name):
    kd, td = getattr(kael, name), getattr(torch, name)
    assert repr(kd) == repr(td).replace("torch.", "kael.")
    assert kd is getattr(kael, repr(td).replace("torch.", ""))  # an alias is the same object
    assert name in kael.__all__
    assert kd.itemsize == td.itemsize
    assert kd.is_floating_point == td.is_floating_point
    assert kd.is_signed == td.is_signed
    assert kd.is_complex is td.is_complex is False
    assert kd.to_real() is kd and td.to_real() is td


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_element_size_and_is_floating_point(dtype):
    k, t = kael.zeros(2, 3, dtype=kdtype(dtype)), torch.zeros(2, 3, dtype=tdtype(dtype))
    assert k.element_size() == t.element_size()
    assert k.is_floating_point() == t.is_floating_point()


@pytest.mark.parametrize("method", sorted({d.method for d in enums.DTYPES}))
@pytest.mark.parametrize("src", DTYPE_NAMES)
def test_conversion_methods(method, src):
    # Tensor.half(), .bfloat16(), .int(), .short(), .char(), .byte(), ... as in torch
    compare(lambda lib, x: getattr(x, method)(), ((3, 4), src, "T"))


# -------------------------------------------------------------- promotion ---
@pytest.mark.parametrize("a", DTYPE_NAMES)
def test_promote_types_whole_table(a):
    for b in DTYPE_NAMES:
        expected = torch.promote_types(tdtype(a), tdtype(b))
        got = kael.promote_types(kdtype(a), kdtype(b))
        assert repr(got) == repr(expected).replace("torch.", "kael."), (a, b)
        # the generated table is the one codegen derives
        assert enums.promote(enums.BY_NAME[a], enums.BY_NAME[b]).name == repr(got)[5:]


@pytest.mark.parametrize("a", DTYPE_NAMES)
def test_can_cast_whole_table(a):
    for b in DTYPE_NAMES:
        assert kael.can_cast(kdtype(a), kdtype(b)) == torch.can_cast(tdtype(a), tdtype(b)), (a, b)


def _operands(lib):
    """Every kind of operand: tensors with dims and 0-d tensors of each dtype, and Python numbers."""
    out = []
    for name in DTYPE_NAMES:
        d = getattr(lib, name)
        out.append((f"tensor-{name}", lib.ones(2, dtype=d)))
        out.append((f"zerodim-{name}", lib.ones((), dtype=d)))
    out += [("True", True), ("int", 2), ("negative-int", -3), ("float", 2.5)]
    return out


def test_result_type_every_pair():
    for (ka_id, ka), (_, ta) in zip(_operands(kael), _operands(torch)):
        for (kb_id, kb), (_, tb) in zip(_operands(kael), _operands(torch)):
            if not isinstance(ta, torch.Tensor) and not isinstance(tb, torch.Tensor):
                continue
            expected = torch.result_type(ta, tb)
            assert repr(kael.result_type(ka, kb)) == repr(expected).replace("torch.", "kael."), (ka_id, kb_id)


BINARY = {"add": operator.add, "mul": operator.mul, "sub": operator.sub, "eq": operator.eq, "lt": operator.lt,
          "truediv": operator.truediv, "pow": operator.pow, "maximum": None}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_op_dtype_every_pair(op):
    # a <op> b across every pair of operand kinds gives torch's dtype and values (or raises where
    # torch does)
    for (ka_id, ka), (_, ta) in zip(_operands(kael), _operands(torch)):
        for (kb_id, kb), (_, tb) in zip(_operands(kael), _operands(torch)):
            if not isinstance(ta, torch.Tensor) and not isinstance(tb, torch.Tensor):
                continue
            if op == "maximum" and not (isinstance(ta, torch.Tensor) and isinstance(tb, torch.Tensor)):
                continue
            f = BINARY[op] or (lambda a, b: (kael if isinstance(a, kael.Tensor) else torch).maximum(a, b))
            try:
                tr = f(ta, tb)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    f(ka, kb)
                continue
            kr = f(ka, kb)
            check(kr, tr)


def test_promotion_examples():
    k = lambda name, **kw: kael.ones(2, dtype=getattr(kael, name), **kw)  # noqa: E731
    assert (k("float16") + k("bfloat16")).dtype is kael.float32
    assert (k("uint8") + k("int8")).dtype is kael.int16
    assert (k("bool") + k("uint8")).dtype is kael.uint8
    assert (k("int8") + 1000).dtype is kael.int8  # a Python int does not promote within its category
    assert (k("int32") + 2.5).dtype is kael.float32
    assert (k("float16") + 2.5).dtype is kael.float16
    assert (k("int8") + kael.tensor(1.0, dtype=kael.float64)).dtype is kael.float64  # 0-d of a higher category
    assert (k("float16") + kael.tensor(1.0, dtype=kael.float64)).dtype is kael.float16


# --------------------------------------------- float16/bfloat16 bit for bit ---
def _bits32(k):
    """The float32 bit patterns of a kael float32 tensor."""
    return np.array(k.tolist(), dtype=np.float64).astype(np.float32).view(np.uint32)


def _special_floats():
    specials = [0.0, -0.0, 1.0, -1.0, 65504.0, 65505.0, 65519.99, 65520.0, 65536.0, 1e-8, -1e-8,
                2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 3.0 * 2.0 ** -25,
                1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.4e38, -3.4e38,
                float("inf"), -float("inf"), 1e-40, -1e-45]
    bits = np.array(specials, dtype=np.float32).view(np.uint32)
    nan_bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0xFFC12345, 0x7FFFFFFF,
                         0x7FA00000], dtype=np.uint32)
    rng = np.random.default_rng(5)
    random_bits = rng.integers(0, 2 ** 32, 200000, dtype=np.uint64).astype(np.uint32)
    # values near the 16-bit grids (ties and their neighbours)
    grid = (rng.integers(0, 2 ** 16, 20000, dtype=np.uint32) << 16) | np.uint32(0x8000)
    grid16 = (rng.integers(0, 2 ** 16, 20000, dtype=np.uint32) << 13) | np.uint32(0x1000)
    return np.concatenate([bits, nan_bits, random_bits, grid, grid - 1, grid + 1, grid16, grid16 - 1,
                           grid16 + 1]).view(np.float32)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_float32_to_half_bit_for_bit(dtype):
    values = _special_floats()
    k = kael.tensor(values).to(kdtype(dtype)).to(kael.float32)
    t = torch.from_numpy(values.copy()).to(tdtype(dtype)).to(torch.float32)
    # float32 holds every 16-bit value exactly (NaN payloads included), so equal float32 bits
    # mean equal 16-bit patterns
    assert np.array_equal(_bits32(k), t.numpy().view(np.uint32))


def test_float16_to_float32_every_pattern():
    values = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    k = kael.tensor(values)
    assert k.dtype is kael.float16
    expected = torch.from_numpy(values.copy()).to(torch.float32).numpy().view(np.uint32)
    assert np.array_equal(_bits32(k.to(kael.float32)), expected)
    assert np.array_equal(_bits32(k.float()), expected)


def test_bfloat16_to_float32_every_pattern():
    # every bfloat16 pattern is the top half of a float32
    f32 = (np.arange(2 ** 16, dtype=np.uint32) << 16).view(np.float32)
    k = kael.tensor(f32).to(kael.bfloat16)
    t = torch.from_numpy(f32.copy()).to(torch.bfloat16)
    assert np.array_equal(_bits32(k.float()), t.float().numpy().view(np.uint32))


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_float64_to_half(dtype):
    with np.errstate(invalid="ignore"):  # (signalling NaNs among the specials)
        specials = _special_floats().astype(np.float64)
    values = np.concatenate([specials,
                             np.random.default_rng(1).standard_normal(10000) * 1e3,
                             np.array([1 + 2.0 ** -11 + 2.0 ** -40, 65519.9999, 2.0 ** -25 + 2.0 ** -60])])
    k = kael.tensor(values).to(kdtype(dtype)).to(kael.float32)
    t = torch.from_numpy(values).to(tdtype(dtype)).to(torch.float32)
    kb, tb = _bits32(k), t.numpy().view(np.uint32)
    nan = np.isnan(values)
    assert np.array_equal(kb[~nan], tb[~nan])
    assert np.isnan(k.tolist()).tolist() == nan.tolist()


@pytest.mark.parametrize("dtype", HALF_NAMES)
@pytest.mark.parametrize("src", ["int64", "int32", "int16", "uint8", "bool"])
def test_integers_to_half(dtype, src):
    values = np.array([0, 1, -1, 255, 2047, 2049, 4097, 65504, 65519, 65520, 100000, 2 ** 24 + 1, -2 ** 31,
                       2 ** 40 + 2 ** 20 + 1])
    info = np.iinfo(np.int64) if src == "bool" else np.iinfo(getattr(np, src))
    values = values[(values >= info.min) & (values <= info.max)].astype(np.int64)
    t = torch.from_numpy(values).to(tdtype(src))
    check(to_kael(t).to(kdtype(dtype)), t.to(tdtype(dtype)), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_to_integers_and_bool(dtype):
    t = torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 100.75, -128.0, 127.0, 255.0], dtype=tdtype(dtype))
    for dst in ["int64", "int32", "int16", "int8", "bool", "float64"]:
        check(to_kael(t).to(kdtype(dst)), t.to(tdtype(dst)))


# ------------------------------------------------ pointwise on 16-bit floats ---
@pytest.mark.parametrize("dtype", HALF_NAMES)
@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "rsqrt", "reciprocal", "neg", "abs",
                                "relu", "log1p", "cos"])
def test_half_unary_rounds_once(dtype, op):
    # compute in float32, round once: exactly torch's result for a correctly rounded float32
    # function, within one 16-bit unit otherwise
    t = (torch.rand(4097, dtype=torch.float64) * 6 + 0.01).to(tdtype(dtype))
    kr = getattr(kael, op)(to_kael(t))
    ref = getattr(torch, op)(t.float()).to(tdtype(dtype))
    check(kr, ref, atol=0, rtol=2 ** -7 if dtype == "bfloat16" else 2 ** -10)
    check(kr, getattr(torch, op)(t))


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_binary_rounds_once(dtype):
    a = (torch.randn(1000, dtype=torch.float64) * 100).to(tdtype(dtype))
    b = (torch.randn(1000, dtype=torch.float64) * 100).to(tdtype(dtype))
    for op in ["add", "sub", "mul", "div", "maximum", "minimum"]:
        kr = getattr(kael, op)(to_kael(a), to_kael(b))
        # the exact float32 result rounded once to the 16-bit type: bit for bit
        check(kr, getattr(torch, op)(a.float(), b.float()).to(tdtype(dtype)), atol=0, rtol=0)
    check(kael.add(to_kael(a), to_kael(b), alpha=3), torch.add(a, b, alpha=3))


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_nan_propagation_and_pow(dtype):
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, 1.0, nan, -inf, 2.0, 0.0], dtype=tdtype(dtype))
    b = torch.tensor([1.0, nan, nan, 3.0, -inf, -0.0], dtype=tdtype(dtype))
    for op in ["maximum", "minimum", "pow"]:
        check(getattr(kael, op)(to_kael(a), to_kael(b)), getattr(torch, op)(a, b))
    check(kael.pow(to_kael(a).abs(), 0.5), torch.pow(a.abs(), 0.5))  # (torch takes sqrt: -inf ** 0.5 is nan)
    check(kael.pow(to_kael(b).abs(), -1), torch.pow(b.abs(), -1))  # the float path: no integer rule


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_overflow_to_inf(dtype):
    big = 60000.0 if dtype == "float16" else 3e38
    compare(lambda lib, a: a * 4, ((3,), dtype))
    t = torch.full((3,), big, dtype=tdtype(dtype))
    check(to_kael(t) * 4, t * 4)
    check(to_kael(t) + to_kael(t), t + t)


# --------------------------------------------------------- integer dtypes ---
WRAP_CASES = {
    "uint8": [0, 1, 100, 200, 255],
    "int8": [-128, -100, -1, 0, 1, 100, 127],
    "int16": [-32768, -30000, -1, 0, 1, 30000, 32767],
    "int32": [-2 ** 31, -2 ** 30, -1, 0, 1, 2 ** 30, 2 ** 31 - 1],
}


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32"])
def test_integer_wrapping(dtype):
    # integer types wrap like torch's (narrow ones are computed in int and stored modulo 2^n)
    vals = WRAP_CASES[dtype]
    t = torch.tensor(vals, dtype=tdtype(dtype))
    k = to_kael(t)
    u = torch.tensor(list(reversed(vals)), dtype=tdtype(dtype))
    ku = to_kael(u)
    check(k + ku, t + u)
    check(k - ku, t - u)
    check(k * ku, t * u)
    check(k * 3, t * 3)
    check(k + 200, t + 200)
    check(-k, -t)
    check(k.abs(), t.abs())
    check(kael.add(k, ku, alpha=7), torch.add(t, u, alpha=7))


@pytest.mark.parametrize("dtype", INT_NAMES)
def test_integer_pow_division_and_comparisons(dtype):
    signed = enums.BY_NAME[dtype].signed
    base = torch.tensor([0, 1, 2, 3, 5, 7, 9] + ([-1, -2, -3] if signed else [250]), dtype=tdtype(dtype))
    exp = torch.tensor([3, 0, 7, 5, 4, 2, 6] + ([3, 4, 5] if signed else [2]), dtype=tdtype(dtype))
    kb, ke = to_kael(base), to_kael(exp)
    check(kb ** ke, base ** exp)  # integer pow, wrapping
    check(kb ** 3, base ** 3)
    check(2 ** ke, 2 ** exp)
    if signed:  # negative exponents of a tensor: 1, +-1 or 0
        neg = torch.tensor([-1, -2, -1, -3, -1, -2, -1, -2, -1, -3], dtype=tdtype(dtype))
        check(kb ** to_kael(neg), base ** neg)
    check(kb / (ke + 1), base / (exp + 1))  # true division gives float32
    check(kb < ke, base < exp)
    check(kael.maximum(kb, ke), torch.maximum(base, exp))


def test_uint8_relu_and_neg():
    t = torch.tensor([0, 1, 128, 255], dtype=torch.uint8)
    check(kael.relu(to_kael(t)), torch.relu(t))
    check(kael.neg(to_kael(t)), torch.neg(t))


# ------------------------------------------------------------ reductions ---
@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_sum_accumulates_in_float32(dtype):
    # a running 16-bit sum would stall (bfloat16 1..99 stops growing near 256 + ...)
    t = torch.arange(1, 100, dtype=tdtype(dtype))
    ks = kael.arange(1, 100, dtype=kdtype(dtype)).sum()
    check(ks, t.sum())
    assert ks.item() == torch.tensor(4950.0).to(tdtype(dtype)).item()
    check(kael.arange(1, 100, dtype=kdtype(dtype)).mean(), t.mean())
    assert kael.arange(1, 100, dtype=kdtype(dtype)).mean().item() == 50.0


@pytest.mark.parametrize("dtype", HALF_NAMES)
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)], ids=str)
def test_half_reductions(dtype, dim):
    t = torch.rand(300, 70, dtype=torch.float64).to(tdtype(dtype))
    kw = {} if dim is None else {"dim": dim}
    exact_sum = t.double().sum(**kw)
    check(to_kael(t).sum(**kw), exact_sum.to(tdtype(dtype)))  # one rounding of a float32 sum
    check(to_kael(t).sum(**kw), t.sum(**kw))
    check(to_kael(t).mean(**kw), t.mean(**kw))
    check(to_kael(t.T).sum(**kw), t.T.sum(**kw))
    check(to_kael(t).sum(**kw, dtype=kael.float32), t.sum(**kw, dtype=torch.float32))


@pytest.mark.parametrize("dtype", INT_NAMES)
def test_integer_sums_are_int64(dtype):
    t = torch.tensor(WRAP_CASES.get(dtype, [2 ** 40, -3, 7]) * 50, dtype=tdtype(dtype))
    check(to_kael(t).sum(), t.sum())
    assert to_kael(t).sum().dtype is kael.int64


# ---------------------------------------------------------------- matmul ---
@pytest.mark.parametrize("dtype", HALF_NAMES)
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((64, 128), (128, 48)), ((2, 33, 40), (40, 17)), ((70,), (70,))],
                         ids=str)
def test_half_matmul(dtype, sa, sb):
    a = torch.randn(sa, dtype=torch.float64).to(tdtype(dtype))
    b = torch.randn(sb, dtype=torch.float64).to(tdtype(dtype))
    kr = to_kael(a) @ to_kael(b)
    exact = (a.double() @ b.double()).to(tdtype(dtype))  # a float32 accumulation rounded once is this or next to it
    tol = dict(rtol=2e-3, atol=1e-3) if dtype == "float16" else dict(rtol=1.6e-2, atol=1e-2)
    check(kr, exact, **tol)
    check(kr, a @ b, **tol)


# --------------------------------------------------- creation and Python ---
@pytest.mark.parametrize("dtype", BUFFER_NAMES)
def test_numpy_arrays_keep_their_dtype(dtype):
    arr = (np.arange(12) - 4).reshape(3, 4).astype(np.dtype(dtype if dtype != "bool" else np.bool_))
    k, t = kael.tensor(arr), torch.tensor(arr)
    check(k, t)
    check(kael.tensor(arr[:, ::2]), torch.tensor(arr[:, ::2]))  # a strided buffer
    check(kael.tensor(arr.T, dtype=kael.float16), torch.tensor(arr.T, dtype=torch.float16))


@pytest.mark.parametrize("npdtype", ["uint16", "uint32", "uint64"])
def test_other_unsigned_buffers_become_int64(npdtype):
    k = kael.tensor(np.arange(5, dtype=npdtype))
    assert k.dtype is kael.int64 and k.tolist() == list(range(5))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("data", [[1, 2, 3], [[1.5, -2.25], [0.1, 7.0]], [True, False], 5, 2.5, [], [-1]], ids=repr)
def test_tensor_from_lists_with_dtype(dtype, data):
    compare(lambda lib: lib.tensor(data, dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("dtype", INT_NAMES)
def test_tensor_and_full_reject_out_of_range(dtype):
    info = np.iinfo(getattr(np, dtype))
    lo = info.min if info.min < 0 else -int(info.max)
    for v in [info.max + 1, lo - 1, info.max + 0.5, float(info.min) - 1.0, float("nan"), float("inf"), -0.5,
              info.max, lo, 1.9, -1.9]:
        if dtype == "int64" and not -2 ** 63 <= v < 2 ** 63:
            continue  # not an int64 Python int at all; 2.0 ** 63 kael rejects where torch wraps
        compare(lambda lib: lib.tensor([v], dtype=getattr(lib, dtype)))
        compare(lambda lib: lib.full((2,), v, dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_item_tolist_repr(dtype):
    t = (torch.randn(3, 4, dtype=torch.float64) * 50).to(tdtype(dtype))
    k = to_kael(t)
    assert k.tolist() == t.tolist()
    assert k[1, 2].item() == t[1, 2].item()
    assert type(k[1, 2].item()) is type(t[1, 2].item())
    for x, y in [(k, t), (k[0, 0], t[0, 0]), (k[:0], t[:0]), (k * 0, t * 0)]:
        assert repr(x) == repr(y).replace("torch.", "kael."), (repr(x), repr(y))


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_repr_of_special_half_values(dtype):
    t = torch.tensor([1.0, 2.0, float("nan"), float("inf"), -0.0, 1e-3, 300.0], dtype=tdtype(dtype))
    assert repr(to_kael(t)) == repr(t).replace("torch.", "kael.")
    assert repr(to_kael(t[:2])) == repr(t[:2]).replace("torch.", "kael.")  # tensor([1., 2.], dtype=kael.float16)


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_factories(dtype):
    compare(lambda lib: lib.arange(10, dtype=getattr(lib, dtype)))
    compare(lambda lib: lib.arange(1, 7, 2, dtype=getattr(lib, dtype)))
    compare(lambda lib: lib.full((2, 3), 7, dtype=getattr(lib, dtype)))
    compare(lambda lib: lib.eye(3, dtype=getattr(lib, dtype)))
    compare(lambda lib: lib.zeros_like(lib.ones(2, 3), dtype=getattr(lib, dtype)))
    compare(lambda lib, x: lib.ones_like(x), ((2, 3), dtype))


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_python_number_protocols(dtype):
    t = torch.tensor(3, dtype=tdtype(dtype))
    k = to_kael(t)
    assert float(k) == float(t) and int(k) == int(t) and bool(k) == bool(t)
    if dtype in FLOAT_NAMES:
        assert math.isclose(float(to_kael(t / 7)), float(t / 7), rel_tol=0)
    assert struct.pack("d", float(k)) == struct.pack("d", float(t))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_index_protocol_and_tensor_indices(dtype):
    t = torch.tensor(1, dtype=tdtype(dtype))
    k = to_kael(t)
    x = torch.arange(12).reshape(3, 4)
    kx = to_kael(x)
    if dtype in FLOAT_NAMES:
        with pytest.raises(TypeError):
            [10, 20, 30][k]
        with pytest.raises(TypeError):
            [10, 20, 30][t]
    else:
        assert [10, 20, 30][k] == [10, 20, 30][t]
    if dtype in INT_NAMES and enums.BY_NAME[dtype].signed:
        check(kx[k], x[t])  # a 0-d signed integer tensor selects
        check(kx[:, k], x[:, t])
    elif dtype in ("bool", "uint8"):  # a 0-d mask: a new dim of size 1 (True) or 0 (False), as in NumPy
        check(kx[k], x[t])
        check(kx[:, k], x[:, t])
    else:
        with pytest.raises(IndexError):  # floats: an error in torch too
            x[t]
        with pytest.raises(IndexError):
            kx[k]
