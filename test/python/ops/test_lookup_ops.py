"""Counting and lookup ops against PyTorch: count_nonzero, bincount, searchsorted, bucketize,
kael.nn.functional.one_hot."""
import pytest
import torch
import torch.nn.functional as F

import kael
import kael.nn.functional as KF
from helpers import DTYPE_NAMES, INT_NAMES, NUMERIC_NAMES, check, compare, to_kael

# ---------------------------------------------------------------- count_nonzero


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", [((), None), ((5,), None), ((5,), 0), ((3, 4), 1), ((3, 4), -2), ((3, 4), (0, 1)),
                                       ((2, 3, 4), (0, 2)), ((0, 3), 0), ((0, 3), None)], ids=str)
def test_count_nonzero(dtype, shape, dim):
    t = torch.randint(-2, 3, shape).to(getattr(torch, dtype))
    k = to_kael(t)
    kw = {} if dim is None else {"dim": dim}
    check(kael.count_nonzero(k, **kw), torch.count_nonzero(t, **kw))
    check(k.count_nonzero(**kw), t.count_nonzero(**kw))
    rev = tuple(reversed(range(t.dim())))
    check(kael.count_nonzero(k.permute(rev)), torch.count_nonzero(t.permute(rev)))


def test_count_nonzero_bad_dims():
    with pytest.raises(IndexError):
        kael.count_nonzero(kael.zeros(2, 3), 2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        kael.count_nonzero(kael.zeros(2, 3), (0, 0))
    with pytest.raises(RuntimeError):
        torch.count_nonzero(torch.zeros(2, 3), (0, 0))


# ---------------------------------------------------------------- bincount

@pytest.mark.parametrize("dtype", INT_NAMES)
@pytest.mark.parametrize("n,high,minlength", [(10, 5, 0), (10, 5, 8), (1, 1, 0), (0, 1, 0), (0, 1, 4), (1000, 50, 3)])
def test_bincount(dtype, n, high, minlength):
    t = torch.randint(0, high, (n,)).to(getattr(torch, dtype))
    k = to_kael(t)
    check(kael.bincount(k, minlength=minlength), torch.bincount(t, minlength=minlength))
    check(k.bincount(None, minlength), t.bincount(None, minlength))
    check(kael.bincount(k[::2]), torch.bincount(t[::2]))


@pytest.mark.parametrize("wdtype", NUMERIC_NAMES + ["bool"])
def test_bincount_weights(wdtype):
    t = torch.randint(0, 6, (40,))
    w = torch.randint(-3, 4, (40,)).to(getattr(torch, wdtype))
    check(kael.bincount(to_kael(t), to_kael(w)), torch.bincount(t, w))
    check(kael.bincount(to_kael(t), weights=to_kael(w), minlength=10), torch.bincount(t, weights=w, minlength=10))


def test_bincount_bad_input():
    with pytest.raises(RuntimeError, match="non-negative"):
        kael.bincount(kael.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="1-d"):
        kael.bincount(kael.tensor([[1, 2]]))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        kael.bincount(kael.tensor([1]), minlength=-1)
    with pytest.raises(RuntimeError, match="same length"):
        kael.bincount(kael.tensor([1, 2]), kael.tensor([1.0]))
    for bad in (kael.tensor([1.0]), kael.tensor([True])):
        with pytest.raises(RuntimeError, match="not implemented"):
            kael.bincount(bad)
    for f in (lambda: torch.bincount(torch.tensor([1, -1])), lambda: torch.bincount(torch.tensor([1.0])),
              lambda: torch.bincount(torch.tensor([1]), minlength=-1)):
        with pytest.raises(RuntimeError):
            f()


# ---------------------------------------------------------------- searchsorted, bucketize

SEARCH_DTYPES = [n for n in DTYPE_NAMES if n != "bool"]


def sorted_values(shape, dtype, dups=True):
    t = torch.randint(-8, 9, shape) if dups else torch.randn(shape) * 4
    if dtype in ("uint8",):
        t = t.abs()
    return torch.sort(t.to(getattr(torch, dtype)), dim=-1).values


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
@pytest.mark.parametrize("bshape,ishape", [((6,), (10,)), ((6,), ()), ((6,), (3, 4)), ((3, 6), (3, 5)),
                                           ((2, 3, 6), (2, 3, 4)), ((0,), (4,)), ((6,), (0,)), ((3, 0), (3, 2))],
                         ids=str)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(dtype, bshape, ishape, right):
    b = sorted_values(bshape, dtype)
    x = torch.randint(-9, 10, ishape).to(getattr(torch, dtype)) if dtype != "uint8" else torch.randint(0, 10, ishape).to(torch.uint8)
    kb, kx = to_kael(b), to_kael(x)
    check(kael.searchsorted(kb, kx, right=right), torch.searchsorted(b, x, right=right))
    check(kael.searchsorted(kb, kx, right=right, out_int32=True), torch.searchsorted(b, x, right=right, out_int32=True))
    if len(bshape) == 1:
        check(kael.bucketize(kx, kb, right=right), torch.bucketize(x, b, right=right))
        check(kael.bucketize(kx, kb, out_int32=True, right=right), torch.bucketize(x, b, out_int32=True, right=right))


def test_searchsorted_mixed_dtypes_and_scalars():
    b = torch.tensor([0.1, 0.5, 2.0, 2.0, 7.5])
    kb = to_kael(b)
    for v in (0.1, 2, 2.0, -1, 100, True):
        for right in (False, True):
            check(kael.searchsorted(kb, v, right=right), torch.searchsorted(b, v, right=right))
            check(kael.bucketize(v, kb, right=right), torch.bucketize(v, b, right=right))
    # a 0-d float64 value does not promote float32 boundaries; a 1-d one does
    for x in (torch.tensor(0.1, dtype=torch.float64), torch.tensor([0.1], dtype=torch.float64)):
        check(kael.searchsorted(kb, to_kael(x), right=True), torch.searchsorted(b, x, right=True))
    # int boundaries with float values; uint8 boundaries with -1 (cast: 255)
    ib = torch.tensor([1, 2, 2, 5])
    check(kael.searchsorted(to_kael(ib), to_kael(torch.tensor([1.5, 2.0, -3.0]))),
          torch.searchsorted(ib, torch.tensor([1.5, 2.0, -3.0])))
    ub = torch.tensor([1, 2], dtype=torch.uint8)
    check(kael.searchsorted(to_kael(ub), -1, right=True), torch.searchsorted(ub, -1, right=True))
    check(kael.searchsorted(to_kael(ub), to_kael(torch.tensor([-1], dtype=torch.int8))),
          torch.searchsorted(ub, torch.tensor([-1], dtype=torch.int8)))


def test_searchsorted_nan_and_layouts():
    b = torch.tensor([-1.0, 0.0, 3.0, float("inf")])
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0])
    for right in (False, True):
        check(kael.searchsorted(to_kael(b), to_kael(x), right=right), torch.searchsorted(b, x, right=right))
    bb = sorted_values((4, 7), "float32", dups=False)
    xx = torch.randn(5, 4) * 4
    kbb, kxx = to_kael(bb), to_kael(xx)
    check(kael.searchsorted(kbb[:, ::2], kxx.T), torch.searchsorted(bb[:, ::2], xx.T))


def test_searchsorted_sorter():
    b = torch.randn(3, 8)
    sorter = torch.argsort(b, dim=-1)
    x = torch.randn(3, 5)
    for right in (False, True):
        check(kael.searchsorted(to_kael(b), to_kael(x), right=right, sorter=to_kael(sorter)),
              torch.searchsorted(b, x, right=right, sorter=sorter))


def test_searchsorted_bad_input():
    b = kael.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        kael.searchsorted(kael.zeros(2, 3), kael.zeros(3, 3))
    with pytest.raises(RuntimeError, match="scalar only when boundaries tensor dimension is 1"):
        kael.searchsorted(kael.zeros(2, 3), kael.tensor(1.0))
    with pytest.raises(RuntimeError, match="sorter must be a tensor of long dtype"):
        kael.searchsorted(b, kael.tensor([1.0]), sorter=kael.tensor([0, 1], dtype=kael.int32))
    with pytest.raises(IndexError, match="sorter index out of range"):
        kael.searchsorted(b, kael.tensor([1.0]), sorter=kael.tensor([0, 2]))
    with pytest.raises(RuntimeError, match="boundary and sorter must have the same size"):
        kael.searchsorted(b, kael.tensor([1.0]), sorter=kael.tensor([0]))
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        kael.searchsorted(kael.tensor([False, True]), kael.tensor([True]))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        kael.bucketize(kael.tensor([1.0]), kael.zeros(2, 2))
    for f in (lambda: torch.searchsorted(torch.zeros(2, 3), torch.zeros(3, 3)),
              lambda: torch.searchsorted(torch.tensor([1.0, 2]), torch.tensor([1.0]), sorter=torch.tensor([0, 2])),
              lambda: torch.bucketize(torch.tensor([1.0]), torch.zeros(2, 2))):
        with pytest.raises(RuntimeError):
            f()


# ---------------------------------------------------------------- one_hot

@pytest.mark.parametrize("shape,high,num_classes", [((5,), 4, -1), ((5,), 4, 6), ((2, 3), 3, -1), ((), 3, 5),
                                                    ((0,), 1, 3), ((2, 0, 2), 1, 2), ((4,), 1, 1)], ids=str)
def test_one_hot(shape, high, num_classes):
    t = torch.randint(0, high, shape)
    check(KF.one_hot(to_kael(t), num_classes), F.one_hot(t, num_classes))
    check(KF.one_hot(to_kael(t), num_classes=num_classes), F.one_hot(t, num_classes=num_classes))
    if len(shape) == 2 and all(shape):
        check(KF.one_hot(to_kael(t).T), F.one_hot(t.T))


def test_one_hot_bad_input():
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        KF.one_hot(kael.tensor([1, 2]), 2)
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        KF.one_hot(kael.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty tensor"):
        KF.one_hot(kael.zeros(0, dtype=kael.int64))
    with pytest.raises(RuntimeError, match="LongTensor"):
        KF.one_hot(kael.tensor([1], dtype=kael.int32))
    for f in (lambda: F.one_hot(torch.tensor([1, 2]), 2), lambda: F.one_hot(torch.tensor([-1, 2])),
              lambda: F.one_hot(torch.zeros(0, dtype=torch.int64)), lambda: F.one_hot(torch.tensor([1]).int())):
        with pytest.raises(RuntimeError):
            f()


def test_bincount_of_an_empty_input_ignores_weights():
    for w in (None, torch.tensor(1.0), torch.tensor([1.0, 2.0])):
        for minlength in (0, 3):
            t = torch.bincount(torch.zeros(0, dtype=torch.int64), w, minlength)
            check(kael.bincount(kael.zeros(0, dtype=kael.int64), None if w is None else to_kael(w), minlength), t)


# ---------------------------------------------------------------- unique

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(), (1,), (10,), (4, 5), (2, 3, 4), (0,), (3, 0)], ids=str)
@pytest.mark.parametrize("inverse,counts", [(False, False), (True, False), (False, True), (True, True)])
def test_unique(dtype, shape, inverse, counts):
    t = torch.randint(-3, 4, shape).to(getattr(torch, dtype))  # many repeats
    k = to_kael(t)
    for sorted_ in (True, False):
        tr = torch.unique(t, sorted=sorted_, return_inverse=inverse, return_counts=counts)
        kr = kael.unique(k, sorted=sorted_, return_inverse=inverse, return_counts=counts)
        if isinstance(tr, tuple):
            assert isinstance(kr, tuple) and len(kr) == len(tr)
            for a, b in zip(kr, tr):
                check(a, b)
        else:
            check(kr, tr)
    if len(shape) >= 2 and all(shape):
        rev = tuple(reversed(range(len(shape))))
        for a, b in zip(kael.unique(k.permute(rev), return_inverse=True, return_counts=True),
                        torch.unique(t.permute(rev), return_inverse=True, return_counts=True)):
            check(a, b)


def test_unique_special_values():
    t = torch.tensor([0.0, -0.0, float("nan"), 1.0, float("nan"), -float("inf"), float("inf"), 1.0, -0.0])
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = t.to(dt)
        for a, b in zip(kael.unique(to_kael(x), return_inverse=True, return_counts=True),
                        torch.unique(x, return_inverse=True, return_counts=True)):
            check(a, b)
    # -0.0 and 0.0 are one value: the first occurrence is kept, as in torch
    assert str(kael.unique(kael.tensor([-0.0, 0.0]))[0].item()) == str(torch.unique(torch.tensor([-0.0, 0.0]))[0].item())


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
@pytest.mark.parametrize("shape,dim", [((4, 3), 0), ((4, 3), 1), ((4, 3), -1), ((2, 3, 2), 1), ((0, 3), 0)], ids=str)
def test_unique_dim(dtype, shape, dim):
    t = torch.randint(0, 2, shape).to(getattr(torch, dtype))  # repeated slices
    k = to_kael(t)
    for a, b in zip(kael.unique(k, dim=dim, return_inverse=True, return_counts=True),
                    torch.unique(t, dim=dim, return_inverse=True, return_counts=True)):
        check(a, b)
    check(kael.unique(k, dim=dim), torch.unique(t, dim=dim))


def test_unique_dim_bad_input():
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        kael.unique(kael.zeros(2, 0), dim=0)
    with pytest.raises(RuntimeError):
        torch.unique(torch.zeros(2, 0), dim=0)
    with pytest.raises(IndexError):
        kael.unique(kael.zeros(2, 3), dim=2)
