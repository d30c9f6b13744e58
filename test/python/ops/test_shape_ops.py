"""Shape ops against PyTorch: repeat, tile, flip, roll, unflatten, diagonal, tril/triu (+ in-place),
diag, diag_embed; views share storage with their base and record it (`_base`)."""
import pytest
import torch

import kael
from helpers import DTYPE_NAMES, check, check_view, compare, compare_raises, make_pair, to_kael

SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3), (2, 0, 3)]


def layouts_for(shape):
    out = ["contig"]
    if len(shape) >= 1 and all(shape):
        out += ["step", "expand"]
    if len(shape) >= 2 and all(shape):
        out += ["T", "transpose"]
    return out


# ---------------------------------------------------------------- repeat, tile

REPEATS = [((), ()), ((), (3,)), ((), (2, 3)), ((5,), (2,)), ((5,), (3, 2)), ((3, 4), (1, 1)), ((3, 4), (2, 3)),
           ((3, 4), (2, 1, 3)), ((3, 4), (0, 2)), ((2, 3, 4), (1, 2, 1, 2)), ((0, 3), (2, 2)), ((0, 3), (-2, 1))]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,reps", REPEATS, ids=str)
def test_repeat(dtype, shape, reps):
    for layout in layouts_for(shape):
        compare(lambda lib, x: x.repeat(reps), (shape, dtype, layout))
    if reps:
        compare(lambda lib, x: x.repeat(*reps), (shape, dtype))


def test_repeat_is_a_copy():
    x = kael.arange(3.0)
    r = x.repeat(1)
    assert r._base is None and r.data_ptr() != x.data_ptr()
    r[0] = 7.0
    assert x.tolist() == [0.0, 1.0, 2.0]


def test_repeat_bad_input():
    with pytest.raises(RuntimeError, match="can not be smaller than number of dimensions"):
        kael.zeros(2, 3).repeat(2)
    with pytest.raises(RuntimeError, match="negative dimension"):
        kael.zeros(2, 3).repeat(-1, 2)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).repeat(2)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).repeat(-1, 2)


TILES = [((), ()), ((), (2,)), ((5,), (2,)), ((3, 4), ()), ((3, 4), (2,)), ((3, 4), (2, 3)), ((3, 4), (2, 1, 3)),
         ((2, 3, 4), (2, 1)), ((0, 3), (2,))]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dims", TILES, ids=str)
def test_tile(dtype, shape, dims):
    for layout in layouts_for(shape):
        compare(lambda lib, x: lib.tile(x, dims), (shape, dtype, layout))
        compare(lambda lib, x: x.tile(dims), (shape, dtype, layout))


# ---------------------------------------------------------------- flip, roll

FLIPS = [((), ()), ((), (0,)), ((), (-1,)), ((5,), (0,)), ((3, 4), (0,)), ((3, 4), (1,)), ((3, 4), (0, 1)),
         ((3, 4), (-1, 0)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (1,)), ((2, 3, 4), ()), ((0, 3), (0, 1))]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dims", FLIPS, ids=str)
def test_flip(dtype, shape, dims):
    for layout in layouts_for(shape):
        compare(lambda lib, x: lib.flip(x, dims), (shape, dtype, layout))
        compare(lambda lib, x: x.flip(dims), (shape, dtype, layout))


def test_flip_bad_input():
    with pytest.raises(RuntimeError, match="appears multiple times"):
        kael.zeros(2, 3).flip((0, -2))
    with pytest.raises(IndexError):
        kael.zeros(2, 3).flip((2,))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).flip((0, -2))
    with pytest.raises(IndexError):
        torch.zeros(2, 3).flip((2,))


ROLLS = [((), 1, None), ((5,), 2, None), ((5,), -7, 0), ((3, 4), 5, None), ((3, 4), 1, 0), ((3, 4), -1, 1),
         ((3, 4), (1, 2), (0, 1)), ((3, 4), (1, 1), (1, 1)), ((2, 3, 4), (2, -5), (2, 0)), ((0, 3), 1, 1),
         ((0, 3), 2, None), ((3, 4), 2 ** 62, 1)]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,shifts,dims", ROLLS, ids=str)
def test_roll(dtype, shape, shifts, dims):
    kw = {} if dims is None else {"dims": dims}
    for layout in layouts_for(shape):
        compare(lambda lib, x: lib.roll(x, shifts, **kw), (shape, dtype, layout))
        compare(lambda lib, x: x.roll(shifts, **kw), (shape, dtype, layout))


def test_roll_bad_input():
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        kael.zeros(2, 3).roll((1, 2), 0)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        kael.zeros(2, 3).roll((1, 2))
    with pytest.raises(IndexError, match="no dimensions"):
        kael.tensor(1.0).roll(1, 0)
    with pytest.raises(IndexError):
        kael.zeros(2, 3).roll(1, 2)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).roll((1, 2), 0)
    with pytest.raises(IndexError):
        torch.tensor(1.0).roll(1, 0)


# ---------------------------------------------------------------- unflatten and diagonal: views

@pytest.mark.parametrize("shape,dim,sizes", [((6,), 0, (2, 3)), ((6,), 0, (-1, 2)), ((2, 6), 1, (3, 2)),
                                             ((2, 6), -1, (1, 6, 1)), ((4, 6, 2), 1, (2, -1, 3)), ((0, 4), 1, (2, 2)),
                                             ((0, 4), 0, (5, 0)), ((3, 4), 0, (3,))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_unflatten_is_a_view(shape, dim, sizes, dtype):
    for layout in layouts_for(shape):
        p = make_pair(shape, dtype, layout)
        tv, kv = torch.unflatten(p.t, dim, sizes), kael.unflatten(p.k, dim, sizes)
        check_view(kv, tv, p.kbase, p.tbase)
        assert kv._base is p.kbase
        check(p.k.unflatten(dim, sizes), p.t.unflatten(dim, sizes))


def test_unflatten_bad_input():
    with pytest.raises(RuntimeError, match="don't multiply up"):
        kael.zeros(2, 6).unflatten(1, (4, -1))
    with pytest.raises(RuntimeError, match="don't multiply up"):
        kael.zeros(2, 6).unflatten(1, (4, 2))
    with pytest.raises(RuntimeError, match="sizes must be non-empty"):
        kael.zeros(2, 6).unflatten(1, ())
    with pytest.raises(IndexError):
        kael.zeros(2, 6).unflatten(2, (6,))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 6).unflatten(1, (4, -1))


DIAGONALS = [((3, 4), 0, 0, 1), ((3, 4), 1, 0, 1), ((3, 4), -2, 0, 1), ((3, 4), 5, 0, 1), ((3, 4), -7, 1, 0),
             ((2, 3, 4), 0, 0, 2), ((2, 3, 4), 1, -1, 1), ((2, 3, 4), -1, 2, 0), ((0, 3), 0, 0, 1),
             ((3, 4), 2 ** 62, 0, 1), ((3, 4), -(2 ** 62), 0, 1)]


@pytest.mark.parametrize("shape,offset,dim1,dim2", DIAGONALS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "float16"])
def test_diagonal_is_a_view(shape, offset, dim1, dim2, dtype):
    for layout in layouts_for(shape):
        p = make_pair(shape, dtype, layout)
        tv = torch.diagonal(p.t, offset, dim1, dim2)
        kv = kael.diagonal(p.k, offset, dim1, dim2)
        check_view(kv, tv, p.kbase, p.tbase)
        assert kv._base is p.kbase
        check(p.k.diagonal(offset=offset, dim1=dim1, dim2=dim2), p.t.diagonal(offset=offset, dim1=dim1, dim2=dim2))
    # writes through the view reach the base
    p = make_pair(shape, "float32")
    kael.diagonal(p.k, offset, dim1, dim2).fill_(-5.0)
    torch.diagonal(p.t, offset, dim1, dim2).fill_(-5.0)
    check(p.k, p.t)


def test_diagonal_bad_input():
    with pytest.raises(RuntimeError, match="cannot be identical"):
        kael.zeros(2, 3).diagonal(0, 1, -1)
    with pytest.raises(IndexError):
        kael.zeros(3).diagonal()
    with pytest.raises(IndexError):
        kael.tensor(1.0).diagonal()
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).diagonal(0, 1, -1)
    with pytest.raises(IndexError):
        torch.zeros(3).diagonal()


# ---------------------------------------------------------------- tril, triu

TRI = [((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((4, 3), 5), ((4, 3), -5), ((2, 3, 4), 0), ((2, 3, 4), -2),
       ((2, 2, 3, 3), 1), ((0, 3), 0), ((3, 0), 1), ((2, 0, 3), 0), ((3, 3), 2 ** 62), ((3, 3), -(2 ** 62))]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,k", TRI, ids=str)
@pytest.mark.parametrize("fn", ["tril", "triu"])
def test_tril_triu(dtype, shape, k, fn):
    for layout in layouts_for(shape):
        compare(lambda lib, x: getattr(lib, fn)(x, k), (shape, dtype, layout))
        compare(lambda lib, x: getattr(x, fn)(diagonal=k), (shape, dtype, layout))
        if layout != "expand":
            compare(lambda lib, x: getattr(x, fn + "_")(k), (shape, dtype, layout), check_same=0)


def test_tril_triu_bad_input():
    for fn in ("tril", "triu"):
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            getattr(kael, fn)(kael.zeros(3))
        with pytest.raises(RuntimeError):
            getattr(torch, fn)(torch.zeros(3))
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            getattr(kael.zeros(1, 3).expand(3, 3), fn + "_")()


# ---------------------------------------------------------------- diag, diag_embed

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,k", [((4,), 0), ((4,), 2), ((4,), -3), ((0,), 1), ((3, 4), 0), ((3, 4), 1),
                                     ((3, 4), -2), ((3, 4), 9), ((0, 2), 0)], ids=str)
def test_diag(dtype, shape, k):
    for layout in layouts_for(shape):
        compare(lambda lib, x: lib.diag(x, k), (shape, dtype, layout))
        compare(lambda lib, x: x.diag(diagonal=k), (shape, dtype, layout))


def test_diag_of_a_matrix_is_a_copy():
    x = kael.ones(3, 3)
    d = kael.diag(x)
    assert d._base is None
    d.fill_(5.0)
    assert x.tolist() == [[1.0] * 3] * 3


def test_diag_bad_input():
    for shape in ((), (2, 2, 2)):
        with pytest.raises(RuntimeError, match="Supports 1D or 2D tensors"):
            kael.diag(kael.zeros(shape))
        with pytest.raises(RuntimeError):
            torch.diag(torch.zeros(shape))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,offset,dim1,dim2", [((3,), 0, -2, -1), ((3,), 1, 0, 1), ((3,), -2, 1, 0),
                                                    ((2, 3), 0, -2, -1), ((2, 3), 1, 0, 2), ((2, 3), -1, 2, 1),
                                                    ((2, 3, 4), 0, 1, 3), ((0,), 0, 0, 1), ((2, 0), 1, 0, 1)],
                         ids=str)
def test_diag_embed(dtype, shape, offset, dim1, dim2):
    for layout in layouts_for(shape):
        compare(lambda lib, x: lib.diag_embed(x, offset, dim1, dim2), (shape, dtype, layout))
        compare(lambda lib, x: x.diag_embed(offset=offset, dim1=dim1, dim2=dim2), (shape, dtype, layout))


def test_diag_embed_bad_input():
    with pytest.raises(RuntimeError, match="cannot be identical"):
        kael.diag_embed(kael.zeros(3), 0, 0, -2)
    with pytest.raises(IndexError):
        kael.diag_embed(kael.zeros(3), 0, 0, 2)
    with pytest.raises(IndexError):
        kael.diag_embed(kael.tensor(1.0))
    with pytest.raises(RuntimeError):
        torch.diag_embed(torch.zeros(3), 0, 0, -2)
    with pytest.raises(IndexError):
        torch.diag_embed(torch.tensor(1.0))


def test_roll_of_an_empty_tensor_checks_no_dim():
    # torch returns a copy of an empty tensor before it looks at dims
    compare(lambda lib, x: lib.roll(x, (1, 2), (5, 7)), ((0, 3), "float32"))
    compare(lambda lib, x: lib.roll(x, 1, -9), ((2, 0), "int64"))
    compare_raises(lambda lib, x: lib.roll(x, (1, 2), (0,)), ((0, 3), "float32"))


# ---------------------------------------------------------------- cat, stack

CATS = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 5)], 1), ([(2, 3), (2, 5)], -1), ([(2, 3, 4)] * 3, 1),
        ([(0, 3), (2, 3)], 0), ([(2, 0), (2, 3)], 1), ([(5,)], 0), ([(2, 3), (0,), (1, 3)], 0), ([(0,), (0,)], 0),
        ([(3,), (4,), (1,)], -1)]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shapes,dim", CATS, ids=str)
def test_cat(dtype, shapes, dim):
    specs = [(s, dtype) for s in shapes]
    compare(lambda lib, *xs: lib.cat(list(xs), dim), *specs)
    compare(lambda lib, *xs: lib.cat(tuple(xs), dim=dim), *specs)
    if dim == 0:
        compare(lambda lib, *xs: lib.cat(xs), *specs)


def test_cat_layouts_and_promotion():
    for layout in ("T", "step", "expand", "transpose"):
        compare(lambda lib, a, b: lib.cat([a, b], 1), ((3, 4), "float32", layout), ((3, 2), "float32", "T"))
    compare(lambda lib, a, b, c: lib.cat([a, b, c]), ((2, 3), "int32"), ((1, 3), "float16"), ((2, 3), "uint8"))
    compare(lambda lib, a, b: lib.cat([a, b], 0), ((2, 3), "bool"), ((1, 3), "int8"))


def test_cat_bad_input():
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 1.*tensor number 1"):
        kael.cat([kael.zeros(2, 3), kael.zeros(3, 3)], 1)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        kael.cat([kael.zeros(2, 3), kael.zeros(2, 3, 4)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        kael.cat([kael.tensor(1.0)])
    with pytest.raises(ValueError, match="non-empty"):  # torch's class here
        kael.cat([])
    with pytest.raises(IndexError):
        kael.cat([kael.zeros(2, 3)], 2)
    with pytest.raises(TypeError):
        kael.cat([kael.zeros(2), 3])
    with pytest.raises(RuntimeError):
        torch.cat([torch.zeros(2, 3), torch.zeros(3, 3)], 1)
    with pytest.raises(IndexError):
        torch.cat([torch.zeros(2, 3)], 2)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,n,dim", [((), 3, 0), ((), 2, -1), ((3,), 2, 0), ((3,), 2, 1), ((2, 3), 3, 1),
                                         ((2, 3), 1, -1), ((2, 3), 2, -3), ((0, 2), 2, 1)], ids=str)
def test_stack(dtype, shape, n, dim):
    specs = [(shape, dtype)] * n
    compare(lambda lib, *xs: lib.stack(list(xs), dim), *specs)
    compare(lambda lib, *xs: lib.stack(xs, dim=dim), *specs)
    compare(lambda lib, *xs: lib.stack(xs, dim=dim), *[(shape, dtype, "T" if len(shape) >= 2 else "contig")] * n)


def test_stack_bad_input():
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        kael.stack([kael.zeros(2, 3), kael.zeros(3, 3)])
    with pytest.raises(RuntimeError, match="non-empty"):
        kael.stack([])
    with pytest.raises(IndexError):
        kael.stack([kael.zeros(2)], 2)
    with pytest.raises(RuntimeError):
        torch.stack([torch.zeros(2, 3), torch.zeros(3, 3)])


# ---------------------------------------------------------------- split, chunk: tuples of views

SPLITS = [((6,), 2, 0), ((5,), 2, 0), ((5,), 5, 0), ((5,), 7, 0), ((4, 6), 4, 1), ((4, 6), 3, -1), ((4, 6), [1, 3], 0),
          ((4, 6), [6, 0], 1), ((4, 6), (2, 2, 2), -1), ((0, 3), 2, 0), ((0, 3), 0, 0), ((3, 0), [0, 0], 1)]


@pytest.mark.parametrize("shape,size,dim", SPLITS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_split_gives_views(shape, size, dim, dtype):
    for layout in layouts_for(shape):
        p = make_pair(shape, dtype, layout)
        tr, kr = torch.split(p.t, size, dim), kael.split(p.k, size, dim)
        assert type(kr) is tuple and len(kr) == len(tr)
        for kv, tv in zip(kr, tr):
            check_view(kv, tv, p.kbase, p.tbase)
            assert kv._base is p.kbase
        mr, tm = p.k.split(size, dim=dim), p.t.split(size, dim=dim)
        assert len(mr) == len(tm)
        for kv, tv in zip(mr, tm):
            check(kv, tv)


@pytest.mark.parametrize("shape,chunks,dim", [((6,), 3, 0), ((5,), 3, 0), ((6,), 4, 0), ((2,), 5, 0), ((0,), 3, 0),
                                              ((4, 7), 2, 1), ((4, 7), 3, -1), ((3, 0), 2, 1)], ids=str)
def test_chunk_gives_views(shape, chunks, dim):
    for layout in layouts_for(shape):
        p = make_pair(shape, "float32", layout)
        tr, kr = torch.chunk(p.t, chunks, dim), kael.chunk(p.k, chunks, dim)
        assert type(kr) is tuple and len(kr) == len(tr)
        for kv, tv in zip(kr, tr):
            check_view(kv, tv, p.kbase, p.tbase)
        assert len(p.k.chunk(chunks, dim=dim)) == len(tr)


def test_split_chunk_bad_input():
    x = kael.zeros(4, 6)
    with pytest.raises(RuntimeError, match="split_size can only be 0 if dimension size is 0"):
        x.split(0)
    with pytest.raises(RuntimeError, match="non-negative"):
        x.split(-1)
    with pytest.raises(RuntimeError, match="sum exactly to 4"):
        x.split([1, 2])
    with pytest.raises(RuntimeError, match="greater than 0"):
        x.chunk(0)
    with pytest.raises(IndexError):
        x.split(2, 2)
    with pytest.raises(RuntimeError, match="at least a 1-dimensional tensor"):
        kael.tensor(1.0).split(1)
    for f in (lambda t: t.split(0), lambda t: t.split([1, 2]), lambda t: t.chunk(0), lambda t: t.split(-1)):
        with pytest.raises(RuntimeError):
            f(torch.zeros(4, 6))


# ---------------------------------------------------------------- einsum

EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
           ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
           ("bij,bjk->bk", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
           ("...ij,...jk", [(1, 3, 4), (2, 4, 5)]), ("i...->...", [(3, 2, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
           ("iij->j", [(3, 3, 2)]), ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]), ("Ba,aB->", [(2, 3), (3, 2)]), ("bA", [(2, 3)]),
           (" i j -> j i ", [(2, 3)]), ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,kl->", [(2, 3), (4, 5)]),
           ("i,i", [(0,), (0,)]), ("ij,jk->ik", [(0, 3), (3, 2)]), ("->", [()]), ("", [()]), ("i,->i", [(3,), ()]),
           ("ab...,b->a...", [(2, 3, 4, 5), (3,)]), ("i1", [(2, 1)]) if False else ("ij,j->i", [(2, 1), (3,)])]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16", "bfloat16"])
def test_einsum(eq, shapes, dtype):
    specs = [(s, dtype) for s in shapes]
    tol = {"float16": 1e-2, "bfloat16": 1e-1}.get(dtype)
    compare(lambda lib, *xs: lib.einsum(eq, *xs), *specs, atol=tol, rtol=tol)
    compare(lambda lib, *xs: lib.einsum(eq, list(xs)), *specs, atol=tol, rtol=tol)


@pytest.mark.parametrize("layout", ["T", "step", "expand", "transpose"])
def test_einsum_layouts(layout):
    compare(lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), ((3, 3), "float32", layout), ((3, 4), "float32", "step"))
    compare(lambda lib, a: lib.einsum("ii->i", a), ((3, 3), "float64", layout))


def test_einsum_bad_input():
    a, b = kael.ones(2, 3), kael.ones(3, 4)
    cases = [("ij,jk->ik", [a], "fewer operands"), ("ij", [a, b], "more operands"),
             ("ijk", [a], "does not match the number of dimensions"), ("ij->iz", [a], "output subscript z does not appear"),
             ("ij->ii", [a], "appears more than once"), ("i.j", [a], "not part of any ellipsis"),
             ("ii", [kael.ones(2, 3)], "sizes don't match"), ("i,i", [kael.ones(2), kael.ones(3)], "broadcast"),
             ("i1", [kael.ones(2, 1)], "invalid subscript"), ("ij,jk", [a, kael.ones(3, 4, dtype=kael.float64)], "dtype")]
    for eq, ops, msg in cases:
        with pytest.raises((RuntimeError, ValueError), match=msg):
            kael.einsum(eq, *ops)
        with pytest.raises(RuntimeError):
            torch.einsum(eq, *[torch.ones(o.shape, dtype=torch.float64 if o.dtype is kael.float64 else torch.float32)
                               for o in ops])
