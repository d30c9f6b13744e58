"""A Python number written into a tensor is range-checked against the destination dtype on every
write path, as PyTorch checks it: `x[False] = 2**40` on an int32 tensor raises PyTorch's
RuntimeError ("<op>: value 1099511627776 cannot be converted to type int32 without overflow")
instead of storing a wrapped value, and so does every other key kind of __setitem__, fill_,
masked_fill, index_fill, index_put_ (through a key), scatter's value, full and its relatives,
clamp's number bounds and where's number operand. Where PyTorch converts without a check (a
number operand of add, mul or an out= of them wraps; float16/bfloat16 assignments round to inf)
kael gives the same values.

The sweep runs every path below for each dtype and value against torch: the same outcome (a
result of the same dtype and values, or an exception of the same class, whose message in kael
starts with the op name and shows the value).

A deliberate difference is left out: fill_/full of a one-element float16/bfloat16 tensor with a
value beyond its range raises in kael and gives inf in torch, which checks only tensors of more
than one element (docs/decisions/numbers.md, "fill_, full ... into float16/bfloat16"); the tensors here
have four elements.
"""
import math

import pytest
import torch

import kael

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "bool", "float16", "bfloat16", "float32", "float64"]
NAN, INF = float("nan"), float("inf")
VALUES = [2 ** 7, 2 ** 8, 2 ** 15, 2 ** 31, 2 ** 40, 2 ** 63 - 1, -2 ** 63, -1, -129, -256, True, False, 1.5, NAN,
          INF, -INF, 1e6, 70000, 3.5e38, 1e39]


def base(lib, dtype, n=4):
    return lib.arange(n).to(getattr(lib, dtype))


def setitem(key):
    def write(lib, dtype, v):
        x = base(lib, dtype)
        x[key(lib) if callable(key) else key] = v
        return x
    return write


def mask(lib):
    return lib.tensor([True, False, True, False])


# name -> (op name in kael's message, write(lib, dtype, value) -> tensor)
PATHS = {
    "setitem_int": ("index", setitem(1)),
    "setitem_negative_int": ("index", setitem(-1)),
    "setitem_slice": ("index", setitem(slice(1, 3))),
    "setitem_empty_slice": ("index", setitem(slice(1, 1))),
    "setitem_None": ("index", setitem(None)),
    "setitem_Ellipsis": ("index", setitem(Ellipsis)),
    "setitem_True": ("index", setitem(True)),
    "setitem_False": ("index", setitem(False)),
    "setitem_tuple_False": ("index", setitem((False,))),
    "setitem_tuple_Ellipsis_None": ("index", setitem((Ellipsis, None))),
    "setitem_bool_mask": ("index", setitem(mask)),
    "setitem_empty_bool_mask": ("index", setitem(lambda lib: lib.zeros(4, dtype=lib.bool))),
    "setitem_int_tensor": ("index", setitem(lambda lib: lib.tensor([0, 2]))),
    "setitem_empty_int_tensor": ("index", setitem(lambda lib: lib.tensor([], dtype=lib.int64))),
    "setitem_0d_int_tensor": ("index", setitem(lambda lib: lib.tensor(1))),
    "setitem_list": ("index", setitem([0, 2])),
    "setitem_empty_list": ("index", setitem([])),
    "fill_": ("fill_", lambda lib, d, v: base(lib, d).fill_(v)),
    "fill_empty": ("fill_", lambda lib, d, v: base(lib, d, 0).fill_(v)),
    "zero_size_full": ("full", lambda lib, d, v: lib.full((0,), v, dtype=getattr(lib, d))),
    "full": ("full", lambda lib, d, v: lib.full((4,), v, dtype=getattr(lib, d))),
    "full_like": ("full", lambda lib, d, v: lib.full_like(base(lib, d), v)),
    "new_full": ("full", lambda lib, d, v: base(lib, d).new_full((4,), v)),
    "masked_fill": ("masked_fill", lambda lib, d, v: base(lib, d).masked_fill(mask(lib), v)),
    "masked_fill_no_mask": ("masked_fill", lambda lib, d, v: base(lib, d).masked_fill(lib.zeros(4, dtype=lib.bool), v)),
    "masked_fill_": ("masked_fill_", lambda lib, d, v: base(lib, d).masked_fill_(mask(lib), v)),
    "masked_fill_fn": ("masked_fill", lambda lib, d, v: lib.masked_fill(base(lib, d), mask(lib), v)),
    "index_fill": ("index_fill", lambda lib, d, v: base(lib, d).index_fill(0, lib.tensor([1]), v)),
    "index_fill_": ("index_fill_", lambda lib, d, v: base(lib, d).index_fill_(0, lib.tensor([1]), v)),
    "index_fill_no_index": ("index_fill_", lambda lib, d, v: base(lib, d).index_fill_(0, lib.tensor([], dtype=lib.int64), v)),
    "scatter_value": ("scatter", lambda lib, d, v: base(lib, d).scatter(0, lib.tensor([1]), v)),
    "scatter_value_": ("scatter_", lambda lib, d, v: base(lib, d).scatter_(0, lib.tensor([1]), v)),
    "clamp_min": ("clamp_min", lambda lib, d, v: base(lib, d).clamp(min=v)),
    "clamp_max": ("clamp_max", lambda lib, d, v: base(lib, d).clamp(max=v)),
    "clamp_both": ("clamp_m", lambda lib, d, v: lib.clamp(base(lib, d), v, v)),
    "clamp_": ("clamp_min", lambda lib, d, v: base(lib, d).clamp_(min=v)),
    "clamp_min_fn": ("clamp_min", lambda lib, d, v: lib.clamp_min(base(lib, d), v)),
    "clamp_max_": ("clamp_max", lambda lib, d, v: base(lib, d).clamp_max_(v)),
    "where_other": ("where", lambda lib, d, v: lib.where(base(lib, d) > 1, base(lib, d), v)),
    "where_input": ("where", lambda lib, d, v: lib.where(base(lib, d) > 1, v, base(lib, d))),
    "where_method": ("where", lambda lib, d, v: base(lib, d).where(base(lib, d) > 1, v)),
    "lerp_weight": ("lerp", lambda lib, d, v: lib.lerp(base(lib, d), base(lib, d).flip(0), v)),
    # PyTorch converts these without a check (a number operand wraps as a cast does)
    "add_": ("add_", lambda lib, d, v: base(lib, d).add_(v)),
    "mul_out": ("mul", lambda lib, d, v: lib.mul(base(lib, d), v, out=base(lib, d))),
    "add_out": ("add", lambda lib, d, v: lib.add(base(lib, d), v, out=base(lib, d))),
}


def outcome(write, lib, dtype, value):
    try:
        r = write(lib, dtype, value)
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return None, e
    return (str(r.dtype).split(".")[-1], r.tolist()), None


def shown(value):
    if isinstance(value, bool):
        return str(value)
    return str(value) if isinstance(value, int) else f"{value:g}"


def same_values(a, b):
    return len(a) == len(b) and all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", list(PATHS))
def test_number_write_is_range_checked_as_in_torch(path, dtype):
    op, write = PATHS[path]
    problems = []
    for value in VALUES:
        t, terr = outcome(write, torch, dtype, value)
        k, kerr = outcome(write, kael, dtype, value)
        if terr is not None:
            if isinstance(terr, NotImplementedError):  # a dtype torch's kernel lacks: any RuntimeError
                ok = isinstance(kerr, RuntimeError)
            else:
                ok = kerr is not None and type(kerr) is type(terr)
            if ok and "without overflow" in str(terr):
                ok = (f"{op}" in str(kerr) and f"value {shown(value)} cannot be converted to type" in str(kerr)
                      and "without overflow" in str(kerr))
            if not ok:
                problems.append(f"{value!r}: torch raised {type(terr).__name__}: {terr}; kael "
                                + (f"gave {k}" if kerr is None else f"raised {type(kerr).__name__}: {kerr}"))
        elif kerr is not None:
            problems.append(f"{value!r}: kael raised {type(kerr).__name__}: {kerr}; torch gave {t}")
        elif k[0] != t[0] or not same_values(k[1], t[1]):
            problems.append(f"{value!r}: kael gave {k}, torch {t}")
    assert not problems, "\n".join(problems)


def test_the_sweep_covers_every_key_kind_and_write_op():
    # each key kind of __setitem__ and each op of the write paths named in the module doc
    names = set(PATHS)
    for kind in ("int", "slice", "None", "Ellipsis", "True", "False", "bool_mask", "int_tensor", "list"):
        assert f"setitem_{kind}" in names
    for op in ("fill_", "full", "masked_fill", "masked_fill_", "index_fill", "index_fill_", "scatter_value",
               "clamp_min", "clamp_max", "where_other", "add_out"):
        assert op in names
    assert len(PATHS) * len(DTYPES) * len(VALUES) >= 8000


@pytest.mark.parametrize("key", [False, 0, slice(None), None, Ellipsis, True], ids=repr)
def test_failed_number_write_changes_nothing(key):
    x = kael.arange(4, dtype=kael.int32)
    version = x._version
    with pytest.raises(RuntimeError, match=r"index: value 1099511627776 cannot be converted to type int32 without "
                                           r"overflow"):
        x[key] = 2 ** 40
    assert x.tolist() == [0, 1, 2, 3] and x._version == version


def test_index_put_with_a_number_value_through_a_key():
    # index_put_ takes tensors; a key with tensor indices writes a number through it
    x = kael.zeros(3, dtype=kael.int8)
    with pytest.raises(RuntimeError, match=r"index: value 128 cannot be converted to type int8 without overflow"):
        x[kael.tensor([0, 2])] = 128
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(3, dtype=torch.int8)[torch.tensor([0, 2])] = 128


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("args", [(0, 1e39, 1e38), (0, 3.5e38, 1e38), (-1e39, 0, 1e38), (0, 10, 1e39),
                                  (-3.5e38, 0, 1e38), (0, 70000, 10000)], ids=str)
def test_half_arange_checks_start_and_step_in_float_as_torch(dtype, args):
    # torch counts float16/bfloat16 in float from start and step and checks those two against
    # float (not end: arange(0, 1e39, 1e38) is [0, inf, ...]); kael gave NaN for a start or step
    # beyond float's range
    try:
        expected, terr = torch.arange(*args, dtype=getattr(torch, dtype)).tolist(), None
    except RuntimeError as e:
        expected, terr = None, e
    if terr is not None:
        assert "without overflow" in str(terr)
        with pytest.raises(RuntimeError, match=r"arange: value .* cannot be converted to type float32 without overflow"):
            kael.arange(*args, dtype=getattr(kael, dtype))
    else:
        assert kael.arange(*args, dtype=getattr(kael, dtype)).tolist() == expected
