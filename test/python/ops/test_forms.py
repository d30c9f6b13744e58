"""Forms of existing operators a PyTorch user reaches for, each compared against torch: the
in-place comparisons, square_, div_(rounding_mode=), round(decimals=), fill_(Tensor),
random_() without bounds, index_copy and index_fill (with their gradients), normal with tensor
arguments and norm(p='fro'); and the gradients of composite in-place ops (clamp_)."""
import numpy as np
import pytest
import torch

import kael
from helpers import check, to_kael, to_torch
from test_oracle_regressions import outcome, same


def raises_as_torch(call, kael_class=None):
    """torch raises; kael raises the same class (or kael_class, a documented difference)."""
    want = outcome(torch, call)
    assert want[0] == "raise", want
    got = outcome(kael, call)
    assert got == ("raise", kael_class or want[1]), (got, want)


# ---- in-place comparisons

@pytest.mark.parametrize("op", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"])
@pytest.mark.parametrize("case", ["float-number", "int-float-tensor", "bool-tensor", "broadcast-other",
                                  "uint8-neg-number", "float16-float64-0d"])
def test_in_place_comparisons(op, case):
    def call(lib):
        x, other = {
            "float-number": (lib.tensor([0.0, 2.0, 3.0, float("nan")]), 2),
            "int-float-tensor": (lib.tensor([1, 2, 3]), lib.tensor(2.5)),
            "bool-tensor": (lib.tensor([True, False, True]), lib.tensor([True, True, False])),
            "broadcast-other": (lib.tensor([[1.0, 2.0], [3.0, 4.0]]), lib.tensor([2.0, 3.0])),
            "uint8-neg-number": (lib.tensor([0, 5, 255], dtype=lib.uint8), -1),
            "float16-float64-0d": (lib.tensor([0.1, 0.2], dtype=lib.float16), lib.tensor(0.1, dtype=lib.float64)),
        }[case]
        r = getattr(x, op)(other)
        assert r is x
        return x
    same(call)


@pytest.mark.parametrize("op", ["eq_", "lt_"])
def test_in_place_comparison_shape_and_overlap_errors(op):
    # self must have the broadcast shape (RuntimeError in both)
    with pytest.raises(RuntimeError):
        getattr(torch.tensor([1.0, 2.0]), op)(torch.ones(2, 2))
    with pytest.raises(RuntimeError, match=op):
        getattr(kael.tensor([1.0, 2.0]), op)(kael.ones(2, 2))
    # other reading self shifted by one: refused before the first write
    for lib in (torch, kael):
        x = lib.arange(6.0)
        with pytest.raises(RuntimeError):
            getattr(x[1:], op)(x[:-1])
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


# ---- square_

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "float16", "bfloat16", "bool"])
def test_square_in_place(dtype):
    def call(lib):
        x = lib.tensor([0, 1, 3, 7], dtype=getattr(lib, dtype)) if dtype != "bool" else lib.tensor([True, False])
        r = x.square_()
        assert r is x
        return x
    same(call)


def test_square_in_place_gradient():
    for lib in (torch, kael):
        a = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        b = a * 1
        b.square_()
        b.sum().backward()
        assert a.grad.tolist() == [2.0, -4.0, 6.0]


# ---- div_ with rounding_mode

@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("case", ["int-number", "int-tensor", "float-tensor", "float-number", "int-float",
                                  "float32-float64-tensor", "broadcast", "int-zero", "float-zero", "float16"])
def test_div_in_place_with_rounding_mode(mode, case):
    def call(lib):
        x, other = {
            "int-number": (lib.tensor([5, -7, 9, -1]), 2),
            "int-tensor": (lib.tensor([5, -7, 9, -1]), lib.tensor([2, 2, -4, 3])),
            "float-tensor": (lib.tensor([5.5, -7.25, 9.0, -1.0]), lib.tensor([2.0, 2.0, -4.0, 3.0])),
            "float-number": (lib.tensor([5.5, -7.25, 9.0, -1.0]), -2.5),
            "int-float": (lib.tensor([5, -7, 9, -1]), 2.5),
            "float32-float64-tensor": (lib.tensor([1.0, -1.0]), lib.tensor([3.0, 3.0], dtype=lib.float64)),
            "broadcast": (lib.tensor([[5.0, -7.0], [1.0, 2.0]]), lib.tensor([2.0, -3.0])),
            "int-zero": (lib.tensor([5, -7]), 0),
            "float-zero": (lib.tensor([5.0, -7.0, 0.0]), 0.0),
            "float16": (lib.tensor([5.5, -7.25], dtype=lib.float16), 3),
        }[case]
        r = x.div_(other, rounding_mode=mode)
        assert r is x
        return x
    same(call)


def test_div_in_place_bad_mode_and_failed_cast_leave_self_alone():
    for lib in (torch, kael):
        x = lib.tensor([5, -7])
        with pytest.raises(RuntimeError):
            x.div_(2)  # true division of int64 gives float32: can't be cast back
        with pytest.raises(RuntimeError):
            x.div_(lib.tensor([2.0, 2.0]), rounding_mode="floor")
        with pytest.raises((RuntimeError, ValueError)):
            x.div_(2, rounding_mode="round")
        assert x.tolist() == [5, -7]


def test_div_in_place_with_rounding_mode_gradient():
    for lib in (torch, kael):
        a = lib.tensor([3.0, -5.0], requires_grad=True)
        b = lib.tensor([2.0, 2.0], requires_grad=True)
        c = a * 1
        c.div_(b, rounding_mode=None)
        c.sum().backward()
        assert a.grad.tolist() == [0.5, 0.5] and b.grad.tolist() == [-0.75, 1.25]


# ---- round(decimals=)

ROUND_VALUES = [1.25, 2.5, -3.35, 1234.5678, 0.125, -0.5, 1e-8, 65000.0, float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, -1, -2, -4, 10, 38, 39, 40, -40, 308, 309, -309])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_round_decimals(dtype, decimals):
    same(lambda lib: lib.round(lib.tensor(ROUND_VALUES, dtype=getattr(lib, dtype)), decimals=decimals))
    same(lambda lib: lib.tensor(ROUND_VALUES, dtype=getattr(lib, dtype)).round(decimals=decimals))

    def in_place(lib):
        x = lib.tensor(ROUND_VALUES, dtype=getattr(lib, dtype))
        assert x.round_(decimals=decimals) is x
        return x
    same(in_place)


def test_round_decimals_random_values_and_views():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((7, 9)) * 1000).astype(np.float32)
    for d in range(-3, 6):
        t = torch.from_numpy(x)[::2, 1::3]
        check(kael.round(to_kael(torch.from_numpy(x))[::2, 1::3], decimals=d), torch.round(t, decimals=d), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_round_decimals_refuses_integers(dtype):
    raises_as_torch(lambda lib: lib.round(lib.tensor([1, 2], dtype=getattr(lib, dtype)), decimals=1))
    raises_as_torch(lambda lib: lib.round(lib.tensor([1, 2], dtype=getattr(lib, dtype)), decimals=0))
    # without decimals, integers come back unchanged
    same(lambda lib: lib.round(lib.tensor([1, 2], dtype=getattr(lib, dtype))))


def test_round_decimals_gradient_is_zero():
    for lib in (torch, kael):
        a = lib.tensor([1.26, 2.5], requires_grad=True)
        lib.round(a, decimals=1).sum().backward()
        assert a.grad.tolist() == [0.0, 0.0]


# ---- fill_(Tensor)

@pytest.mark.parametrize("case", ["float-int0d", "int-float0d", "bool-float0d", "uint8-neg", "self-element",
                                  "view", "1-d value", "empty self"])
def test_fill_with_a_tensor(case):
    def call(lib):
        x = lib.arange(6.0).reshape(2, 3)
        value = {
            "float-int0d": lambda: lib.tensor(3),
            "int-float0d": lambda: lib.tensor(2.7),
            "bool-float0d": lambda: lib.tensor(0.5),
            "uint8-neg": lambda: lib.tensor(-1),
            "self-element": lambda: x[1, 2],
            "view": lambda: lib.tensor(9.0),
            "1-d value": lambda: lib.tensor([3.0, 4.0]),
            "empty self": lambda: lib.tensor(1.5),
        }[case]()
        if case == "int-float0d":
            x = lib.tensor([1, 2, 3])
        elif case == "bool-float0d":
            x = lib.tensor([True, False])
        elif case == "uint8-neg":
            x = lib.zeros(3, dtype=lib.uint8)
        elif case == "view":
            x[:, 1].fill_(value)
            return x
        elif case == "empty self":
            x = lib.zeros(0, 3)
        r = x.fill_(value)
        assert r is x
        return x
    same(call)


def test_fill_with_a_tensor_gradient():
    grads = []
    for lib in (torch, kael):
        v = lib.tensor(2.0, requires_grad=True)
        a = lib.zeros(3, requires_grad=True)
        b = a * 1
        b.fill_(v)
        (b * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        grads.append((v.grad.tolist(), a.grad.tolist()))
    assert grads[0] == grads[1] == (6.0, [0.0, 0.0, 0.0])


# ---- random_() without bounds

@pytest.mark.parametrize("dtype,top", [("float32", 2**24), ("float64", 2**53), ("float16", 2**11),
                                       ("bfloat16", 2**8), ("uint8", 255), ("int8", 127), ("int16", 2**15 - 1),
                                       ("int32", 2**31 - 1), ("int64", 2**63 - 1), ("bool", 1)])
def test_random_without_bounds(dtype, top):
    kael.manual_seed(3)
    n = 20000 if dtype not in ("bfloat16", "bool", "uint8", "int8") else 4000
    x = kael.empty(n, dtype=getattr(kael, dtype))
    assert x.random_() is x
    v = to_torch(x).double() if dtype != "bool" else to_torch(x).double()
    assert v.min().item() >= 0 and v.max().item() <= top
    assert (v == v.round()).all()
    # spread over the range: the mean is near top / 2 and both ends are reached for small ranges
    assert abs(v.mean().item() / (top / 2) - 1) < 0.05
    if top <= 2**11:
        assert v.min().item() == 0 and v.max().item() == top
    # torch's range is the same (its values differ: another generator)
    t = torch.empty(n, dtype=getattr(torch, dtype)).random_()
    assert t.double().min().item() >= 0 and t.double().max().item() <= top
    # the same seed gives the same values
    kael.manual_seed(3)
    y = kael.empty(n, dtype=getattr(kael, dtype)).random_()
    assert kael.equal(x, y)


def test_random_without_bounds_takes_a_generator():
    g1, g2 = kael.Generator(), kael.Generator()
    g1.manual_seed(11)
    g2.manual_seed(11)
    a = kael.empty(100).random_(generator=g1)
    b = kael.empty(100).random_(generator=g2)
    assert kael.equal(a, b)


# ---- index_copy

def call_form(lib, name, args, in_place):
    """lib.<name>(x, *rest), which leaves x alone, or x.<name>_(*rest), which returns x."""
    x, rest = args[0], args[1:]
    if in_place:
        assert getattr(x, name + "_")(*rest) is x
        return x
    before = x.tolist()
    r = getattr(lib, name)(x, *rest)
    assert x.tolist() == before
    return r


IC_CASES = {
    "rows": lambda lib: (lib.zeros(4, 3), 0, lib.tensor([2, 0]), lib.arange(6.0).reshape(2, 3)),
    "cols": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([3, 1, 0]), lib.arange(9.0).reshape(3, 3)),
    "neg dim": lambda lib: (lib.zeros(2, 3, 4), -2, lib.tensor([1]), lib.ones(2, 1, 4)),
    "0-d index": lambda lib: (lib.zeros(3, 4), 1, lib.tensor(2), lib.ones(3, 1)),
    "duplicates": lambda lib: (lib.zeros(3), 0, lib.tensor([1, 1]), lib.tensor([5.0, 6.0])),
    "0-d self": lambda lib: (lib.zeros(()), 0, lib.tensor(0), lib.tensor(5.0)),
    "empty index": lambda lib: (lib.zeros(3, 2), 0, lib.tensor([], dtype=lib.int64), lib.zeros(0, 2)),
    "int": lambda lib: (lib.zeros(4, dtype=lib.int32), 0, lib.tensor([3, 1]), lib.tensor([7, 8], dtype=lib.int32)),
    "bool": lambda lib: (lib.zeros(3, dtype=lib.bool), 0, lib.tensor([2]), lib.tensor([True])),
    "non-contiguous": lambda lib: (lib.zeros(4, 6)[:, ::2], 0, lib.tensor([3, 0]), lib.arange(12.0).reshape(3, 4).t()[:2, :3]),
    # errors
    "negative index": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([-1]), lib.ones(1, 4)),
    "index too large": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([3]), lib.ones(1, 4)),
    "int32 index": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([1], dtype=lib.int32), lib.ones(1, 4)),
    "float index": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([1.0]), lib.ones(1, 4)),
    "2-d index": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([[1]]), lib.ones(1, 4)),
    "dtype": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([1]), lib.ones(1, 4, dtype=lib.float64)),
    "slice shape": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([1]), lib.ones(1, 5)),
    "count": lambda lib: (lib.zeros(3, 4), 0, lib.tensor([1, 2]), lib.ones(3, 4)),
    "dims": lambda lib: (lib.zeros(3, 4), 1, lib.tensor(2), lib.ones(3)),
    "dim range": lambda lib: (lib.zeros(3, 4), 2, lib.tensor([1]), lib.ones(3, 1)),
}


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("case", list(IC_CASES))
def test_index_copy(case, in_place):
    def call(lib):
        return call_form(lib, "index_copy", IC_CASES[case](lib), in_place)
    same(call)
    same(lambda lib: IC_CASES["rows"](lib)[0].index_copy(*IC_CASES["rows"](lib)[1:]))


def test_index_copy_overlap_is_refused_before_writing():
    for lib in (torch, kael):
        x = lib.arange(8.0).reshape(4, 2)
        with pytest.raises(RuntimeError):
            x.index_copy_(0, lib.tensor([1, 2]), x[:2])
        assert x.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]


def grads_of(lib, fn, *arrays):
    leaves = [lib.tensor(a, requires_grad=True) if a.dtype.kind == "f" else lib.tensor(a) for a in arrays]
    out = fn(lib, *leaves)
    g = lib.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape)).astype(np.float64))
    out.backward(g)
    return [x.grad.tolist() for x in leaves if x.requires_grad]


@pytest.mark.parametrize("in_place", [False, True])
def test_index_copy_gradients(in_place):
    x = np.arange(12.0).reshape(4, 3)
    s = np.ones((2, 3)) * 5
    i = np.array([3, 1])

    def fn(lib, x, i, s):
        return (x * 1).index_copy_(0, i, s) if in_place else x.index_copy(0, i, s)
    assert grads_of(kael, fn, x, i, s) == grads_of(torch, fn, x, i, s)


# ---- index_fill

IF_CASES = {
    "cols": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([2, 0]), 5),
    "negative indices": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([-1, 0]), 5.5),
    "0-d index": lambda lib: (lib.zeros(3, 4), 0, lib.tensor(1), -2),
    "duplicates": lambda lib: (lib.zeros(5), 0, lib.tensor([1, 1, -4]), 3),
    "0-d self": lambda lib: (lib.zeros(()), 0, lib.tensor([0]), 3),
    "empty index": lambda lib: (lib.zeros(3), 0, lib.tensor([], dtype=lib.int64), 3),
    "neg dim": lambda lib: (lib.zeros(2, 3, 4), -1, lib.tensor([3]), 1),
    "int float value": lambda lib: (lib.zeros(3, dtype=lib.int64), 0, lib.tensor([1]), 2.7),
    "bool": lambda lib: (lib.zeros(3, dtype=lib.bool), 0, lib.tensor([1]), 2),
    "uint8 -1": lambda lib: (lib.zeros(3, dtype=lib.uint8), 0, lib.tensor([1]), -1),
    "uint8 300": lambda lib: (lib.zeros(3, dtype=lib.uint8), 0, lib.tensor([1]), 300),
    "float16 big": lambda lib: (lib.zeros(3, dtype=lib.float16), 0, lib.tensor([1]), 1e6),
    "tensor value": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([1]), lib.tensor(7.0)),
    "int tensor value": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([1]), lib.tensor(7)),
    "non-contiguous": lambda lib: (lib.zeros(4, 6).t()[::2], 1, lib.tensor([3, 0]), 4),
    # errors
    "index too large": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([4]), 5),
    "index too small": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([-5]), 5),
    "int32 index": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([1], dtype=lib.int32), 5),
    "2-d index": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([[1]]), 5),
    "1-d value": lambda lib: (lib.zeros(3, 4), 1, lib.tensor([1]), lib.tensor([7.0])),
    "dim range": lambda lib: (lib.zeros(3, 4), 3, lib.tensor([1]), 5),
}


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("case", list(IF_CASES))
def test_index_fill(case, in_place):
    same(lambda lib: call_form(lib, "index_fill", IF_CASES[case](lib), in_place))


@pytest.mark.parametrize("in_place", [False, True])
def test_index_fill_gradients(in_place):
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([1, 3, -1])

    def fn(lib, x, i):
        return (x * 1).index_fill_(1, i, 2.0) if in_place else x.index_fill(1, i, 2.0)
    assert grads_of(kael, fn, x, i) == grads_of(torch, fn, x, i)

    def fn_t(lib, x, i, v):
        return (x * 1).index_fill_(1, i, v) if in_place else x.index_fill(1, i, v)
    v = np.array(3.0)
    assert grads_of(kael, fn_t, x, np.array([1, 3]), v) == grads_of(torch, fn_t, x, np.array([1, 3]), v)


# ---- normal with tensor arguments

@pytest.mark.parametrize("case", ["tensor-tensor", "float-tensor", "tensor-float", "broadcast", "float64",
                                  "float16 mean", "int mean", "negative std", "0-d", "empty"])
def test_normal_with_tensors_shapes_dtypes_errors(case):
    def call(lib):
        args = {
            "tensor-tensor": lambda: (lib.zeros(2, 3), lib.ones(2, 3)),
            "float-tensor": lambda: (1.0, lib.ones(4)),
            "tensor-float": lambda: (lib.zeros(4), 2.0),
            "broadcast": lambda: (lib.zeros(2, 1), lib.ones(3)),
            "float64": lambda: (lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)),
            "float16 mean": lambda: (lib.zeros(3, dtype=lib.float16), 1.0),
            "int mean": lambda: (lib.zeros(3, dtype=lib.int64), 1.0),
            "negative std": lambda: (lib.zeros(3), lib.tensor([1.0, -1.0, 1.0])),
            "0-d": lambda: (lib.tensor(0.0), lib.tensor(1.0)),
            "empty": lambda: (lib.zeros(0), 1.0),
        }[case]()
        r = lib.normal(*args)
        return r.shape, r.dtype
    want, got = outcome_meta(torch, call), outcome_meta(kael, call)
    assert got == want


def outcome_meta(lib, call):
    try:
        shape, dtype = call(lib)
    except Exception as e:  # noqa: BLE001 - the class is compared
        return ("raise", "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__)
    return (list(shape), str(dtype).split(".")[1])


def test_normal_with_tensors_statistics_and_seed():
    mean = kael.tensor([[-5.0], [0.0], [10.0]])
    std = kael.tensor([0.5, 1.0, 3.0, 0.0])
    kael.manual_seed(1)
    big_mean = mean.expand(3, 4).contiguous().reshape(3, 4, 1).expand(3, 4, 20000)
    big_std = std.reshape(1, 4, 1).expand(3, 4, 20000)
    x = to_torch(kael.normal(big_mean, big_std)).double()
    assert torch.allclose(x.mean(-1), to_torch(mean).double().expand(3, 4), atol=0.06)
    assert torch.allclose(x.std(-1), to_torch(std).double().expand(3, 4), rtol=0.03, atol=1e-12)
    kael.manual_seed(1)
    y = kael.normal(big_mean, big_std)
    assert torch.equal(to_torch(y).double(), x)
    g = kael.Generator()
    g.manual_seed(4)
    a = kael.normal(kael.zeros(5), 1.0, generator=g)
    g.manual_seed(4)
    assert kael.equal(a, kael.normal(kael.zeros(5), 1.0, generator=g))


def test_normal_with_tensors_gradients():
    # torch: d/dmean = grad, d/dstd = grad * (x - mean) / std
    kael.manual_seed(2)
    m = kael.tensor([1.0, -2.0, 3.0], requires_grad=True)
    s = kael.tensor([0.5, 2.0, 1.0], requires_grad=True)
    x = kael.normal(m, s)
    x.sum().backward()
    assert m.grad.tolist() == [1.0, 1.0, 1.0]
    want = ((to_torch(x.detach()) - to_torch(m.detach())) / to_torch(s.detach())).tolist()
    np.testing.assert_allclose(s.grad.tolist(), want, rtol=1e-6)


# ---- norm(p='fro')

@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": (0, 1)}, {"dim": 0, "keepdim": True}, {"dim": -1}])
def test_norm_fro(kw):
    x = np.arange(-6.0, 6.0).reshape(3, 4)
    for dt in (np.float32, np.float64):
        check(kael.norm(kael.tensor(x.astype(dt)), p="fro", **kw), torch.norm(torch.tensor(x.astype(dt)), p="fro", **kw))
        check(kael.tensor(x.astype(dt)).norm("fro", **kw), torch.tensor(x.astype(dt)).norm("fro", **kw))


def test_norm_bad_string():
    for lib in (torch, kael):
        with pytest.raises(RuntimeError):
            lib.norm(lib.ones(2, 2), p="max")


# ---- gradients through composite in-place ops

@pytest.mark.parametrize("call", [
    lambda lib, b, c: b.clamp_(0.0, 1.0),
    lambda lib, b, c: b.clamp_(min=0.0),
    lambda lib, b, c: b.clamp_(c, lib.tensor(1.5)),
    lambda lib, b, c: b.clamp_(max=c),
    lambda lib, b, c: b.div_(c, rounding_mode="trunc"),
    lambda lib, b, c: b.div_(2.0, rounding_mode="floor"),
    lambda lib, b, c: b.round_(decimals=1),
], ids=["clamp_", "clamp_-min", "clamp_-tensors", "clamp_-max-tensor", "div_-trunc", "div_-floor", "round_"])
def test_composite_in_place_ops_keep_gradients(call):
    got = []
    for lib in (torch, kael):
        a = lib.tensor([-1.0, 0.25, 0.75, 2.0], requires_grad=True)
        c = lib.tensor([0.5, 0.5, 0.5, 0.5], requires_grad=True)
        b = a * 2
        r = call(lib, b, c)
        assert r is b
        (b * lib.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
        got.append((b.tolist(), a.grad.tolist(), None if c.grad is None else c.grad.tolist()))
    assert got[1] == got[0]


@pytest.mark.parametrize("call", [
    lambda lib, a: a * 0.01, lambda lib, a: 0.01 * a, lambda lib, a: lib.mul(a, 0.1), lambda lib, a: a.add(a, alpha=0.3),
    lambda lib, a: lib.pow(a, 1.1), lambda lib, a: lib.fmod(a, 0.3) * 0.2, lambda lib, a: a.lerp(a * 2, 0.3),
], ids=["mul", "rmul", "mul-fn", "add-alpha", "pow", "fmod", "lerp"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_gradients_with_python_numbers_keep_their_precision(call, dtype):
    """A Python float saved for the backward pass keeps its double value (torch's wrapped numbers
    are float64): the float64 gradient of x * 0.01 is 0.01, not 0.01 rounded to float32."""
    grads = []
    for lib in (torch, kael):
        a = lib.tensor([0.5, 1.5, 2.25], dtype=getattr(lib, dtype), requires_grad=True)
        call(lib, a).sum().backward()
        assert a.grad.dtype == getattr(lib, dtype)
        grads.append(a.grad.tolist())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-15 if dtype == "float64" else 1e-6 if dtype == "float32"
                               else 1e-3)
