"""Bugs the fuzz suite (test_fuzz.py) found, each as a regression test against PyTorch. The
kael side of each runs in a fresh interpreter, so a crash fails the test instead of the suite."""
import itertools
import math
import subprocess
import sys
import warnings
from collections.abc import Mapping

import numpy as np
import pytest
import torch

import kael


def run_kael(code):
    """Runs `code` with kael in a new interpreter; returns its stdout (last line)."""
    proc = subprocess.run([sys.executable, "-c", "import kael\n" + code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "eq"])
def test_out_with_only_number_inputs_raises_instead_of_crashing(op):
    # Both inputs numbers, out= a tensor: out gave the call its dispatch key and the loop ran
    # over no tensor (SIGSEGV). The error is the one without out= (codegen/README.md).
    out = run_kael(f"""
o = kael.zeros(2)
try:
    kael.{op}(1.0, 2.0, out=o)
except TypeError as e:
    print(str(e) if str(e).startswith("{op}: ") else "wrong message: " + str(e))
else:
    print("no error")
assert o.tolist() == [0.0, 0.0]
""")
    assert out.endswith(f"\n{op}: expected at least one tensor argument, got only numbers") or \
        out == f"{op}: expected at least one tensor argument, got only numbers", out
    with pytest.raises(TypeError, match=f"^{op}: expected at least one tensor argument"):
        getattr(kael, op)(1.0, 2.0)


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "copy_", "neg"])
def test_in_place_write_into_an_empty_expanded_tensor_is_allowed_like_torch(method):
    # An expanded (2, 0, 3) has no element to write twice; kael raised "more than one element
    # of the written-to tensor refers to a single memory location".
    for lib in (torch, kael):
        x = lib.zeros(1, 0, 3).expand(2, 0, 3)
        if method == "neg":
            r = lib.neg(lib.ones(2, 0, 3), out=x)
        elif method == "copy_":
            r = x.copy_(lib.ones(2, 0, 3))
        else:
            r = getattr(x, method)(1)
        assert r is x and tuple(x.shape) == (2, 0, 3)
    for lib in (torch, kael):  # with elements it still raises
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            lib.zeros(1, 3).expand(2, 3).add_(1)


@pytest.mark.parametrize("method", ["size", "stride"])
def test_size_and_stride_take_any_integer_like_every_int_parameter(method):
    # size(np.int64(0)) raised TypeError; torch takes it, and so do kael's other int parameters.
    t, k = torch.zeros(2, 3), kael.zeros(2, 3)
    for dim in (np.int64(1), np.int32(-1), np.uint8(0)):
        assert getattr(k, method)(dim) == getattr(t, method)(dim)
        assert getattr(k, method)(dim=dim) == getattr(t, method)(dim=dim)
    for bad in (True, 1.0, "1", kael.tensor(1)):
        with pytest.raises(TypeError, match=f"{method}\\(\\) received an invalid combination"):
            getattr(k, method)(bad)
    with pytest.raises(OverflowError):
        getattr(k, method)(2 ** 64)
    with pytest.raises(IndexError):
        getattr(k, method)(np.int64(2))


@pytest.mark.parametrize("value", [np.float32(2.5), np.float16(-1.5), np.bool_(True), np.bool_(False),
                                   np.int64(3), np.uint8(7), np.float64(0.25)], ids=lambda v: type(v).__name__)
def test_numpy_scalars_are_scalars_like_torch(value):
    # np.float32 and np.bool_ have __getitem__, so kael's parser took them for sequences and
    # rejected them as Scalars and as number operands (TypeError); torch takes them.
    for expr in ("lib.add(lib.ones(2, dtype=lib.int64), v)", "lib.full((2,), v)", "lib.ones(2).fill_(v)",
                 "lib.mul(v, lib.arange(3))", "lib.ones(2, dtype=lib.int32) - v"):
        t = eval(expr, {"lib": torch, "v": value})
        k = eval(expr, {"lib": kael, "v": value})
        assert k.tolist() == t.tolist() and repr(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], expr
    with pytest.raises(TypeError):
        kael.add(kael.ones(2), np.ones(2))  # arrays stay out: they have a length


@pytest.mark.parametrize("scalar", [np.int64(2), np.float32(2.0), np.float64(2.0), np.bool_(True)],
                         ids=lambda v: type(v).__name__)
def test_numpy_scalar_on_the_left_of_an_operator_gives_a_tensor(scalar):
    # Without __array_priority__ NumPy answered np.int64(2) + t itself, with an object array of
    # 0-d tensors; like torch's tensors, kael's make NumPy defer to the reflected operator.
    t, k = torch.arange(3), kael.arange(3)
    for op in ("+", "-", "*", "/", "<", "=="):
        tr, kr = eval(f"s {op} x", {"s": scalar, "x": t}), eval(f"s {op} x", {"s": scalar, "x": k})
        assert isinstance(kr, kael.Tensor), (op, type(kr))
        assert kr.tolist() == tr.tolist(), op
    assert kael.ones(1).__array_priority__ == torch.ones(1).__array_priority__ == 1000


@pytest.mark.parametrize("offset", [2 ** 63 - 1, 2 ** 63 // 2 + 1, 2 ** 62 + 7])
def test_as_strided_offset_near_int64_max_raises_instead_of_reading_anywhere(offset):
    # (last + 1) * itemsize overflowed, passed the bounds check, and gave a view far outside
    # its storage (the long fuzz run: SIGSEGV on reading it).
    out = run_kael(f"""
t = kael.zeros(4, 1, dtype=kael.float32)[1:]
try:
    r = kael.as_strided(t, [], [], {offset})
except RuntimeError as e:
    print("as_strided" in str(e))
else:
    print("no error", r.tolist())
""")
    assert out == "True", out
    with pytest.raises(RuntimeError):
        torch.as_strided(torch.zeros(4, 1)[1:], [], [], offset)


# ---------------------------------------------------------------- the long runs' open findings

def _outcome(make, lib):
    """("ok", dtype name, values as a list with NaN as the string 'nan') or ("raises", class)."""
    try:
        r = make(lib)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return ("raises", RuntimeError if isinstance(e, RuntimeError) else type(e))
    values = [("nan" if isinstance(v, float) and math.isnan(v) else v) for v in r.reshape(-1).tolist()]
    return ("ok", str(r.dtype).split(".")[-1], tuple(r.shape), values)


def same_as_torch(make):
    """make(lib) computes the same (dtype, shape and exact values, NaN where torch has NaN) or
    raises the same class in kael as in torch (RuntimeError standing for its subclasses)."""
    t, k = _outcome(make, torch), _outcome(make, kael)
    assert k == t, f"kael {k}\ntorch {t}"
    return t


HALF_X = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, 0.5, 1e-3, 60000.0, -60000.0, float("inf"), -float("inf"), float("nan")]
BIG_NUMBERS = [3.4e38, -3.4e38, 1e300, 70000.0, -70000.0, 65520.0, 1e-8, 1.0001, 257.0, 2049.0, -2 ** 63]


def _other(lib, kind, v):
    if kind == "number":
        return v
    if kind.endswith("i64") and (v != int(v) or not -2 ** 63 <= v < 2 ** 63):
        return None
    dtype = {"f32": lib.float32, "f64": lib.float64, "i64": lib.int64}[kind[-3:]]
    v = int(v) if kind.endswith("i64") else v
    return lib.tensor([v], dtype=dtype) if kind.startswith("row_") else lib.tensor(v, dtype=dtype)


# (torch's atan2 and maximum take no number)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op,kind", [(op, kind) for op in ("mul", "div", "add", "sub", "atan2", "maximum", "lt", "eq",
                                                           "fmod", "remainder")
                                     for kind in ("number", "f32", "f64", "i64", "row_i64")
                                     if not (kind == "number" and op in ("atan2", "maximum"))])
def test_half_ops_with_a_number_compute_as_torch_does(dtype, op, kind):
    # kael rounded every number (and 0-d tensor of another dtype) to float16 first, so
    # kael.mul(kael.tensor(0., dtype=kael.float16), 3.4e38) was 0 * inf = NaN. torch's mul and
    # div read such a second input from its own value in float32 (0 there); its other ops round
    # it to float16 first, as kael does (codegen/README.md, opmath_other_scalar).
    # (torch takes a number on the left of lt, eq and fmod as a TypeError)
    sides = ("right",) if kind == "number" and op in ("lt", "eq", "fmod") else ("right", "left")
    for v in BIG_NUMBERS:
        for side in sides:
            def make(lib):
                x = lib.tensor(HALF_X, dtype=getattr(lib, dtype))
                o = _other(lib, kind, v)
                if o is None:
                    return lib.zeros(1)
                return getattr(lib, op)(x, o) if side == "right" else getattr(lib, op)(o, x)
            same_as_torch(make)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_mul_and_div_read_a_number_in_float32_in_every_variant(dtype):
    for op, v in itertools.product(("mul", "div"), (3.4e38, 1e-8, 70000.0, 257.0, 1.0001)):
        def x(lib):
            return lib.tensor(HALF_X, dtype=getattr(lib, dtype))
        same_as_torch(lambda lib: getattr(x(lib), op)(v))
        same_as_torch(lambda lib: getattr(x(lib), op + "_")(v))
        same_as_torch(lambda lib: getattr(lib, op)(x(lib), v, out=lib.empty(len(HALF_X), dtype=getattr(lib, dtype))))
        same_as_torch(lambda lib: getattr(lib, op)(x(lib), lib.tensor(v, dtype=lib.float64),
                                                   out=lib.empty(0, dtype=getattr(lib, dtype))))
        same_as_torch(lambda lib: getattr(lib, op)(x(lib).reshape(13, 1)[::2], v))
    # the issue's examples
    assert kael.mul(kael.tensor(0.0, dtype=kael.float16), 3.4e38).item() == 0.0
    assert kael.div(kael.tensor(float("inf"), dtype=kael.float16), kael.tensor(-2 ** 63)).item() == -math.inf


BUFFER_VALUES = {
    "b": [-100, 5], "B": [200, 7], "h": [-300, 300], "i": [70000, -70000], "q": [-5, 2 ** 40],
    "f": [2.5, 1e30], "d": [2.5, -0.5], "d_nan": [float("nan")], "d_big": [1e300], "d_2_63": [2.0 ** 63],
}


def _buffers():
    import array
    import ctypes
    out = {f"array_{code}": (lambda code=code: array.array(code.split("_")[0], BUFFER_VALUES[code]))
           for code in BUFFER_VALUES}
    out["bytearray"] = lambda: bytearray(b"\xc8\x05\xff")
    out["memoryview"] = lambda: memoryview(b"\xc8\x05\xff")
    out["memoryview_cast"] = lambda: memoryview(bytearray(b"\x00\x00\x80\x7f\x00\x00\x20\x40")).cast("f")
    out["bytes"] = lambda: b"\xc8\x05"
    out["ctypes_double"] = lambda: (ctypes.c_double * 2)(2.5, 1e300)
    out["ctypes_int"] = lambda: (ctypes.c_int * 2)(2, 300)
    out["ctypes_bool"] = lambda: (ctypes.c_bool * 2)(True, False)
    out["empty"] = lambda: bytearray()
    return out


BUFFERS = _buffers()


@pytest.mark.parametrize("buf", list(BUFFERS))
@pytest.mark.parametrize("dtype", [None, "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32"])
def test_buffers_that_are_not_numpy_arrays_are_value_checked_like_sequences(buf, dtype):
    # kael.tensor(bytearray(b"\xc8"), dtype=kael.int8) wrapped to [-56]; torch reads such a
    # buffer as a sequence of Python numbers and raises "value cannot be converted to type int8
    # without overflow", as for [200].
    def make(lib):
        kw = {} if dtype is None else {"dtype": getattr(lib, dtype)}
        return lib.tensor(BUFFERS[buf](), **kw)
    same_as_torch(make)


@pytest.mark.parametrize("value", [np.int64(70000), np.uint8(200), np.int8(-100), np.int16(-300), np.float32(2.5),
                                   np.float16(0), np.float64(2.5), np.float64(1e10), np.float64("nan"),
                                   np.float32("inf"), np.bool_(True), np.int64(3)],
                         ids=lambda v: f"{type(v).__name__}({v})")
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int64", "float16", "float32"])
def test_numpy_scalars_convert_like_numbers_and_arrays_like_to(value, dtype):
    # kael.tensor(np.int64(70000), dtype=kael.int16) wrapped to 4464 and np.float16(0) as int64
    # gave 0; torch checks a NumPy scalar as a number (overflow raises; NumPy's float16 and
    # float32 are no integers: TypeError). NumPy arrays, 0-d ones included, convert as .to does.
    same_as_torch(lambda lib: lib.tensor(value, dtype=getattr(lib, dtype)))
    same_as_torch(lambda lib: lib.tensor([value, value], dtype=getattr(lib, dtype)))
    if isinstance(value, np.integer):  # arrays wrap, as .to does
        same_as_torch(lambda lib: lib.tensor(np.array([value]), dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("element", ["f32_2.5", "f32_2", "f64_-0.5", "i64_2", "i64_300", "i8_-3", "bool_True"])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int64", "float16", "float32", "float64"])
def test_0d_tensor_elements_are_read_as_torch_reads_them(element, dtype):
    # kael.tensor([kael.tensor(2.5)], dtype=kael.int64) truncated to [2]; torch reads the element
    # through Tensor.__index__ for integer and bool dtypes (TypeError for a floating one) and
    # checks the range.
    src, text = element.split("_")
    def make(lib):
        e = lib.tensor(eval(text), dtype=getattr(lib, {"f32": "float32", "f64": "float64", "i64": "int64",
                                                       "i8": "int8", "bool": "bool"}[src]))
        return lib.tensor([e, e], dtype=getattr(lib, dtype))
    same_as_torch(make)


class _IndexAndFloat:
    def __index__(self):
        return 3

    def __float__(self):
        return 2.5


class _IndexOnly:
    def __index__(self):
        return 3


class _FloatOnly:
    def __float__(self):
        return 2.5


class _BadIndexGoodFloat:
    def __index__(self):
        raise ZeroDivisionError("hostile __index__")

    def __float__(self):
        return 2.5


@pytest.mark.parametrize("cls", [_IndexAndFloat, _IndexOnly, _FloatOnly, _BadIndexGoodFloat])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float32", "float64"])
def test_elements_with_index_and_float_are_read_in_torchs_order(cls, dtype):
    # kael read an element with both __index__ and __float__ through __index__ for every dtype;
    # torch reads floating dtypes through __float__ (then __index__) and integer and bool ones
    # through __index__ alone.
    same_as_torch(lambda lib: lib.tensor([cls(), cls()], dtype=getattr(lib, dtype)))
    same_as_torch(lambda lib: lib.tensor(cls(), dtype=getattr(lib, dtype)))


def test_mT_of_a_0d_tensor_is_the_tensor_itself_with_torchs_warning():
    # kael raised "only supported on matrices"; torch 2.13 returns the tensor and warns (once
    # per process, so the warning is checked on kael's side only).
    t = torch.tensor(3.0)
    assert t.mT is t
    a = kael.tensor(3.0)
    with pytest.warns(UserWarning, match="mT: Tensor.mT is deprecated on 0-D tensors"):
        assert a.mT is a
    for lib in (torch, kael):
        with pytest.raises(RuntimeError, match="only supported on matrices or batches of matrices. Got 1-D"):
            lib.ones(3).mT
        assert tuple(lib.ones(2, 3).mT.stride()) == (1, 3)


# ---------------------------------------------------------------- the long run of 2026-11-30

@pytest.mark.parametrize("variant", ["function", "method"])  # (kael has no clamp_.Tensor, no clamp.Tensor out=)
@pytest.mark.parametrize("dtypes", [("int64", "float64", "float16"), ("int64", "float16", "float64"),
                                    ("uint8", "int8", "bfloat16"), ("int32", "bool", "float64"),
                                    ("float16", "bfloat16", "int64"), ("bool", "int8", "uint8")])
def test_clamp_tensor_promotes_self_min_and_max_at_once(variant, dtypes):
    # The long run: kael promoted pairwise (clamp_min, then clamp_max), so a 0-d min of another
    # dtype could change the result's dtype or, through an intermediate float16, its values;
    # torch promotes the three in one TensorIterator.
    s, lo, hi = dtypes
    for lo_0d, hi_0d in itertools.product((True, False), repeat=2):
        def make(lib):
            x = lib.tensor([0, 1, 3, 100, 250]).to(getattr(lib, s))
            a = lib.tensor(1.5 if lo_0d else [1.5, 0, 2, 2, 70000 if lo != "float16" else 2]).to(getattr(lib, lo))
            b = lib.tensor(2049.0 if hi_0d else [7.5, 1, 60, 2049, 3000]).to(getattr(lib, hi))
            if variant == "function":
                return lib.clamp(x, a, b)
            return x.clamp(a, b)
        same_as_torch(make)


def test_pow_with_a_number_base_is_contiguous_as_torchs_scalar_overload():
    # torch.pow(Scalar, Tensor) allocates its result without the exponent's strides; kael kept
    # the exponent's layout (as torch does for a 0-d tensor base, which is TensorIterator's op).
    for lib in (torch, kael):
        e = lib.arange(6.0).reshape(2, 3).T
        for base in (-3, 2.5, True, 1):
            for r in (lib.pow(base, e), base ** e):
                assert r.is_contiguous() and tuple(r.stride()) == (2, 1), (lib.__name__, base, r.stride())
        r = lib.pow(lib.tensor(2.5), e)  # a 0-d tensor base keeps the exponent's layout
        assert tuple(r.stride()) == (1, 3), (lib.__name__, r.stride())
        r = e.pow(2)  # a number exponent too
        assert tuple(r.stride()) == (1, 3), (lib.__name__, r.stride())
        out = lib.zeros(6)[::2]  # an out= resized keeps contiguous strides from its offset
        lib.pow(2, e, out=out)
        assert tuple(out.stride()) == (2, 1), (lib.__name__, out.stride())
    same_as_torch(lambda lib: lib.pow(-3, lib.arange(6.0).reshape(2, 3).T))
    same_as_torch(lambda lib: lib.pow(2, lib.arange(24).reshape(2, 3, 4).permute(2, 0, 1)))


@pytest.mark.parametrize("base", [1.0, 1, True, 2.0, 0.5, -1.0])
def test_pow_number_base_into_an_integer_out_checks_the_cast_for_every_base(base):
    # torch's pow(Scalar, Tensor) returns out.fill_(1) for a base equal to 1 before it checks
    # that the result type (float32 for a float base) casts to out's dtype, so 1.0 fills ones
    # where 2.0 raises "result type Float can't be cast to the desired output type Long". kael
    # checks the cast whatever the base's value (docs/decisions/fuzz-findings.md, "pow with a base of 1").
    def make(lib):
        return lib.pow(base, lib.tensor([0.5, 2.0, -1.0]), out=lib.zeros(3, dtype=lib.int64))
    t, k = _outcome(make, torch), _outcome(make, kael)
    assert k == ("raises", RuntimeError), k
    with pytest.raises(RuntimeError, match="pow: result type .* can't be cast to the desired output type"):
        make(kael)
    # (torch's shortcut compares the base with 1.0: True is not taken)
    assert t == (("ok", "int64", (3,), [1, 1, 1]) if base == 1 and base is not True else ("raises", RuntimeError)), t
    # with an integer exponent every base computes, base 1 included, and both agree
    same_as_torch(lambda lib: lib.pow(base if not isinstance(base, float) else int(base) or 2,
                                      lib.tensor([0, 2, 3]), out=lib.zeros(3, dtype=lib.int64)))


def test_eye_with_no_rows_and_2_62_columns_is_an_empty_tensor_in_both():
    # The oracle asked NumPy for an array of shape (0, 2**62) ("array is too big"); an empty
    # result is compared by shape and dtype (test_fuzz.assert_same_tensor).
    from test_fuzz import assert_same_tensor
    for n, m in ((0, 2 ** 62), (2 ** 62, 0)):
        k, t = kael.eye(n, m), torch.eye(n, m)
        assert tuple(k.shape) == tuple(t.shape) == (n, m) and k.numel() == 0
        assert_same_tensor(k, t, "eye")


EMPTY_HUGE_OPS = {
    "fill_": lambda lib, x: x.fill_(2.5),
    "zero_": lambda lib, x: x.zero_(),
    "add": lambda lib, x: x + x,
    "add_number": lambda lib, x: lib.add(x, 1.5),
    "mul_out": lambda lib, x: lib.mul(x, 2, out=lib.empty_like(x)),
    "exp": lambda lib, x: x.exp(),
    "where": lambda lib, x: lib.where(x > 0, x, 0.0),
    "clone": lambda lib, x: x.clone(),
    "contiguous_T": lambda lib, x: x.T.contiguous(),
    "copy_": lambda lib, x: lib.empty_like(x).copy_(x),
    "to_float64": lambda lib, x: x.double(),
    "sum_dim": lambda lib, x: x.sum(0 if x.shape[0] else 1),
    "sum": lambda lib, x: x.sum(),
    "amax_dim": lambda lib, x: x.amax(1 if x.shape[1] else 0),  # over a dim with elements
    "cumsum": lambda lib, x: x.cumsum(1),
    "cumsum0": lambda lib, x: x.cumsum(0),
    "cumprod": lambda lib, x: x.cumprod(1),
    "topk": lambda lib, x: x.topk(0, 1)[1],
    "softmax": lambda lib, x: x.softmax(0),
    "cat": lambda lib, x: lib.cat([x, x], 0),
    "masked_fill": lambda lib, x: x.masked_fill(x > 0, 1.0),
}


@pytest.mark.parametrize("op", list(EMPTY_HUGE_OPS))
@pytest.mark.parametrize("shape", [(0, 2 ** 62), (2 ** 61, 0), (0, 2 ** 31, 2 ** 31)])
def test_empty_tensor_with_huge_dims_runs_every_loop_as_torch(op, shape):
    # An empty tensor's strides in bytes need not fit in int64 ((0, 2**62): 2**62 floats a row),
    # and the product of its other dims neither; kael's loop set-up computed both (signed
    # overflow, reported by UBSan in kael.eye(0, 2**62)'s fill). Run under tools/run_sanitizers.sh.
    def make(lib):
        return EMPTY_HUGE_OPS[op](lib, lib.empty(shape))
    same_as_torch(make)


@pytest.mark.parametrize("shape,dim", [((2 ** 61, 0), 1), ((0, 2 ** 61), 0), ((0, 2 ** 61), 1)])
def test_sort_of_an_empty_tensor_with_huge_dims_returns_at_once(shape, dim):
    # torch 2.13 walks the 2**61 empty lines of (2**61, 0) along dim 1 (it does not return within
    # minutes), so it is no oracle here: the result is the empty tensor of the input's shape. kael
    # did the same; the check runs in a child so that a regression fails instead of hanging.
    topk_shape = tuple(0 if d == dim else n for d, n in enumerate(shape))
    out = run_kael(f"""
x = kael.empty({shape})
values, indices = x.sort({dim})
assert values.shape == indices.shape == {shape} and values.dtype == kael.float32 and indices.dtype == kael.int64
assert x.argsort({dim}, descending=True).shape == {shape}
assert x.cumsum({dim}).shape == x.cumprod({dim}).shape == {shape}
assert x.topk(0, {dim})[1].shape == {topk_shape}
print("ok")
""")
    assert out == "ok"


@pytest.mark.parametrize("count", [2 ** 62, 2 ** 62 + 1, 2 ** 62 + 3])
def test_frombuffer_count_whose_byte_size_wraps_raises_where_torch_returns_a_broken_tensor(count):
    # torch.frombuffer computes count * itemsize in int64; 2**62 * 4 wraps to 0 (2**62 + 3: to
    # 12) and passes its length check, so it returns a tensor of 2**62 elements over a storage
    # of 12 bytes or none (a torch bug: printing it raises). kael raises its ValueError; the oracle checks kael alone there.
    buf = bytearray(12)
    t = torch.frombuffer(buf, dtype=torch.float32, count=count)
    assert t.numel() * t.element_size() > t.untyped_storage().nbytes()
    with pytest.raises(ValueError, match="requested buffer length .* must not be greater than actual buffer length"):
        kael.frombuffer(buf, dtype=kael.float32, count=count)
    same_as_torch(lambda lib: lib.frombuffer(bytearray(12), dtype=lib.float32, count=3))


# ---------------------------------------------------------------- the entry points above the ops (test_fuzz_api.py)

MUTATE_IDS = {"clear": "ids.clear()", "extend": "ids.extend([104] * 1000)", "shrink": "del ids[1:]",
              "replace": "ids[:] = [104, 97, 122, 122]", "junk": "ids[:] = [None, 'x', 2.5, object()]"}


@pytest.mark.parametrize("how", list(MUTATE_IDS))
@pytest.mark.parametrize("method", ["decode", "decode_bytes"])
def test_bpe_decode_reads_ids_an_index_method_mutates_as_tiktoken(how, method):
    # decode read the ids from the list itself with the length it had before the first
    # __index__ call: an id that clears or shrinks the list made it read freed memory. It now
    # reads them as tiktoken does, converting each as it iterates (the list iterator re-reads
    # the length and holds the item), so both see what the mutation left.
    import tiktoken
    from gpt2_assets import GPT2_PATTERN
    code = f"""
ids = [104, 105, 106]
class E:
    def __index__(self):
        {MUTATE_IDS[how]}
        return 97
ids.insert(1, E())
try:
    print(repr(tok.{method}(ids)))
except TypeError as e:
    print("TypeError")
"""
    ranks = {bytes([b]): b for b in range(256)}
    out = run_kael(f"tok = kael.BpeTokenizer({ranks!r})\n" + code)
    enc = tiktoken.Encoding("bytes", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {"tok": enc})
    assert out == buf.getvalue().strip(), (out, buf.getvalue())


def test_bpe_decode_of_an_endless_iterable_of_junk_fails_at_its_first_item():
    # (it materialised the sequence first: memory without bound)
    class Endless:
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return (2,)
    tok = kael.BpeTokenizer({bytes([b]): b for b in range(256)})
    with pytest.raises(TypeError, match="token ids must be ints, got tuple"):
        tok.decode(Endless())


class _TwoFacedMapping(Mapping):
    """A mapping whose value for a key is `first` on the first read and `later` afterwards."""

    def __init__(self, first, later):
        self.first, self.later, self.reads = first, later, {}

    def __getitem__(self, key):
        self.reads[key] = self.reads.get(key, 0) + 1
        return (self.first if self.reads[key] == 1 else self.later)[key]

    def __iter__(self):
        return iter(self.first)

    def __len__(self):
        return len(self.first)


def _linear(lib):
    m = lib.nn.Linear(3, 2)
    with lib.no_grad():
        m.weight.copy_(lib.arange(6.0).reshape(2, 3))
        m.bias.copy_(lib.tensor([1.0, -1.0]))
    return m


def test_load_state_dict_reads_each_value_once_as_torch_does():
    # kael checked the shape of state_dict[key] and then copied a second state_dict[key]: a
    # mapping that answers differently passed the check with a (2, 3) tensor and had a (3,)
    # one broadcast into the weight. torch copies the mapping into an OrderedDict first.
    results = []
    for lib in (torch, kael):
        m = _linear(lib)
        sd = _TwoFacedMapping({"weight": lib.full((2, 3), 5.0), "bias": lib.zeros(2)},
                              {"weight": lib.full((3,), 7.0), "bias": lib.ones(2)})
        m.load_state_dict(sd)
        results.append((m.weight.tolist(), m.bias.tolist()))
    assert results[0] == results[1] == ([[5.0] * 3] * 2, [0.0, 0.0]), results


def test_load_state_dict_unexpected_keys_in_torchs_order():
    # module by module (the root first), each in the state dict's order; kael listed them in the
    # state dict's order alone
    for keys in (["0.weight.x", "extra", "1.bias.y", "0", "1.x"], ["1.x", "0.z", "zz"]):
        got = []
        for lib in (torch, kael):
            m = lib.nn.Sequential(_linear(lib), lib.nn.LayerNorm(2))
            sd = dict(m.state_dict())
            sd.update({k: lib.zeros(1) for k in keys})
            got.append(m.load_state_dict(sd, strict=False))
        assert list(got[1].unexpected_keys) == list(got[0].unexpected_keys), (got[1], got[0])
        assert list(got[1].missing_keys) == list(got[0].missing_keys) == []


@pytest.mark.parametrize("bad", [[("weight", None)], "weight", 3, {1: None}, {None: None}, {("weight",): None}])
def test_load_state_dict_rejects_what_is_not_a_mapping_of_str_before_any_copy(bad):
    # kael took anything `in` and `[]` work on (a list gave "missing keys"); torch raises
    # TypeError for a non-mapping and fails on a key that is not a str (AttributeError).
    for lib in (torch, kael):
        m = _linear(lib)
        sd = bad
        if isinstance(bad, dict):
            sd = {**{k: v.detach() * 2 for k, v in m.state_dict().items()}, **{k: lib.zeros(2) for k in bad}}
        with pytest.raises(TypeError if lib is kael or not isinstance(bad, dict) else AttributeError):
            m.load_state_dict(sd)
        if lib is kael:  # and nothing was copied
            assert m.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and m.bias.tolist() == [1.0, -1.0]


def _batches(lib, dataset, **kw):
    """Every batch of the library's DataLoader as plain data, container types included."""
    import torch.utils.data as tdata
    loader = (kael.data.DataLoader if lib is kael else tdata.DataLoader)(dataset(lib), **kw)

    def plain(b):
        if isinstance(b, (torch.Tensor, kael.Tensor)):
            return ("tensor", str(b.dtype).split(".")[-1], tuple(b.shape), b.tolist())
        if isinstance(b, (list, tuple)):
            return (type(b).__name__, [plain(x) for x in b])
        if isinstance(b, dict):
            return ("dict", [(k, plain(v)) for k, v in b.items()])
        return (type(b).__name__, b)
    return [plain(b) for b in loader]


COLLATED = {
    "bool_then_int": lambda lib: [True, 2, False],
    "int_then_float": lambda lib: [1, 2.5, 3],
    "bools": lambda lib: [True, False, True],
    "numpy_ints": lambda lib: [np.int64(3), np.int64(-4), np.int64(5)],
    "numpy_float32": lambda lib: [np.float32(1.5), np.float32(2.5), np.float32(-1)],
    "numpy_bools": lambda lib: [np.bool_(True), np.bool_(False), np.bool_(True)],
    "numpy_arrays": lambda lib: [np.arange(3, dtype=np.int32) + i for i in range(3)],
    "tuples": lambda lib: [(lib.tensor([i, i]), i, float(i)) for i in range(3)],
    "lists": lambda lib: [[lib.tensor(i), [i, True]] for i in range(3)],
    "dicts_of_tuples": lambda lib: [{"x": (i, 2.5), "y": "s"} for i in range(3)],
    "tensor_dataset": lambda lib: (kael.data.TensorDataset if lib is kael else torch.utils.data.TensorDataset)(
        lib.arange(6).reshape(3, 2), lib.tensor([True, False, True])),
}


@pytest.mark.parametrize("batch_size", [2, None])
@pytest.mark.parametrize("case", list(COLLATED))
def test_data_loader_collates_and_converts_as_torch(case, batch_size):
    # kael's default_collate made bool batches bool and int batches int64 from the first sample
    # alone ([True, 2] was [True, True]; [1, 2.5] raised), refused NumPy scalars and arrays, and
    # gave tuples where torch gives lists (a batch of tuple samples, a TensorDataset's batch);
    # with batch_size=None torch converts each sample (default_convert), kael returned it as is.
    import torch.utils.data  # noqa: F401
    k = _batches(kael, COLLATED[case], batch_size=batch_size)
    t = _batches(torch, COLLATED[case], batch_size=batch_size)
    assert k == t, f"kael {k}\ntorch {t}"


AUTOGRAD_CALLS = {
    "grad_inputs_none": lambda lib, x, y: lib.autograd.grad(y, None),
    "grad_inputs_empty": lambda lib, x, y: lib.autograd.grad(y, []),
    "grad_outputs_none": lambda lib, x, y: lib.autograd.grad(None, x),
    "grad_outputs_empty_list": lambda lib, x, y: lib.autograd.grad(y, x, grad_outputs=[]),
    "backward_grad_tensors_empty": lambda lib, x, y: lib.autograd.backward(y, grad_tensors=[]),
    "backward_none": lambda lib, x, y: lib.autograd.backward(None),
    "create_graph_none": lambda lib, x, y: lib.autograd.grad(y, x, create_graph=None),
    "create_graph_str": lambda lib, x, y: lib.autograd.grad(y, x, create_graph="no"),
    "create_graph_float": lambda lib, x, y: lib.autograd.grad(y, x, create_graph=0.0),
    "retain_graph_negative": lambda lib, x, y: lib.autograd.grad(y, x, retain_graph=-1),
    "retain_graph_256": lambda lib, x, y: y.backward(retain_graph=256),
    "allow_unused_str": lambda lib, x, y: lib.autograd.grad(y, x, allow_unused="yes"),
    # these compute in both
    "allow_unused_none": lambda lib, x, y: lib.autograd.grad(y, x, allow_unused=None),
    "flags_as_ints": lambda lib, x, y: lib.autograd.grad(y, x, retain_graph=1, create_graph=0, allow_unused=3),
    "numpy_bool_flag": lambda lib, x, y: lib.autograd.grad(y, x, create_graph=np.bool_(False)),
    "backward_flags_as_ints": lambda lib, x, y: lib.autograd.backward(y, retain_graph=0, create_graph=0),
}


@pytest.mark.parametrize("case", list(AUTOGRAD_CALLS))
def test_autograd_arguments_are_read_as_torch_reads_them(case):
    # kael read grad's inputs=None and [] as no inputs (torch: TypeError, RuntimeError), an
    # empty grad_outputs as none given, and every flag through bool() ("no" was True); torch's
    # engine reads the flags as an unsigned byte through __index__.
    def make(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        r = AUTOGRAD_CALLS[case](lib, x, y)
        return lib.stack(list(r)) if isinstance(r, tuple) else x.grad
    same_as_torch(make)


# ---------------------------------------------------------------- the long run of 2026-11-30, 18:34 (seed 20261131)

M64 = 2 ** 63 - 1


@pytest.mark.parametrize("step", [M64, M64 - 1, 2 ** 63, 2 ** 62 + 1])
def test_slice_with_a_step_near_int64_max_has_pythons_length(step):
    # kael computed torch's (len + step - 1) // step in int64, which wrapped: x[::2**63 - 1] of 2
    # or 3 elements had size -1 (printed as an empty tensor), where torch raises "Storage size
    # calculation overflowed". The length is now exact, as Python's: one element.
    lines = run_kael(f"""
import warnings
warnings.simplefilter("ignore")
out = []
for n in range(7):
    t = kael.arange(float(n))
    for start in (None, 1):
        r = t[start::{step}]
        out.append((tuple(r.shape), r.tolist()))
    t[::{step}] = 9.0
    out.append(t.tolist())
print(out)
""")
    expected = []
    for n in range(7):
        for start in (None, 1):
            s = list(map(float, range(n)))[start::step]
            expected.append(((len(s),), s))
        expected.append(([9.0] + list(map(float, range(1, n)))) if n else [])
    assert lines == repr(expected)
    # torch's verdicts where its int64 arithmetic wraps: an error for 2 or 3 elements, an empty
    # slice for more (docs/hardening.md, "Known differences")
    if step >= M64:
        with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
            torch.arange(2.)[::step]
        assert torch.arange(6.)[::step].numel() == 0
    for n in range(2):  # where torch's arithmetic does not overflow, the same
        assert kael.arange(float(n))[::step].tolist() == torch.arange(float(n))[::step].tolist()


def test_slice_whose_stride_overflows_raises_as_in_torch():
    # strides[d] * step wrapped to a negative stride in kael (a view with stride -2)
    for lib in (torch, kael):
        x = lib.arange(1.)[::M64]
        with pytest.raises(RuntimeError):
            x[::2]
        with pytest.raises(RuntimeError):
            lib.arange(3.)[::2 ** 62][::2]
    # a product that wraps to a non-negative stride is kept, as torch keeps it (one element)
    k, t = kael.arange(1.)[::M64][::M64], torch.arange(1.)[::M64][::M64]
    assert k.tolist() == t.tolist() and k.stride() == t.stride()


ARANGE_OVERFLOWS = [(-3, -1, M64), (-3, 2 ** 40, M64), (0, 2, M64), (-1, 1, M64), (0, M64, M64), (-M64, M64, M64),
                    (-2 ** 62, 2 ** 62, 2 ** 62), (M64, 0, -M64), (-2 ** 63, 0, 2 ** 62)]


@pytest.mark.parametrize("args", ARANGE_OVERFLOWS, ids=str)
def test_int64_arange_has_pythons_length_where_torchs_arithmetic_overflows(args):
    # torch counts (end - start + step - sign) / step in int64: for these it raises "invalid
    # size, possible overflow?" or returns an empty tensor. kael counts exactly (Note [arange
    # semantics]); the fuzz suite's oracle is Python's range there.
    k = kael.arange(*args)
    assert k.dtype == kael.int64 and k.tolist() == list(range(*args))
    try:
        t = torch.arange(*args)
    except RuntimeError as e:
        assert "invalid size, possible overflow" in str(e)
    else:
        assert t.tolist() != list(range(*args)) and t.numel() == 0


def test_int64_arange_too_long_still_raises_in_both():
    for lib in (torch, kael):
        with pytest.raises(RuntimeError, match="invalid size, possible overflow"):
            lib.arange(-2 ** 63, M64, 1)


def _f64(lib, v):
    return lib.tensor(v, dtype=lib.float64)


SETITEM_DTYPES = {
    # index_put_ refuses a tensor value of another dtype ...
    "0d_int_list": lambda L: (L.zeros(3), [0, 1], _f64(L, 2.5)),
    "0d_int_tensor": lambda L: (L.zeros(3), L.tensor([0, 1]), _f64(L, 2.5)),
    "1d_int_tensor": lambda L: (L.zeros(3), L.tensor([0, 1]), _f64(L, [2.5, 1.5])),
    "1elem_int_tensor": lambda L: (L.zeros(3), L.tensor([0, 1]), _f64(L, [2.5])),
    "int64_into_float": lambda L: (L.zeros(3), L.tensor([0, 1]), L.tensor(2)),
    "float_into_int64": lambda L: (L.zeros(3, dtype=L.int64), L.tensor([0, 1]), L.tensor(2.5)),
    "bool_into_float": lambda L: (L.zeros(3), L.tensor([0]), L.tensor(True)),
    "slice_and_index": lambda L: (L.zeros(2, 3), (slice(None), L.tensor([0, 1])), _f64(L, 2.5)),
    "empty_index": lambda L: (L.zeros(3), L.tensor([], dtype=L.int64), _f64(L, 2.5)),
    "index_out_of_range": lambda L: (L.zeros(3), L.tensor([5]), _f64(L, 2.5)),  # the dtype error first
    "mask_two_values": lambda L: (L.zeros(3), L.tensor([True, False, True]), _f64(L, [2.5, 1.5])),
    "tuple_true": lambda L: (L.zeros(3), (True,), _f64(L, 2.5)),
    "tuple_false": lambda L: (L.zeros(3), (False,), _f64(L, 2.5)),
    "true_and_int": lambda L: (L.zeros(3), (True, 0), _f64(L, 2.5)),
    "0d_bool_tensor": lambda L: (L.zeros(3), L.tensor(True), _f64(L, 2.5)),
    "mask_and_list": lambda L: (L.zeros(2, 3), (L.tensor([True, False]), [0]), _f64(L, 2.5)),
    "mask_and_true": lambda L: (L.zeros(3), (L.tensor([True, False, True]), True), _f64(L, 2.5)),
    "two_masks": lambda L: (L.zeros(2, 3), (L.tensor([True, False]), L.tensor([True, False, True])), _f64(L, 2.5)),
    # ... except where torch converts: numbers, a key that is True or False itself, basic keys,
    "number": lambda L: (L.zeros(3), L.tensor([0, 1]), 2.5),
    "true": lambda L: (L.zeros(3), True, _f64(L, [1.0, 2.0, 3.0])),
    "false_any_shape": lambda L: (L.zeros(3), False, L.ones(9, 9)),
    "slice": lambda L: (L.zeros(3), slice(0, 2), _f64(L, 2.5)),
    "int_0d_tensor": lambda L: (L.zeros(3), L.tensor(1), _f64(L, 2.5)),
    # and masked_fill's shortcut: one bool mask the only index tensor, a one-element value
    "mask": lambda L: (L.zeros(3), L.tensor([True, False, True]), _f64(L, 2.5)),
    "mask_1elem": lambda L: (L.zeros(3), L.tensor([True, False, True]), _f64(L, [2.5])),
    "mask_list": lambda L: (L.zeros(3), [True, False, True], _f64(L, 2.5)),
    "mask_2d": lambda L: (L.zeros(2, 2), L.tensor([[True, False], [False, True]]), _f64(L, 2.5)),
    "mask_after_select": lambda L: (L.zeros(2, 3), (0, L.tensor([True, False, True])), _f64(L, 2.5)),
    "mask_int_into_uint8": lambda L: (L.zeros(3, dtype=L.uint8), L.tensor([True, False, True]), L.tensor(-1)),
    "mask_float_into_bool": lambda L: (L.zeros(3, dtype=L.bool), L.tensor([True, False, True]), L.tensor(2.5)),
    "mask_inf_into_half": lambda L: (L.zeros(3, dtype=L.float16), L.tensor([True, False]).repeat(2)[:3],
                                     L.tensor(float("inf"))),
    # with a number's overflow check (raised even when the mask selects nothing)
    "mask_overflow_uint8": lambda L: (L.zeros(3, dtype=L.uint8), L.tensor([True, False, True]), L.tensor(300)),
    "mask_overflow_int32": lambda L: (L.zeros(3, dtype=L.int32), L.tensor([True, False, True]), _f64(L, 1e10)),
    "mask_overflow_float": lambda L: (L.zeros(3), L.tensor([True, False, True]), _f64(L, 1e300)),
    "mask_overflow_half": lambda L: (L.zeros(3, dtype=L.float16), L.tensor([True, False, True]), L.tensor(1e10)),
    "mask_nan_into_int": lambda L: (L.zeros(3, dtype=L.int64), L.tensor([True, False, True]), L.tensor(float("nan"))),
    "mask_empty_overflow": lambda L: (L.zeros(3, dtype=L.int8), L.tensor([False] * 3), L.tensor(300)),
}


@pytest.mark.parametrize("case", list(SETITEM_DTYPES))
def test_setitem_with_a_tensor_value_of_another_dtype_as_torch(case):
    # kael converted the value in every case; torch's advanced-index assignment is index_put_,
    # which requires the value's dtype, but for its copy and masked_fill shortcuts.
    def make(lib):
        t, key, value = SETITEM_DTYPES[case](lib)
        t[key] = value
        return t
    same_as_torch(make)


INDEX_PUT_DTYPES = {
    "int_index": lambda L: (L.zeros(3), (L.tensor([0, 1]),), _f64(L, 2.5), False),
    "int_index_accumulate": lambda L: (L.zeros(3), (L.tensor([0, 1]),), _f64(L, 2.5), True),
    "mask_0d": lambda L: (L.zeros(3, dtype=L.uint8), (L.tensor([True, False, True]),), _f64(L, 2.5), False),
    "mask_1elem": lambda L: (L.zeros(3, dtype=L.uint8), (L.tensor([True, False, True]),), _f64(L, [2.5]), False),
    "mask_overflow": lambda L: (L.zeros(3, dtype=L.uint8), (L.tensor([True, False, True]),), L.tensor(300), False),
    "mask_accumulate": lambda L: (L.zeros(3, dtype=L.uint8), (L.tensor([True, False, True]),), _f64(L, 2.5), True),
    "mask_two_values": lambda L: (L.zeros(3), (L.tensor([True, False, True]),), _f64(L, [1.0, 2.0]), False),
    "range_after_dtype": lambda L: (L.zeros(3), (L.tensor([7]),), _f64(L, 1.0), False),
    "range_same_dtype": lambda L: (L.zeros(3), (L.tensor([7]),), L.tensor(1.0), False),
}


@pytest.mark.parametrize("case", list(INDEX_PUT_DTYPES))
def test_index_put_dtype_rule_and_check_order_as_torch(case):
    def make(lib):
        t, indices, values, accumulate = INDEX_PUT_DTYPES[case](lib)
        return t.index_put_(indices, values, accumulate=accumulate)
    same_as_torch(make)


BACKWARD_GRADIENTS = {
    "extra_junk": lambda L, y, z: L.autograd.backward([y], grad_tensors=[L.tensor(1.0), "x"]),
    "extra_none": lambda L, y, z: L.autograd.backward([y], grad_tensors=[L.tensor(1.0), None]),
    "extra_wrong_shape": lambda L, y, z: L.autograd.backward([y], grad_tensors=[L.tensor(1.0), L.ones(7)]),
    "extra_for_no_tensors": lambda L, y, z: L.autograd.backward([], grad_tensors=[L.tensor(1.0)]),
    "single_tensor_extra": lambda L, y, z: L.autograd.backward(y, grad_tensors=[None, 5, "x"]),
    "generator": lambda L, y, z: L.autograd.backward([y], grad_tensors=(g for g in [L.tensor(1.0), 1])),
    "tensor_backward_list": lambda L, y, z: y.backward([L.tensor(2.0), "x"]),
    "two_outputs_extra": lambda L, y, z: L.autograd.backward([y, z], grad_tensors=[L.tensor(1.0), L.ones(2), "x"]),
    "grad_extra": lambda L, y, z: L.autograd.grad(y, L._x, grad_outputs=[L.tensor(1.0), "junk"]),
    # fewer gradients than tensors, or junk among those zipped: errors in both
    "fewer": lambda L, y, z: L.autograd.backward([y, z], grad_tensors=[L.tensor(1.0)]),
    "none_for_two": lambda L, y, z: L.autograd.backward([y, y], grad_tensors=L.tensor(1.0)),
    "zipped_junk": lambda L, y, z: L.autograd.backward([z], grad_tensors=["x", L.tensor(1.0)]),
    "grad_fewer": lambda L, y, z: L.autograd.grad([y, z], L._x, grad_outputs=[L.tensor(1.0)]),
    "empty_inputs_first": lambda L, y, z: L.autograd.backward([y, z], grad_tensors=[L.tensor(1.0)], inputs=[]),
}


@pytest.mark.parametrize("case", list(BACKWARD_GRADIENTS))
def test_backward_zips_gradients_with_tensors_as_torch(case):
    # kael type-checked every gradient and raised for any length difference; torch zips them
    # with the tensors, so extra gradients are never looked at, and fewer raise.
    def make(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        lib._x = x
        try:
            r = BACKWARD_GRADIENTS[case](lib, (x * 3).sum(), x * x)
        finally:
            del lib._x
        return lib.stack(list(r)) if isinstance(r, tuple) else (x.grad if x.grad is not None else lib.zeros(0))
    same_as_torch(make)
    with pytest.raises(RuntimeError, match="backward: got 2 tensors and 1 gradients"):
        x = kael.tensor([1.0], requires_grad=True)
        kael.autograd.backward([x.sum(), x.sum()], grad_tensors=[kael.tensor(1.0)])


@pytest.mark.parametrize("p_shape", [(3,), (5,), (2, 0), (0, 3), (), (1,)])
@pytest.mark.parametrize("p_dtype", ["float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_bernoulli_into_an_empty_tensor_ignores_p_as_torch(shape, p_dtype, p_shape):
    # kael checked that p expands to self (and is floating) before noticing there was nothing to
    # write: "check 'expandable' failed" for p of size [3] and an empty self; torch returns self.
    def make(lib):
        t = lib.zeros(shape)
        p = lib.full(p_shape, 2, dtype=getattr(lib, p_dtype))  # not even a probability
        r = t.bernoulli_(p)
        assert r is t
        return r
    same_as_torch(make)


@pytest.mark.parametrize("p_shape", [(2,), (0,), (2, 3)])
def test_bernoulli_with_a_p_that_does_not_expand_still_raises(p_shape):
    for lib in (torch, kael):
        with pytest.raises(RuntimeError):
            lib.zeros(3).bernoulli_(lib.full(p_shape, 0.5))


def test_split_with_one_integer_binds_split_size_in_kael_and_torch():
    # The fuzz oracle gave torch [1] where kael got 1 (split.sizes), so torch raised "expects
    # split_sizes to sum exactly to 0" where both libraries split by size for an int.
    for n in (0, 3, 4):
        k, t = kael.zeros(n).split(1), torch.zeros(n).split(1)
        assert [x.tolist() for x in k] == [x.tolist() for x in t]
        k, t = kael.split(kael.zeros(n), 3), torch.split(torch.zeros(n), 3)
        assert [x.tolist() for x in k] == [x.tolist() for x in t]
    for lib in (torch, kael):
        with pytest.raises((RuntimeError, ValueError), match="sum exactly to 0"):
            lib.zeros(0).split([1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_neg_into_a_strided_out_that_must_be_resized_writes_in_the_inputs_order(dtype):
    # The fuzz oracle emulated neg's out= of another dtype with out.resize_ (row-major) where
    # torch's out= ops restride a resized out in the input's layout, as kael does.
    def run(lib):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).T.contiguous().T  # strides (1, 2)
        base = lib.zeros(6, dtype=getattr(lib, dtype))
        out = base[::2]
        if lib is torch and dtype != "float32":
            torch.mul(torch.neg(x), True, out=out)  # torch.neg takes only an out of x's dtype
        else:
            lib.neg(x, out=out)
        return base.tolist(), out.stride()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(kael) == run(torch)
        t_same = torch.zeros(6)
        torch.neg(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).T.contiguous().T, out=t_same[::2])
    assert run(kael)[0] == t_same.tolist()


def test_to_takes_non_blocking_before_copy_as_torch():
    # kael's to(dtype, copy) read t.to(dtype, True) as a copy where torch's True is non_blocking
    # (the same tensor back), and refused non_blocking= by keyword.
    calls = [lambda t, L: t.to(L.float32, True), lambda t, L: t.to(L.float32, False, True),
             lambda t, L: t.to("cpu", L.float32, True), lambda t, L: t.to("cpu", L.float32, False, True),
             lambda t, L: t.to(t, True), lambda t, L: t.to(t, False, True), lambda t, L: t.to(L.float64, True),
             lambda t, L: t.to(L.float32, non_blocking=True), lambda t, L: t.to("cpu", non_blocking=True, copy=True)]
    for call in calls:
        got = []
        for L in (torch, kael):
            t = L.tensor([0.5, 1.5])
            r = call(t, L)
            got.append((r is t, str(r.dtype).split(".")[-1], r.tolist()))
        assert got[0] == got[1]


def test_to_with_a_number_is_a_type_error_in_kael():
    # torch reads a number as a 0-d tensor for `to` (t.to(6, True) converts to int64, t.to(2.5,
    # True) to float64) but t.to(6) as device 6; kael's to takes a device, a dtype or a tensor
    # (docs/hardening.md, "Known differences")
    t = torch.tensor([0.5])
    assert t.to(6, True).dtype == torch.int64 and t.to(2.5, True).dtype == torch.float64
    for args in [(6, True), (2.5, True), (True, True), (6,)]:
        with pytest.raises(TypeError, match="to\\(\\) received an invalid combination of arguments"):
            kael.tensor([0.5]).to(*args)


def test_an_object_with_float_and_len_is_not_a_number():
    # kael read an object with __float__ and a __len__ (one that raises, here) as a number where
    # torch raises TypeError; kael's rule (NumPy float scalars: __float__ and no __len__) now
    # holds as its comment said. An object with __float__ alone stays a number in kael
    # (docs/decisions/hostile-input.md).
    class FloatLen:
        def __float__(self):
            return 2.5

        def __len__(self):
            raise ValueError("no length")

    for lib in (torch, kael):
        for op in ("gt", "add", "mul"):
            with pytest.raises(TypeError):
                getattr(lib, op)(lib.tensor(0.0), FloatLen())
    assert kael.add(kael.tensor(0.0), np.float32(2.5)).item() == 2.5
# ---------------------------------------------------------------- the long run of 2026-11-30, seed 20261201

def _with_warnings(make):
    """make(lib) for both libraries: (the outcome as same_as_torch compares it, the messages of
    the warnings it issued, each up to its first period)."""
    import warnings
    out = []
    for lib in (torch, kael):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = _outcome(make, lib)
        out.append((outcome, [str(w.message).split(".")[0] for w in caught]))
    return out


EXPANDED_INDEX_PUTS = {
    # x is zeros(1, 4).expand(3, 4) (rows share memory) or zeros(1).expand(3)
    "list_assign": lambda lib, x: x.__setitem__([0, 2], lib.tensor(5.0)),
    "empty_list": lambda lib, x: x.__setitem__([], 0),
    "empty_index_tensor": lambda lib, x: x.__setitem__(lib.tensor([], dtype=lib.int64), 7.0),
    "repeated_rows_last_wins": lambda lib, x: x.__setitem__(lib.tensor([0, 1, 2]), lib.tensor([1.0, 2.0, 3.0])
                                                            .reshape(3, *([1] if x.dim() == 2 else []))),
    "bool_mask": lambda lib, x: x.__setitem__(lib.tensor([True, False, True]), 3.0),
    "index_put_accumulate": lambda lib, x: x.index_put_((lib.tensor([0, 1, 1]),), lib.tensor(2.0), accumulate=True),
    "index_put_negative": lambda lib, x: x.index_put_((lib.tensor([-1]),), lib.tensor(4.0)),
    "two_dims": lambda lib, x: x.__setitem__((lib.tensor([0, 1]), lib.tensor([1, 1]))
                                             if x.dim() == 2 else lib.tensor([0, 1]), 9.0),
}


@pytest.mark.parametrize("shape", [(3,), (3, 4)])
@pytest.mark.parametrize("case", list(EXPANDED_INDEX_PUTS))
def test_index_put_into_an_expanded_tensor_warns_and_writes_as_torch(case, shape):
    # The long run: kael refused index_put_ (and `x[indices] = v`) on a tensor whose elements
    # share memory ("more than one element of the written-to tensor refers to a single memory
    # location") where torch writes, with a deprecation warning. The values are the same as
    # torch's: kael's loop is serial, the last write wins, accumulate adds every write.
    def make(lib):
        x = lib.zeros(1, *shape[1:]).expand(*shape)
        EXPANDED_INDEX_PUTS[case](lib, x)
        return x
    t, k = _with_warnings(make)
    assert k[0] == t[0] and t[0][0] == "ok", f"kael {k}\ntorch {t}"
    assert "Use of index_put_ on expanded tensors is deprecated" in k[1], k[1]
    # the tensor's memory holds the values the elements show (one element per row)
    x = kael.zeros(1, *shape[1:]).expand(*shape)
    with pytest.warns(UserWarning, match="Use of index_put_ on expanded tensors is deprecated"):
        EXPANDED_INDEX_PUTS[case](kael, x)
    assert np.array_equal(x.numpy(), np.broadcast_to(x[0:1].numpy(), shape))


def test_index_put_into_an_expanded_tensor_keeps_its_other_checks():
    # Only the internal overlap became a warning: a wrong dtype, an out-of-range index and a
    # value of the wrong shape are still refused, before any write.
    base = kael.zeros(4)
    x = base[:1].expand(3)
    with pytest.raises(RuntimeError, match="index_put_: shape"):
        x.index_put_((kael.tensor([0, 1]),), kael.ones(3))
    with pytest.raises(RuntimeError, match="index_put_: Index put requires the source and destination dtypes match"):
        x.index_put_((kael.tensor([0]),), kael.tensor(1.0, dtype=kael.float64))
    with pytest.raises(IndexError):
        x.index_put_((kael.tensor([0, 5]),), kael.tensor(1.0))
    assert base.tolist() == [0.0] * 4
    # (basic indexing assigns through copy_/fill_, which refuse an expanded tensor in both)
    same_as_torch(lambda lib: lib.zeros(1).expand(3).__setitem__(slice(0, 2), 1.0))


MASKS = [[True, False, False], [False, False, False], [True, True, True], [False, True, False]]


@pytest.mark.parametrize("value_kind", ["number", "0d_tensor"])
@pytest.mark.parametrize("case", ["row", "column", "both", "0d_mask", "broadcast_mask"])
def test_masked_fill_into_an_expanded_tensor_writes_where_masked_as_torch(case, value_kind):
    # The long run: masked_fill_ on an expanded self raised kael's overlap error from its copy_;
    # torch warns and writes value where the mask is set and nowhere else, so a memory location
    # gets value when any element that refers to it is masked (copying where()'s result would
    # write an unmasked element's old value over it).
    for mask_rows in itertools.product(MASKS, repeat=2):
        def make(lib):
            base = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
            if case == "row":  # rows share memory
                x, mask = base[:1].expand(2, 3), lib.tensor(list(mask_rows))
            elif case == "column":  # columns share memory
                x, mask = base[:, :1].expand(2, 3), lib.tensor(list(mask_rows))
            elif case == "both":
                x, mask = base[:1, :1].expand(2, 3), lib.tensor(list(mask_rows))
            elif case == "0d_mask":
                x, mask = base[:1].expand(2, 3), lib.tensor(mask_rows[0][0])
            else:  # a mask of one row, broadcast over the expanded dim
                x, mask = base[:1].expand(2, 3), lib.tensor(mask_rows[0])
            value = -7.5 if value_kind == "number" else lib.tensor(-7.5, dtype=lib.float64)
            r = x.masked_fill_(mask, value)
            assert r is x
            return lib.cat([base.reshape(-1), x.reshape(-1)])
        t, k = _with_warnings(make)
        assert k[0] == t[0] and t[0][0] == "ok", f"{mask_rows}: kael {k}\ntorch {t}"
        assert k[1] == ["Use of masked_fill_ on expanded tensors is deprecated"], k[1]
        assert t[1] == ["Use of masked_fill_ on expanded tensors is deprecated"], t[1]
    # a mask of the wrong shape is still refused before any write
    x = kael.zeros(1, 3).expand(2, 3)
    with pytest.raises(Exception, match="masked_fill_"):
        x.masked_fill_(kael.tensor([[True], [False], [True]]), 1.0)
    assert x.tolist() == [[0.0] * 3] * 2


EMPTY_STRIDED = [([1], [-3]), ([2, 1], [1, -5]), ([1, 2], [-1, 1]), ([1, 1, 3], [-2, -7, 1]), ([2, 1, 3], [3, -1, -1]),
                 ([0], [-1]), ([2, 0, 3], [-1, -2, -3]), ([3, 0], [-1, -1]), ([1], [-2 ** 62]),
                 ([2], [-3]), ([2, 3], [3, -1]), ([3, 1], [-1, 1]), ([1, 2 ** 62, 0], [-1, 2, 1])]


@pytest.mark.parametrize("size,stride", EMPTY_STRIDED)
def test_empty_strided_takes_a_negative_stride_where_it_moves_to_no_element(size, stride):
    # The long run: kael refused every negative stride; torch takes one for a dim of size 1 or
    # an empty tensor and stores the stride a contiguous layout gives after the later dims
    # (TensorImpl::set_sizes_and_strides), refusing it elsewhere. kael has no negative strides
    # and now follows that rule. The tensor is written and read whole in a fresh interpreter.
    def make(lib):
        t = lib.empty_strided(size, stride)
        return lib.tensor(list(t.shape) + [-1] + list(t.stride()))
    expected = same_as_torch(make)
    if expected[0] == "ok":
        out = run_kael(f"""
t = kael.empty_strided({size}, {stride})
t.fill_(2.0)
print(tuple(t.shape), t.stride(), float(t.sum()), t.numel())""")
        t = torch.empty_strided(size, stride)
        assert out == f"{tuple(t.shape)} {t.stride()} {2.0 * t.numel()} {t.numel()}", out
    else:
        with pytest.raises(RuntimeError, match=r"empty_strided: (negative strides are not supported|storage size)"):
            kael.empty_strided(size, stride)


NORM_CASES = [((2, 1, 3), -2, True), ((2, 1, 3), 1, False), ((1, 1), None, False), ((1,), None, True), ((), None, False),
              ((), 0, True), ((), (), False), ((1, 1, 1), (0, 2), False), ((3, 1), (1,), False), ((0, 1), 1, False),
              ((1, 2), 1, False)]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("p", [2, 0, 1, 3, 0.5, -1, -2.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("shape,dim,keepdim", NORM_CASES)
def test_norm_over_single_elements_is_their_absolute_value_as_torch(shape, dim, keepdim, p, dtype):
    # The long run: norm(x, dim=-2) over a dim of size 1 of float64 -1.8e308 gave inf in kael,
    # (|x|^2)^(1/2) overflowing; torch's linalg_vector_norm returns |x| (x != 0 for p = 0) when
    # every reduced dim has size 1, so the value is exact. The (1, 2) case reduces two
    # elements; a 0-d input with dim= takes the formula in torch (its test reads the size of a
    # dim the tensor does not have), and in kael.
    fi = torch.finfo(getattr(torch, dtype))
    values = [-float(fi.max), float(fi.max) / 3, -0.0, 0.0, 5.0, float("nan"), -float("inf"), float(fi.tiny), -1.5, 2.0]

    def make(lib):
        n = math.prod(shape)
        x = lib.tensor([values[i % len(values)] for i in range(n)], dtype=getattr(lib, dtype)).reshape(shape)
        kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
        return lib.norm(x, p=p, **kw)
    if (shape == (1, 2) or dim == 0 and shape == ()) and dtype != "float64":
        # the formula: float32 and half norms accumulate in double and float in kael, in float
        # in torch, so |x|^p overflows in torch alone (docs/decisions/sums.md, "float32 sums")
        return
    same_as_torch(make)
    if dtype == "float32":  # dtype= converts first, then takes |x|
        same_as_torch(lambda lib: lib.norm(lib.full(shape, -3e38), p=p, dim=dim, dtype=lib.float64))


@pytest.mark.parametrize("ignore_index", [0, 1, 5, 2 ** 40])
@pytest.mark.parametrize("shape", [(0,), (3,), (2, 3), (2, 3, 4)])
def test_cross_entropy_with_probability_targets_refuses_a_non_negative_ignore_index(shape, ignore_index):
    # The long run: kael computed the losses of class-probability (floating) targets with
    # ignore_index=0 (tensor(-0.) for an empty input), where torch raises "ignore_index is not
    # supported for floating point target": a probability target has no class index to ignore.
    def make(lib, ii=ignore_index):
        x = lib.linspace(-2, 2, math.prod(shape)).reshape(shape)
        target = lib.softmax(lib.linspace(1, -1, math.prod(shape)).reshape(shape), dim=1 if len(shape) > 1 else 0)
        return lib.nn.functional.cross_entropy(x, target, ignore_index=ii, reduction="none")
    assert _outcome(make, torch) == _outcome(make, kael) == ("raises", RuntimeError)
    with pytest.raises(RuntimeError, match=f"cross_entropy_losses: ignore_index is not supported for floating point "
                                           rf"target \(got ignore_index={ignore_index}\)"):
        make(kael)
    with pytest.raises(RuntimeError, match="ignore_index is not supported"):
        kael.nn.CrossEntropyLoss(ignore_index=ignore_index)(kael.zeros(2, 3), kael.zeros(2, 3))
    for ii in (-100, -1):  # a negative ignore_index (the default -100) is taken and means nothing
        t, k = make(torch, ii), make(kael, ii)
        assert tuple(k.shape) == tuple(t.shape) and np.allclose(k.numpy(), t.numpy(), rtol=1e-6, atol=1e-6), (k, t)
    # class-index targets keep their ignore_index
    same_as_torch(lambda lib: lib.nn.functional.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 2]),
                                                              ignore_index=0, reduction="none"))


ELLIPSIS_KEYS = [(..., ...), (..., 0, ...), (0, ..., ...), (..., None, ...), (..., [0, 1], ...), (..., ..., ...),
                 (..., ..., 0), (0, ..., 1, ..., 2)]


@pytest.mark.parametrize("shape", [(), (3,), (2, 3, 4)])
@pytest.mark.parametrize("key", ELLIPSIS_KEYS, ids=str)
def test_an_index_with_more_than_one_ellipsis_is_numpys_index_error(key, shape):
    # The long run: t[..., ...] of a 0-d tensor is tensor(0.) in torch and an IndexError in
    # kael. Kept, deliberately (docs/hardening.md, "Known differences"): NumPy and the array API
    # allow one Ellipsis; torch expands every one by the dims the key leaves unspecified, so a
    # second one that expands to dims pushes later indices past the last dim (torch: "index 0 is
    # out of bounds for dimension 2 with size 0" for a 3-d t[..., ..., 0]), pytorch/pytorch#59787.
    from test_fuzz import known_difference
    x = kael.zeros(shape)
    with pytest.raises(IndexError, match=r"index: an index can only have a single ellipsis \('\.\.\.'\)"):
        x[key]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[key] = 1.0
    assert x.eq(0).all()
    with pytest.raises(IndexError, match="single ellipsis"):
        np.zeros(shape)[key]
    try:
        tres = torch.zeros(shape)[key]
    except IndexError:  # where its later indices run past the dims, or too many are given
        tres = None
    if tres is not None:  # the fuzz oracle accepts kael's error where torch computes
        try:
            x[key]
        except IndexError as kerr:
            assert known_difference(kerr, None, tres) == "more than one Ellipsis"
    # one Ellipsis is the same in both
    single = tuple(k for i, k in enumerate(key) if k is not ... or i == key.index(...))
    same_as_torch(lambda lib: lib.arange(math.prod(shape) * 1.0).reshape(shape)[single])


def test_random_from_with_to_none_draws_up_to_the_mantissa_as_torch():
    # The long run: the oracle left out a None for every optional parameter, so x.random_(-3,
    # None) (random_.from, to=None: [from, 2**24] for float32) reached torch as x.random_(-3)
    # (random_.to: "from=0 >= to=-3"); kael was right. The oracle now keeps a None where kael's
    # schema has no default. Both libraries agree on both spellings:
    for lib in (torch, kael):
        x = lib.zeros(2000)
        x.random_(-3, None)
        assert x.min() >= -3 and x.max() <= 2 ** 24 and x.max() > 2 ** 20, (lib.__name__, x.min(), x.max())
        with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
            lib.zeros(3).random_(-3)
    same_as_torch(lambda lib: lib.zeros(3).random_(5, None).ge(5).to(lib.int64))
    same_as_torch(lambda lib: lib.zeros(3, dtype=lib.int8).random_(-3, None).le(127).to(lib.int64))


@pytest.mark.parametrize("other", [-3, 2.5, True])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float16"])
def test_where_out_with_a_number_other_computes_as_torch_with_the_number_wrapped(dtype, other):
    # The long run: kael.where(cond, x, -3, out=x) computes; torch's where has no out= overload
    # that takes a number, and the oracle's emulation (wrapping the number as a 0-d tensor of the
    # promoted dtype) called torch.result_type with the condition too, which takes two
    # operands (TypeError). The condition takes no part in promotion.
    from test_fuzz_ops import CASE_BY_ID, make_call
    f = CASE_BY_ID["where-out"][0]
    call = make_call(f, "out", ["condition", "self", "other"], ["out"], False)
    for cond in ([True, False, True], [0, 1, 0]):
        def make(lib):
            c = lib.tensor(cond, dtype=lib.bool if isinstance(cond[0], bool) else lib.uint8)
            x = lib.tensor([1, 2, 3]).to(getattr(lib, dtype))
            r = call(lib, c, x, other, x)  # out= x, as the fuzz example
            assert r is x
            return x
        same_as_torch(make)
    # the oracle's value is torch's where with the number as a 0-d tensor of the promoted dtype
    x = torch.tensor([1, 2, 3]).to(getattr(torch, dtype))
    rt = torch.result_type(x, other)
    expected = torch.where(torch.tensor([True, False, True]), x, torch.tensor(other, dtype=rt))
    kx = kael.tensor([1, 2, 3]).to(getattr(kael, dtype))
    got = kael.where(kael.tensor([True, False, True]), kx, other)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("key", [[2], [-3], [5, 0], (slice(None), [0], [7])], ids=str)
def test_an_out_of_range_index_into_no_elements_is_an_index_error(key):
    # The re-run of seed 20261201: torch.zeros(2, 0, 3)[[2]] has shape (1, 0, 3) (its index
    # kernel checks only the elements it reads; index_select and NumPy raise). Kept in kael, for
    # reading and assignment, before any write (docs/hardening.md, "Known differences").
    from test_fuzz import known_difference
    x = kael.zeros(2, 0, 3)
    with pytest.raises(IndexError, match="is out of bounds for dimension"):
        x[key]
    with pytest.raises(IndexError, match="is out of bounds for dimension"):
        x[key] = 1.0
    with pytest.raises(IndexError):
        np.zeros((2, 0, 3))[key if not isinstance(key, list) else (key,)]
    try:
        tres = torch.zeros(2, 0, 3)[key]
    except IndexError:
        tres = None
    if tres is not None:
        assert tres.numel() == 0
        try:
            x[key]
        except IndexError as kerr:
            assert known_difference(kerr, None, tres) == "index out of range into no elements"
    # in range, both compute the same empty result
    same_as_torch(lambda lib: lib.zeros(2, 0, 3)[[1, -2]])


def test_where_with_a_number_condition_is_a_type_error_in_both():
    # The re-run: the oracle wrapped the method's condition (t.where(True, True)) as a tensor,
    # so torch computed; torch and kael both refuse a number condition.
    for make in (lambda lib: lib.zeros(2).where(True, 1.0), lambda lib: lib.where(True, lib.zeros(2), 1.0)):
        assert _outcome(make, torch) == _outcome(make, kael) == ("raises", TypeError)
    from test_pointwise_registry import TorchOp
    from test_fuzz_ops import CASE_BY_ID
    op = TorchOp(CASE_BY_ID["where-method"][0])
    with pytest.raises(TypeError):
        op.method([torch.zeros(()), True, True], {})
    # torch's where takes only an out= of the result's dtype; kael (and the oracle) cast
    c = [True, False]
    out = kael.zeros(2)
    kael.where(kael.tensor(c), kael.tensor([1.5, 2.5], dtype=kael.float64), 7, out=out)
    assert out.dtype == kael.float32 and out.tolist() == [1.5, 7.0]
    tout = torch.zeros(2)
    op = TorchOp(CASE_BY_ID["where-out"][0])
    op.out([torch.tensor(c), torch.tensor([1.5, 2.5], dtype=torch.float64), 7], {}, tout)
    assert tout.tolist() == [1.5, 7.0]


# ---------------------------------------------------------------- the long run of 2026-12-01, seed 20261202

@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 2.5, -2.0 ** 63])
@pytest.mark.parametrize("form", ["function", "method", "inplace"])
def test_masked_fill_with_a_0d_tensor_value_checks_the_conversion_as_torch(value, form):
    # masked_fill(int64 x, mask, tensor(nan)) stored INT64_MIN: the 0-d value tensor was cast
    # unchecked; torch fills with value.item() and raises "value cannot be converted".
    def make(lib):
        x = lib.zeros(3, dtype=lib.int64)
        mask = lib.tensor([True, False, True])
        v = lib.tensor(value, dtype=lib.float64)
        if form == "function":
            return lib.masked_fill(x, mask, v)
        if form == "method":
            return x.masked_fill(mask, v)
        x.masked_fill_(mask, v)
        return x
    same_as_torch(make)


@pytest.mark.parametrize("value", ["row", "number", "other_dtype"])
def test_setitem_with_true_is_a_copy_into_unsqueeze_as_torch(value):
    # x[True] = v went through index_put_, which (as torch's index_put_) writes into an expanded
    # x with a warning; torch copies into x.unsqueeze(0), whose overlap check refuses it.
    def make(lib, expanded):
        x = lib.zeros(1).expand(3) if expanded else lib.zeros(2, 3)
        v = {"row": lib.tensor([1.0, 2.0, 3.0]), "number": 7,
             "other_dtype": lib.tensor([1.5, 2.5, 3.5], dtype=lib.float64)}[value]
        x[True] = v
        return x
    same_as_torch(lambda lib: make(lib, False))
    same_as_torch(lambda lib: make(lib, True))


@pytest.mark.parametrize("a,b", [(-3, -3), (2, 300), (2.5, 1), ("int8", "int8"), ("int8", 3), ("uint8", "int8"),
                                 ("float16", 2.5), ("bool", "bool"), ("bool", 7)])
@pytest.mark.parametrize("cond", ["uint8", "bool"])
def test_where_condition_takes_no_part_in_promotion_as_torch(cond, a, b):
    # where(uint8 c, -3, -3) was uint8 253 and where(uint8 c, int8 t, int8 t) int16: the
    # deprecated uint8 condition was promoted with the values (registry key condition_first).
    def make(lib):
        def operand(v):
            if isinstance(v, str):
                return lib.tensor([1, 0, 2], dtype=getattr(lib, v)) if v != "bool" else lib.tensor([True, False, True])
            return v
        c = lib.tensor([2, 0, 255], dtype=lib.uint8) if cond == "uint8" else lib.tensor([True, False, True])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the uint8 deprecation warning, in torch's and kael's words
            return lib.where(c, operand(a), operand(b))
    same_as_torch(make)


def test_a_dim_of_one_element_with_a_huge_stride_is_never_stepped_over():
    # x[::2**63 - 1] keeps its stride for its one element; tolist and repr computed the stride in
    # bytes (UBSan: signed overflow, the ASan + UBSan run of 2026-12-01), and so did index_put_'s
    # trailing dims and embedding's rows. Run in a child, as under tools/run_sanitizers.sh.
    out = run_kael("""
x = kael.arange(3.)[::2**63 - 1]
assert x.stride() == (2**63 - 1,) and x.tolist() == [0.0] and repr(x) == "tensor([0.])"
t = kael.zeros(2, 3)[:, ::2**63 - 1]
assert t.stride() == (3, 2**63 - 1)
t[kael.tensor([1])] = 5.0
assert t.tolist() == [[0.0], [5.0]], t.tolist()
w = kael.arange(2.).reshape(2, 1)[::2**63 - 1]
assert w.stride() == (2**63 - 1, 1)
assert kael.nn.functional.embedding(kael.tensor([0, 0]), w).tolist() == [[0.0], [0.0]]
print("ok")
""")
    assert out == "ok"


def _close_to_torch(make, rtol=1e-6, atol=1e-6):
    k, t = make(kael), make(torch)
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and tuple(k.shape) == tuple(t.shape)
    np.testing.assert_allclose(np.array(k.tolist(), dtype=np.float64), np.array(t.tolist(), dtype=np.float64),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", ["int64_min_dim0", "int64_min_rows", "f32_big_dim0", "f32_big_rows", "f64_big_3d"])
@pytest.mark.parametrize("op", ["log_softmax", "softmax"])
def test_log_softmax_of_large_values_subtracts_the_max_first_as_torch(op, case):
    # log_softmax(int64 (2, 3) of -2**63, dim=-2, dtype=float32) was 0 where torch gives
    # log(1/2): kael computed x - (max + log(sum)), and max + log(2) rounds to max in float32
    # for a max of -9.2e18; torch computes (x - max) - log(sum).
    def make(lib):
        if case.startswith("int64_min"):
            x = lib.full((2, 3), -2 ** 63, dtype=lib.int64)
        elif case.startswith("f32_big"):
            x = lib.tensor([[1e30, 1e30, -1e30], [1e30, 3e30, 1e30]])
        else:
            x = lib.tensor([[[1e300, 1e300], [1e300, -1e300]]] * 2, dtype=lib.float64)
        dim = -1 if case.endswith("rows") else (1 if case.endswith("3d") else 0)
        return getattr(lib, op)(x, dim, dtype=lib.float32 if case.startswith("int64") else None)
    _close_to_torch(make)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("target", ["index", "probabilities"])
def test_cross_entropy_of_large_logits_subtracts_the_max_first_as_torch(target, smoothing):
    # the same order of operations in the fused cross-entropy: its loss was (max + log(sum)) - x_t,
    # 0 for three equal logits of 1e30 where torch gives log(3)
    def make(lib):
        x = lib.tensor([[1e30, 1e30, 1e30], [1e30, -1e30, 2e30]])
        t = lib.tensor([0, 2]) if target == "index" else lib.tensor([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
        return lib.nn.functional.cross_entropy(x, t, reduction="none", label_smoothing=smoothing)
    _close_to_torch(make)


LINEAR_CASES = [
    # (input shape, weight shape, bias shape or None, input/weight dtype, bias dtype, input transposed)
    ((0,), (0,), (0,), "float32", "float32", False),    # torch: addmm, "mat2 must be a matrix"
    ((3,), (3,), (3,), "float32", "float32", False),
    ((2, 3), (3,), (2,), "float32", "float32", False),
    ((3,), (3,), (), "float32", "float32", False),      # matmul, then the bias added in place
    ((3,), (3,), (), "float16", "float32", False),      # float16, as the product
    ((0,), (0,), (), "float16", "float32", False),
    ((3,), (2, 3), (2,), "float16", "float32", False),  # addmm: the dtypes must agree
    ((3,), (2, 3), (2,), "float32", "float32", False),
    ((3,), (2, 3), (1, 2), "float32", "float32", False),  # in place: the bias may not grow the result
    ((2, 4, 3), (5, 3), (5,), "float32", "float32", True),
    ((2, 4, 3), (5, 3), (4, 5), "float32", "float32", True),
    ((2, 4, 3), (5, 3), (2, 4, 5), "float32", "float32", True),
    ((2, 4, 3), (5, 3), (3, 4, 5), "float32", "float32", True),
    ((2, 0, 3), (5, 3), (5,), "float32", "float32", False),
    ((0, 3), (5, 3), (5,), "float32", "float32", False),
    ((3,), (2, 3), (2,), "int64", "float32", False),
]


@pytest.mark.parametrize("case", LINEAR_CASES, ids=[str(i) for i in range(len(LINEAR_CASES))])
def test_linear_takes_torchs_path_for_every_input_rank_and_bias(case):
    # linear(float16 x, float16 w, float32 0-d bias) was float32 (torch: float16, the bias added
    # in place to the product) and a 1-d weight with a 1-d bias computed where torch raises
    # "mat2 must be a matrix" (its addmm over the input flattened to 2-d).
    xs, ws, bs, dt, bdt, transposed = case

    def make(lib):
        def t(shape, dtype):
            n = math.prod(shape)
            return (lib.arange(n) % 5 - 2).to(getattr(lib, dtype)).reshape(shape)
        x = t(xs, dt)
        if transposed:
            x = t(xs[:-2] + (xs[-1], xs[-2]), dt).transpose(-1, -2)
        return lib.nn.functional.linear(x, t(ws, dt), t(bs, bdt) if bs is not None else None)
    t, k = _outcome(make, torch), _outcome(make, kael)
    if k == ("raises", ValueError):  # kael's shape errors are ValueErrors (docs/decisions/errors.md)
        k = ("raises", RuntimeError)
    assert k == t, f"kael {k}\ntorch {t}"


def test_data_loader_with_a_batch_size_beyond_sys_maxsize_raises_at_the_first_batch_as_torch():
    # DataLoader(dataset, batch_size=2**63) batched; torch's sampler raises ValueError (islice)
    # when the first batch is drawn.
    import kael.data
    import torch.utils.data
    for lib_loader in (kael.data.DataLoader, torch.utils.data.DataLoader):
        loader = lib_loader(list(range(5)), batch_size=2 ** 63)
        assert len(loader) == 1
        with pytest.raises(ValueError):
            next(iter(loader))
    assert [b.tolist() for b in kael.data.DataLoader(list(range(5)), batch_size=sys.maxsize)] == [[0, 1, 2, 3, 4]]


def test_float32_pow_rounds_a_number_exponent_to_float32_as_numpy():
    # A known difference (docs/hardening.md): torch raises its float32 lanes to the exponent
    # rounded to float32 and its scalar tail to the double, so torch.pow(torch.zeros(40),
    # 5e-324) is 1 in 32 places and 0 in 8; kael rounds the number once, as NumPy does.
    k = kael.pow(kael.zeros(40), 5e-324).tolist()
    assert k == (np.zeros(40, np.float32) ** 5e-324).tolist() == [1.0] * 40
    assert k == torch.pow(torch.zeros(40), float(np.float32(5e-324))).tolist()
    t = torch.pow(torch.zeros(40), 5e-324).tolist()
    assert 1.0 in t and 0.0 in t  # torch's own answer depends on the element's place


def test_bernoulli_method_with_a_number_p_takes_the_float_overload_in_both():
    # (an oracle bug of the long run: a number p is bernoulli_.float's, in torch and kael)
    same_as_torch(lambda lib: lib.ones(5).bernoulli_(0.0))
    same_as_torch(lambda lib: lib.zeros(5).bernoulli_(1.0))


@pytest.mark.parametrize("key", ["empty_and_3", "empty_and_minus_9", "empty_2d_and_3", "empty_mask_dim_and_3"])
@pytest.mark.parametrize("form", ["read", "write", "accumulate"])
def test_indices_that_broadcast_to_no_element_are_not_range_checked_as_torch_and_numpy(key, form):
    # x[[], [3]] on a (2, 3) tensor: the index lists broadcast to no element, so torch and NumPy
    # use (and check) no index; kael checked the 3 (IndexError).
    def make(lib):
        x = lib.arange(6.).reshape(2, 3)
        empty = lib.zeros(0, dtype=lib.int64)
        k = {"empty_and_3": (empty, lib.tensor([3])), "empty_and_minus_9": (empty, lib.tensor([-9])),
             "empty_2d_and_3": (lib.zeros(0, 1, dtype=lib.int64), lib.tensor([3, 5])),
             "empty_mask_dim_and_3": (lib.zeros(0, dtype=lib.int64), lib.tensor(7))}[key]
        if form == "read":
            return x[k]
        if form == "write":
            x[k] = 1.0
        else:
            x.index_put_(k, lib.tensor(1.0), accumulate=True)
        return x
    same_as_torch(make)
    x = np.arange(6.).reshape(2, 3)
    assert x[[], [3]].shape == (0,)
    x[[], [3]] = 1.0
    assert x.tolist() == np.arange(6.).reshape(2, 3).tolist()
    # an index into a tensor that has no elements is still checked, as in NumPy (a known difference)
    with pytest.raises(IndexError):
        kael.zeros(2, 0, 3)[[2]]
    with pytest.raises(IndexError):
        np.zeros((2, 0, 3))[[2]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["log_softmax", "softmax"])
def test_half_input_with_dtype_float32_computes_in_float32_as_torch(op, dtype):
    # (an oracle bug of the long run: with dtype=float32 the result is float32 in both)
    _close_to_torch(lambda lib: getattr(lib, op)(lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]],
                                                             dtype=getattr(lib, dtype)), -2, dtype=lib.float32))


# ---------------------------------------------------------------- the long run of 2026-12-01, seed 20261203
# (both findings were the oracle's: kael follows its documented rules; the tests pin the rules)

@pytest.mark.parametrize("values", [[-2.5, 3.4028234663852886e38, 0.0], [3e38, 3e38, 1e-38], [1e30, 1e30, 1e-30, 1e-30]])
def test_float32_prod_accumulates_in_double_as_sum(values):
    # prod's accumulator is sum's (docs/decisions/reductions.md): every factor multiplied in
    # double and the product rounded once, so [-2.5, 3.4e38, 0] is -0.0 where torch's float32
    # product is NaN (-inf * 0); the oracle is torch's product of the same values in float64.
    k = kael.tensor(values).prod()
    assert k.dtype == kael.float32
    expected = torch.tensor(values, dtype=torch.float32).double().prod().float()
    assert str(k.item()) == str(expected.item())
    assert str(kael.tensor(values).prod(0).item()) == str(expected.item())



@pytest.mark.parametrize("value,expected", [(_IndexOnly(), 3.0), (_FloatOnly(), 2.5)])
def test_setitem_takes_a_number_value_as_fill_does(value, expected):
    # x[i] = v reads v as every Scalar parameter does (docs/decisions/argument-parsing.md):
    # an object with __index__ or __float__ is a number, as for fill_; torch's __setitem__
    # takes only Python and NumPy numbers ("can't assign a _IndexOnly to a torch.FloatTensor").
    x = kael.zeros(3)
    x[-3] = value
    assert x.tolist() == [expected, 0.0, 0.0] == kael.zeros(3).fill_(value).tolist()[:1] + [0.0, 0.0]
    with pytest.raises(TypeError, match="can't assign"):
        torch.zeros(3)[-3] = value



# ---------------------------------------------------------------- optional arguments spelled None
# The long fuzz run with seed 99033651 found amax(t, None), amin(t, None), sort(t, stable=None)
# and normal(0.0, <0-d tensor>, ()) raising TypeError where torch computes. The class: an argument
# that has a default passed explicitly as None, by position and by keyword, and an overload the
# parser did not reach. The sweep calls every registry op that has a Python spelling with each
# defaulted parameter given as None; wherever torch accepts the call, kael must accept it and give
# the same result (kael taking None where torch raises is allowed: docs/decisions/argument-parsing.md, "Argument
# parsing").

from pathlib import Path  # noqa: E402

from helpers import _ROOT as _REPO  # noqa: E402  (puts the repository on sys.path)
from codegen.model import parse_registry as _parse_registry  # noqa: E402

_REGISTRY = _parse_registry((_REPO / "native_functions.yaml").read_text(), "native_functions.yaml")


def _sample_tensor(lib, kind):
    return {
        "f": lambda: lib.arange(12, dtype=lib.float32).reshape(3, 4) / 4 - 1,
        "f1": lambda: lib.arange(4, dtype=lib.float32) / 2,
        "sq": lambda: lib.eye(3) * 2 + 1,
        "p": lambda: lib.full((3, 4), 0.5),
        "q1": lambda: lib.tensor([0.25, 0.5]),
        "b3": lambda: lib.ones(2, 3, 3),
        "i": lambda: lib.tensor([[0, 1, 2, 1], [2, 0, 1, 1], [1, 1, 0, 2]]),
        "i1": lambda: lib.tensor([0, 2, 1]),
        "b": lambda: lib.tensor([[True, False, True, False]] * 3),
        # convolution inputs and weights: (N, C, H, W) with C = 3 and (C_out, C_in, kH, kW) / (C_in, C_out, k...)
        "n4": lambda: lib.arange(48, dtype=lib.float32).reshape(1, 3, 4, 4) / 8 - 3,
        "w4": lambda: lib.arange(36, dtype=lib.float32).reshape(2, 3, 2, 3) / 16 - 1,
        "wt4": lambda: lib.arange(36, dtype=lib.float32).reshape(3, 2, 2, 3) / 16 - 1,
        "wt3": lambda: lib.arange(18, dtype=lib.float32).reshape(3, 2, 3) / 8 - 1,
    }[kind]()


# argument sets tried in turn until torch and kael both accept the required arguments alone
_PROFILES = [
    dict(T="f", I=1, IL=(0,), S=2, F=0.5),
    dict(T="f", I=0, IL=(3, 4), S=2, F=0.5),
    dict(T="f1", I=0, IL=(4,), S=1, F=0.5),
    dict(T="sq", I=0, IL=(0,), S=1, F=0.5),
    dict(T="f", I=1, IL=(4, 3), S=1, F=0.5, plain=True),
    dict(T="i", I=1, IL=(0,), S=2, F=0.5),
    dict(T="b", I=1, IL=(0,), S=True, F=0.5),
    dict(T="p", I=1, IL=(0,), S=1, F=0.5),
    dict(T="b3", I=0, IL=(0,), S=1, F=0.5),
    dict(T="i1", I=3, IL=(3,), S=1, F=0.5),
]
# tensors whose parameter name says what they hold
_BY_NAME = {"index": "i", "indices": "i", "mask": "b", "condition": "b", "target": "i1", "src": "f"}
# per op: the tensors and values a valid call needs
_OP_SAMPLES = {
    "index_add": {"index": "i1", "source": "f"}, "index_add_": {"index": "i1", "source": "f"},
    "bincount": {"self": "i1"}, "multinomial": {"self": "p"},
    "randint": {"low": 0, "high": 5}, "randint_like": {"low": 0, "high": 5},
    "random_": {"from": 0, "to": 5}, "embedding_backward": {"indices": "i1", "num_weights": 5},
    "conv2d": {"self": "n4", "weight": "w4"}, "conv_transpose2d": {"self": "n4", "weight": "wt4"},
    "conv_transpose1d": {"self": "b3", "weight": "wt3"},
    "quantile": {"q": "q1"}, "nanquantile": {"q": "q1"},
}
_STRINGS = {"reduce": "sum", "rounding_mode": "floor", "reduction": "mean", "approximate": "none", "side": "left",
            "indexing": "ij", "equation": "ij->ji", "p": "fro"}
# ops with no torch function to compare with, or no valid call of the required arguments alone
_NO_BASELINE = {
    # clamp with both bounds None raises in both (one bound given as None: test_clamp.py)
    "clamp-function", "clamp-method", "clamp.Tensor-function", "clamp.Tensor-method",
    "clamp_-function", "clamp_-method", "clamp_.Tensor-function", "clamp_.Tensor-method",
    "gelu-method",  # torch has no Tensor.gelu
    # kael's own kernels, no torch function of the name
    "standardize-function", "cross_entropy_losses-function", "cross_entropy_losses_backward-function",
    "embedding_backward-function",
}
_RANDOM = {"uniform_", "normal_", "random_", "bernoulli_", "exponential_", "log_normal_", "cauchy_", "geometric_", "bernoulli", "rand", "randn", "randint", "normal",
           "randperm", "rand_like", "randn_like", "randint_like", "multinomial", "dropout", "empty", "empty_like",
           "empty_strided"}


def _sample(lib, f, p, prof):
    special = _OP_SAMPLES.get(f.name, {}).get(p.name)
    if special is not None and not isinstance(special, str):
        return special
    base = p.type.base
    if base == "Tensor":
        kind = special or (None if prof.get("plain") else _BY_NAME.get(p.name)) or prof["T"]
        return _sample_tensor(lib, kind)
    if base == "Tensor[]":
        return [_sample_tensor(lib, prof["T"]), _sample_tensor(lib, prof["T"])]
    if base == "int":
        return prof["I"]
    if base.startswith("int["):
        return prof["IL"]
    return {"Scalar": prof["S"], "float": prof["F"], "bool": False, "ScalarType": lib.float32, "Device": "cpu",
            "str": _STRINGS.get(p.name, "sum"), "Generator": None}[base]


def _default(lib, p):
    d = p.default
    if d in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[d]
    if d.startswith("'"):
        return d[1:-1]
    if p.type.base == "ScalarType":
        return getattr(lib, d)
    if p.type.base == "Device":
        return d
    return eval(d)  # noqa: S307 - an int, a float or a list literal of the registry


def _call(lib, f, variant, pos, kw):
    if variant == "method":
        return getattr(pos[0], f.name)(*pos[1:], **kw)
    module = lib
    if not hasattr(lib, f.name):
        module = kael._C if lib is kael else next(
            m for m in (torch.nn.functional, torch.special) if hasattr(m, f.name))
    kw = dict(kw)
    if "self" in kw:
        kw["input"] = kw.pop("self")
    return getattr(module, f.name)(*pos, **kw)


def _none_outcome(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(), None
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return None, e


def _same(k, t):
    if isinstance(t, torch.Tensor):
        return (isinstance(k, kael.Tensor) and tuple(k.shape) == tuple(t.shape)
                and str(k.dtype) == str(t.dtype).replace("torch", "kael")
                and np.allclose(np.array(k.tolist(), dtype=float), np.array(t.tolist(), dtype=float), equal_nan=True))
    if isinstance(t, (tuple, list)):
        return isinstance(k, (tuple, list)) and len(k) == len(t) and all(_same(a, b) for a, b in zip(k, t))
    return k == t


def _none_cases():
    cases = []
    for f in _REGISTRY:
        for variant in ("function", "method"):
            # private entries (_unique_dim) are kael's kernels of public functions, compared there
            if variant in f.variants and any(p.has_default for p in f.schema.params) and not f.name.startswith("_"):
                cases.append((f, variant))
    return cases


_NONE_CASES = {f"{f.schema.full_name}-{v}": (f, v) for f, v in _none_cases()}


@pytest.mark.parametrize("case", list(_NONE_CASES))
def test_optional_argument_given_as_none_is_taken_where_torch_takes_it(case):
    f, variant = _NONE_CASES[case]
    params = list(f.schema.params)
    required = [p for p in params if not p.has_default]

    def args(lib, prof, none=None, form="kw"):
        vals = {p.name: _sample(lib, f, p, prof) for p in required}
        if none is None or form == "kw":
            pos = [vals[p.name] for p in required if not p.kwonly]
            kw = {p.name: vals[p.name] for p in required if p.kwonly}
            if none is not None:
                kw[none.name] = None
            return pos, kw
        pos = []
        for p in params:
            if p is none:
                pos.append(None)
                break
            pos.append(vals[p.name] if not p.has_default else _default(lib, p))
        return pos, {p.name: vals[p.name] for p in required if p.kwonly}

    prof = None
    for candidate in _PROFILES:
        (_, terr), (_, kerr) = (_none_outcome(lambda: _call(lib, f, variant, *args(lib, candidate))) for lib in (torch, kael))
        if terr is None and kerr is None:
            prof = candidate
            break
    if prof is None:
        assert case in _NO_BASELINE, f"{case}: no profile gives a call both torch and kael accept; add samples"
        return
    assert case not in _NO_BASELINE, f"{case} has a baseline now: take it off _NO_BASELINE"
    problems, checked = [], 0
    for p in params:
        if not p.has_default:
            continue
        for form in ("kw",) if p.kwonly else ("kw", "pos"):
            t, terr = _none_outcome(lambda: _call(torch, f, variant, *args(torch, prof, p, form)))
            if terr is not None:
                continue
            checked += 1
            k, kerr = _none_outcome(lambda: _call(kael, f, variant, *args(kael, prof, p, form)))
            if kerr is not None:
                problems.append(f"{p.name}=None ({form}): kael raised {type(kerr).__name__}: {kerr}")
            elif f.name not in _RANDOM and not _same(k, t):
                problems.append(f"{p.name}=None ({form}): kael gave {k!r:.200}, torch {t!r:.200}")
    assert not problems, f"{case}:\n" + "\n".join(problems)


def test_none_sweep_reaches_the_ops_the_fuzz_found():
    # the sweep covers the reported calls (and exercises each: torch takes all of them)
    for name in ("amax.-function", "amin.-method", "sort.-function", "roll.-method", "norm.-function"):
        assert name.replace(".-", "-") in _NONE_CASES
    assert len(_NONE_CASES) >= 180 and len(_NO_BASELINE) <= 15
    t = kael.arange(12.0).reshape(3, 4)
    assert kael.amax(t, None).item() == 11.0 and t.amin(dim=None).item() == 0.0
    assert t.sort(stable=None).values.tolist() == t.tolist()
    assert kael.norm(t, None).item() == pytest.approx(torch.norm(torch.arange(12.0).reshape(3, 4), None).item())
    assert t.roll(1, None).tolist() == torch.arange(12.0).reshape(3, 4).roll(1, None).tolist()


@pytest.mark.parametrize("args", [(0.0, "t0", ()), ("t0", 1.0, (2, 3)), ("t0", "t0", (2,)), (1.5, "t0", [])],
                         ids=str)
def test_normal_float_parameters_take_a_0d_tensor_as_torch(args):
    # normal.float_float(float mean, float std, int[] size): torch's parser reads a 0-d tensor as
    # the float (its Tensor overloads do not take a size); kael raised TypeError
    for lib in (torch, kael):
        a = [lib.tensor(0.0) if x == "t0" else x for x in args]
        r = lib.normal(*a)
        assert tuple(r.shape) == tuple(args[2]) and str(r.dtype).endswith("float32")
    # the Tensor overloads still come first: a 0-d mean with a std tensor broadcasts
    assert tuple(kael.normal(kael.tensor(0.0), kael.ones(3)).shape) == (3,)
    assert tuple(kael.normal(kael.ones(2, 1), kael.tensor(1.0)).shape) == (2, 1)


# ---------------------------------------------------------------- complex numbers
# A float tensor == (1+2j) returned False (the number was refused, so == fell back to identity),
# where kael, which has no complex dtype, raises TypeError for a complex number everywhere else.
# Every comparison and binary op, in each form, with Python and NumPy complex numbers.

_COMPLEX = [1 + 2j, 0j, complex(1, 0), np.complex64(1 + 2j), np.complex128(3j)]
_OPERATORS = ["==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "//", "%", "**", "&", "|", "^"]
# every pointwise op of two or three inputs (each takes a number for any input): the comparisons,
# arithmetic, where, lerp, ...
_NUMBER_INPUT_OPS = [f for f in _REGISTRY if f.is_pointwise and len(f.schema.tensor_params) >= 2]


def _complex_message(e):
    return "complex numbers are not supported (kael has no complex dtype)" in str(e)


@pytest.mark.parametrize("z", _COMPLEX, ids=repr)
@pytest.mark.parametrize("op", _OPERATORS)
def test_complex_operand_of_an_operator_raises_type_error(op, z):
    t = kael.ones(3)
    for expr in (f"t {op} z", f"z {op} t"):
        with pytest.raises(TypeError):
            eval(expr)  # noqa: S307
    if op not in ("==", "!=", "<", "<=", ">", ">="):
        with pytest.raises(TypeError):
            exec(f"t {op}= z")  # noqa: S102


@pytest.mark.parametrize("z", _COMPLEX, ids=repr)
@pytest.mark.parametrize("f", _NUMBER_INPUT_OPS, ids=lambda f: f.name)
def test_complex_input_of_a_pointwise_op_raises_type_error_naming_it(f, z):
    fn = getattr(kael._C, f.name)
    n = len(f.schema.tensor_params)
    # a required number after the tensors (_threshold_backward's threshold) gets an ordinary value
    extra = [0.5 for p in f.schema.params if not p.type.is_tensor_like() and not p.has_default and not p.kwonly]
    for i in range(n):
        args = [kael.ones(3) > 0 if f.condition_first and j == 0 else kael.ones(3) for j in range(n)] + extra
        args[i] = z
        for kw in ({}, {"out": kael.empty(3)}):
            with pytest.raises(TypeError) as e:
                fn(*args, **kw)
            assert _complex_message(e.value) and str(e.value).startswith(f.name), e.value
    if "method" in f.variants and not f.condition_first:
        with pytest.raises(TypeError, match=f"^{f.name}: complex numbers"):
            getattr(kael.ones(3), f.name)(*([z] * (n - 1)))
        if f.inplace:
            with pytest.raises(TypeError, match=f"^{f.name}_?: complex numbers"):
                getattr(kael.ones(3), f.name + "_")(*([z] * (n - 1)))


def test_complex_sweep_covers_comparisons_and_arithmetic():
    names = {f.name for f in _NUMBER_INPUT_OPS}
    assert {"eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "pow", "where", "lerp"} <= names


@pytest.mark.parametrize("z", _COMPLEX, ids=repr)
def test_complex_number_as_a_comparison_raises_with_the_op_name(z):
    t = kael.ones(3)
    with pytest.raises(TypeError, match=r"^eq: complex numbers are not supported \(kael has no complex dtype\)"):
        t == z  # noqa: B015
    with pytest.raises(TypeError, match=r"^ne: complex numbers are not supported"):
        z != t  # noqa: B015
    with pytest.raises(TypeError, match=r"^eq: complex numbers are not supported"):
        kael.eq(t, z)
    with pytest.raises(TypeError, match=r"^index: complex numbers are not supported"):
        t[0] = z
    for call in (lambda: t.fill_(z), lambda: kael.full((2,), z), lambda: kael.where(t > 0, t, z),
                 lambda: kael.clamp(t, z), lambda: t.masked_fill(t > 0, z), lambda: t.add(1, alpha=z)):
        with pytest.raises(TypeError, match="complex numbers are not supported"):
            call()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's ComplexWarning for numpy.complex64
        assert torch.is_tensor(torch.ones(3) == z)  # torch computes (it has complex dtypes)


# the long run of 2026-12-06, seed 1796525540: normal(1.8e308, float32 std) gave inf where torch
# raises (a number mean is added to a float32 result with the overflow check; float16 and bfloat16
# results round to inf, float64 holds it)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("mean", [1.0, -3.5e38, 3.4e38, 1e39, 1.7976931348623157e308, float("inf"), float("nan")])
def test_normal_number_mean_range_checked_as_torch(dtype, mean):
    outcome = []
    for lib in (torch, kael):
        try:
            r = lib.normal(mean, lib.zeros(3, dtype=getattr(lib, dtype)))
            outcome.append(("ok", [float(v) for v in r.float().tolist()]))
        except Exception as e:  # noqa: BLE001
            outcome.append((type(e), None))
    assert outcome[1][0] == outcome[0][0]
    if outcome[0][0] == "ok":
        np.testing.assert_allclose(outcome[1][1], outcome[0][1], rtol=1e-2, equal_nan=True)


# ---------------------------------------------------------------- the run of 2026-12-07, seed 5
# (tools/fuzz_long.py --jobs 2, 72,445 cases of one child): composites moved into the registry


def _composite_outcome(lib, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = call(lib)
        except Exception as e:  # noqa: BLE001 - the class is compared
            return type(e), None
    return "ok", (str(r.dtype), tuple(r.shape), [float(v) for v in r.double().flatten().tolist()])


def _same_composite_outcome(call):
    want, got = _composite_outcome(torch, call), _composite_outcome(kael, call)
    if want[0] == "ok":
        assert got[0] == "ok", (got, want)
        assert got[1][:2] == (want[1][0].replace("torch.", "kael."), want[1][1])
        np.testing.assert_allclose(got[1][2], want[1][2], rtol=1e-6, equal_nan=True)
    else:
        # torch's NotImplementedError ("not implemented for 'Bool'") is a RuntimeError, kael's one class
        assert got[0] is not None and got[0] != "ok" and issubclass(want[0], got[0]), (got, want)


# cross checked the size of dim after broadcasting (cross(ones(3), ones(1)) gave zeros), and
# promoted mixed dtypes; torch's linalg.cross checks both inputs' size 3 and one dtype first
@pytest.mark.parametrize("shapes,dim", [(((3,), (1,)), None), (((3,), (1,)), 0), (((1,), (3,)), 0),
                                        (((2, 3), (1, 3)), 1), (((2, 3), (1, 1)), -1), (((3, 2), (3, 1)), 0),
                                        (((3, 3), (1, 3)), None), (((4, 3), (1, 3)), 1)], ids=str)
def test_cross_checks_both_inputs_before_broadcasting(shapes, dim):
    a, b = (np.arange(1.0, 1.0 + np.prod(s)).reshape(s) for s in shapes)
    kw = {} if dim is None else {"dim": dim}
    _same_composite_outcome(lambda lib: lib.cross(lib.tensor(a), lib.tensor(b), **kw))
    _same_composite_outcome(lambda lib: lib.tensor(a).cross(lib.tensor(b), **kw))


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float32", "int64"), ("int32", "int64"),
                                    ("float16", "float32"), ("int64", "int64")], ids=str)
def test_cross_refuses_mixed_dtypes_as_torch(dtypes):
    _same_composite_outcome(lambda lib: lib.cross(lib.ones(3, dtype=getattr(lib, dtypes[0])),
                                        lib.ones(3, dtype=getattr(lib, dtypes[1])), dim=0))


def test_cross_rounds_each_product_on_every_machine():
    # both products past float32's range: each rounded, inf - inf = NaN (torch's own kernel gives
    # inf where its compiler fused a multiply into a subtract, NaN without FMA; test_fuzz_ops.py)
    a, b = kael.full((3,), -2.5), kael.full((3,), 3.4e38)
    assert all(math.isnan(v) for v in kael.cross(a, b, dim=0).tolist())
    ta, tb = torch.full((3,), -2.5), torch.full((3,), 3.4e38)
    unfused = ta[1] * tb[2] - ta[2] * tb[1]
    assert math.isnan(float(unfused))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
                                   "float64"])
def test_trace_dtypes_as_torch(dtype):
    # trace of a bool matrix gave a count where torch refuses
    _same_composite_outcome(lambda lib: lib.trace(lib.ones(2, 3, dtype=getattr(lib, dtype))))
    _same_composite_outcome(lambda lib: lib.ones(3, 3, dtype=getattr(lib, dtype)).trace())


@pytest.mark.parametrize("dim", [-3, 2, 7, -2 ** 63])
def test_diff_checks_dim_before_reading_the_shape(dim):
    # diff wrapped dim by hand and read sizes()[dim + ndim] past the shape (found by the run;
    # test_dim_range_sweep.py sweeps every registry op with a dim)
    _same_composite_outcome(lambda lib: lib.zeros(2, 3).diff(dim=dim))
    _same_composite_outcome(lambda lib: lib.diff(lib.zeros(2, 3), n=2, dim=dim))


@pytest.mark.parametrize("prepend,append", [((0,), None), (None, (3,)), ((2, 1), None), ((3, 1), None),
                                            (None, (2, 2, 1)), ((1, 3), (2, 5)), ((2, 0), None)], ids=str)
@pytest.mark.parametrize("dim", [-1, 0])
def test_diff_checks_prepend_and_append_shapes(prepend, append, dim):
    # a 1-d prepend beside a 2-d input was joined (cat skips an empty 1-d tensor); torch refuses
    kw = {k: (lambda lib, s=s: lib.ones(*s)) for k, s in (("prepend", prepend), ("append", append)) if s is not None}
    _same_composite_outcome(lambda lib: lib.diff(lib.zeros(2, 3), dim=dim, **{k: v(lib) for k, v in kw.items()}))


@pytest.mark.parametrize("weights", ["fweights", "aweights"])
@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2, 1)], ids=str)
def test_cov_leaves_its_input_alone(weights, shape):
    # torch 2.13's cov writes the centred values into its input when weights are given and there
    # is one observation; kael's does not, and gives torch's result
    w = {"fweights": lambda lib: lib.tensor([2]), "aweights": lambda lib: lib.tensor([0.5])}[weights]
    values = np.full(shape, 5.0)
    x = kael.tensor(values)
    got = kael.cov(x, **{weights: w(kael).reshape(())}) if shape == () else kael.cov(x, **{weights: w(kael)})
    assert x.tolist() == values.tolist()
    tx = torch.tensor(values)
    want = torch.cov(tx.clone(), **{weights: w(torch).reshape(())}) if shape == () else torch.cov(
        tx.clone(), **{weights: w(torch)})
    np.testing.assert_allclose(np.array(got.tolist()), np.array(want.tolist()), equal_nan=True)


@pytest.mark.parametrize("op", ["clamp_min", "clamp_max"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int16"])
def test_clamp_bounds_range_checked_but_a_number_self_computed_as_in_add(op, dtype):
    # clamp_min(3.4e38, float16 tensor) raised the bound's overflow error for the number in
    # self's place; kael computes with a number self as every pointwise op does (add's rule:
    # the wrapped number cast to the result dtype), and checks the number bound as torch does
    big = 3.4e38 if dtype.startswith(("float", "bfloat")) else 2 ** 40
    tk = kael.zeros((), dtype=getattr(kael, dtype))
    tt = torch.zeros((), dtype=getattr(torch, dtype))
    want = getattr(torch, op)(torch.tensor(big).to(getattr(torch, dtype)), tt)
    got = getattr(kael, op)(big, tk)
    assert str(got.dtype) == str(want.dtype).replace("torch", "kael")
    assert float(got) == float(want) or (math.isnan(float(got)) and math.isnan(float(want)))
    with pytest.raises(RuntimeError, match="without overflow"):
        getattr(torch, op)(tt, big)
    with pytest.raises(RuntimeError, match="without overflow"):
        getattr(kael, op)(tk, big)


@pytest.mark.parametrize("op", ["bucketize", "searchsorted"])
@pytest.mark.parametrize("sizes", [(0, 0), (2, 0), (0, 2), (2, 2)], ids=str)
def test_searchsorted_refuses_bool_only_with_values_to_look_up(op, sizes):
    # a bool input with no elements raised where torch's kernel never runs and gives an empty result
    def call(lib):
        x, b = lib.zeros(sizes[0], dtype=lib.bool), lib.zeros(sizes[1], dtype=lib.bool)
        return lib.bucketize(x, b) if op == "bucketize" else lib.searchsorted(b, x)
    want, got = _composite_outcome(torch, call), _composite_outcome(kael, call)
    assert (got[0] == "ok") == (want[0] == "ok"), (got, want)
    if want[0] == "ok":
        assert got[1] == (want[1][0].replace("torch", "kael"), want[1][1], want[1][2])


# the long run of 2026-12-07 under ASan + UBSan, seed 1486082866: nanmean(x, dtype=int64) summed
# into int64 and divided into float32, where torch refuses a dtype that is not floating (as mean)
@pytest.mark.parametrize("op", ["mean", "nanmean"])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "float64"])
@pytest.mark.parametrize("dim", [None, 0], ids=str)
def test_mean_and_nanmean_take_only_floating_dtypes(op, dtype, dim):
    def call(lib):
        x = lib.tensor([[1.0, float("nan"), 2.0], [3.0, 4.0, 5.0]])
        kw = {"dtype": getattr(lib, dtype)}
        return getattr(lib, op)(x, **kw) if dim is None else getattr(x, op)(dim, **kw)
    want, got = _composite_outcome(torch, call), _composite_outcome(kael, call)
    assert (got[0] == "ok") == (want[0] == "ok"), (got, want)
    if want[0] == "ok":
        assert got[1][:2] == (want[1][0].replace("torch", "kael"), want[1][1])
        np.testing.assert_allclose(got[1][2], want[1][2], rtol=1e-3, equal_nan=True)
