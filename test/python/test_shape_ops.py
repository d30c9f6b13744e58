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
    with pytest.raises(ValueError, match="negative dimension"):
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
