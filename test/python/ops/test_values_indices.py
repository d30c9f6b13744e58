"""Ops that return (values, indices) along one dim: max/min with a dim (and their overloads with
another tensor), sort and topk -- against PyTorch over shapes, dims, every dtype, layouts, ties,
NaN, empty and 0-d inputs, the named tuples they return, and errors."""
import math
import pickle

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, FLOAT_NAMES, LAYOUTS, check, make_pair, rand_torch, to_kael, to_torch
from test_reductions_more import both, run_both
from test_sort_scan import LINE_CASES, check_sort_indices

INF = math.inf
NAN = math.nan

# (shape, dim): max/min take one int dim
DIM_CASES = [
    ((), 0), ((), -1),
    ((1,), 0), ((7,), 0), ((7,), -1),
    ((3, 5), 0), ((3, 5), 1), ((3, 5), -2),
    ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 1, 3, 2), 2), ((4, 1), 1),
    ((0, 3), 1), ((3, 0), 0), ((2, 0, 3), 2),
]


# ------------------------------------------------------------------------------------- max/min with a dim

@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(name, dtype, shape, dim, keepdim):
    # "small": integers 0..3 and floats in [-2, 2): many ties, where the first index must win
    both(lambda lib, x: getattr(lib, name)(x, dim, keepdim), shape, dtype, domain="small")
    both(lambda lib, x: getattr(x, name)(dim=dim, keepdim=keepdim), shape, dtype, domain="small")
    both(lambda lib, x: getattr(lib, name)(x, dim=dim), shape, dtype, domain="small")


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "float32", "bfloat16"])
def test_max_min_dim_ties_pick_the_first(name, dtype):
    t = torch.randint(0, 3, (6, 40)).to(getattr(torch, dtype))
    k = to_kael(t)
    for dim in [0, 1, -1]:
        kv, ki = getattr(kael, name)(k, dim)
        tv, ti = getattr(torch, name)(t, dim)
        check(kv, tv)
        check(ki, ti)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_max_min_dim_nan_propagates_with_its_first_index(name, dtype):
    t = rand_torch((5, 12), dtype)
    t[1, 4] = NAN
    t[1, 9] = NAN
    t[3, 0] = INF
    t[4, 11] = -INF
    t[0, 0] = NAN
    k = to_kael(t)
    for dim in [0, 1]:
        for keepdim in [False, True]:
            run_both(lambda lib, x: getattr(lib, name)(x, dim, keepdim), t, k)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_max_min_dim_noncontiguous(name, layout, dim):
    both(lambda lib, x: getattr(lib, name)(x, dim), (4, 6), "float32", layout)
    both(lambda lib, x: getattr(lib, name)(x, dim, True), (3, 4, 5), "int32", layout, domain="small")


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("shape,dim", [((3, 300, 150), 2), ((50, 700, 3), 1), ((200003,), 0)], ids=str)
def test_max_min_dim_above_the_threading_grain(name, shape, dim):
    t = rand_torch(shape, "float64", "small")
    run_both(lambda lib, x: getattr(lib, name)(x, dim), t, to_kael(t))
    t = rand_torch(shape, "float32")
    run_both(lambda lib, x: getattr(lib, name)(x, dim), t, to_kael(t))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim_returns_a_named_tuple(name):
    t = torch.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 2.0]])
    r = getattr(kael, name)(to_kael(t), 1)
    tr = getattr(torch, name)(t, 1)
    assert type(r).__name__ == name and type(r).__module__ == "kael.return_types"
    assert type(r) is getattr(kael.return_types, name)
    assert isinstance(r, tuple) and len(r) == 2
    check(r.values, tr.values)
    check(r.indices, tr.indices)
    values, indices = r
    check(values, tr.values)
    check(r[1], tr.indices)
    assert repr(r).startswith(f"kael.return_types.{name}(\nvalues=")
    # the type pickles by its name (the tensors themselves are not picklable yet)
    assert pickle.loads(pickle.dumps(type(r))) is type(r)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim_errors(name):
    t = torch.randn(2, 3)
    for dim in [2, -3]:
        with pytest.raises(IndexError) as te:
            getattr(torch, name)(t, dim)
        with pytest.raises(IndexError) as ke:
            getattr(kael, name)(to_kael(t), dim)
        assert f"{name}: " in str(ke.value)
        assert str(te.value).split("Dimension ", 1)[1] in str(ke.value)
    # an empty reduced dim has no extreme
    for shape, dim in [((0, 3), 0), ((3, 0), -1), ((0,), 0)]:
        e = torch.empty(shape)
        with pytest.raises(IndexError, match="Expected reduction dim . to have non-zero size"):
            getattr(torch, name)(e, dim)
        with pytest.raises(IndexError, match="Expected reduction dim . to have non-zero size") as ke:
            getattr(kael, name)(to_kael(e), dim)
        assert f"{name}: " in str(ke.value)
    # a float dim or a keyword of another overload binds no overload
    for call in [lambda lib, x: getattr(lib, name)(x, 1.5), lambda lib, x: getattr(lib, name)(x, 1, other=x)]:
        with pytest.raises(TypeError):
            call(torch, t)
        with pytest.raises(TypeError):
            call(kael, to_kael(t))


# ------------------------------------------------------------------------------------- max/min with another tensor

@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_max_min_other(name, dtype):
    for sa, sb in [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (2, 3)), ((0, 3), (3,))]:
        a, b = make_pair(sa, dtype), make_pair(sb, dtype)
        check(getattr(kael, name)(a.k, b.k), getattr(torch, name)(a.t, b.t))
        check(getattr(a.k, name)(b.k), getattr(a.t, name)(b.t))
        check(getattr(kael, name)(a.k, other=b.k), getattr(torch, name)(a.t, other=b.t))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_other_promotes_and_propagates_nan(name):
    a = torch.tensor([1, 2, 3], dtype=torch.uint8)
    b = torch.tensor([1.5, NAN, 0.0])
    check(getattr(kael, name)(to_kael(a), to_kael(b)), getattr(torch, name)(a, b))
    # a 0-d integer tensor is a tensor, not a dim (torch's parser prefers the Tensor overload)
    x = torch.tensor([[1.0, 5.0], [-3.0, 2.0]])
    one = torch.tensor(1)
    check(getattr(kael, name)(to_kael(x), to_kael(one)), getattr(torch, name)(x, one))
    p = make_pair((4, 6), "float32", "T")
    q = make_pair((4, 6), "float32", "step")
    check(getattr(kael, name)(p.k, q.k), getattr(torch, name)(p.t, q.t))
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(2, 3), torch.ones(4))
    with pytest.raises(RuntimeError, match=f"{name}imum: shapes"):  # torch's class
        getattr(kael, name)(kael.ones(2, 3), kael.ones(4))


# ------------------------------------------------------------------------------------- sort

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LINE_CASES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dtype, shape, dim, descending):
    # many ties ("small"): kael's order is stable, so its indices equal torch's stable ones
    p = make_pair(shape, dtype, domain="small")
    tv, ti = torch.sort(p.t, dim=dim, descending=descending, stable=True)
    for r in [kael.sort(p.k, dim, descending), kael.sort(p.k, dim=dim, descending=descending, stable=True),
              p.k.sort(dim, descending), p.k.sort(dim=dim, descending=descending, stable=False)]:
        assert type(r) is kael.return_types.sort
        check(r.values, tv)
        check(r.indices, ti)
    # torch's unstable order of ties is its kernel's: the values agree and kael's indices sort x
    tv2, _ = torch.sort(p.t, dim=dim, descending=descending)
    kv, ki = kael.sort(p.k, dim, descending)
    check(kv, tv2)
    check_sort_indices(ki, p.t, tv2, dim)


def test_sort_default_dim_is_the_last():
    p = make_pair((3, 4, 5), "float32")
    kv, ki = kael.sort(p.k)
    tv, ti = torch.sort(p.t)
    check(kv, tv)
    check(ki, ti)
    check(p.k.sort(descending=True).values, p.t.sort(descending=True).values)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_inf_and_signed_zeros(dtype, descending):
    t = torch.tensor([[1.0, NAN, -INF, 0.0, -0.0, INF, NAN, -2.0, 0.0, -0.0]], dtype=getattr(torch, dtype))
    for x, dim in [(t, 1), (t.T, 0)]:
        kv, ki = kael.sort(to_kael(x), dim, descending)
        tv, ti = torch.sort(x, dim=dim, descending=descending, stable=True)
        check(kv, tv)
        check(ki, ti)
        # -0.0 and 0.0 tie: their signs stay where the stable order puts them
        assert [math.copysign(1, v) for v in to_torch(kv).flatten().tolist()] == \
               [math.copysign(1, v) for v in tv.flatten().tolist()]


@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_noncontiguous(layout, dim):
    for dtype, domain in [("int64", "small"), ("float32", "any"), ("float16", "small")]:
        p = make_pair((5, 7), dtype, layout, domain=domain)
        for descending in [False, True]:
            kv, ki = kael.sort(p.k, dim, descending)
            tv, ti = torch.sort(p.t, dim=dim, descending=descending, stable=True)
            check(kv, tv)
            check(ki, ti)


def test_sort_large_and_errors():
    t = torch.randint(0, 50, (40, 3000))
    for dim, descending in [(1, False), (0, True)]:
        kv, ki = kael.sort(to_kael(t), dim, descending)
        tv, ti = torch.sort(t, dim=dim, descending=descending, stable=True)
        check(kv, tv)
        check(ki, ti)
    for dim in [2, -3]:
        with pytest.raises(IndexError) as te:
            torch.sort(t, dim)
        with pytest.raises(IndexError) as ke:
            kael.sort(to_kael(t), dim)
        assert "sort: " in str(ke.value)
        assert str(te.value).split("Dimension ", 1)[1] in str(ke.value)


# ------------------------------------------------------------------------------------- topk

def topk_cases():
    for shape, dim in LINE_CASES:
        n = 1 if shape == () else shape[dim]
        for k in sorted({0, min(1, n), n // 2, n}):
            yield shape, dim, k


TOPK_CASES = list(topk_cases())


@pytest.mark.parametrize("dtype", [d for d in DTYPE_NAMES if d != "bool"])
@pytest.mark.parametrize("shape,dim,k", TOPK_CASES, ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, shape, dim, k, largest):
    # distinct values (a permutation) so that the selected positions are unique
    n = math.prod(shape)
    base = torch.randperm(n).reshape(shape) - n // 3
    if dtype == "uint8":
        base = base + n // 3
    t = base.to(getattr(torch, dtype)) if n < 200 else base.double().to(getattr(torch, dtype))
    k_ = to_kael(t)
    r = kael.topk(k_, k, dim, largest)
    assert type(r) is kael.return_types.topk
    tv, ti = torch.topk(t, k, dim, largest)
    check(r.values, tv)
    check(r.indices, ti)
    kv, ki = k_.topk(k, dim=dim, largest=largest, sorted=True)
    check(kv, tv)
    check(ki, ti)


@pytest.mark.parametrize("dtype", ["int64", "int8", "float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shape,dim,k", [((6, 40), 1, 3), ((6, 40), 0, 4), ((3, 500), 1, 5), ((3, 500), 1, 200),
                                         ((9,), 0, 9)], ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_pick_torchs_positions(dtype, shape, dim, k, largest):
    # few distinct values: many ties; kael selects with PyTorch's CPU algorithm (Note [Sort order of ties])
    t = torch.randint(0, 4, shape).to(getattr(torch, dtype))
    kv, ki = kael.topk(to_kael(t), k, dim, largest)
    tv, ti = torch.topk(t, k, dim, largest)
    check(kv, tv)
    check(ki, ti)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_nan_counts_as_largest(dtype, largest):
    t = torch.tensor([[1.0, NAN, -INF, 0.5, INF, NAN, -2.0, 3.0]], dtype=getattr(torch, dtype))
    for k in range(0, 9):
        kv, ki = kael.topk(to_kael(t), k, 1, largest)
        tv, ti = torch.topk(t, k, 1, largest)
        check(kv, tv)
        check(ki, ti)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_unsorted_selects_the_same_elements(largest):
    t = torch.randn(4, 300, dtype=torch.float64)
    for k in [1, 3, 150, 299]:
        kv, ki = kael.topk(to_kael(t), k, 1, largest, False)
        tv, _ = torch.topk(t, k, 1, largest, True)
        v = to_torch(kv)
        assert torch.equal(v.sort(1, descending=largest).values, tv)
        assert torch.equal(torch.gather(t, 1, to_torch(ki)), v)


@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_topk_noncontiguous(layout, dim):
    p = make_pair((5, 7), "float32", layout)
    for k in [1, 3, 5]:
        kv, ki = kael.topk(p.k, k, dim)
        tv, ti = torch.topk(p.t, k, dim)
        check(kv, tv)
        check(ki, ti)


def test_topk_errors():
    t = torch.randn(2, 3)
    # k out of range: RuntimeError, as torch
    for k, dim in [(4, 1), (-1, 1), (3, 0)]:
        with pytest.raises(RuntimeError, match="selected index k out of range"):
            torch.topk(t, k, dim)
        with pytest.raises(RuntimeError, match="selected index k out of range") as ke:
            kael.topk(to_kael(t), k, dim)
        assert "topk: " in str(ke.value)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        kael.topk(kael.tensor(3.0), 2)
    for dim in [2, -3]:
        with pytest.raises(IndexError) as te:
            torch.topk(t, 1, dim)
        with pytest.raises(IndexError) as ke:
            kael.topk(to_kael(t), 1, dim)
        assert str(te.value).split("Dimension ", 1)[1] in str(ke.value)
    b = torch.tensor([True, False])
    with pytest.raises(RuntimeError, match="does not support bool"):
        torch.topk(b, 1)
    with pytest.raises(RuntimeError, match="does not support bool"):
        kael.topk(to_kael(b), 1)
    with pytest.raises(TypeError):
        kael.topk(to_kael(t))  # k is required, as in torch


# ------------------------------------------------------------------------------------- determinism

def test_same_bits_with_one_and_two_threads():
    before = kael.get_num_threads()
    t = torch.randint(0, 20, (60, 3000)).float()
    k = to_kael(t)
    results = []
    try:
        for n in [1, 2]:
            kael.set_num_threads(n)
            results.append([[r.tolist() for r in kael.max(k, 1)], [r.tolist() for r in kael.min(k, 0)],
                            [r.tolist() for r in kael.sort(k, 1)], [r.tolist() for r in kael.topk(k, 7, 0)]])
    finally:
        kael.set_num_threads(before)
    assert results[0] == results[1]
