"""Reductions beyond sum/mean: prod, max/min, amax/amin, argmax/argmin, all/any, norm,
logsumexp, var/std -- against PyTorch over shapes, dims, keepdim, dtypes, layouts, NaN, ties,
empty and 0-d inputs, errors, and determinism across thread counts."""
import math
import warnings

import pytest
import torch

import kael
from helpers import (DTYPE_NAMES, FLOAT_NAMES, LAYOUTS, check, make_pair, rand_torch, tdtype, to_kael,
                     to_torch)

INF = math.inf


def run_both(fn, tx, kx, atol=None, rtol=None):
    """fn(lib, x) on torch and kael: equal results, or the same exception class."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tres = fn(torch, tx)
        except Exception as e:  # noqa: BLE001 -- torch's class is the oracle
            terr = e
        else:
            terr = None
    if terr is not None:
        # torch's NotImplementedError for an unsupported dtype is a RuntimeError; kael raises
        # RuntimeError for those (docs/decisions/errors.md, Errors)
        cls = RuntimeError if isinstance(terr, NotImplementedError) else type(terr)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(cls):
                fn(kael, kx)
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kres = fn(kael, kx)
    if isinstance(tres, tuple):
        assert len(kres) == len(tres)
        for a, b in zip(kres, tres):
            check(a, b, atol=atol, rtol=rtol)
    else:
        check(kres, tres, atol=atol, rtol=rtol)
    return kres


def both(fn, shape, dtype, layout="contig", domain="any", atol=None, rtol=None):
    p = make_pair(shape, dtype, layout, domain)
    return run_both(fn, p.t, p.k, atol=atol, rtol=rtol)


def dim_kw(dim, keepdim):
    kw = {}
    if dim is not None:
        kw["dim"] = dim
    if keepdim is not None:
        kw["keepdim"] = keepdim
    return kw


# (shape, dim) with dim an int or None: the ops whose dim is one int (prod, argmax, argmin).
INT_DIM_CASES = [
    ((), None), ((), 0), ((), -1),
    ((7,), None), ((7,), 0), ((7,), -1),
    ((3, 5), None), ((3, 5), 0), ((3, 5), 1), ((3, 5), -2),
    ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 1, 3, 2), 2), ((4, 1), 1),
    ((0,), 0), ((0, 3), 0), ((0, 3), 1), ((3, 0), 0), ((3, 0), None), ((0,), None),
]

# (shape, dim) with dim a tuple, an int or None: amax, amin, all, any, norm, var, std.
LIST_DIM_CASES = [
    ((), None), ((), 0), ((), (0,)), ((), (-1,)),
    ((6,), None), ((6,), 0), ((6,), (-1,)),
    ((3, 4), None), ((3, 4), 0), ((3, 4), (1,)), ((3, 4), (0, 1)), ((3, 4), (-1, -2)), ((3, 4), [1, 0]),
    ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, 0)), ((2, 3, 4), 1), ((2, 1, 3, 2), (1, 3)), ((2, 3, 4), (0, 1, 2)),
    ((0,), None), ((0,), 0), ((0, 3), 0), ((0, 3), 1), ((3, 0), (0,)), ((3, 0), (1,)), ((2, 0, 3), (0, 2)),
]


# ------------------------------------------------------------------------------------- prod

# torch.prod takes keepdim only with a dim: keepdim=True is paired with the cases that have one.
PROD_CASES = [(shape, dim, keepdim) for shape, dim in INT_DIM_CASES for keepdim in (None, True)
              if dim is not None or keepdim is None]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim,keepdim", PROD_CASES, ids=str)
def test_prod(dtype, shape, dim, keepdim):
    # small magnitudes so float products stay representable; integers wrap as in torch
    both(lambda lib, x: lib.prod(x, **dim_kw(dim, keepdim)), shape, dtype, domain="small")


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_prod_method_and_dtype_keyword(dtype):
    both(lambda lib, x: x.prod(), (3, 4), dtype, domain="small")
    both(lambda lib, x: x.prod(1, True), (3, 4), dtype, domain="small")
    for out in ["int32", "int64", "float32", "float64", "float16"]:
        both(lambda lib, x: lib.prod(x, dtype=getattr(lib, out)), (3, 4), dtype, domain="small")
        both(lambda lib, x: lib.prod(x, 0, dtype=getattr(lib, out)), (3, 4), dtype, domain="small")


def test_prod_integers_wrap_and_promote():
    t = torch.tensor([2**40, 2**30, 3, -5], dtype=torch.int64)
    check(kael.prod(to_kael(t)), torch.prod(t))
    t = torch.tensor([100, 100, 100], dtype=torch.int8)
    check(kael.prod(to_kael(t)), torch.prod(t))
    check(kael.prod(to_kael(t), dtype=kael.int8), torch.prod(t, dtype=torch.int8))
    t = torch.tensor([[True, False], [True, True]])
    check(kael.prod(to_kael(t), 1), torch.prod(t, 1))


def test_prod_with_zeros_and_specials():
    t = torch.tensor([[1.5, 0.0, -2.0], [INF, 2.0, -0.0], [math.nan, 1.0, 2.0], [INF, 0.0, 1.0]])
    for dim in [0, 1]:
        check(kael.prod(to_kael(t), dim), torch.prod(t, dim))
    check(kael.prod(to_kael(t)), torch.prod(t))


# ------------------------------------------------------------------------------------- max/min/amax/amin

@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LIST_DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_amax_amin(name, dtype, shape, dim, keepdim):
    both(lambda lib, x: getattr(lib, name)(x, **dim_kw(dim, keepdim)), shape, dtype)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(), (1,), (5,), (3, 4), (2, 3, 5), (0,), (2, 0)], ids=str)
def test_max_min_of_everything(name, dtype, shape):
    both(lambda lib, x: getattr(lib, name)(x), shape, dtype)
    both(lambda lib, x: getattr(x, name)(), shape, dtype)


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_extremes_propagate_nan(name, dtype):
    t = rand_torch((4, 9), dtype)
    t[1, 3] = math.nan
    t[2, 0] = INF
    t[3, 5] = -INF
    t[3, 7] = math.nan
    k = to_kael(t)
    fn = getattr(torch, name)
    check(getattr(kael, name)(k), fn(t))
    if name in ("amax", "amin"):
        for dim in [0, 1, (0, 1)]:
            check(getattr(kael, name)(k, dim), fn(t, dim))


def test_amax_zero_and_negative_zero():
    t = torch.tensor([0.0, -0.0, -1.0])
    check(kael.amax(to_kael(t)), torch.amax(t))
    check(kael.amin(to_kael(-t)), torch.amin(-t))


# ------------------------------------------------------------------------------------- argmax/argmin

@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", INT_DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_argmax_argmin(name, dtype, shape, dim, keepdim):
    # "small" draws integers from 0..3 (and floats from a few values below): many ties
    both(lambda lib, x: getattr(lib, name)(x, **dim_kw(dim, keepdim)), shape, dtype, domain="small")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8", "float32", "float16", "bfloat16"])
def test_argmax_ties_pick_the_first(name, dtype):
    t = torch.randint(0, 3, (6, 40)).to(getattr(torch, dtype))
    k = to_kael(t)
    for dim in [None, 0, 1, -1]:
        check(getattr(kael, name)(k, dim), getattr(torch, name)(t, dim))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_argmax_picks_nan(name, dtype):
    t = rand_torch((5, 12), dtype)
    t[1, 4] = math.nan
    t[1, 9] = math.nan
    t[3, 0] = INF
    t[4, 11] = -INF
    k = to_kael(t)
    for dim in [None, 0, 1]:
        check(getattr(kael, name)(k, dim), getattr(torch, name)(t, dim))


# ------------------------------------------------------------------------------------- all/any

@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LIST_DIM_CASES + [((3, 4), ()), ((), ())], ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_all_any(name, dtype, shape, dim, keepdim):
    both(lambda lib, x: getattr(lib, name)(x, **dim_kw(dim, keepdim)), shape, dtype, domain="small")


@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_special_values(name):
    t = torch.tensor([[math.nan, 0.0], [-0.0, 0.0], [INF, 1.0], [1e-45, 2.0]])
    for dim in [None, 0, 1]:
        check(getattr(kael, name)(to_kael(t), dim), getattr(torch, name)(t, dim))


# ------------------------------------------------------------------------------------- norm

NORM_PS = [2, 1, INF, -INF, 0, 3.5, 0.5, -1.5]


@pytest.mark.parametrize("p", NORM_PS, ids=str)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LIST_DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_norm(p, dtype, shape, dim, keepdim):
    both(lambda lib, x: lib.norm(x, p, **dim_kw(dim, keepdim)), shape, dtype)


def test_norm_default_p_and_method():
    both(lambda lib, x: lib.norm(x), (3, 5), "float32")
    both(lambda lib, x: x.norm(), (3, 5), "float64")
    both(lambda lib, x: x.norm(1, 0, True), (3, 5), "float32")
    both(lambda lib, x: lib.norm(x, p=INF, dim=(0, 1)), (3, 5), "float32")


@pytest.mark.parametrize("src", FLOAT_NAMES)
@pytest.mark.parametrize("dst", DTYPE_NAMES)
def test_norm_dtype_keyword(src, dst):
    both(lambda lib, x: lib.norm(x, 2, dtype=getattr(lib, dst)), (3, 4), src)
    both(lambda lib, x: lib.norm(x, 1, 0, dtype=getattr(lib, dst)), (3, 4), src)


def test_norm_special_values():
    t = torch.tensor([[math.nan, 1.0, 2.0], [INF, -3.0, 0.0], [-INF, 0.0, 0.0], [0.0, 0.0, 0.0]])
    for p in NORM_PS:
        for dim in [0, 1]:
            check(kael.norm(to_kael(t), p, dim), torch.norm(t, p, dim))


# ------------------------------------------------------------------------------------- logsumexp

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", [c for c in LIST_DIM_CASES if c[1] is not None], ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_logsumexp(dtype, shape, dim, keepdim):
    if dtype in ("float16", "bfloat16"):
        # kael computes in float32 and rounds once; torch rounds every step of its composite
        # (amax, x - max, exp, sum, log) to the half dtype: its float32 result, rounded, is the oracle
        p = make_pair(shape, dtype)
        kres = kael.logsumexp(p.k, **dim_kw(dim, keepdim))
        check(kres, torch.logsumexp(p.t.float(), **dim_kw(dim, keepdim)).to(p.t.dtype))
        return
    both(lambda lib, x: lib.logsumexp(x, **dim_kw(dim, keepdim)), shape, dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_logsumexp_special_values(dtype):
    rows = [[1.0, 2.0, 3.0], [INF, 1.0, 2.0], [-INF, -INF, -INF], [INF, -INF, 0.0], [math.nan, INF, 1.0],
            [INF, INF, 1.0], [-INF, 5.0, -INF], [80.0, 90.0, 100.0], [-100.0, -90.0, -200.0]]
    t = torch.tensor(rows, dtype=getattr(torch, dtype))
    oracle = t.float() if dtype in ("float16", "bfloat16") else t  # see test_logsumexp
    check(kael.logsumexp(to_kael(t), 1), torch.logsumexp(oracle, 1).to(t.dtype))
    check(kael.logsumexp(to_kael(t.T), 0), torch.logsumexp(oracle.T, 0).to(t.dtype))


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1000, 40000, 100003])
def test_logsumexp_long_rows(n):
    # across block and chunk boundaries; the largest element first, last and in the middle
    for where in [0, n // 2, n - 1]:
        t = torch.randn(n) * 10
        t[where] = 60.0
        check(kael.logsumexp(to_kael(t), 0), torch.logsumexp(t, 0))
    t = torch.randn(3, n, dtype=torch.float64) * 30
    check(kael.logsumexp(to_kael(t), 1), torch.logsumexp(t, 1))
    check(kael.logsumexp(to_kael(t.T), 0), torch.logsumexp(t.T, 0))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", [64, 1000, 4096, 4097, 16384, 40000])
def test_logsumexp_blocks(dtype, n):
    # the vectorised float kernel's paths (Note [logsumexp in one pass]): a block summed in one
    # pass against the row's running max, a block whose max rises far above it (two passes),
    # special values in a later block than the first, and rows of -inf
    g = torch.Generator().manual_seed(n)
    base = torch.randn(n, generator=g, dtype=torch.float64)
    rises = base.clone()
    rises[n // 2:] += 50.0  # the second half's max is far above the first half's
    ramp = torch.linspace(-300.0, 300.0, n, dtype=torch.float64)  # a rise in every block
    huge = base * 1e30
    cases = [base, base * 20, rises, ramp, huge, -huge]
    for value in (math.nan, INF, -INF):
        for where in (0, n - 1, n // 2 + 3):
            t = base.clone()
            t[where] = value
            cases.append(t)
    t = base.clone()
    t[n - 1], t[1] = INF, math.nan
    cases.append(t)
    cases.append(torch.full((n,), -INF, dtype=torch.float64))
    t = torch.full((n,), -INF, dtype=torch.float64)
    t[n - 2] = 3.0
    cases.append(t)
    t = torch.full((n,), -INF, dtype=torch.float64)
    t[-5:] = math.nan
    cases.append(t)
    for t in cases:
        t = t.to(getattr(torch, dtype))
        oracle = t.float() if dtype in ("float16", "bfloat16") else t  # see test_logsumexp
        want = torch.logsumexp(oracle, 0).to(t.dtype)
        check(kael.logsumexp(to_kael(t), 0), want)
        # the same row as the last dim of a 2-d tensor (keepdim, dim list), and strided
        check(kael.logsumexp(to_kael(t.reshape(1, n)), (1,), keepdim=True), want.reshape(1, 1))
        wide = torch.stack([t, t.flip(0)], 1)  # column 0 is t with stride 2
        check(kael.logsumexp(to_kael(wide), 0), torch.logsumexp(wide.to(oracle.dtype), 0).to(t.dtype))


def test_logsumexp_float32_error_within_the_documented_bound():
    # Note [logsumexp in one pass]: the terms' error keeps the result within 2e-7 of the exact
    # value (here the float64 logsumexp of the same float32 inputs) beyond its final rounding;
    # rows far from 0 take their terms' reference M L near the max (|max| <= kLseDirect, 4096)
    # or subtract the max (beyond)
    g = torch.Generator().manual_seed(3)
    for n in (1000, 3 * 4096 + 17):
        for scale, shift in [(0.1, 0.0), (1.0, 0.0), (1.0, 30.0), (5.0, -50.0), (20.0, 0.0), (60.0, 30.0),
                             (1.0, 1000.3), (3.0, -4088.0), (1.0, 4100.0), (2.0, -20000.0)]:
            x = torch.randn(64, n, generator=g) * scale + shift
            ref = torch.logsumexp(x.double(), 1)
            got = torch.tensor(kael.logsumexp(to_kael(x), 1).tolist(), dtype=torch.float64)
            excess = (got - ref).abs() - 2.0 ** -24 * ref.abs()
            assert excess.max().item() <= 2e-7, (n, scale, shift, excess.max().item())


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_logsumexp_rows(dtype):
    # many rows of the last dim, rows longer than a block, rows of special values among them
    g = torch.Generator().manual_seed(7)
    for shape in [(0, 5), (5, 0), (33, 1024), (7, 5000), (300, 70)]:
        t = (torch.randn(shape, generator=g, dtype=torch.float64) * 30).to(getattr(torch, dtype))
        if t.numel():
            t[0, -1] = INF
            t[-1, 0] = math.nan
            t[t.shape[0] // 2] = -INF
        oracle = t.float() if dtype in ("float16", "bfloat16") else t
        for dim, keepdim in [(1, False), (-1, True), ((1,), False), ((0, 1), True)]:
            check(kael.logsumexp(to_kael(t), dim, keepdim=keepdim),
                  torch.logsumexp(oracle, dim, keepdim=keepdim).to(t.dtype))
        check(kael.logsumexp(to_kael(t.T), 0), torch.logsumexp(oracle.T, 0).to(t.dtype))


def on_one_and_two_threads(fn):
    """[fn() on 1 thread, fn() on 2 threads], the thread count restored after."""
    old = kael.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            kael.set_num_threads(n)
            results.append(fn())
    finally:
        kael.set_num_threads(old)
    return results


def test_logsumexp_same_bits_across_threads():
    t = to_kael(torch.randn(3 * 2**20 + 5) * 10)
    rows = to_kael(torch.randn(4096, 1500) * 10)
    results = on_one_and_two_threads(lambda: (kael.logsumexp(t, 0).item(), kael.logsumexp(rows, 1).tolist()))
    assert results[0] == results[1]


# ------------------------------------------------------------------------------------- var/std

@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dim", LIST_DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [None, True])
def test_var_std(name, dtype, shape, dim, keepdim):
    both(lambda lib, x: getattr(lib, name)(x, **dim_kw(dim, keepdim)), shape, dtype)


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_var_std_correction_and_unbiased(name, dtype):
    for kw in [dict(correction=0), dict(correction=2), dict(correction=1.5), dict(correction=5),
               dict(unbiased=False), dict(unbiased=True)]:
        both(lambda lib, x: getattr(lib, name)(x, **kw), (3, 4), dtype)
        both(lambda lib, x: getattr(lib, name)(x, 1, keepdim=True, **kw), (3, 4), dtype)
    both(lambda lib, x: getattr(lib, name)(x, 1, False, True), (3, 4), dtype)   # (dim, unbiased, keepdim)
    both(lambda lib, x: getattr(x, name)(dim=(0, 1), correction=0), (3, 4), dtype)


def test_var_degrees_of_freedom_warning():
    x = kael.ones(1)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        r = kael.var(x)
    assert math.isnan(r.item())
    with pytest.warns(UserWarning, match="degrees of freedom"):
        kael.std(kael.ones(3, 2), 0, correction=3)


def test_var_std_precision_with_a_large_mean():
    t = torch.randn(1000, dtype=torch.float64) + 1e6
    check(kael.var(to_kael(t)), torch.var(t))
    t32 = t.float()  # kael's float32 var adds in float64 (as torch's CPU kernel): the float64 oracle, rounded
    check(kael.std(to_kael(t32)), torch.std(t32.double()).float())


def test_var_rejects_unbiased_with_correction():
    with pytest.raises(TypeError, match="var"):
        kael.var(kael.ones(3), 0, True, correction=1)


# ------------------------------------------------------------------------------------- layouts

REDUCERS = {
    "prod": lambda lib, x, d: lib.prod(x, d) if isinstance(d, int) else lib.prod(x),
    "amax": lambda lib, x, d: lib.amax(x, d if d is not None else ()),
    "amin": lambda lib, x, d: lib.amin(x, d if d is not None else ()),
    "argmax": lambda lib, x, d: lib.argmax(x, d if isinstance(d, int) else None),
    "argmin": lambda lib, x, d: lib.argmin(x, d if isinstance(d, int) else None),
    "all": lambda lib, x, d: lib.all(x, d),
    "any": lambda lib, x, d: lib.any(x, d),
    "norm": lambda lib, x, d: lib.norm(x, 2, d),
    "norm_inf": lambda lib, x, d: lib.norm(x, INF, d),
    "logsumexp": lambda lib, x, d: lib.logsumexp(x, d if d is not None else (0,)),
    "var": lambda lib, x, d: lib.var(x, d),
    "std": lambda lib, x, d: lib.std(x, d, correction=0),
}


@pytest.mark.parametrize("name", sorted(REDUCERS))
@pytest.mark.parametrize("layout", [lay for lay in LAYOUTS if lay != "contig"])
@pytest.mark.parametrize("shape", [(4, 6), (3, 4, 5)], ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)], ids=str)
def test_noncontiguous_inputs(name, layout, shape, dim):
    both(lambda lib, x: REDUCERS[name](lib, x, dim), shape, "float32", layout)
    both(lambda lib, x: REDUCERS[name](lib, x, dim), shape, "float64", layout)


@pytest.mark.parametrize("name", sorted(REDUCERS))
@pytest.mark.parametrize("dim", [None, 0, 1, 2, (0, 2), (1, 2)], ids=str)
def test_large_inputs_above_the_threading_grain(name, dim):
    # rows longer than a chunk (split and merged), many short rows, strided rows
    shape = (3, 300, 150) if dim != 1 else (50, 700, 3)
    both(lambda lib, x: REDUCERS[name](lib, x, dim), shape, "float32", domain="small")
    both(lambda lib, x: REDUCERS[name](lib, x, dim), (shape[2], shape[1], shape[0]), "float64", "T", domain="small")


@pytest.mark.parametrize("name", ["prod", "amax", "argmax", "all", "norm", "logsumexp", "var"])
def test_single_long_row_is_split_and_merged(name):
    t = rand_torch((200003,), "float64", "small")
    t[123457] = 7.0  # the largest element in a middle chunk
    run_both(lambda lib, x: REDUCERS[name](lib, x, None), t, to_kael(t))
    t32 = (torch.rand(3, 100001) * 0.02 + 0.99)
    if name == "prod":
        # kael multiplies float32 in float64 (as it sums, docs/decisions/sums.md): the float64 oracle, rounded
        check(kael.prod(to_kael(t32), 1), torch.prod(t32.double(), 1).float())
    else:
        run_both(lambda lib, x: REDUCERS[name](lib, x, 1), t32, to_kael(t32))


# ------------------------------------------------------------------------------------- tiles
# Reductions over outer dims, where the innermost kept dim is contiguous, copy tiles of
# neighbouring rows (Note [Reduction tiles] in aten/src/native/cpu/reduce_engine.h; 4-byte types
# through a 16 x 16 transpose in registers on AVX-512 builds).

TILE_CASES = [
    ((37, 53), 0),          # neither size a multiple of 16: the scalar edges
    ((64, 48), 0),          # whole 16 x 16 blocks
    ((20000, 17), 0),       # rows longer than a chunk (16384): partial results merged in order
    ((6, 40, 35), (0, 1)),  # two reduced dims (walked)
    ((33, 5, 40), 1),       # several runs of the kept dims
    ((9, 70, 130), (0, 1)),
]
TILE_DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16", "bool"]


# (argmax and argmin take one dim)
TILE_OPS = [(name, shape, dim) for name in sorted(REDUCERS) for shape, dim in TILE_CASES
            if isinstance(dim, int) or name not in ("argmax", "argmin")]


@pytest.mark.parametrize("name,shape,dim", TILE_OPS, ids=str)
@pytest.mark.parametrize("dtype", TILE_DTYPES)
def test_outer_reductions_in_tiles(name, dtype, shape, dim):
    domain = "small" if name == "prod" else "any"
    if dtype in ("float32", "float16", "bfloat16") and name in ("prod", "norm", "norm_inf", "logsumexp", "var", "std"):
        # kael accumulates these in float64 (float32 for float16/bfloat16) and rounds once; over
        # rows this long torch's float32 accumulation drifts by more than the float tolerance
        # (norm over 20000 float32: torch 7e-4 from the exact value, kael 1.5e-5, the exact
        # value rounded). The oracle is torch in float64, rounded, as for long rows above.
        p = make_pair(shape, dtype, "contig", domain)
        check(REDUCERS[name](kael, p.k, dim), REDUCERS[name](torch, p.t.double(), dim).to(p.t.dtype))
        return
    both(lambda lib, x: REDUCERS[name](lib, x, dim), shape, dtype, domain=domain)


@pytest.mark.parametrize("name,dtype", [(name, dtype) for name in sorted(REDUCERS)
                                        for dtype in ("float32", "float64", "int32", "float16")
                                        if dtype != "int32" or name in ("prod", "amax", "amin", "argmax", "argmin", "all", "any")])
def test_tiles_match_contiguous_rows_bit_for_bit(name, dtype):
    # The tile holds each row's elements in row order, and its segments are those of a contiguous
    # row (one, for rows of at most 16384): x.op(0) is the bits of x.t().contiguous().op(1).
    t = rand_torch((16000, 35), dtype, "small" if name == "prod" else "any")  # one segment per row
    x = to_kael(t)
    rows = to_kael(t.t().contiguous())
    a = REDUCERS[name](kael, x, 0)
    b = REDUCERS[name](kael, rows, 1)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(torch.from_numpy(a.float().numpy()), torch.from_numpy(b.float().numpy())) or \
        a.tolist() == b.tolist()


def test_tiles_same_bits_across_threads():
    t = to_kael(torch.randn(40000, 100) * 10)
    results = on_one_and_two_threads(lambda: [REDUCERS[name](kael, t, 0).tolist() for name in sorted(REDUCERS)])
    assert results[0] == results[1]


def test_tiles_of_a_transposed_view_and_a_slice():
    base = torch.randn(300, 200)
    # rows of x.t() are contiguous after the transpose; a column slice's kept dim has stride 1
    for tx, kx in ((base.t(), to_kael(base).t()), (base[:, 3:150], to_kael(base)[:, 3:150])):
        for name in sorted(REDUCERS):
            run_both(lambda lib, x: REDUCERS[name](lib, x, 0), tx, kx)
        run_both(lambda lib, x: lib.max(x, 0), tx, kx)


# ------------------------------------------------------------------------------------- errors

ERROR_CALLS = [
    ("prod", lambda lib, x: lib.prod(x, 2)),
    ("prod", lambda lib, x: lib.prod(x, -3)),
    ("amax", lambda lib, x: lib.amax(x, 5)),
    ("amax", lambda lib, x: lib.amax(x, (0, -2))),
    ("amin", lambda lib, x: lib.amin(x, (1, 2))),
    ("argmax", lambda lib, x: lib.argmax(x, 2)),
    ("argmin", lambda lib, x: lib.argmin(x, -3)),
    ("all", lambda lib, x: lib.all(x, 2)),
    ("any", lambda lib, x: lib.any(x, (0, 0))),
    ("norm", lambda lib, x: lib.norm(x, 2, 3)),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, 2)),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, (1, -1))),
    ("var", lambda lib, x: lib.var(x, 2)),
    ("std", lambda lib, x: lib.std(x, (0, 7))),
]


@pytest.mark.parametrize("name,fn", ERROR_CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERROR_CALLS)])
def test_bad_dims_raise_like_torch(name, fn):
    t = torch.randn(2, 3)
    with pytest.raises(Exception) as te:
        fn(torch, t)
    with pytest.raises(type(te.value)) as ke:
        fn(kael, to_kael(t))
    msg = str(ke.value)
    assert f"{name}: " in msg, msg
    if isinstance(te.value, IndexError):
        # torch: "Dimension out of range (expected to be in range of [-2, 1], but got 2)"
        fragment = str(te.value).split("Dimension ", 1)[1]
        assert fragment in msg, (msg, str(te.value))
    else:
        assert "appears multiple times in the list of dims" in msg


EMPTY_ERRORS = [
    ("max", lambda lib, x: lib.max(x), (0, 3), RuntimeError, "Expected reduction dim to be specified"),
    ("min", lambda lib, x: lib.min(x), (0,), RuntimeError, "Expected reduction dim to be specified"),
    ("amax", lambda lib, x: lib.amax(x), (2, 0), RuntimeError, "Expected reduction dim to be specified"),
    ("amax", lambda lib, x: lib.amax(x, 0), (0, 3), IndexError, "Expected reduction dim 0 to have non-zero size"),
    ("amin", lambda lib, x: lib.amin(x, (0, 1)), (3, 0), IndexError, "Expected reduction dim 1 to have non-zero"),
    ("argmax", lambda lib, x: lib.argmax(x), (0,), IndexError, "Expected reduction dim to be specified"),
    ("argmin", lambda lib, x: lib.argmin(x, 1), (2, 0), IndexError, "Expected reduction dim 1 to have non-zero"),
    ("norm", lambda lib, x: lib.norm(x, INF), (0,), RuntimeError, "does not have an identity"),
    ("norm", lambda lib, x: lib.norm(x, -INF, 0), (0, 3), RuntimeError, "does not have an identity"),
]


@pytest.mark.parametrize("name,fn,shape,cls,fragment", EMPTY_ERRORS,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(EMPTY_ERRORS)])
def test_empty_reductions_without_identity_raise(name, fn, shape, cls, fragment):
    t = torch.empty(shape)
    with pytest.raises(cls, match=fragment):
        fn(torch, t)
    with pytest.raises(cls, match=fragment) as ke:
        fn(kael, to_kael(t))
    assert f"{name}: " in str(ke.value)


DTYPE_ERRORS = [
    ("argmax", lambda lib, x: lib.argmax(x), "bool"),
    ("argmin", lambda lib, x: lib.argmin(x, 0), "bool"),
    ("norm", lambda lib, x: lib.norm(x), "int64"),
    ("norm", lambda lib, x: lib.norm(x, 1, 0), "bool"),
    ("var", lambda lib, x: lib.var(x), "int32"),
    ("std", lambda lib, x: lib.std(x, 0), "uint8"),
    ("norm", lambda lib, x: lib.norm(x, 2, dtype=lib.int64), "float32"),
    ("norm", lambda lib, x: lib.norm(x, 2, dtype=lib.float32), "float64"),
]


@pytest.mark.parametrize("name,fn,dtype", DTYPE_ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(DTYPE_ERRORS)])
def test_unsupported_dtypes_raise_like_torch(name, fn, dtype):
    t = rand_torch((3, 4), dtype)
    with pytest.raises(Exception) as te:
        fn(torch, t)
    with pytest.raises(type(te.value)) as ke:
        fn(kael, to_kael(t))
    assert f"{name}: " in str(ke.value)


# ------------------------------------------------------------------------------------- determinism

@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_same_bits_with_one_and_two_threads(name):
    before = kael.get_num_threads()
    t = torch.randn(3, 70000, dtype=torch.float32) * 0.01 + 1.0
    k = to_kael(t)
    results = []
    try:
        for n in [1, 2]:
            kael.set_num_threads(n)
            results.append([REDUCERS[name](kael, k, d).tolist() for d in [None, 0, 1]])
    finally:
        kael.set_num_threads(before)
    assert results[0] == results[1]


# Note [Extremes down columns] (cpu/extremes.cpp): amax/amin over one outer dim with contiguous
# outputs walk the input rows in blocks of 256, one running extreme per column.
@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("rows,cols", [(2, 5), (255, 3), (256, 16), (257, 1), (1000, 100), (3000, 2)], ids=str)
def test_extremes_down_columns(name, dtype, rows, cols):
    t = rand_torch((rows, cols), dtype)
    k = to_kael(t)
    check(getattr(kael, name)(k, 0), getattr(torch, name)(t, 0))
    check(getattr(kael, name)(k, -2, keepdim=True), getattr(torch, name)(t, -2, keepdim=True))
    slabs = rand_torch((3, rows, cols), dtype)
    check(getattr(kael, name)(to_kael(slabs), 1), getattr(torch, name)(slabs, 1))


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_extremes_down_columns_of_views(name):
    base = torch.randn(700, 50)
    k = to_kael(base)
    for view in (lambda x: x[:, 3:40], lambda x: x[::3, :7], lambda x: x[:600].unflatten(0, (3, 200))[:, 1:, 5:30],
                 lambda x: x[:1].expand(500, 50)):
        check(getattr(kael, name)(view(k), -2), getattr(torch, name)(view(base), -2))


def float_bits(x):
    return to_torch(x).view(torch.int32)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_extremes_down_columns_keep_the_first_nan(name):
    """A column's first NaN in row order, as the row of a contiguous input gives it (its bits:
    NaNs of two signs), in the first block of 256 rows or a later one; +-0 as torch orders them."""
    t = torch.randn(1000, 40)
    t[5, 1], t[700, 1] = float("nan"), -float("nan")  # first block, then a later one
    t[300, 2], t[900, 2] = -float("nan"), float("nan")  # two later blocks
    t[999, 3] = float("nan")
    t[:, 4] = 0.0
    t[::2, 4] = -0.0
    t[:, 5] = -0.0
    t[500:, 5] = 0.0
    k = to_kael(t)
    down = getattr(kael, name)(k, 0)
    check(down, getattr(torch, name)(t, 0))
    along = getattr(kael, name)(k.t().contiguous(), 1)
    assert torch.equal(float_bits(down), float_bits(along))
    threads = on_one_and_two_threads(lambda: float_bits(getattr(kael, name)(k, 0)))
    assert torch.equal(threads[0], threads[1])


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("rows,cols", [(50000, 3), (40000, 2), (3000, 63), (100, 5)], ids=str)
def test_extremes_of_narrow_rows_keep_the_first_nan(name, rows, cols):
    """Narrow rows side by side go in lanes (extreme_run_into): a column's first NaN in row order
    wins over NaNs of other lanes and later blocks, whatever lane holds it."""
    t = torch.randn(rows, cols)
    g = torch.Generator().manual_seed(rows + cols)
    for c in range(cols):
        picks = torch.randperm(rows, generator=g)[:3].tolist()
        for i, r in enumerate(sorted(picks, reverse=True)):  # the first in row order gets -NaN
            t[r, c] = -float("nan") if i == 2 else float("nan")
    t[:, 0] = torch.where(torch.arange(rows) % 7 == 3, float("nan"), t[:, 0])
    t[rows // 2 + 1, 0] = -float("nan")
    k = to_kael(t)
    down = getattr(kael, name)(k, 0)
    check(down, getattr(torch, name)(t, 0))
    assert torch.equal(float_bits(down), float_bits(getattr(kael, name)(k.t().contiguous(), 1)))
    threads = on_one_and_two_threads(lambda: float_bits(getattr(kael, name)(k, 0)))
    assert torch.equal(threads[0], threads[1])
    clean = torch.randn(rows, cols)
    check(getattr(kael, name)(to_kael(clean), 0), getattr(torch, name)(clean, 0))


# ------------------------------------------------------------------------------------- first extreme in blocks
# argmax/argmin and max/min along a dim over rows of 2 or more blocks of 4096 bytes (Note [First
# extreme in blocks] in cpu/extremes.cpp): each block's extreme in vectors, the first block
# that beats the earlier ones searched again. Rows cross the blocks' and the chunks' (16384
# elements, merged in order) edges; the values must be x at the index, bit for bit.

def block_elems(dtype):
    return 4096 // tdtype(dtype).itemsize


def check_first_extreme(t, name, dim, k=None):
    """kael's argmax/argmin (index) and max/min (values, indices) against torch, and each value
    equal, bit for bit, to the input at its index; k: kael's input (a view of the same values),
    else a contiguous copy of t."""
    k = to_kael(t) if k is None else k
    arg = "argmax" if name == "max" else "argmin"
    check(getattr(kael, arg)(k, dim), getattr(torch, arg)(t, dim))
    if dim is None:
        return
    values, indices = getattr(kael, name)(k, dim)
    tvalues, tindices = getattr(torch, name)(t, dim)
    check(indices, tindices)
    check(values, tvalues)
    at = t.gather(dim, to_torch(indices).unsqueeze(dim)).squeeze(dim)
    got = to_torch(values)
    if t.dtype.is_floating_point:
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.dtype.itemsize]
        assert torch.equal(got.view(bits), at.view(bits))
    else:
        assert torch.equal(got, at)


FIRST_DTYPES = ["float32", "float64", "int64", "int32", "int16", "int8", "uint8", "float16", "bfloat16"]


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", FIRST_DTYPES)
@pytest.mark.parametrize("blocks", [2, 2.5, 5.25, 0])
def test_first_extreme_of_long_rows(name, dtype, blocks):
    """Many ties ("small" values) in rows of several blocks, a partial last block, and rows longer
    than a chunk (blocks=0: 3 chunks and a bit), at dim=-1 and dim=None."""
    B = block_elems(dtype)
    n = 3 * 16384 + 5 if blocks == 0 else int(blocks * B) - (1 if blocks == 2 else 0)
    t = rand_torch((3, n), dtype, domain="small")
    check_first_extreme(t, name, -1)
    check_first_extreme(t, name, None)
    check_first_extreme(t[1], name, 0)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "uint8", "int16"])
def test_first_extreme_planted_in_later_blocks(name, dtype):
    """The extreme planted in a later block, then again in a block after it, in the last (partial)
    block, or in the first element only; the rest of the row below (above) it."""
    B = block_elems(dtype)
    n = 4 * B + 100
    td = tdtype(dtype)
    top = 100 if name == "max" else -100 if td.is_signed or td.is_floating_point else 0
    fill = 3 if td.is_floating_point or td.is_signed or name == "max" else 50
    for positions in ([2 * B + 17, 3 * B + 1], [4 * B + 99], [0], [B - 1, B], [3 * B, 4 * B + 5]):
        t = torch.full((n,), fill, dtype=td)
        if name == "max" and not td.is_floating_point:
            t[::3] = 1
        for p in positions:
            t[p] = top
        check_first_extreme(t.unsqueeze(0), name, -1)
        check_first_extreme(t, name, None)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_first_extreme_nan_and_zeros(name, dtype):
    """The first NaN wins over +-inf and later NaNs (of either sign), in whichever block it lies;
    a row of zeros reports its first element, -0 or +0 as it is."""
    td = tdtype(dtype)
    B = block_elems(dtype)
    n = 3 * 16384 + 7
    for nans in ([5 * B + 3, 2 * B + 9], [16384 + 2, 40000], [n - 1], [0, 7 * B]):
        t = torch.randn(n, dtype=torch.float64).to(td)
        t[B + 5] = math.inf
        t[B + 6] = -math.inf
        for i, p in enumerate(sorted(nans)):
            t[p] = -math.nan if i == 0 else math.nan
        check_first_extreme(t.unsqueeze(0), name, -1)
        check_first_extreme(t, name, None)
    for first in (0.0, -0.0):
        z = torch.zeros(3 * B + 1, dtype=td)
        z[1::2] = -first
        z[0] = first
        check_first_extreme(z.unsqueeze(0), name, -1)
        check_first_extreme(z, name, None)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_first_extreme_same_on_thread_counts(name):
    t = torch.randint(0, 5, (4, 5 * 16384 + 3)).float()
    k = to_kael(t)
    results = on_one_and_two_threads(lambda: to_torch(getattr(kael, name)(k, 1)))
    assert torch.equal(results[0], results[1])
    assert torch.equal(results[0], getattr(torch, name)(t, 1))


# ------------------------------------------------------------------------------------- columns in blocks
# prod, norm (every p) and all/any over one reduced dim outside contiguous outputs walk blocks of
# rows with one accumulator per column (Note [Columns in blocks] in cpu/reduce_engine.h): blocks of
# 256 rows, or of about 32768 elements of narrow rows (in lanes when they lie side by side), merged
# in block order. The shapes reach several blocks, narrow runs below and above the 64 lanes, and
# partial last blocks.
STEP_COLUMN_CASES = [(40000, 2), (40000, 3), (9000, 5), (3000, 63), (3000, 64), (3000, 65), (700, 255),
                     (600, 300), (41, 2500), (7, 3)]


def _oracle(fn, t):
    """fn on torch in float64 for floating inputs (kael accumulates float32 in double), rounded back."""
    if t.dtype.is_floating_point:
        return fn(t.double()).to(t.dtype)
    return fn(t)


def _near_one(shape, dtype):
    """Values whose products stay finite over tens of thousands of rows (integers: +-1 and a few 2s,
    whose int64 products wrap exactly as torch's)."""
    td = tdtype(dtype)
    if td.is_floating_point:
        return (1 + (torch.rand(shape, dtype=torch.float64) - 0.5) * 1e-3).to(td)
    if td == torch.bool:
        return torch.rand(shape) < 0.999
    t = torch.ones(shape, dtype=td)
    if td.is_signed:
        t[torch.rand(shape) < 0.3] = -1
    t[torch.rand(shape) < 0.001] = 2
    return t


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("rows,cols", STEP_COLUMN_CASES, ids=str)
def test_prod_down_columns(dtype, rows, cols):
    t = _near_one((rows, cols), dtype)
    k = to_kael(t)
    check(kael.prod(k, 0), _oracle(lambda x: torch.prod(x, 0), t))
    check(kael.prod(k, 0, keepdim=True), _oracle(lambda x: torch.prod(x, 0, keepdim=True), t))
    slabs = _near_one((3, rows // 3 + 1, cols), dtype)
    check(kael.prod(to_kael(slabs), 1), _oracle(lambda x: torch.prod(x, 1), slabs))


@pytest.mark.parametrize("p", [2, 1, INF, -INF, 0, 3.5], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("rows,cols", STEP_COLUMN_CASES, ids=str)
def test_norm_down_columns(p, dtype, rows, cols):
    t = torch.randn(rows, cols, dtype=torch.float64)
    t[torch.rand(rows, cols) < 0.1] = 0.0
    t = t.to(tdtype(dtype))
    k = to_kael(t)
    # float16 and bfloat16 accumulate in float32: torch's float32 norm (of the same values) as oracle
    wide = torch.float64 if dtype in ("float32", "float64") else torch.float32
    check(kael.norm(k, p, 0), torch.norm(t.to(wide), p, 0).to(t.dtype))
    slabs = t[: rows - rows % 2].unflatten(0, (2, -1))
    check(kael.norm(to_kael(slabs), p, 1), torch.norm(slabs.to(wide), p, 1).to(t.dtype))


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "uint8", "bool", "float16"])
@pytest.mark.parametrize("rows,cols", STEP_COLUMN_CASES, ids=str)
def test_all_any_down_columns(name, dtype, rows, cols):
    """Columns that hold a single zero (all: false) or a single non-zero (any: true), in the first
    row, the last, or a block in between; NaN counts as true."""
    fill, odd = (1, 0) if name == "all" else (0, 1)
    t = torch.full((rows, cols), fill).to(tdtype(dtype))
    for c in range(0, cols, 3):
        t[(c * 7919) % rows, c] = odd
    t[rows - 1, cols - 1] = odd
    if tdtype(dtype).is_floating_point:
        t[0, 1 % cols] = math.nan
    k = to_kael(t)
    check(getattr(kael, name)(k, 0), getattr(torch, name)(t, 0))
    check(getattr(kael, name)(k.unsqueeze(0).expand(2, rows, cols), 1), getattr(torch, name)(t, 0).expand(2, cols))


@pytest.mark.parametrize("name", ["prod", "norm", "all", "any"])
def test_columns_in_blocks_of_views(name):
    base = torch.randn(1500, 70, dtype=torch.float64) * 0.01 + 1
    fn = {"prod": lambda lib, x: lib.prod(x, -2), "norm": lambda lib, x: lib.norm(x, 2, -2),
          "all": lambda lib, x: lib.all(x > 0.99, -2), "any": lambda lib, x: lib.any(x > 1.02, -2)}[name]
    k = to_kael(base)
    for view in (lambda x: x[:, 3:40], lambda x: x[::3, :7], lambda x: x[:1200].unflatten(0, (3, 400))[:, 1:, 5:30],
                 lambda x: x[:1].expand(900, 70)):
        check(fn(kael, view(k)), fn(torch, view(base)))


@pytest.mark.parametrize("name", ["prod", "norm"])
def test_columns_in_blocks_same_bits_on_thread_counts(name):
    t = torch.rand(50000, 3, dtype=torch.float32) * 0.01 + 1
    w = torch.rand(2000, 300, dtype=torch.float32) * 0.01 + 1
    for x in (t, w):
        k = to_kael(x)
        fn = (lambda: to_torch(kael.prod(k, 0))) if name == "prod" else (lambda: to_torch(kael.norm(k, 2, 0)))
        results = on_one_and_two_threads(fn)
        assert torch.equal(results[0].view(torch.int32), results[1].view(torch.int32))


# ------------------------------------------------------------------------------------- first extreme down columns
# argmax/argmin and max/min over one reduced dim outside contiguous outputs (Note [First extreme
# down columns] in cpu/extremes.cpp): blocks' extremes, the first winning block per column, its
# rows searched again. Many ties ("small" values: a few distinct ones), so the first index
# matters in nearly every column.

@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "int8", "uint8", "float16", "bfloat16"])
@pytest.mark.parametrize("rows,cols", STEP_COLUMN_CASES, ids=str)
def test_first_extreme_down_columns(name, dtype, rows, cols):
    t = rand_torch((rows, cols), dtype, domain="small")
    if tdtype(dtype).is_floating_point:
        t = (t * 2).round()  # few distinct values in floats too
    check_first_extreme(t, name, 0)
    slabs = rand_torch((3, rows // 3 + 1, cols), dtype, domain="small")
    check_first_extreme(slabs, name, 1)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("rows,cols", [(40000, 2), (3000, 63), (600, 300), (41, 2500)], ids=str)
def test_first_extreme_down_columns_nan_and_zeros(name, rows, cols):
    """A column's first NaN in row order (of either sign), in whichever block and lane it lies,
    beats +-inf and later NaNs; columns of zeros report their first element, -0 or +0 as it is;
    the extreme planted once late and once in a later block still reports the first."""
    t = torch.randn(rows, cols)
    g = torch.Generator().manual_seed(rows + cols)
    for c in range(0, cols, 2):
        picks = sorted(torch.randperm(rows, generator=g)[:3].tolist())
        t[picks[0], c] = -math.nan
        t[picks[1], c] = math.nan
        t[picks[2], c] = math.inf
    zc = 1 % cols
    t[:, zc] = 0.0
    t[::3, zc] = -0.0
    if cols > 3:
        t[:, 3] = 1.0
        t[rows - 1, 3] = 9.0 if name == "max" else -9.0
        t[rows // 2, 3] = t[rows - 1, 3]
    check_first_extreme(t, name, 0)
    check_first_extreme(t.unsqueeze(0).expand(2, rows, cols), name, 1, to_kael(t).unsqueeze(0).expand(2, rows, cols))


@pytest.mark.parametrize("name", ["max", "min"])
def test_first_extreme_down_columns_of_views(name):
    base = torch.randint(0, 4, (1500, 70)).double()
    k = to_kael(base)
    for view in (lambda x: x[:, 3:40], lambda x: x[::3, :7], lambda x: x[:1200].unflatten(0, (3, 400))[:, 1:, 5:30],
                 lambda x: x[:1].expand(900, 70)):
        assert not view(k).is_contiguous()
        check_first_extreme(view(base), name, -2, view(k))


def test_first_extreme_down_columns_same_on_thread_counts():
    t = torch.randint(0, 6, (50000, 3)).float()
    w = torch.randint(0, 6, (2000, 300)).float()
    for x in (t, w):
        k = to_kael(x)
        results = on_one_and_two_threads(lambda: [to_torch(r) for r in kael.max(k, 0)])
        assert all(torch.equal(a, b) for a, b in zip(results[0], results[1]))
        assert torch.equal(results[0][1], torch.max(x, 0)[1])


# ------------------------------------------------------------------------------------- four rows a sweep
# Walks down columns whose accumulators outgrow 8 KB (16 KB for the first extremes' values and
# rows) step four rows at a time through tiles of 64 columns (Note [Four rows a sweep] in
# cpu/reduce_engine.h): the same steps in the same order, so the same bits as one row at a time.
# Widths just past the thresholds, not multiples of 64 (a tail of columns), row counts that leave
# 1 to 3 rows after the sweeps, blocks of 256 rows, views whose rows are wider than their columns.
SWEEP_CASES = [(41, 2500), (13, 2100), (300, 2049), (6, 4100), (262, 1090), (5, 8300)]


@pytest.mark.parametrize("rows,cols", SWEEP_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16", "bool"])
def test_four_rows_a_sweep_step_walks(rows, cols, dtype):
    t = _near_one((rows, cols), dtype)
    k = to_kael(t)
    check(kael.prod(k, 0), _oracle(lambda x: torch.prod(x, 0), t))
    if tdtype(dtype).is_floating_point:
        check(kael.norm(k, 2, 0), torch.norm(t.double(), 2, 0).to(t.dtype))
        check(kael.norm(k, INF, 0), torch.norm(t.double(), INF, 0).to(t.dtype))
    odd = torch.zeros(rows, cols, dtype=torch.bool)
    odd[torch.arange(cols) % rows, torch.arange(cols)] = True
    for name, x in (("all", ~odd), ("any", odd), ("any", odd & (torch.arange(cols) % 5 == 0))):
        x = x.to(tdtype(dtype))
        check(getattr(kael, name)(to_kael(x), 0), getattr(torch, name)(x, 0))


@pytest.mark.parametrize("rows,cols", SWEEP_CASES, ids=str)
@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_four_rows_a_sweep_extremes(rows, cols, name, dtype):
    """The running extremes down wide columns, with a column's first NaN (of either sign) kept,
    NaN in each of the four rows of a sweep and in the rows left after the sweeps."""
    t = rand_torch((rows, cols), dtype)
    if tdtype(dtype).is_floating_point:
        for c in range(0, cols, 7):
            t[(c // 7) % rows, c] = -math.nan if c % 2 else math.nan
            t[rows - 1 - (c // 7) % rows, c] = math.nan
        t[rows - 1, 3] = math.nan  # in a row after the sweeps (or the last of a sweep)
    k = to_kael(t)
    got = getattr(kael, name)(k, 0)
    check(got, getattr(torch, name)(t, 0))
    if tdtype(dtype).is_floating_point:
        # each NaN column holds its first NaN, bit for bit (Note [Extremes down columns])
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.dtype.itemsize]
        nan = t.isnan()
        first = nan.int().argmax(0)
        cols_with_nan = nan.any(0)
        want = t.gather(0, first.unsqueeze(0)).squeeze(0).view(bits)[cols_with_nan]
        assert torch.equal(to_torch(got).view(bits)[cols_with_nan], want)


@pytest.mark.parametrize("rows,cols", SWEEP_CASES, ids=str)
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "bfloat16"])
def test_four_rows_a_sweep_first_extremes(rows, cols, name, dtype):
    """Few distinct values (ties in nearly every column: the first row must win), and a NaN that
    must beat later NaNs and infinities."""
    t = rand_torch((rows, cols), dtype, domain="small")
    if tdtype(dtype).is_floating_point:
        t = (t * 2).round()
    if dtype in ("float32", "float64"):  # (NaN values' bits: as the input's in these dtypes)
        for c in range(1, cols, 5):
            t[(3 * c) % rows, c] = math.nan
            t[(3 * c + 1) % rows, c] = -math.nan
            t[(3 * c + 2) % rows, c] = math.inf
    check_first_extreme(t, name, 0)


@pytest.mark.parametrize("name", ["prod", "amax", "argmax", "all"])
def test_four_rows_a_sweep_of_views(name):
    base = torch.rand(600, 2700, dtype=torch.float32) * 0.01 + 1
    base[::3] = (base[::3] * 4).round() / 4
    fn = {"prod": lambda lib, x: lib.prod(x, -2), "amax": lambda lib, x: lib.amax(x, -2),
          "argmax": lambda lib, x: lib.argmax(x, -2), "all": lambda lib, x: lib.all(x > 1.0001, -2)}[name]
    k = to_kael(base)
    for view in (lambda x: x[:, 5:2600], lambda x: x[1::2, 100:], lambda x: x[:590].unflatten(0, (2, 295))[:, 3:],
                 lambda x: x[:1].expand(40, 2700), lambda x: x[:, :2100]):
        assert not view(k).is_contiguous()
        check(fn(kael, view(k)), fn(torch, view(base)))


@pytest.mark.parametrize("name", ["prod", "amax", "argmax"])
def test_four_rows_a_sweep_same_on_thread_counts(name):
    t = torch.rand(1500, 2500, dtype=torch.float32) * 0.001 + 1
    k = to_kael(t)
    fn = {"prod": lambda: to_torch(kael.prod(k, 0)).view(torch.int32),
          "amax": lambda: to_torch(kael.amax(k, 0)).view(torch.int32),
          "argmax": lambda: to_torch(kael.argmax(k, 0))}[name]
    results = on_one_and_two_threads(fn)
    assert torch.equal(results[0], results[1])


# Reductions whose output has no elements though the reduced dims do (x of shape (7, 0, 3)
# reduced over dim 0): every op returns the empty result torch returns. Run in a subprocess,
# since these once killed the interpreter (SIGFPE in the walk of Note [Extremes down columns]).
_EMPTY_OUTPUT_SCRIPT = r"""
import json, sys
lib = __import__(sys.argv[1])
FLOAT_OPS = ("mean", "var", "std", "logsumexp", "norm")
layouts = {
    "(7,0,3) dim 0": lambda: (lib.zeros(7, 0, 3), 0),
    "(7,3,0) dim 1": lambda: (lib.zeros(7, 3, 0), 1),
    "(3,0)[::2] dim 0": lambda: (lib.zeros(3, 0)[::2], 0),
    "(0,5).t() dim 1": lambda: (lib.zeros(0, 5).t(), 1),
    "(4,0,2).permute(2,1,0) dim 2": lambda: (lib.zeros(4, 0, 2).permute(2, 1, 0), 2),
    "(2,0,3) int dim 2": lambda: (lib.zeros(2, 0, 3, dtype=lib.int32), 2),
    "(0,3,2)[:, ::2] int dim 0": lambda: (lib.zeros(0, 3, 2, dtype=lib.int64)[:, ::2], 0),
}
out = {}
for name, make in layouts.items():
    for op in ("amax", "amin", "max", "min", "argmax", "argmin", "sum", "prod", "mean", "all", "any",
               "logsumexp", "norm", "var", "std", "cumsum", "count_nonzero"):
        x, d = make()
        if op in FLOAT_OPS and "int" in name:
            x = x.float()
        try:
            r = getattr(x, op)(d)
        except Exception as e:
            out[name + " " + op] = type(e).__name__
            continue
        r = r[0] if isinstance(r, tuple) else r
        out[name + " " + op] = [list(r.shape), str(r.dtype).split(".")[1]]
print(json.dumps(out))
"""


def test_reductions_with_an_empty_output_return_empty_results():
    import json
    import subprocess
    import sys
    got = {}
    for lib in ("torch", "kael"):
        proc = subprocess.run([sys.executable, "-c", _EMPTY_OUTPUT_SCRIPT, lib], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, (lib, proc.returncode, proc.stderr[-2000:])
        got[lib] = json.loads(proc.stdout)
    assert got["kael"] == got["torch"]


def _same_outcome(call):
    """torch and kael both return equal results, or both raise the same exception class."""
    try:
        expected = call(torch)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        with pytest.raises(type(e)):
            call(kael)
        return
    got = call(kael)
    assert list(got.shape) == list(expected.shape) and got.tolist() == expected.tolist()


@pytest.mark.parametrize("op,dims", [
    ("sum", (0, 0)), ("amax", (0, 0)), ("sum", (0, -1)), ("sum", (0,)), ("mean", (0, 0)), ("logsumexp", (0, 0)),
    ("count_nonzero", (0, 0)), ("amin", (-1,)),
], ids=str)
def test_repeated_dims_of_a_zero_dim_tensor_are_refused_as_torch(op, dims):
    _same_outcome(lambda lib: getattr(lib, op)(lib.tensor(3.5), dims))


@pytest.mark.parametrize("op", ["sum", "amax", "amin", "all", "any", "logsumexp", "count_nonzero", "mean"])
@pytest.mark.parametrize("dims", [(0, 0, 2), (1, 1, 5), (-3, 0, 0), (0, 0), (1, -1)], ids=str)
def test_a_dim_out_of_range_is_reported_before_a_repeated_one(op, dims):
    _same_outcome(lambda lib: getattr(lib, op)(lib.ones(2, 3), dims))
