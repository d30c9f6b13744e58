"""scatter with reduce='add'|'multiply', scatter_reduce ('sum', 'prod', 'mean', 'amax', 'amin',
include_self), nonzero(as_tuple=True), where(condition) and Tensor.unique -- against PyTorch over
dtypes, shapes, duplicate indices, views, 0-d/empty inputs and errors."""
import math

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, HALF_NAMES, LAYOUTS, check, make_pair, rand_torch, to_kael
from test_index_ops import SCATTER_CASES, rand_index

# torch warns that scatter's reduce= with a src tensor is deprecated (kael does not)
pytestmark = pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter:UserWarning")

REDUCES = ["sum", "prod", "mean", "amax", "amin"]
NAN = math.nan


def oracle(dtype, fn):
    """fn(lib, x, s) on both sides; torch computes float16/bfloat16 in float32 and rounds once, as
    kael does (Note [Scatter reductions] in scatter_reduce.cpp)."""
    if dtype not in HALF_NAMES:
        return fn

    def via_float32(lib, x, s):
        if lib is torch:
            return fn(lib, x.float(), s.float()).to(x.dtype)
        return fn(lib, x, s)
    return via_float32


def run(fn, x, s, dtype):
    """fn on torch tensors and on their kael copies: equal results, or torch's exception class
    (NotImplementedError: RuntimeError) from both."""
    try:
        expect = oracle(dtype, fn)(torch, x.clone(), s)
    except NotImplementedError:
        with pytest.raises(RuntimeError):
            fn(kael, to_kael(x), to_kael(s))
        return
    check(fn(kael, to_kael(x), to_kael(s)), expect)


def torch_accepts(reduce, dtype):
    return not (reduce == "mean" and dtype == "bool")


# ---------------------------------------------------------------- scatter_reduce

@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", SCATTER_CASES, ids=str)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, dtype, shape, ishape, dim, include_self):
    n = shape[dim] if shape else 1
    index = rand_index(ishape, n)  # duplicate positions on purpose: they reduce together
    x = rand_torch(shape, dtype, "small" if reduce == "prod" else "any")
    s = rand_torch(ishape, dtype, "small" if reduce == "prod" else "any")
    ki = to_kael(index)
    run(lambda lib, a, b: lib.scatter_reduce(a, dim, index if lib is torch else ki, b, reduce,
                                             include_self=include_self), x, s, dtype)
    run(lambda lib, a, b: a.scatter_reduce(dim, index if lib is torch else ki, b, reduce=reduce,
                                           include_self=include_self), x, s, dtype)
    if not torch_accepts(reduce, dtype):
        return
    # in place: returns self, writes self
    kx = to_kael(x)
    r = kx.scatter_reduce_(dim, ki, to_kael(s), reduce, include_self=include_self)
    assert r is kx
    check(kx, oracle(dtype, lambda lib, a, b: a.scatter_reduce_(dim, index, b, reduce, include_self=include_self))(
        torch, x.clone(), s))


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_scatter_reduce_integers_wrap_and_floor(reduce, dtype):
    # many duplicates: int8 products wrap, integer means divide with floor (negative sums round down)
    index = torch.randint(0, 3, (4, 40))
    x = rand_torch((3, 40), dtype)
    s = rand_torch((4, 40), dtype)
    for include_self in [True, False]:
        run(lambda lib, a, b: lib.scatter_reduce(a, 0, index if lib is torch else to_kael(index), b, reduce,
                                                 include_self=include_self), x, s, dtype)


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "mean", "prod"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_scatter_reduce_nan_and_inf(reduce, dtype):
    x = torch.tensor([[1.0, NAN, -2.0, math.inf], [0.5, 3.0, NAN, -1.0]], dtype=getattr(torch, dtype))
    s = torch.tensor([[NAN, 2.0, 1.0, -math.inf], [4.0, -math.inf, 5.0, NAN]], dtype=getattr(torch, dtype))
    index = torch.tensor([[0, 1, 0, 1], [0, 0, 1, 1]])
    for include_self in [True, False]:
        run(lambda lib, a, b: lib.scatter_reduce(a, 0, index if lib is torch else to_kael(index), b, reduce,
                                                 include_self=include_self), x, s, dtype)


@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay not in ("contig", "expand")])
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_views(layout, reduce):
    # self a non-contiguous view (written through to its base), src non-contiguous too
    index = rand_index((2, 3, 3), 3)
    p = make_pair((3, 3, 3), "float64", layout)
    s = make_pair((3, 3, 3), "float64", layout)
    p.t.scatter_reduce_(1, index, s.t, reduce, include_self=False)
    r = p.k.scatter_reduce_(1, to_kael(index), s.k, reduce, include_self=False)
    assert r is p.k
    check(p.kbase, p.tbase)
    check(kael.scatter_reduce(s.k, 0, to_kael(index), p.k, reduce), torch.scatter_reduce(s.t, 0, index, p.t, reduce))


def test_scatter_reduce_is_deterministic_with_threads():
    index = torch.randint(0, 10, (100000,))
    src = torch.rand(100000) * 1000
    before = kael.get_num_threads()
    out = []
    try:
        for n in [1, 2, 2]:
            kael.set_num_threads(n)
            out.append(kael.scatter_reduce(kael.zeros(10), 0, to_kael(index), to_kael(src), "mean").tolist())
    finally:
        kael.set_num_threads(before)
    assert out[0] == out[1] == out[2]
    check(kael.tensor(out[0]), torch.zeros(10).scatter_reduce(0, index, src, "mean"), rtol=1e-5)


def test_scatter_reduce_errors_leave_self_untouched():
    x = kael.arange(12.0).reshape(3, 4)
    before = x.tolist()
    t = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin, got foo"):
        t.scatter_reduce_(0, torch.tensor([[0]]), torch.ones(1, 1), "foo")
    with pytest.raises(RuntimeError, match="scatter_reduce: reduce argument must be either sum, prod, mean, amax "
                                           "or amin, got foo"):
        x.scatter_reduce_(0, kael.tensor([[0]]), kael.ones(1, 1), "foo")
    with pytest.raises(RuntimeError, match=r"scatter_reduce_: index 7 is out of bounds for dimension 1 with size 4"):
        x.scatter_reduce_(1, kael.tensor([[0, 1, 7]]), kael.ones(1, 3), "sum")
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_reduce_(0, kael.tensor([[0]]), kael.ones(1, 1, dtype=kael.float64), "amax")
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
        x.scatter_reduce_(0, kael.tensor([[0]], dtype=kael.int16), kael.ones(1, 1), "prod")
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.scatter_reduce_(0, kael.tensor([0]), kael.ones(1, 1), "mean")
    with pytest.raises(IndexError):
        x.scatter_reduce_(2, kael.tensor([[0]]), kael.ones(1, 1), "sum")
    assert x.tolist() == before
    b = kael.ones(3, dtype=kael.bool)
    with pytest.raises(RuntimeError, match="scatter_reduce: reduce='mean' is not implemented for dtype bool"):
        kael.scatter_reduce(b, 0, kael.tensor([0]), b[:1], "mean")
    with pytest.raises(NotImplementedError):
        torch.scatter_reduce(torch.ones(3, dtype=torch.bool), 0, torch.tensor([0]), torch.ones(1, dtype=torch.bool),
                             "mean")
    with pytest.raises(TypeError):
        kael.scatter_reduce(x, 0, kael.tensor([[0]]), kael.ones(1, 1))  # reduce is required, as in torch


# ---------------------------------------------------------------- scatter(..., reduce=)

@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", SCATTER_CASES, ids=str)
def test_scatter_with_reduce(reduce, dtype, shape, ishape, dim):
    n = shape[dim] if shape else 1
    index = rand_index(ishape, n)
    ki = to_kael(index)
    x = rand_torch(shape, dtype, "small")
    s = rand_torch(ishape, dtype, "small")
    run(lambda lib, a, b: lib.scatter(a, dim, index if lib is torch else ki, b, reduce=reduce), x, s, dtype)
    run(lambda lib, a, b: a.scatter(dim, index if lib is torch else ki, b, reduce=reduce), x, s, dtype)
    kx = to_kael(x)
    assert kx.scatter_(dim, ki, to_kael(s), reduce=reduce) is kx
    check(kx, oracle(dtype, lambda lib, a, b: a.scatter_(dim, index, b, reduce=reduce))(torch, x.clone(), s))
    value = True if dtype == "bool" else 2
    run(lambda lib, a, _: lib.scatter(a, dim, index if lib is torch else ki, value, reduce=reduce), x, s, dtype)
    kx = to_kael(x)
    assert kx.scatter_(dim, ki, value, reduce=reduce) is kx
    check(kx, oracle(dtype, lambda lib, a, _: a.scatter_(dim, index, value, reduce=reduce))(torch, x.clone(), s))


def test_scatter_with_reduce_errors():
    t = torch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        t.scatter(0, torch.tensor([[0]]), torch.ones(1, 1), reduce="mean")
    x = kael.zeros(3, 4)
    with pytest.raises(RuntimeError, match="scatter: reduce argument must be either add or multiply, got 'mean'"):
        x.scatter(0, kael.tensor([[0]]), kael.ones(1, 1), reduce="mean")
    with pytest.raises(RuntimeError, match="scatter_: reduce argument must be either add or multiply"):
        x.scatter_(0, kael.tensor([[0]]), 1.0, reduce="sum")
    with pytest.raises(RuntimeError, match="scatter_: index 3 is out of bounds"):
        x.scatter_(0, kael.tensor([[3]]), 1.0, reduce="add")
    assert x.tolist() == [[0.0] * 4] * 3


# ---------------------------------------------------------------- nonzero(as_tuple=True), where(condition)

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4), (0,), (3, 0), (2, 1, 3, 2)], ids=str)
def test_nonzero_as_tuple_and_where_of_a_condition(dtype, shape):
    p = make_pair(shape, dtype, domain="small")
    expect = torch.nonzero(p.t, as_tuple=True)
    for got in [kael.nonzero(p.k, as_tuple=True), p.k.nonzero(as_tuple=True), kael.where(p.k)]:
        assert type(got) is tuple and len(got) == len(expect)
        for a, b in zip(got, expect):
            check(a, b)
    check(kael.nonzero(p.k), torch.nonzero(p.t))
    check(kael.nonzero(p.k, as_tuple=False), torch.nonzero(p.t, as_tuple=False))
    check(p.k.nonzero(), p.t.nonzero())


@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
def test_nonzero_as_tuple_noncontiguous(layout):
    p = make_pair((4, 6), "float32", layout, domain="small")
    for a, b in zip(kael.nonzero(p.k, as_tuple=True), torch.nonzero(p.t, as_tuple=True)):
        check(a, b)
    # the tuple indexes the input back (x[nonzero(x, as_tuple=True)] is every nonzero element)
    rows, cols = kael.where(p.k)
    assert [p.k[r, c].item() for r, c in zip(rows.tolist(), cols.tolist())] == p.t[torch.where(p.t)].tolist()


def test_where_keeps_its_three_argument_forms():
    c = torch.tensor([[True, False], [False, True]])
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    check(kael.where(to_kael(c), to_kael(a), to_kael(b)), torch.where(c, a, b))
    check(kael.where(to_kael(c), to_kael(a), 0.0), torch.where(c, a, 0.0))
    check(kael.where(to_kael(c), input=to_kael(a), other=to_kael(b)), torch.where(c, input=a, other=b))
    out = kael.empty(2, 2)
    assert kael.where(to_kael(c), to_kael(a), to_kael(b), out=out) is out
    check(out, torch.where(c, a, b))
    with pytest.raises(TypeError):
        torch.where(c, a)
    with pytest.raises(TypeError):
        kael.where(to_kael(c), to_kael(a))
    with pytest.raises(TypeError):
        torch.nonzero(c, True)
    with pytest.raises(TypeError):
        kael.nonzero(to_kael(c), True)  # as_tuple is keyword-only, as in torch


# ---------------------------------------------------------------- Tensor.unique

@pytest.mark.parametrize("dtype", ["int64", "float32", "bool", "uint8", "float16"])
def test_unique_method(dtype):
    p = make_pair((4, 5), dtype, domain="small")
    check(p.k.unique(), p.t.unique())
    for kw in [dict(return_inverse=True), dict(return_counts=True), dict(return_inverse=True, return_counts=True),
               dict(sorted=True, dim=0), dict(dim=1, return_counts=True)]:
        got, expect = p.k.unique(**kw), p.t.unique(**kw)
        if not isinstance(expect, tuple):  # no return_* flag: the values alone
            check(got, expect)
            continue
        assert type(got) is tuple and len(got) == len(expect)
        for a, b in zip(got, expect):
            check(a, b)
    with pytest.raises(IndexError):
        p.t.unique(dim=2)
    with pytest.raises(IndexError):
        p.k.unique(dim=2)
