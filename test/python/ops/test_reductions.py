"""sum / mean reductions."""
import pytest
import torch

import kael
from helpers import DTYPE_NAMES, INT_NAMES, NUMERIC_NAMES, check, compare, compare_raises, to_kael

# (shape, dim) cases; dim may be None, an int (incl. negative), a tuple or a list
DIM_CASES = [
    ((), None), ((), 0), ((), -1),
    ((5,), None), ((5,), 0), ((5,), -1),
    ((3, 4), None), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((3, 4), -2), ((3, 4), (0, 1)), ((3, 4), [1, 0]),
    ((2, 3, 4), None), ((2, 3, 4), 1), ((2, 3, 4), (0, 2)), ((2, 3, 4), [-1, 0]), ((2, 3, 4), (-2,)),
    ((2, 3, 4), (0, 1, 2)), ((2, 1, 3, 2), (1, 3)), ((2, 1, 3, 2), -3),
    ((0, 3), None), ((0, 3), 0), ((0, 3), 1), ((3, 0), 1),
]


def _kw(dim, keepdim):
    """dim=None is passed explicitly when keepdim is given (torch rejects keepdim without dim)."""
    kw = {}
    if dim is not None or keepdim is not None:
        kw["dim"] = dim
    if keepdim is not None:
        kw["keepdim"] = keepdim
    return kw


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, False, True])
def test_sum(dtype, shape, dim, keepdim):
    compare(lambda lib, x: lib.sum(x, **_kw(dim, keepdim)), (shape, dtype))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_mean(dtype, shape, dim, keepdim):
    # mean of int64/bool raises in torch (and kael); mean over empty gives nan
    compare(lambda lib, x: lib.mean(x, **_kw(dim, keepdim)), (shape, dtype))


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_reduction_methods(name, dtype):
    d = "float32" if name == "mean" else dtype
    compare(lambda lib, x: getattr(x, name)(), ((3, 4), d))
    compare(lambda lib, x: getattr(x, name)(1), ((3, 4), d))
    compare(lambda lib, x: getattr(x, name)(-1, keepdim=True), ((2, 3, 4), d))
    compare(lambda lib, x: getattr(x, name)((0, 2)), ((2, 3, 4), d))
    compare(lambda lib, x: getattr(x, name)(dim=[0, 1], keepdim=False), ((2, 3, 4), d))
    compare(lambda lib, x: getattr(x, name)((0, 1), True), ((2, 3, 4), d))


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape,layout", [((3, 4), "T"), ((2, 3, 4), "T"), ((3, 5), "step"), ((2, 3, 4), "transpose"),
                                          ((4, 3), "expand"), ((2, 3, 5), "step")], ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)], ids=str)
def test_reduction_noncontiguous(name, shape, layout, dim):
    compare(lambda lib, x: getattr(lib, name)(x, **_kw(dim, None)), (shape, "float32", layout))
    compare(lambda lib, x: getattr(lib, name)(x, **_kw(dim, True)), (shape, "float64", layout))


@pytest.mark.parametrize("dtype", INT_NAMES + ["bool"])
def test_sum_of_integers_and_bools_is_int64(dtype):
    kr, _ = compare(lambda lib, x: lib.sum(x), ((4, 5), dtype))
    assert kr.dtype is kael.int64
    kr, _ = compare(lambda lib, x: x.sum(dim=0), ((4, 5), dtype))
    assert kr.dtype is kael.int64


@pytest.mark.parametrize("src", DTYPE_NAMES)
@pytest.mark.parametrize("dst", NUMERIC_NAMES)
@pytest.mark.parametrize("dim", [None, 1])
def test_sum_dtype_keyword(src, dst, dim):
    compare(lambda lib, x: x.sum(dtype=getattr(lib, dst), **_kw(dim, None)), ((3, 4), src))
    compare(lambda lib, x: lib.sum(x, dtype=getattr(lib, dst), **_kw(dim, None)), ((3, 4), src))


def test_sum_dtype_keyword_accepts_string():
    k = kael.tensor([[1.5, 2.25], [3.0, 4.0]])
    check(k.sum(dtype="float64"), torch.tensor([[1.5, 2.25], [3.0, 4.0]]).sum(dtype=torch.float64))


def test_sum_float64_accumulates_in_double():
    data = [1e16, 1.0, -1e16, 1.0]
    check(kael.tensor(data, dtype=kael.float64).sum(), torch.tensor(data, dtype=torch.float64).sum())


def test_sum_large_int64_exact():
    data = [2 ** 62, 2 ** 61, -(2 ** 60), 12345]
    check(kael.tensor(data).sum(), torch.tensor(data).sum())
    assert kael.tensor(data).sum().item() == sum(data)


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape,dim", [((10000,), None), ((100, 301), 0), ((100, 301), 1), ((37, 41, 13), (0, 2))],
                         ids=str)
def test_reduction_larger_inputs(name, shape, dim):
    compare(lambda lib, x: getattr(lib, name)(x, **_kw(dim, None)), (shape, "float32", "contig", "pos"),
            rtol=1e-5, atol=1e-4)
    compare(lambda lib, x: getattr(lib, name)(x, **_kw(dim, None)), (shape, "float64", "contig", "any"))


def test_mean_of_int64_raises_runtime_error():
    with pytest.raises(RuntimeError):
        kael.tensor([1, 2, 3]).mean()
    with pytest.raises(RuntimeError):
        kael.mean(kael.tensor([[1, 2], [3, 4]]), dim=0)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2, 3]).mean()


def test_mean_of_empty_is_nan():
    check(kael.zeros(0, 3).mean(), torch.zeros(0, 3).mean())
    check(kael.zeros(0, 3).mean(dim=0), torch.zeros(0, 3).mean(dim=0))


def test_sum_of_empty_is_zero():
    check(kael.zeros(0).sum(), torch.zeros(0).sum())
    check(kael.zeros(0, 3, dtype=kael.int64).sum(dim=0), torch.zeros(0, 3, dtype=torch.int64).sum(dim=0))


@pytest.mark.parametrize("dim", [(0, 0), [1, -1]], ids=str)
def test_repeated_dims_raise(dim):
    compare_raises(lambda lib, x: x.sum(dim=dim), ((3, 4), "float32"))
    compare_raises(lambda lib, x: x.mean(dim=dim), ((3, 4), "float32"))


def test_reductions_return_fresh_tensors():
    k = kael.ones(3, 4)
    s = k.sum(dim=0)
    s.add_(1)
    assert k.tolist() == [[1.0] * 4] * 3
    assert s.is_contiguous()


def test_reduction_nan_and_inf_propagate():
    data = [[1.0, float("nan")], [float("inf"), 2.0], [float("inf"), -float("inf")]]
    for dim in (None, 0, 1):
        kw = {} if dim is None else {"dim": dim}
        check(kael.tensor(data).sum(**kw), torch.tensor(data).sum(**kw))
        check(kael.tensor(data).mean(**kw), torch.tensor(data).mean(**kw))


@pytest.mark.parametrize("shape, dim", [((256, 300), 1), ((256, 300), 0), ((64, 40, 30), (0, 2)),
                                        ((64, 40, 30), 1), ((300, 256), -1)], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_large_reductions_over_dims_match_torch(shape, dim, layout):
    # Large enough for the loop engine to split rows across threads when that is safe.
    t = torch.randn(*shape, dtype=torch.float64)
    k = kael.tensor(t.numpy())
    if layout == "transposed":
        t, k = t.transpose(0, -1), k.transpose(0, -1)
    previous = kael.get_num_threads()
    for threads in (1, 2):
        kael.set_num_threads(threads)
        try:
            check(k.sum(dim=dim), t.sum(dim=dim))
            check(k.mean(dim=dim, keepdim=True), t.mean(dim=dim, keepdim=True))
        finally:
            kael.set_num_threads(previous)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [65536 * 3 + 17, 1 << 20, (1 << 22) + 12345])
def test_full_sum_is_the_same_on_any_thread_count(dtype, n):
    """A contiguous full sum has one chunk decomposition whatever the thread count (Note
    [Deterministic sums]): 1, 2 and 3 threads give the same bits, and the value is the exact
    sum (float64's) rounded to the dtype, within the dtype's tolerance."""
    scale = 10 if dtype in ("float32", "float64") else 0.1
    t = torch.randn(n, dtype=torch.float64).mul_(scale).to(getattr(torch, dtype))
    k = to_kael(t)
    results = on_thread_counts(lambda: (k.sum().item(), k.mean().item()))
    assert results == [results[0]] * 3, results
    check(k.sum(), t.double().sum().to(t.dtype))


# Note [Column sums] (kael/native/cpu/reduce.cpp): the innermost dim kept and contiguous, the next
# one reduced. K columns: below 256 the rows go in blocks of 32768 // K rows with partial sums
# (one contiguous run per block when the rows lie next to each other), from 256 in blocks of 256
# rows by up to 65536 columns, one row or four rows a sweep (rows over 2048 columns); the cases
# reach several blocks, leave rows over after the fours and cut rows of 70000 columns.
COLUMN_CASES = [(40000, 1), (40000, 2), (40000, 3), (9000, 5), (3000, 16), (3000, 63), (3000, 64), (3000, 65),
                (700, 255), (300, 256), (300, 257), (200, 600), (41, 2500), (520, 2100), (3, 70000), (7, 3), (1, 40)]


def _oracle_sum(t, dim, mean=False, keepdim=False):
    """torch's sum in float64 for floating inputs (kael adds float32 in double), rounded back."""
    if t.dtype.is_floating_point:
        exact = t.double().mean(dim, keepdim=keepdim) if mean else t.double().sum(dim, keepdim=keepdim)
        return exact.to(t.dtype)
    return t.sum(dim, keepdim=keepdim)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("rows,cols", COLUMN_CASES, ids=str)
def test_column_sums(dtype, rows, cols):
    if dtype in ("float16", "bfloat16"):
        t = (torch.randn(rows, cols) * 0.25).to(getattr(torch, dtype))
    elif dtype == "bool":
        t = torch.rand(rows, cols) < 0.3
    elif dtype.startswith(("int", "uint")):
        info = torch.iinfo(getattr(torch, dtype))
        t = torch.randint(info.min, info.max, (rows, cols), dtype=getattr(torch, dtype))  # int64 sums wrap
    else:
        t = torch.randn(rows, cols, dtype=getattr(torch, dtype)) * 10
    k = to_kael(t)
    check(k.sum(0), _oracle_sum(t, 0))
    check(k.sum(0, keepdim=True), _oracle_sum(t, 0, keepdim=True))
    if t.dtype.is_floating_point:
        check(k.mean(0), _oracle_sum(t, 0, mean=True))


@pytest.mark.parametrize("shape", [(3, 5000, 7), (3, 100, 300), (2, 20000, 2), (5, 3, 1000)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bfloat16"])
def test_column_sums_of_slabs(shape, dtype):
    """x.sum(1) of (B, R, K): R rows of K columns in each of B slabs."""
    t = (torch.randn(shape) * 4).to(getattr(torch, dtype))
    k = to_kael(t)
    check(k.sum(1), _oracle_sum(t, 1))
    check(k.sum(-2, keepdim=True), _oracle_sum(t, -2, keepdim=True))
    if t.dtype.is_floating_point:
        check(k.mean(1), _oracle_sum(t, 1, mean=True))


@pytest.mark.parametrize("layout", ["column_slice", "row_step", "expanded", "slab_slice"])
@pytest.mark.parametrize("cols", [3, 300], ids=str)
def test_column_sums_of_views(layout, cols):
    base = torch.randn(50000 // cols + 7, cols + 5, dtype=torch.float64)
    if layout == "column_slice":  # rows apart by more than their length
        make = lambda x: x[:, 2:2 + cols]  # noqa: E731
    elif layout == "row_step":
        make = lambda x: x[::3, :cols]  # noqa: E731
    elif layout == "expanded":  # every row the same memory (row stride 0)
        make = lambda x: x[:1, :cols].expand(40000 // cols, cols)  # noqa: E731
    else:  # (B, R, K) with slabs and rows apart
        make = lambda x: x[:, :cols].unflatten(0, (1, -1))[:, 1:]  # noqa: E731
    t = make(base)
    k = make(to_kael(base))
    check(k.sum(-2), t.sum(-2))
    check(k.mean(-2), t.mean(-2))
    check(k.float().sum(-2), _oracle_sum(t.float(), -2))


@pytest.mark.parametrize("rows,cols", [(40000, 3), (3000, 64), (300, 600), (41, 2500), (520, 2100)], ids=str)
def test_column_sums_same_bits_across_threads(rows, cols):
    t = torch.randn(rows, cols) * 100
    k = to_kael(t)
    results = on_thread_counts(lambda: to_torch_exact(k.sum(0)))
    assert all(torch.equal(r, results[0]) for r in results), "column sums differ across thread counts"
    check(k.sum(0), _oracle_sum(t, 0))


def to_torch_exact(k):
    return torch.from_numpy(k.numpy().copy())


def on_thread_counts(fn, counts=(1, 2, 3)):
    """[fn() on each thread count], the thread count restored after."""
    old = kael.get_num_threads()
    try:
        results = []
        for n in counts:
            kael.set_num_threads(n)
            results.append(fn())
    finally:
        kael.set_num_threads(old)
    return results


# Short rows (kael/native/cpu/reduce.cpp): x.sum(1) of (R, K) with K < 16 adds each row in order
# in tasks of whole rows; from 16 the loop engine's inner loop (lane sums) takes them.
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int8", "bool"])
@pytest.mark.parametrize("cols", [1, 2, 3, 7, 15, 16, 17], ids=str)
def test_short_row_sums(dtype, cols):
    rows = 40000
    if dtype == "bool":
        t = torch.rand(rows, cols) < 0.5
    elif dtype.startswith("int"):
        info = torch.iinfo(getattr(torch, dtype))
        t = torch.randint(info.min, info.max, (rows, cols), dtype=getattr(torch, dtype))
    else:
        t = (torch.randn(rows, cols) * 3).to(getattr(torch, dtype))
    k = to_kael(t)
    check(k.sum(1), _oracle_sum(t, 1))
    check(k.sum(-1, keepdim=True), _oracle_sum(t, -1, keepdim=True))
    if t.dtype.is_floating_point:
        check(k.mean(1), _oracle_sum(t, 1, mean=True))
        # each row's sum is the bits of that row summed on its own
        picked = range(0, rows, 997)
        alone = torch.stack([to_torch_exact(k[i].sum()) for i in picked])
        assert torch.equal(to_torch_exact(k.sum(1))[list(picked)], alone)


@pytest.mark.parametrize("layout", ["column_slice", "row_step", "transposed_out"])
def test_short_row_sums_of_views(layout):
    base = torch.randn(30003, 9, dtype=torch.float64)
    k_base = to_kael(base)
    if layout == "column_slice":
        t, k = base[:, 2:5], k_base[:, 2:5]
    elif layout == "row_step":
        t, k = base[::2, :3], k_base[::2, :3]
    else:  # (3, R, 3) reduced over the last dim: the outputs of one slab R apart
        t, k = (x[:, :3].reshape(3, 10001, 3).transpose(0, 1) for x in (base, k_base))
    check(k.sum(-1), t.sum(-1))
    check(k.mean(-1), t.mean(-1))
