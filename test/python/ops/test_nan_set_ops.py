"""NaN, +-0 and +-inf through every set-like op (isin, unique, unique(dim=), unique_consecutive, sort,
argsort, msort, searchsorted, bucketize, topk, max/min with indices, argmax/argmin, median,
nanmedian, kthvalue, mode)
against PyTorch, for every floating dtype, over all elements and along each dim.

Values are compared bit for bit in meaning: NaN where torch has NaN, the sign of every zero and
infinity as torch's. Indices are compared exactly where torch's result is defined (stable sorts, the first NaN of
max/min/argmax/argmin, searchsorted, topk's selection) and where torch's selection algorithm
decides among equal keys (kthvalue's quickselect, median's and nanmedian's nth_element, mode's
sort: kael runs the same algorithms, Note [Selection ties] in cpu/select.cpp). Only the inverse
indices of distinct NaNs in unique are an accident of torch's unstable sort: there the test checks
what the result must mean (the inverse rebuilds the input, each NaN its own value).
"""
import math

import pytest
import torch

import kael
from helpers import FLOAT_NAMES, to_kael, to_torch

NAN, INF = math.nan, math.inf

# rows with NaN first/in the middle/only, both zeros in both orders, both infinities, ties
ROWS = [[NAN, 0.0, -0.0, 1.0, NAN, -INF],
        [INF, -INF, 0.0, -0.0, 2.0, 2.0],
        [NAN, NAN, NAN, NAN, NAN, NAN],
        [1.0, NAN, -1.0, INF, 0.0, -0.0],
        [-0.0, 0.0, -0.0, 0.0, 3.0, -3.0]]
TEST = [NAN, 0.0, INF, -1.0]


def _same(kres, tres, path="result"):
    """kael's result means what torch's does: shapes, dtypes, NaN positions, values and signs of zeros."""
    if isinstance(tres, (tuple, list)):
        assert len(kres) == len(tres), path
        for i, (a, b) in enumerate(zip(kres, tres)):
            _same(a, b, f"{path}[{i}]")
        return
    assert tuple(kres.shape) == tuple(tres.shape), f"{path}: shape {tuple(kres.shape)} != torch {tuple(tres.shape)}"
    assert str(kres.dtype).split(".")[-1] == str(tres.dtype).split(".")[-1], f"{path}: dtype {kres.dtype} != {tres.dtype}"
    k = to_torch(kres)
    if tres.is_floating_point():
        nan = tres.isnan()
        assert torch.equal(k.isnan(), nan), f"{path}: NaN positions\nkael:  {k}\ntorch: {tres}"
        assert torch.equal(k[~nan].double(), tres[~nan].double()), f"{path}: values\nkael:  {k}\ntorch: {tres}"
        assert torch.equal(k[~nan].signbit(), tres[~nan].signbit()), f"{path}: signs of zeros\nkael:  {k}\ntorch: {tres}"
    else:
        assert torch.equal(k, tres), f"{path}\nkael:  {k}\ntorch: {tres}"


def _inputs(dtype):
    tx = torch.tensor(ROWS, dtype=getattr(torch, dtype))
    tt = torch.tensor(TEST, dtype=tx.dtype)
    return (tx, tt), (to_kael(tx), to_kael(tt))


def _sorted_flat(lib, x):
    return lib.sort(x.flatten(), stable=True).values


# ops whose whole result torch defines: compared exactly
EXACT = {
    "isin": lambda L, x, t: L.isin(x, t),
    "isin_invert": lambda L, x, t: L.isin(x, t, invert=True),
    "isin_assume_unique": lambda L, x, t: L.isin(t, t[1:], assume_unique=True),
    "isin_assume_unique_invert": lambda L, x, t: L.isin(t, t[:3], assume_unique=True, invert=True),
    "isin_swapped": lambda L, x, t: L.isin(t, x),
    "isin_rows_in_rows": lambda L, x, t: L.isin(x, x[0]),
    "isin_nan_only": lambda L, x, t: L.isin(x, t[:1]),
    "isin_scalar_test": lambda L, x, t: L.isin(x, 0.0),
    "isin_scalar_element": lambda L, x, t: L.isin(-1.0, t),
    "isin_dtypes": lambda L, x, t: L.isin(x, L.tensor([0, 3], dtype=L.int64)),
    "unique": lambda L, x, t: L.unique(x),
    "unique_counts": lambda L, x, t: L.unique(x, return_counts=True),
    "unique_unsorted_counts": lambda L, x, t: L.unique(x, sorted=False, return_counts=True),
    "unique_dim0": lambda L, x, t: L.unique(x, dim=0, return_inverse=True, return_counts=True),
    "unique_dim1": lambda L, x, t: L.unique(x, dim=1, return_inverse=True, return_counts=True),
    "unique_dim0_rows": lambda L, x, t: L.unique(L.cat([x[3:], x[3:]]), dim=0, return_inverse=True,
                                                 return_counts=True),
    "unique_consecutive": lambda L, x, t: L.unique_consecutive(x),
    "unique_consecutive_all": lambda L, x, t: L.unique_consecutive(x.flatten(), return_inverse=True,
                                                                   return_counts=True),
    "unique_consecutive_2d_inverse": lambda L, x, t: L.unique_consecutive(x, return_inverse=True),
    "unique_consecutive_zeros": lambda L, x, t: L.unique_consecutive(x[4], return_counts=True),
    "unique_consecutive_dim0": lambda L, x, t: L.unique_consecutive(L.cat([x, x[[0]], x[[1]], x[[1]]]), dim=0,
                                                                    return_inverse=True, return_counts=True),
    "unique_consecutive_dim1": lambda L, x, t: L.unique_consecutive(x[[1, 4]], dim=1, return_counts=True),
    "sort": lambda L, x, t: L.sort(x, stable=True),
    "sort_descending": lambda L, x, t: L.sort(x, descending=True, stable=True),
    "sort_dim0": lambda L, x, t: L.sort(x, dim=0, stable=True),
    "sort_dim0_descending": lambda L, x, t: L.sort(x, dim=0, descending=True, stable=True),
    "sort_unstable_values": lambda L, x, t: L.sort(x).values,
    "sort_unstable_descending_values": lambda L, x, t: L.sort(x, descending=True).values,
    "sort_flat": lambda L, x, t: L.sort(x.flatten(), stable=True),
    "argsort": lambda L, x, t: L.argsort(x, stable=True),
    "argsort_descending": lambda L, x, t: L.argsort(x, dim=0, descending=True, stable=True),
    "msort": lambda L, x, t: L.msort(x),
    "searchsorted": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), t),
    "searchsorted_right": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), t, right=True),
    "searchsorted_side": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), t, side="right"),
    "searchsorted_int32": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), x, out_int32=True),
    "searchsorted_sorter": lambda L, x, t: L.searchsorted(x.flatten(), t,
                                                          sorter=L.argsort(x.flatten(), stable=True)),
    "searchsorted_sorter_right": lambda L, x, t: L.searchsorted(x.flatten(), x, side="right",
                                                                sorter=L.argsort(x.flatten(), stable=True)),
    "searchsorted_rows": lambda L, x, t: L.searchsorted(L.sort(x).values, x),
    "searchsorted_rows_right": lambda L, x, t: L.searchsorted(L.sort(x).values, x, right=True),
    "searchsorted_rows_sorter": lambda L, x, t: L.searchsorted(x, x, sorter=L.argsort(x, stable=True)),
    "searchsorted_scalar_nan": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), NAN),
    "searchsorted_scalar_inf": lambda L, x, t: L.searchsorted(_sorted_flat(L, x), -INF, right=True),
    "bucketize": lambda L, x, t: L.bucketize(x, L.sort(t).values),
    "bucketize_right": lambda L, x, t: L.bucketize(x, L.sort(t).values, right=True),
    "bucketize_scalar": lambda L, x, t: L.bucketize(NAN, L.sort(t).values),
    "topk": lambda L, x, t: L.topk(x, 3),
    "topk_smallest": lambda L, x, t: L.topk(x, 3, largest=False),
    "topk_dim0": lambda L, x, t: L.topk(x, 2, dim=0),
    "topk_dim0_smallest": lambda L, x, t: L.topk(x, 4, dim=0, largest=False),
    "topk_all": lambda L, x, t: L.topk(x.flatten(), 30),
    "max_dim": lambda L, x, t: L.max(x, 1),
    "min_dim": lambda L, x, t: L.min(x, 1),
    "max_dim0": lambda L, x, t: L.max(x, 0, keepdim=True),
    "min_dim0": lambda L, x, t: L.min(x, 0),
    "max": lambda L, x, t: L.max(x),
    "min": lambda L, x, t: L.min(x),
    "max_no_nan": lambda L, x, t: L.max(x[1]),
    "min_no_nan": lambda L, x, t: L.min(x[4]),
    "argmax": lambda L, x, t: L.argmax(x, 1),
    "argmin": lambda L, x, t: L.argmin(x, 1),
    "argmax_dim0": lambda L, x, t: L.argmax(x, 0),
    "argmin_dim0": lambda L, x, t: L.argmin(x, 0, keepdim=True),
    "argmax_all": lambda L, x, t: L.argmax(x),
    "argmin_all": lambda L, x, t: L.argmin(x),
    "argmin_no_nan": lambda L, x, t: L.argmin(x[4]),
    "median": lambda L, x, t: L.median(x),
    "median_no_nan": lambda L, x, t: L.median(x[4]),
    "median_transposed": lambda L, x, t: L.median(x[[1, 4]].t()),
    "median_dim": lambda L, x, t: L.median(x, 1),
    "median_dim0": lambda L, x, t: L.median(x, 0),
    "nanmedian": lambda L, x, t: L.nanmedian(x),
    "nanmedian_all_nan": lambda L, x, t: L.nanmedian(x[2]),
    "nanmedian_zeros": lambda L, x, t: L.nanmedian(x[[0, 4]]),
    "nanmedian_dim": lambda L, x, t: L.nanmedian(x, 1),
    "nanmedian_dim_rows_with_numbers": lambda L, x, t: L.nanmedian(x[[0, 1, 3, 4]], 1),
    "nanmedian_dim0": lambda L, x, t: L.nanmedian(x, 0),
    "kthvalue": lambda L, x, t: L.kthvalue(x, 2, 1),
    "kthvalue_dim0": lambda L, x, t: L.kthvalue(x, 3, 0, keepdim=True),
    "kthvalue_last": lambda L, x, t: L.kthvalue(x, 6, 1),
    "kthvalue_flat": lambda L, x, t: L.kthvalue(x.flatten(), 13),
    "mode": lambda L, x, t: L.mode(x, 1),
    "mode_dim0": lambda L, x, t: L.mode(x, 0, keepdim=True),
    "mode_flat": lambda L, x, t: L.mode(x.flatten()),
    "mode_method": lambda L, x, t: x.mode(),
}


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("name", list(EXACT))
def test_nan_set_op(name, dtype):
    (tx, tt), (kx, kt) = _inputs(dtype)
    _same(EXACT[name](kael, kx, kt), EXACT[name](torch, tx, tt), name)


def _unique_meaning(kres, tres, kx):
    """unique with inverse: values and counts as torch's; the inverse rebuilds the input (each NaN
    its own value, used once), which is all torch defines among distinct NaNs."""
    kv, kinv, kcnt = kres
    tv, tinv, tcnt = tres
    _same(kv, tv, "values")
    _same(kcnt, tcnt, "counts")
    assert tuple(kinv.shape) == tuple(tinv.shape) and str(kinv.dtype) == "kael.int64"
    inv = to_torch(kinv).flatten()
    v = to_torch(kv)
    x = to_torch(kx).flatten()
    rebuilt = v[inv]
    assert torch.equal(rebuilt.isnan(), x.isnan())
    assert torch.equal(rebuilt[~x.isnan()].double(), x[~x.isnan()].double())
    nan_groups = inv[x.isnan()]
    assert len(set(nan_groups.tolist())) == nan_groups.numel()  # every NaN is a value of its own
    assert torch.equal(torch.bincount(inv, minlength=v.numel()), to_torch(kcnt))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("sorted_", [True, False])
def test_nan_unique_inverse(dtype, sorted_):
    (tx, _), (kx, _) = _inputs(dtype)
    for t, k in [(tx, kx), (tx[2], kx[2]), (tx.t(), kx.t())]:
        tres = torch.unique(t, sorted=sorted_, return_inverse=True, return_counts=True)
        kres = kael.unique(k, sorted=sorted_, return_inverse=True, return_counts=True)
        _unique_meaning(kres, tres, k)
        tv, tinv = torch.unique(t, sorted=sorted_, return_inverse=True)
        kv, kinv = kael.unique(k, sorted=sorted_, return_inverse=True)
        _unique_meaning((kv, kinv, kael.bincount(kinv.flatten(), minlength=kv.numel())),
                        (tv, tinv, torch.bincount(tinv.flatten(), minlength=tv.numel())), k)


def _index_meaning(kres, kx, dim):
    """(values, indices) along dim: each index points at an element equal to its value (NaN at NaN,
    a zero of the same sign)."""
    assert str(kres.indices.dtype) == "kael.int64"
    x = to_torch(kx)
    picked = torch.gather(x, dim, to_torch(kres.indices).unsqueeze(dim)).squeeze(dim)
    vals = to_torch(kres.values)
    nan = vals.isnan()
    assert torch.equal(picked.isnan(), nan)
    assert torch.equal(picked[~nan].double(), vals[~nan].double())
    assert torch.equal(picked[~nan].signbit(), vals[~nan].signbit())


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_nan_kthvalue(dtype, dim, k):
    # NaN counts as the largest value; ties (0.0 and -0.0 too) pick torch's element
    (tx, _), (kx, _) = _inputs(dtype)
    tres, kres = torch.kthvalue(tx, k, dim), kael.kthvalue(kx, k, dim)
    _same(kres, tres)
    _index_meaning(kres, kx, dim)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_nan_nanmedian_all_nan_row(dtype):
    (tx, _), (kx, _) = _inputs(dtype)
    tres, kres = torch.nanmedian(tx, 1), kael.nanmedian(kx, 1)
    _same(kres, tres)
    _index_meaning(kres, kx, 1)
    assert math.isnan(kres.values[2].item())


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_nan_isin_matches_elementwise(dtype):
    # the bug report's case, and a sweep of test sets with NaN in every position
    t = torch.tensor([0.0, 1.0, 2.0], dtype=getattr(torch, dtype))
    for test in ([NAN, 0.0], [0.0, NAN], [NAN, NAN, 2.0], [NAN], [INF, NAN, -0.0, 1.0], [-INF, NAN, NAN, NAN, 1.0]):
        tt = torch.tensor(test, dtype=t.dtype)
        for invert in (False, True):
            _same(kael.isin(to_kael(t), to_kael(tt), invert=invert), torch.isin(t, tt, invert=invert), str(test))
    # large enough for torch's sorting path (elements.numel() >= 10 * test.numel() ** 0.145)
    big = torch.tensor(ROWS * 8, dtype=t.dtype).flatten()
    tt = torch.tensor(TEST * 3, dtype=t.dtype)
    for invert in (False, True):
        _same(kael.isin(to_kael(big), to_kael(tt), invert=invert), torch.isin(big, tt, invert=invert), "big")


SELECTIONS = {
    "kthvalue": lambda L, x, d, k: L.kthvalue(x, k, d),
    "median": lambda L, x, d, k: L.median(x, d),
    "nanmedian": lambda L, x, d, k: L.nanmedian(x, d),
    "mode": lambda L, x, d, k: L.mode(x, d),
    "median_all": lambda L, x, d, k: L.median(x),
    "nanmedian_all": lambda L, x, d, k: L.nanmedian(x),
}


@pytest.mark.parametrize("dtype", FLOAT_NAMES + ["int64", "int32", "uint8"])
@pytest.mark.parametrize("n", [2, 3, 7, 16, 65, 300])
@pytest.mark.parametrize("name", list(SELECTIONS))
def test_selection_ties(name, dtype, n):
    # many ties (a few distinct values, both zeros, NaN) on lines short and long: the element
    # picked among equal keys, and so every index and the sign of every zero, is torch's
    g = torch.Generator().manual_seed(n)
    if dtype in FLOAT_NAMES:
        pool = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, NAN, INF, -INF], dtype=getattr(torch, dtype))
    else:
        pool = torch.tensor([0, 1, 2, 3], dtype=getattr(torch, dtype))
    t = pool[torch.randint(0, len(pool), (4, n), generator=g)]
    if dtype in FLOAT_NAMES:
        t[1] = torch.where(t[1].isnan(), torch.zeros((), dtype=t.dtype), t[1])  # a row without NaN
        t[2] = NAN
    k = to_kael(t)
    for dim in (0, 1):
        kk = (n + 1) // 2 if dim == 1 else 3
        _same(SELECTIONS[name](kael, k, dim, kk), SELECTIONS[name](torch, t, dim, kk), f"{name} dim {dim}")
        _same(SELECTIONS[name](kael, k.t(), 1 - dim, kk), SELECTIONS[name](torch, t.t(), 1 - dim, kk),
              f"{name} transposed dim {1 - dim}")
