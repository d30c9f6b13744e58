"""Ops along one dim: cumsum, cumprod, sort, argsort, topk -- against PyTorch over shapes, dims,
dtypes, layouts, ties, NaN, empty and 0-d inputs, errors, and determinism across thread counts."""
import math

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, FLOAT_NAMES, LAYOUTS, check, make_pair, rand_torch, to_kael, to_torch
from test_reductions_more import both, run_both

INF = math.inf

# (shape, dim)
LINE_CASES = [
    ((), 0), ((), -1),
    ((1,), 0), ((9,), 0), ((9,), -1),
    ((3, 5), 0), ((3, 5), 1), ((3, 5), -1), ((3, 5), -2),
    ((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), -1), ((2, 1, 3), 1),
    ((0,), 0), ((0, 3), 0), ((0, 3), 1), ((3, 0), 1), ((3, 0), 0),
]


# ------------------------------------------------------------------------------------- cumsum, cumprod

@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LINE_CASES, ids=str)
def test_cumsum_cumprod(name, dtype, shape, dim):
    both(lambda lib, x: getattr(lib, name)(x, dim), shape, dtype, domain="small")
    both(lambda lib, x: getattr(x, name)(dim=dim), shape, dtype, domain="small")


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("src", DTYPE_NAMES)
@pytest.mark.parametrize("dst", ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_cumsum_cumprod_dtype_keyword(name, src, dst):
    both(lambda lib, x: getattr(lib, name)(x, 1, dtype=getattr(lib, dst)), (3, 5), src, domain="small")


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_noncontiguous(name, layout, dim):
    both(lambda lib, x: getattr(lib, name)(x, dim), (4, 6), "float64", layout, domain="small")
    both(lambda lib, x: getattr(lib, name)(x, dim), (3, 4, 5), "int32", layout, domain="small")


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumsum_cumprod_special_values(name):
    t = torch.tensor([[1.0, INF, -INF, 2.0], [math.nan, 1.0, 2.0, 3.0], [0.0, -0.0, 5.0, INF]])
    for dim in [0, 1]:
        check(getattr(kael, name)(to_kael(t), dim), getattr(torch, name)(t, dim))
    t = torch.tensor([2**62, 2**62, 7, -3])
    check(getattr(kael, name)(to_kael(t), 0), getattr(torch, name)(t, 0))  # int64 wraps


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape,dim", [((5, 20000), 1), ((20000, 5), 0), ((300, 400), 0), ((300, 400), 1)], ids=str)
def test_cumsum_cumprod_large(name, shape, dim):
    t = torch.rand(shape, dtype=torch.float64) * 0.02 + 0.99
    run_both(lambda lib, x: getattr(lib, name)(x, dim), t, to_kael(t))
    t = torch.randn(shape).to(torch.float16)
    run_both(lambda lib, x: getattr(lib, name)(x, dim), t, to_kael(t))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumsum_cumprod_errors(name):
    t = torch.randn(2, 3)
    for dim in [2, -3]:
        with pytest.raises(IndexError) as te:
            getattr(torch, name)(t, dim)
        with pytest.raises(IndexError) as ke:
            getattr(kael, name)(to_kael(t), dim)
        assert f"{name}: " in str(ke.value)
        assert str(te.value).split("Dimension ", 1)[1] in str(ke.value)
    with pytest.raises(TypeError):
        getattr(kael, name)(to_kael(t))  # dim is required, as in torch


# ------------------------------------------------------------------------------------- argsort

def check_sort_indices(kidx, x, values, dim):
    """kidx (kael) must be a permutation along dim that gathers x into values (torch)."""
    ti = to_torch(kidx)
    if x.dim() == 0:
        assert ti.item() == 0
        return
    assert torch.equal(torch.sort(ti, dim).values,
                       torch.arange(x.shape[dim]).view([-1 if d == dim % x.dim() else 1 for d in range(x.dim())])
                       .expand_as(ti))
    torch.testing.assert_close(torch.gather(x, dim, ti), values, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LINE_CASES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort(dtype, shape, dim, descending):
    # many ties ("small": integers 0..3): kael's order is stable, so it equals torch's stable order
    p = make_pair(shape, dtype, domain="small")
    k = kael.argsort(p.k, dim, descending)
    check(k, torch.argsort(p.t, dim=dim, descending=descending, stable=True))
    check_sort_indices(k, p.t, torch.sort(p.t, dim=dim, descending=descending).values, dim)
    check(kael.argsort(p.k, dim=dim, descending=descending, stable=True),
          torch.argsort(p.t, dim=dim, descending=descending, stable=True))
    check(p.k.argsort(dim, descending=descending), torch.argsort(p.t, dim=dim, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_nan_inf_and_signed_zeros(dtype, descending):
    t = torch.tensor([[1.0, math.nan, -INF, 0.0, -0.0, INF, math.nan, -2.0, 0.0, -0.0]], dtype=getattr(torch, dtype))
    check(kael.argsort(to_kael(t), 1, descending), torch.argsort(t, dim=1, descending=descending, stable=True))
    check(kael.argsort(to_kael(t.T), 0, descending), torch.argsort(t.T, dim=0, descending=descending, stable=True))


@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_argsort_noncontiguous(layout, dim):
    p = make_pair((5, 7), "int64", layout, domain="small")
    check(kael.argsort(p.k, dim), torch.argsort(p.t, dim=dim, stable=True))
    p = make_pair((5, 7), "float32", layout)
    check(kael.argsort(p.k, dim, True), torch.argsort(p.t, dim=dim, descending=True, stable=True))


def test_argsort_large_and_errors():
    t = torch.randint(0, 50, (40, 3000))
    check(kael.argsort(to_kael(t), 1), torch.argsort(t, dim=1, stable=True))
    check(kael.argsort(to_kael(t), 0, True), torch.argsort(t, dim=0, descending=True, stable=True))
    with pytest.raises(IndexError) as ke:
        kael.argsort(to_kael(t), 2)
    assert "argsort: " in str(ke.value)


# ------------------------------------------------------------------------------------- determinism

def test_same_bits_with_one_and_two_threads():
    before = kael.get_num_threads()
    t = torch.rand(60, 3000, dtype=torch.float32) * 0.02 + 0.99
    k = to_kael(t)
    results = []
    try:
        for n in [1, 2]:
            kael.set_num_threads(n)
            results.append([kael.cumsum(k, 1).tolist(), kael.cumprod(k, 0).tolist(),
                            kael.argsort(k, 1).tolist(), kael.argsort(k, 0, True).tolist()])
    finally:
        kael.set_num_threads(before)
    assert results[0] == results[1]
