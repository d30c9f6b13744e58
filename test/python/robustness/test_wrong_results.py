"""Calls that once returned a wrong answer without an error: out= aliasing, arange's length,
assignment shapes, output layouts under promotion, and the float32 sum accumulation rule."""
import itertools
import math
import random

import pytest
import torch

import kael
from helpers import check


# -- out= that is also an input, with another shape ------------------------------------------

def test_out_that_is_an_input_of_another_shape_raises_before_writing():
    for lib, error in ((torch, RuntimeError), (kael, RuntimeError)):
        a = lib.tensor([5.0])
        with pytest.raises(error, match=r"output with shape \[1\] doesn't match the broadcast shape \[4\]"):
            lib.add(a, lib.zeros(4), out=a)
        assert a.tolist() == [5.0]


# -- arange takes its length as PyTorch does ---------------------------------------------------

@pytest.mark.parametrize("args,dtype", [((0.5, 3.7), "int64"), ((0.5, 3.7), "int32"), ((0, 1, 0.2), "int16"),
                                        ((-1.5, 3), "uint8"), ((0, 300), "int8")])
def test_arange_length_and_values_with_integral_dtypes(args, dtype):
    check(kael.arange(*args, dtype=getattr(kael, dtype)), torch.arange(*args, dtype=getattr(torch, dtype)))


def test_arange_rejects_bool():
    with pytest.raises(RuntimeError):
        torch.arange(3, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="arange: not implemented for dtype bool"):
        kael.arange(3, dtype=kael.bool)


# -- assignment: the value must broadcast to the indexed shape ---------------------------------

SET_INDICES = [slice(0, 0), slice(None), slice(1, 3), 0, -1, (0,), (slice(None), 0), (0, slice(1, 2)), Ellipsis,
               (Ellipsis, 0), None, (None, 0), (slice(None), None), (slice(0, 0), 0), (0, 0)]
SET_VALUES = [(), (1,), (4,), (1, 4), (3, 4), (9, 9), (2,), (0,), (1, 1), (1, 1, 4), (2, 4), (3, 1), (1, 3, 4),
              (0, 4), (4, 1), (1, 2, 1, 1)]


@pytest.mark.parametrize("index", SET_INDICES, ids=repr)
def test_setitem_shape_rules_match_torch(index):
    """Leading 1s of the value are dropped, the rest must broadcast to the indexed shape;
    a mismatch raises RuntimeError in both."""
    for shape in SET_VALUES:
        t, k = torch.zeros(3, 4), kael.zeros(3, 4)
        try:
            t[index] = torch.full(shape, 2.0)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="shape mismatch"):
                k[index] = kael.full(shape, 2.0)
            assert k.tolist() == torch.zeros(3, 4).tolist(), (index, shape)
        else:
            k[index] = kael.full(shape, 2.0)
            assert k.tolist() == t.tolist(), (index, shape)


def test_setitem_examples():
    x = kael.zeros(4)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[9, 9\]"):
        x[0:0] = kael.ones(9, 9)
    x[:] = kael.ones(1, 4)
    assert x.tolist() == [1.0] * 4


# -- output layout: follow PyTorch's rules when inputs are promoted or broadcast -------------

def _layout(lib, kind, dtype):
    d = getattr(lib, dtype)
    make = {
        "contiguous": lambda: lib.arange(120).to(d).reshape(2, 3, 4, 5),
        "channels_last": lambda: lib.arange(120).to(d).reshape(2, 4, 5, 3).permute(0, 3, 1, 2),
        "transposed": lambda: lib.arange(120).to(d).reshape(5, 4, 3, 2).permute(3, 2, 1, 0),
        "expanded_last": lambda: lib.arange(5).to(d).reshape(1, 1, 1, 5).expand(2, 3, 4, 5),
        "expanded_channel": lambda: lib.arange(3).to(d).reshape(1, 3, 1, 1).expand(2, 3, 4, 5),
        "stepped": lambda: lib.arange(240).to(d).reshape(2, 3, 4, 10)[..., ::2],
        "broadcast_2d": lambda: lib.arange(20).to(d).reshape(4, 5),
        "broadcast_2d_T": lambda: lib.arange(20).to(d).reshape(5, 4).T,
        "broadcast_col": lambda: lib.arange(3).to(d).reshape(3, 1, 1),
    }
    return make[kind]()


LAYOUTS = ["contiguous", "channels_last", "transposed", "expanded_last", "expanded_channel", "stepped",
           "broadcast_2d", "broadcast_2d_T", "broadcast_col"]
LAYOUT_DTYPES = ["float32", "int64", "float64", "uint8", "bool"]


@pytest.mark.parametrize("first", LAYOUTS)
def test_binary_output_strides_match_torch_under_promotion_and_broadcasting(first):
    for second, d1, d2 in itertools.product(LAYOUTS, LAYOUT_DTYPES, LAYOUT_DTYPES):
        for op in ("add", "lt"):
            t = getattr(torch, op)(_layout(torch, first, d1), _layout(torch, second, d2))
            k = getattr(kael, op)(_layout(kael, first, d1), _layout(kael, second, d2))
            assert (k.shape, k.stride()) == (tuple(t.shape), t.stride()), (op, first, d1, second, d2)
            assert k.tolist() == t.tolist()


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("op", ["sigmoid", "neg", "exp"])
def test_unary_output_strides_match_torch_under_promotion(kind, op):
    for dtype in ("float32", "int64", "uint8", "float64"):
        if op == "neg" and dtype == "uint8":
            continue
        t = getattr(torch, op)(_layout(torch, kind, dtype))
        k = getattr(kael, op)(_layout(kael, kind, dtype))
        assert (k.shape, k.stride(), k.dtype) == (tuple(t.shape), t.stride(), getattr(kael, str(t.dtype)[6:]))


def test_issue_example_transposed_int64_sigmoid():
    assert kael.arange(4).reshape(2, 2).T.sigmoid().stride() == torch.arange(4).reshape(2, 2).T.sigmoid().stride()
    assert kael.arange(4).reshape(2, 2).T.sigmoid().stride() == (1, 2)


# -- float32 sums: the documented accumulation rule (docs/decisions/sums.md) ------------------------
# kael adds float32 values in float64 (long contiguous runs first in 64 float32 lanes of at most
# 64 values each), so it is at least as accurate as PyTorch, whose float32 partial sums are
# float32. The two examples below are where the rule shows.

@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_float32_sum_accumulates_in_float64(layout):
    def make(values):
        t = kael.tensor(values)
        if layout == "strided":  # every other element of a twice-as-long tensor
            t = kael.tensor([v for x in values for v in (x, 0.0)])[::2]
            assert not t.is_contiguous()
        return t
    big = make([3e38, 3e38, -3e38])
    assert big.sum().item() == pytest.approx(3e38, rel=1e-7)  # PyTorch: inf (float32 partial sum)
    assert big.mean().item() == pytest.approx(1e38, rel=1e-7)
    assert make([1e8, 1.0, -1e8]).sum().item() == 1.0  # PyTorch: 0.0 (1e8 + 1 rounds to 1e8 in float32)
    assert torch.tensor([3e38, 3e38, -3e38]).sum().item() == math.inf
    assert torch.tensor([1e8, 1.0, -1e8]).sum().item() == 0.0


def test_float32_sum_overflows_only_when_the_result_does():
    assert kael.tensor([3e38, 3e38]).sum().item() == math.inf
    assert kael.tensor([3e38, 3e38]).sum().dtype is kael.float32


@pytest.mark.parametrize("n", [3, 100, 4095, 4096, 10_000, 100_003])
def test_float32_sum_is_at_least_as_accurate_as_torch(n):
    rng = random.Random(n)
    values = [rng.uniform(-1, 1) * 10 ** rng.uniform(-3, 6) for _ in range(n)]
    t = torch.tensor(values, dtype=torch.float32)
    exact = math.fsum(float(v) for v in t.tolist())
    k = kael.tensor(t.tolist())
    ulp = math.ulp(abs(exact)) * 2 ** 29  # one float32 ulp of the exact sum
    assert abs(k.sum().item() - exact) <= abs(t.sum().item() - exact) + ulp
    assert abs(k.sum().item() - exact) <= ulp  # and within one float32 ulp of the exact sum


@pytest.mark.parametrize("make_out", [lambda lib: lib.zeros(6)[::2], lambda lib: lib.zeros(0), lambda lib: lib.zeros(6)[1:4]])
def test_resized_out_is_laid_out_in_the_inputs_order_like_torch(make_out):
    results = []
    for lib in (torch, kael):
        out = make_out(lib)
        base = out._base if out._base is not None else out
        with pytest.warns(UserWarning) if out.numel() else _no_warning():
            lib.add(lib.arange(6.0).reshape(3, 2).T, 0, out=out)
        results.append((out.tolist(), tuple(out.stride()), base.tolist()))
    assert results[0] == results[1]


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
