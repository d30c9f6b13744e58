"""Indexing ops against PyTorch: index_select, gather, scatter(_), scatter_add(_), index_add(_),
masked_select, nonzero, argwhere, take_along_dim.

Indices out of range raise IndexError naming the index and the size (PyTorch raises
RuntimeError for most of them), before anything is written (docs/decisions/indexing.md)."""
import pytest
import torch

import kael
from helpers import DTYPE_NAMES, HALF_NAMES, check, compare, make_pair, to_kael

INDEX_DTYPES = ["int64", "int32"]


def rand_index(shape, high, dtype="int64"):
    return torch.randint(0, max(high, 1), shape, dtype=getattr(torch, dtype)) if high > 0 else \
        torch.zeros(shape, dtype=getattr(torch, dtype))


def both(t):
    return t, to_kael(t)


def accumulating(dtype, fn):
    """fn(lib, x, s) for an op that adds values up (scatter_add, index_add). kael adds float16 and
    bfloat16 in float32 and rounds once (Note [Half accumulation] in index_ops.cpp); PyTorch's CPU
    kernels round after every addition on some paths, so torch's side computes in float32 too."""
    if dtype not in HALF_NAMES:
        return fn

    def via_float32(lib, x, s):
        if lib is torch:
            return fn(lib, x.float(), s.float()).to(x.dtype)
        return fn(lib, x, s)
    return via_float32


def compare_inplace(fn, x_spec, s_spec, dtype):
    """An accumulating in-place op: the result is self, and self holds torch's values."""
    if dtype not in HALF_NAMES:
        compare(fn, x_spec, s_spec, check_same=0)
        return
    p, q = make_pair(*x_spec), make_pair(*s_spec)
    r = fn(kael, p.k, q.k)
    assert r is p.k
    check(p.kbase, fn(torch, p.t.float(), q.t.float()).to(p.t.dtype))


# ---------------------------------------------------------------- index_select

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((4, 3), 0), ((4, 3), 1), ((4, 3), -1), ((2, 3, 4), 1),
                                       ((2, 3, 4), -3), ((3, 0), 0), ((0, 3), 1)], ids=str)
def test_index_select(dtype, shape, dim):
    n = shape[dim]
    ti, ki = both(rand_index((7,), n))
    if n == 0:
        ti, ki = both(torch.zeros(0, dtype=torch.int64))
    compare(lambda lib, x: lib.index_select(x, dim, ti if lib is torch else ki), (shape, dtype))
    compare(lambda lib, x: x.index_select(dim, ti if lib is torch else ki), (shape, dtype))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_index_select_layouts(index_dtype, layout):
    ti, ki = both(rand_index((9,), 3, index_dtype))
    for dim in (0, 1, -1):
        compare(lambda lib, x: lib.index_select(x, dim, ti if lib is torch else ki), ((3, 3, 3), "float32", layout))
    # a strided index
    tib, kib = both(rand_index((10,), 3, index_dtype))
    compare(lambda lib, x: lib.index_select(x, 1, tib[::2] if lib is torch else kib[::2]), ((3, 3), "float64", layout))


def test_index_select_zero_dim_and_scalar_index():
    compare(lambda lib, x: lib.index_select(x, 0, lib.tensor([0])), ((), "float32"))
    compare(lambda lib, x: lib.index_select(x, -1, lib.tensor(0)), ((), "int64"))
    compare(lambda lib, x: lib.index_select(x, 0, lib.tensor(2)), ((4, 2), "float32"))


def test_index_select_bad_input():
    x = kael.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index_select: index 4 is out of bounds for dimension 1 with size 4"):
        kael.index_select(x, 1, kael.tensor([0, 4]))
    with pytest.raises(IndexError, match=r"index -1 is out of bounds"):
        kael.index_select(x, 0, kael.tensor([-1]))
    with pytest.raises(IndexError, match="dimension out of range"):
        kael.index_select(x, 2, kael.tensor([0]))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        kael.index_select(x, 0, kael.tensor([[0]]))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        kael.index_select(x, 0, kael.tensor([0], dtype=kael.int16))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        kael.index_select(x, 0, kael.tensor([0.0]))
    # torch agrees that each of these is an error
    for idx, dim in (([0, 4], 1), ([-1], 0), ([0], 2)):
        with pytest.raises((RuntimeError, IndexError)):
            torch.index_select(torch.zeros(3, 4), dim, torch.tensor(idx))


# ---------------------------------------------------------------- gather

GATHER_CASES = [((5,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 5), 1), ((4, 3), (2, 2), -1),
                ((2, 3, 4), (2, 5, 4), 1), ((2, 3, 4), (1, 1, 1), -3), ((3, 4), (0, 4), 0), ((), (), 0), ((), (), -1)]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", GATHER_CASES, ids=str)
def test_gather(dtype, shape, ishape, dim):
    n = shape[dim] if shape else 1
    ti, ki = both(rand_index(ishape, n))
    compare(lambda lib, x: lib.gather(x, dim, ti if lib is torch else ki), (shape, dtype))
    compare(lambda lib, x: x.gather(dim, ti if lib is torch else ki, sparse_grad=False), (shape, dtype))


@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_gather_layouts(layout):
    for dim in (0, 1, 2):
        tb = rand_index((6, 6, 6), 3)
        kb = to_kael(tb)
        # a non-contiguous index too
        compare(lambda lib, x: lib.gather(x, dim, (tb if lib is torch else kb)[::2, :3].transpose(1, 2)),
                ((3, 3, 3), "float32", layout))


def test_gather_bad_input():
    x = kael.zeros(3, 4)
    # an index out of range and the shapes: torch's RuntimeError
    with pytest.raises(RuntimeError, match=r"gather: index 4 is out of bounds for dimension 1 with size 4"):
        kael.gather(x, 1, kael.tensor([[0, 4]]))
    with pytest.raises(RuntimeError, match=r"index -1 is out of bounds for dimension 0 with size 3"):
        kael.gather(x, 0, kael.tensor([[-1]]))
    with pytest.raises(IndexError):
        kael.gather(x, -3, kael.tensor([[0]]))
    with pytest.raises(RuntimeError, match="int32/int64"):
        kael.gather(x, 0, kael.tensor([[0]], dtype=kael.int16))
    with pytest.raises(RuntimeError, match="int32/int64"):
        torch.gather(torch.zeros(3, 4), 0, torch.tensor([[0]], dtype=torch.int16))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        kael.gather(x, 0, kael.tensor([0]))
    with pytest.raises(RuntimeError, match="Size does not match at dimension 0"):
        kael.gather(x, 1, kael.zeros(4, 1, dtype=kael.int64))
    with pytest.raises(RuntimeError):
        torch.gather(torch.zeros(3, 4), 1, torch.zeros(4, 1, dtype=torch.int64))


# ---------------------------------------------------------------- scatter, scatter_add

SCATTER_CASES = [((5,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 2), 1), ((4, 3), (2, 2), -1),
                 ((2, 3, 4), (2, 2, 3), 1), ((3, 4), (0, 4), 0), ((), (), 0)]


def scatter_index(ishape, n, unique_along=None):
    """An index for scatter; with unique_along, no two entries of one slice along that dim collide
    (scatter with duplicate positions picks one of the values in torch: no oracle)."""
    if unique_along is None or not ishape:
        return rand_index(ishape, n)
    d = unique_along % len(ishape)
    k = ishape[d]
    perm = torch.stack([torch.randperm(n)[:k] for _ in range(max(1, torch.Size(ishape).numel() // max(k, 1)))])
    # perm rows hold k distinct positions each; lay them along d
    moved = list(ishape[:d]) + list(ishape[d + 1:]) + [k]
    rows = perm[: max(1, torch.Size(moved[:-1]).numel())].reshape(moved)
    return rows.movedim(-1, d).contiguous()


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", SCATTER_CASES, ids=str)
def test_scatter_src_and_value(dtype, shape, ishape, dim):
    n = shape[dim] if shape else 1
    ti, ki = both(scatter_index(ishape, n, unique_along=dim))
    src = (ishape, dtype)
    compare(lambda lib, x, s: lib.scatter(x, dim, ti if lib is torch else ki, s), (shape, dtype), src)
    compare(lambda lib, x, s: x.scatter(dim, ti if lib is torch else ki, s), (shape, dtype), src)
    compare(lambda lib, x, s: x.clone().scatter_(dim, ti if lib is torch else ki, s), (shape, dtype), src)
    value = True if dtype == "bool" else 3
    compare(lambda lib, x: lib.scatter(x, dim, ti if lib is torch else ki, value), (shape, dtype))
    compare(lambda lib, x: x.scatter_(dim, ti if lib is torch else ki, value), (shape, dtype), check_same=0)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", SCATTER_CASES, ids=str)
def test_scatter_add(dtype, shape, ishape, dim):
    n = shape[dim] if shape else 1
    # duplicate positions on purpose: they add up
    ti, ki = both(rand_index(ishape, n))
    src = (ishape, dtype)
    compare(accumulating(dtype, lambda lib, x, s: lib.scatter_add(x, dim, ti if lib is torch else ki, s)),
            (shape, dtype), src)
    compare(accumulating(dtype, lambda lib, x, s: x.scatter_add(dim, ti if lib is torch else ki, s)), (shape, dtype),
            src)
    compare_inplace(lambda lib, x, s: x.scatter_add_(dim, ti if lib is torch else ki, s), (shape, dtype), src, dtype)


def test_scatter_add_duplicates_accumulate_deterministically():
    # many duplicates in float32: the order of the additions shows in the rounding, and must be
    # the same on every run
    idx = torch.zeros(100000, dtype=torch.int64)
    src = torch.rand(100000) * 1000
    k = [kael.zeros(1).scatter_add_(0, to_kael(idx), to_kael(src)).item() for _ in range(3)]
    assert k[0] == k[1] == k[2]
    expect = torch.zeros(1, dtype=torch.float64).scatter_add_(0, idx, src.double()).item()
    assert abs(k[0] - expect) <= 1e-4 * abs(expect)


@pytest.mark.parametrize("layout", ["T", "step", "transpose"])
def test_scatter_into_views(layout):
    # self a non-contiguous view: the write goes through to its base
    ti, ki = both(scatter_index((2, 3, 3), 3, unique_along=1))
    p = make_pair((3, 3, 3), "float32", layout)
    s = make_pair((2, 3, 3), "float32")
    p.t.scatter_(1, ti, s.t)
    p.k.scatter_(1, ki, s.k)
    check(p.kbase, p.tbase)
    q = make_pair((3, 3, 3), "float64", layout)
    q.t.scatter_add_(0, ti, s.t.double())
    q.k.scatter_add_(0, ki, s.k.double())
    check(q.kbase, q.tbase)


def test_scatter_bad_input_leaves_self_untouched():
    x = kael.arange(12.0).reshape(3, 4)
    before = x.tolist()
    with pytest.raises(RuntimeError, match=r"scatter_: index 7 is out of bounds for dimension 1 with size 4"):
        x.scatter_(1, kael.tensor([[0, 1, 7]]), kael.ones(1, 3))
    with pytest.raises(RuntimeError, match=r"scatter_add_: index -2 is out of bounds for dimension 0 with size 3"):
        x.scatter_add_(0, kael.tensor([[0], [-2]]), kael.ones(2, 1))
    with pytest.raises(RuntimeError, match=r"index 3 is out of bounds"):
        x.scatter_(0, kael.tensor([[1, 3]]), 5.0)
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_(0, kael.tensor([[0]]), kael.ones(1, 1, dtype=kael.float64))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.scatter_(0, kael.tensor([0]), kael.ones(1, 1))
    with pytest.raises(RuntimeError, match="no larger"):
        x.scatter_(0, kael.zeros(2, 2, dtype=kael.int64), kael.ones(1, 1))
    with pytest.raises(IndexError):
        x.scatter_(2, kael.tensor([[0]]), 1.0)
    assert x.tolist() == before
    for f in (lambda t: t.scatter_(1, torch.tensor([[0, 1, 7]]), torch.ones(1, 3)),
              lambda t: t.scatter_(0, torch.tensor([[0]]), torch.ones(1, 1, dtype=torch.float64)),
              lambda t: t.scatter_(0, torch.zeros(2, 2, dtype=torch.int64), torch.ones(1, 1))):
        with pytest.raises(RuntimeError):
            f(torch.zeros(3, 4))


def test_scatter_overlap_is_refused_before_writing():
    x = kael.arange(8.0)
    before = x.tolist()
    # src is self: PyTorch refuses (assert_no_overlap)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x.scatter_(0, kael.tensor([1, 0]), x)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x[:4].scatter_add_(0, kael.tensor([1, 0]), x[2:6])
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        kael.zeros(1).expand(4).scatter_(0, kael.tensor([0]), 1.0)
    assert x.tolist() == before
    t = torch.arange(8.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        t.scatter_(0, torch.tensor([1, 0]), t)
    # an index that shares self's bytes (int64 viewed as float64 is not possible in kael, so use
    # a too-hard overlap): src read through a step view of self's storage is snapshot first
    y = kael.arange(8.0)
    ty = torch.arange(8.0)
    y[::2].scatter_(0, kael.tensor([3, 2, 1, 0]), y[1::2])
    ty[::2].scatter_(0, torch.tensor([3, 2, 1, 0]), ty[1::2])
    check(y, ty)


# ---------------------------------------------------------------- index_add

INDEX_ADD_CASES = [((5,), 0, 4), ((4, 3), 0, 6), ((4, 3), 1, 2), ((4, 3), -1, 5), ((2, 3, 4), 1, 3),
                   ((3, 4), 0, 0), ((), 0, 1)]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim,k", INDEX_ADD_CASES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_index_add(dtype, shape, dim, k, index_dtype):
    n = shape[dim] if shape else 1
    ti, ki = both(rand_index((k,) if shape else (), n, index_dtype))  # duplicates on purpose
    if shape:
        sshape = list(shape)
        sshape[dim] = k
        sshape = tuple(sshape)
    else:
        sshape = ()
    src = (sshape, dtype)
    compare(accumulating(dtype, lambda lib, x, s: lib.index_add(x, dim, ti if lib is torch else ki, s)),
            (shape, dtype), src)
    compare_inplace(lambda lib, x, s: x.index_add_(dim, ti if lib is torch else ki, s), (shape, dtype), src, dtype)
    if dtype != "bool":
        alpha = 2.5 if dtype in ("float16", "bfloat16", "float32", "float64") else 3
        compare(accumulating(dtype, lambda lib, x, s: x.index_add(dim, ti if lib is torch else ki, s, alpha=alpha)),
                (shape, dtype), src)


@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_index_add_layouts(layout):
    ti, ki = both(rand_index((5,), 3))
    compare(lambda lib, x, s: lib.index_add(x, 1, ti if lib is torch else ki, s), ((3, 3, 3), "float32", layout),
            ((3, 5, 3), "float32", "T"))


@pytest.mark.parametrize("op", ["gather", "scatter", "scatter_value", "scatter_add", "scatter_reduce", "scatter_",
                                "scatter_add_"])
def test_gather_and_scatters_take_int32_indices_as_torch(op):
    data = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    idx = [[1, 0, 1], [0, 0, 2]]
    res = {}
    for lib in (torch, kael):
        x = lib.tensor(data)
        i32 = lib.tensor(idx, dtype=lib.int32)[:, ::1]
        src = lib.tensor(data) * 10
        if op == "gather":
            r = lib.gather(x, 1, i32)
        elif op == "scatter":
            r = x.scatter(1, i32, src)
        elif op == "scatter_value":
            r = x.scatter(0, i32[:, :2], 7.0)
        elif op == "scatter_add":
            r = x.scatter_add(1, i32, src)
        elif op == "scatter_reduce":
            r = x.scatter_reduce(1, i32, src, "amax", include_self=False)
        elif op == "scatter_":
            r = x.scatter_(0, i32.t()[:2].t().contiguous(), src)
        else:
            r = x.scatter_add_(1, i32, src)
        res[lib] = r.tolist()
    assert res[kael] == res[torch]
    with pytest.raises(RuntimeError):  # torch's class (index_select's is IndexError)
        kael.gather(kael.zeros(2, 3), 1, kael.tensor([[3]], dtype=kael.int32))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("alpha", [1.5, -1.5, 0.5, 2.9])
def test_index_add_floating_alpha_on_integers_truncates_as_torch(dtype, alpha):
    base = [10, 20, 30] if dtype != "bool" else [True, False, False]
    src = [3, 5] if dtype != "bool" else [True, False]
    try:
        t = torch.index_add(torch.tensor(base, dtype=getattr(torch, dtype)), 0, torch.tensor([0, 2]),
                            torch.tensor(src, dtype=getattr(torch, dtype)), alpha=alpha)
    except RuntimeError:  # a negative alpha on uint8: torch refuses its conversion, and so must kael
        with pytest.raises(RuntimeError, match="without overflow"):
            kael.index_add(kael.tensor(base, dtype=getattr(kael, dtype)), 0, kael.tensor([0, 2]),
                           kael.tensor(src, dtype=getattr(kael, dtype)), alpha=alpha)
        return
    k = kael.index_add(kael.tensor(base, dtype=getattr(kael, dtype)), 0, kael.tensor([0, 2]),
                       kael.tensor(src, dtype=getattr(kael, dtype)), alpha=alpha)
    assert k.dtype == getattr(kael, dtype)
    assert k.tolist() == t.tolist()
    x = kael.tensor(base, dtype=getattr(kael, dtype))
    x.index_add_(0, kael.tensor([0, 2]), kael.tensor(src, dtype=getattr(kael, dtype)), alpha=alpha)
    assert x.tolist() == t.tolist()


def test_index_add_bad_input():
    x = kael.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index_add_: index 3 is out of bounds for dimension 0 with size 3"):
        x.index_add_(0, kael.tensor([0, 3]), kael.ones(2, 4))
    with pytest.raises(RuntimeError, match=r"Number of indices \(2\) should be equal to source.size\(dim\)"):
        x.index_add_(0, kael.tensor([0, 1]), kael.ones(3, 4))
    with pytest.raises(RuntimeError, match="source tensor shape must match self tensor shape"):
        x.index_add_(0, kael.tensor([0, 1]), kael.ones(2, 3))
    with pytest.raises(RuntimeError, match="must have the same scalar type"):
        x.index_add_(0, kael.tensor([0]), kael.ones(1, 4, dtype=kael.float64))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.index_add_(0, kael.tensor([[0]]), kael.ones(1, 4))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x.index_add_(0, kael.tensor([0, 1, 2]), x)
    assert x.tolist() == [[0.0] * 4] * 3
    with pytest.raises(RuntimeError):
        torch.zeros(3, 4).index_add_(0, torch.tensor([0, 1]), torch.ones(3, 4))


def test_index_add_duplicates_deterministic():
    idx = torch.randint(0, 3, (50000,))
    src = torch.rand(50000, 4)
    ki, ks = to_kael(idx), to_kael(src)
    r = [kael.zeros(3, 4).index_add_(0, ki, ks).tolist() for _ in range(3)]
    assert r[0] == r[1] == r[2]
    check(kael.zeros(3, 4, dtype=kael.float64).index_add_(0, ki, ks.double()),
          torch.zeros(3, 4, dtype=torch.float64).index_add_(0, idx, src.double()))


# ---------------------------------------------------------------- masked_select, nonzero, argwhere

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,mshape", [((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)),
                                          ((), ()), ((), (3,)), ((0, 4), (4,)), ((2, 3, 4), (2, 1, 4))], ids=str)
def test_masked_select(dtype, shape, mshape):
    tm = torch.rand(mshape) > 0.5
    km = to_kael(tm)
    compare(lambda lib, x: lib.masked_select(x, tm if lib is torch else km), (shape, dtype))
    compare(lambda lib, x: x.masked_select(tm if lib is torch else km), (shape, dtype))


@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_masked_select_layouts(layout):
    tm = torch.rand(6, 3, 6) > 0.5
    km = to_kael(tm)
    compare(lambda lib, x: lib.masked_select(x, (tm if lib is torch else km)[::2].transpose(0, 2)),
            ((3, 3, 3), "float32", layout))


def test_masked_select_bad_input():
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        kael.masked_select(kael.zeros(3), kael.tensor([1, 0, 1], dtype=kael.uint8))
    with pytest.raises(RuntimeError, match="not broadcastable"):
        kael.masked_select(kael.zeros(3), kael.tensor([True, False]))
    with pytest.raises(RuntimeError):
        torch.masked_select(torch.zeros(3), torch.tensor([1, 0, 1], dtype=torch.uint8))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4), (0, 3), (3, 0, 2), (1, 1, 1, 5)], ids=str)
@pytest.mark.parametrize("fn", ["nonzero", "argwhere"])
def test_nonzero_and_argwhere(dtype, shape, fn):
    t = torch.randint(-2, 3, shape).to(getattr(torch, dtype))  # about 40% zeros
    k = to_kael(t)
    check(getattr(kael, fn)(k), getattr(torch, fn)(t))
    check(getattr(k, fn)(), getattr(t, fn)())


def test_nonzero_special_values():
    t = torch.tensor([0.0, -0.0, float("nan"), 1e-45, float("inf"), -1.0])
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        check(kael.nonzero(to_kael(t.to(dt))), torch.nonzero(t.to(dt)))
        check(kael.count_nonzero(to_kael(t.to(dt))), torch.count_nonzero(t.to(dt)))


@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_nonzero_layouts(layout):
    compare(lambda lib, x: lib.nonzero(x), ((3, 4, 5), "int64", layout))
    compare(lambda lib, x: lib.nonzero(x), ((3, 4, 5), "bool", layout))


# ---------------------------------------------------------------- take_along_dim

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,ishape,dim", [((4, 3), (4, 2), 1), ((4, 3), (1, 5), 1), ((4, 3), (2, 1), 0),
                                              ((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (1, 5, 1), 1),
                                              ((4, 3), (5,), None), ((), (2,), None), ((3, 4), (0, 4), 0)], ids=str)
def test_take_along_dim(dtype, shape, ishape, dim):
    n = (shape[dim] if dim is not None else max(torch.Size(shape).numel(), 1))
    # with a dim, negative indices count from the end (without one, torch refuses them)
    ti, ki = both(torch.randint(-n if dim is not None else 0, n, ishape))
    kw = {} if dim is None else {"dim": dim}
    compare(lambda lib, x: lib.take_along_dim(x, ti if lib is torch else ki, **kw), (shape, dtype))
    compare(lambda lib, x: x.take_along_dim(ti if lib is torch else ki, **kw), (shape, dtype))


def test_take_along_dim_bad_input():
    x = kael.zeros(3, 4)
    with pytest.raises(RuntimeError, match="out of bounds"):
        kael.take_along_dim(x, kael.tensor([[5]]), dim=1)
    with pytest.raises(RuntimeError, match="out of bounds"):
        kael.take_along_dim(x, kael.tensor([[-5]]), dim=1)
    with pytest.raises(RuntimeError, match="Long"):
        kael.take_along_dim(x, kael.tensor([[0]], dtype=kael.int32), dim=1)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        kael.take_along_dim(x, kael.tensor([0]), dim=1)
    with pytest.raises(IndexError):
        kael.take_along_dim(x, kael.tensor([[0]]), dim=2)
    # torch 2.13 takes any index modulo the size here (-5 and 3 both give column 3): kael raises
    # for an index outside [-size, size) (docs/decisions/indexing.md)
    assert torch.take_along_dim(torch.arange(12.0).reshape(3, 4), torch.tensor([[-5]]), dim=1).flatten().tolist() == \
        [3.0, 7.0, 11.0]


def test_empty_index_tensors_follow_torch():
    # torch checks neither the dtype nor the dims of an empty index for gather/scatter (but does
    # for index_select/index_add and take_along_dim with a dim)
    fx = lambda lib: lib.zeros(0)  # noqa: E731
    compare(lambda lib, x: lib.gather(x, 1, fx(lib)), ((2, 3), "float32"))
    compare(lambda lib, x: lib.gather(x, 1, lib.zeros(0, 0)), ((2, 3), "float32"))
    compare(lambda lib, x: lib.scatter(x, 1, fx(lib), 1.0), ((2, 3), "float32"))
    compare(lambda lib, x: lib.scatter(x, 1, fx(lib), lib.zeros(3)), ((2, 3), "float32"))
    compare(lambda lib, x: lib.scatter_add(x, 0, fx(lib), lib.zeros(3)), ((), "float32"))
    compare(lambda lib, x: lib.take_along_dim(x, fx(lib)), ((2, 3), "float32"))
    for f in (lambda lib, x: lib.index_select(x, 1, fx(lib)),
              lambda lib, x: x.index_add(1, fx(lib), lib.zeros(2, 0)),
              lambda lib, x: lib.take_along_dim(x, lib.zeros(2, 0), 1),
              lambda lib, x: lib.gather(x, 5, lib.zeros(0, dtype=lib.int64)),
              lambda lib, x: lib.scatter(x, 1, lib.zeros(0, dtype=lib.int64), lib.zeros(3, dtype=lib.int64))):
        with pytest.raises((RuntimeError, IndexError)):
            f(torch, torch.zeros(2, 3))
        with pytest.raises((RuntimeError, IndexError)):
            f(kael, kael.zeros(2, 3))


def test_take_along_dim_without_dim_takes_any_layout():
    # torch views input and indices as 1-d here and raises for a transposed index; kael reshapes
    x = torch.arange(6.0).reshape(2, 3)
    idx = torch.tensor([[0, 5, 1], [2, 2, 4]])
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        torch.take_along_dim(x, idx.T)
    check(kael.take_along_dim(to_kael(x), to_kael(idx).T), torch.take_along_dim(x, idx.T.contiguous()))
    check(kael.take_along_dim(to_kael(x).T, to_kael(idx)), torch.take_along_dim(x.T.contiguous(), idx))
