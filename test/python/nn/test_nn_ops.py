"""Neural-network ops against PyTorch: softmax, log_softmax, standardize, layer_norm, embedding,
cross_entropy_losses (and F.cross_entropy), linear, addmm, bmm, baddbmm, and the C++-only backward
kernels of embedding and cross_entropy_losses against torch.autograd."""
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, HALF_NAMES, KAEL_ERRORS, LAYOUTS, check, compare, make_pair, rand_torch, tdtype, \
    to_kael

ALL_NAMES = list(FLOAT_NAMES) + ["int64", "int32", "uint8", "bool"]


def both(shape, dtype="float32", layout="contig", domain="any"):
    p = make_pair(shape, dtype, layout, domain)
    return p.t, p.k


# ---------------------------------------------------------------- softmax / log_softmax


def torch_softmax(name, t, *args, **kw):
    """torch's result; for log_softmax of float16/bfloat16, computed in float32 and rounded once.

    kael computes the half types in float32 and rounds once (docs/decisions/half-types.md). torch's
    log_softmax kernels for them lose precision (relative errors of 3% for float16 and 100% for
    bfloat16 near log-probabilities of 0 on random rows of 7), so the oracle there is torch's
    float32 result, rounded; softmax of the half types agrees with it as is.
    """
    fn = getattr(torch, name) if not kw.pop("functional", False) else getattr(TF, name)
    if name == "log_softmax" and t.dtype in (torch.float16, torch.bfloat16) and "dtype" not in kw:
        return fn(t.float(), *args, **kw).to(t.dtype)
    return fn(t, *args, **kw)


SOFTMAX_SHAPES = [(7,), (3, 5), (4, 1, 6), (2, 3, 4, 5), (1,), (5, 300), (64, 1030)]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax_every_dim(name, dtype, shape):
    t, k = both(shape, dtype)
    for dim in range(-len(shape), len(shape)):
        check(getattr(kael, name)(k, dim), torch_softmax(name, t, dim))
        check(getattr(k, name)(dim), torch_softmax(name, t, dim))
        check(getattr(KF, name)(k, dim=dim), torch_softmax(name, t, dim=dim, functional=True))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_softmax_non_contiguous(name, layout):
    for dtype in ["float32", "float64", "bfloat16"]:
        shape = (6, 9, 70)
        t, k = both(shape, dtype, layout)
        for dim in (0, 1, -1):
            check(getattr(kael, name)(k, dim), torch_softmax(name, t, dim))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_random_shapes(name):
    rng = random.Random(7)
    for _ in range(30):
        nd = rng.randint(1, 4)
        shape = tuple(rng.randint(1, 40) for _ in range(nd))
        dtype = rng.choice(FLOAT_NAMES)
        t, k = both(shape, dtype)
        dim = rng.randrange(-nd, nd)
        check(getattr(kael, name)(k, dim), torch_softmax(name, t, dim))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_zero_dim_and_empty(name):
    for dtype in FLOAT_NAMES:
        for shape, dims in [((), (0, -1)), ((0,), (0,)), ((3, 0), (0, 1)), ((0, 4), (0, 1)), ((2, 0, 3), (0, 1, 2))]:
            t, k = both(shape, dtype)
            for dim in dims:
                check(getattr(kael, name)(k, dim), torch_softmax(name, t, dim))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_dtype_argument(name):
    for src in ALL_NAMES:
        for dst in FLOAT_NAMES:
            t, k = both((4, 9), src)
            # dtype= converts the input first, then computes (torch's rule)
            check(getattr(kael, name)(k, -1, dtype=getattr(kael, dst)), torch_softmax(name, t.to(tdtype(dst)), -1))
            if name == "softmax" or dst not in HALF_NAMES:
                check(getattr(k, name)(-1, dtype=getattr(kael, dst)), getattr(t, name)(-1, dtype=tdtype(dst)))
    # without dtype=, integer and bool inputs are rejected, as in torch
    for src in ["int64", "int32", "uint8", "bool"]:
        t, k = both((3, 4), src)
        with pytest.raises(RuntimeError):
            getattr(torch, name)(t, 0)
        with pytest.raises(RuntimeError, match=name):
            getattr(kael, name)(k, 0)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_special_values(name):
    rows = [
        [0.0, 1.0, 2.0],
        [float("-inf"), 0.0, 1.0],
        [float("-inf")] * 3,
        [float("inf"), 0.0, 1.0],
        [float("nan"), 0.0, 1.0],
        [1e30, -1e30, 0.0],
        [-100.0, -200.0, -90.0],
        [88.0, 89.0, -87.0],
    ]
    for dtype in FLOAT_NAMES:
        t = torch.tensor(rows, dtype=tdtype(dtype))
        k = to_kael(t)
        check(getattr(kael, name)(k, 1), torch_softmax(name, t, 1))
        check(getattr(kael, name)(k, 0), torch_softmax(name, t, 0))


def test_softmax_large_rows_and_threads():
    # above the threading grain; the same result with 1 and 2 threads
    t, k = both((300, 2000), "float32")
    before = kael.get_num_threads()
    try:
        kael.set_num_threads(1)
        one = kael.softmax(k, 1)
        kael.set_num_threads(2)
        two = kael.softmax(k, 1)
        assert one.tolist() == two.tolist()
        check(two, torch.softmax(t, 1))
        check(kael.log_softmax(k, 0), torch.log_softmax(t, 0))
    finally:
        kael.set_num_threads(before)


def test_softmax_bad_dim():
    t, k = both((3, 4))
    for dim in (2, -3, 100):
        with pytest.raises(IndexError):
            torch.softmax(t, dim)
        with pytest.raises(IndexError, match="softmax"):
            kael.softmax(k, dim)
        with pytest.raises(IndexError, match="log_softmax"):
            kael.log_softmax(k, dim)


def test_functional_softmax_implicit_dim_warns():
    for shape in [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)]:
        t, k = both(shape)
        with pytest.warns(UserWarning, match="Implicit dimension"):
            kr = KF.softmax(k)
        with pytest.warns(UserWarning):
            tr = TF.softmax(t)
        check(kr, tr)
        with pytest.warns(UserWarning, match="Implicit dimension"):
            kr = KF.log_softmax(k)
        with pytest.warns(UserWarning):
            tr = TF.log_softmax(t)
        check(kr, tr)


def test_exp_approximation_ulp_bound():
    # softmax's vectorised exp (nn_kernels.h): within 2 ulp of the correctly rounded exp over
    # [-86.6, 0], seen through softmax of rows [x, 0] (= exp(x) / (1 + exp(x)) ~ exp(x) for x << 0)
    # and exactly through log_softmax(x)[0] - x of a one-element row (must be 0).
    xs = np.linspace(-86.0, -20.0, 4001).astype(np.float32)
    rows = np.stack([xs, np.zeros_like(xs)], axis=1)
    k = kael.softmax(kael.tensor(rows), 1).tolist()
    got = np.array([r[0] for r in k], dtype=np.float32)
    exact = np.exp(xs.astype(np.float64)) / (1 + np.exp(xs.astype(np.float64)))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact) / ulp
    assert err.max() <= 3.0, err.max()  # 2 ulp of exp + rounding of the division


def test_exp_approximation_ulp_bound_wide_rows():
    # the same bound through the vector loops (16 lanes with AVX-512, 8 with AVX2; the last
    # partial vector under a mask): rows of 1000 to 1017 elements spread over [-86, -20] with
    # one 0, so that every element's exp is a term of a sum close to 1
    rng = np.random.default_rng(7)
    for n in range(1000, 1018):
        xs = rng.uniform(-86.0, -20.0, n).astype(np.float32)
        xs[(n * 5) // 7] = 0.0
        got = np.array(kael.softmax(kael.tensor(xs), 0).tolist(), dtype=np.float32)
        e = np.exp(xs.astype(np.float64))
        exact = e / e.sum()
        ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - exact) / ulp
        assert err.max() <= 3.0, (n, err.max())  # 2 ulp of exp + rounding of the scaling
        # log_softmax: log(sum) is (nearly) 0, so the result is x - max itself
        got_log = np.array(kael.log_softmax(kael.tensor(xs), 0).tolist(), dtype=np.float32)
        exact_log = xs.astype(np.float64) - np.log(e.sum())
        assert np.abs(got_log.astype(np.float64) - exact_log).max() <= 1e-5


@pytest.mark.parametrize("n", [1, 15, 16, 17, 63, 64, 65, 127, 129])
def test_softmax_row_lengths_around_the_vector_width(n):
    # every remainder of the vector loops, each row's max in a different place; every value far
    # below 0, so that a lane past the row's end (read as 0) would add a large term
    t = torch.randn(n + 3, n, generator=torch.Generator().manual_seed(n)) * 3 - 30
    for i in range(n + 3):
        t[i, i % n] = -20.0
    k = to_kael(t)
    for name in ("softmax", "log_softmax"):
        check(getattr(kael, name)(k, 1), torch_softmax(name, t, 1))
        check(getattr(kael, name)(k, 0), torch_softmax(name, t, 0))


# ---------------------------------------------------------------- standardize / layer_norm

LN_CASES = [((5,), (5,)), ((3, 8), (8,)), ((2, 3, 8), (8,)), ((2, 3, 8), (3, 8)), ((4, 1024), (1024,)),
            ((2, 2, 3, 5), (2, 3, 5)), ((1, 1), (1,))]


def torch_layer_norm(t, ns, w=None, b=None, eps=1e-5):
    """torch's layer_norm; for float16/bfloat16 computed in float32 and rounded once.

    kael computes the half types in float32 and rounds once. torch's kernels for them compute
    y = x * rstd + (-mean * rstd) with rounded terms, whose error grows with rstd: a row of one
    element gives about 1.6e-5 instead of 0 at eps=1e-5. float32 and float64 compare with torch
    as is.
    """
    if t.dtype in (torch.float16, torch.bfloat16):
        f = lambda v: None if v is None else v.float()  # noqa: E731
        return TF.layer_norm(t.float(), ns, f(w), f(b), eps=eps).to(t.dtype)
    return TF.layer_norm(t, ns, w, b, eps=eps)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,ns", LN_CASES)
def test_layer_norm(dtype, shape, ns):
    t, k = both(shape, dtype)
    tw, kw = both(ns, dtype)
    tb, kb = both(ns, dtype)
    for eps in (1e-5, 0.1):
        check(kael.layer_norm(k, ns, kw, kb, eps), torch_layer_norm(t, ns, tw, tb, eps))
        check(KF.layer_norm(k, ns, kw, kb, eps=eps), torch_layer_norm(t, ns, tw, tb, eps=eps))
        check(KF.layer_norm(k, ns, kw, None, eps=eps), torch_layer_norm(t, ns, tw, None, eps=eps))
        check(KF.layer_norm(k, ns, None, kb, eps=eps), torch_layer_norm(t, ns, None, tb, eps=eps))
        check(KF.layer_norm(k, ns), torch_layer_norm(t, ns))
        # standardize is layer_norm without weight and bias
        check(kael.standardize(k, ns, eps), torch_layer_norm(t, ns, eps=eps))
    check(kael.standardize(k, ns), torch_layer_norm(t, ns))
    if dtype in ("float32", "float64"):
        check(kael.layer_norm(k, ns, kw, kb), torch.layer_norm(t, ns, tw, tb))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layer_norm_non_contiguous(layout):
    for dtype in ["float32", "float64", "float16"]:
        t, k = both((6, 5, 40), dtype, layout)
        tw, kw = both((40,), dtype, "step")
        tb, kb = both((40,), dtype)
        check(kael.layer_norm(k, [40], kw, kb), torch_layer_norm(t, [40], tw, tb))
        check(kael.standardize(k, [5, 40]), torch_layer_norm(t, [5, 40]))


def test_layer_norm_half_input_float_weight():
    # torch takes float32 weight and bias for a float16/bfloat16 input (mixed dtypes)
    for dtype in HALF_NAMES:
        t, k = both((4, 16), dtype)
        tw, kw = both((16,), "float32")
        tb, kb = both((16,), "float32")
        check(kael.layer_norm(k, [16], kw, kb), torch_layer_norm(t, [16], tw, tb))


def test_layer_norm_special_and_empty():
    for dtype in FLOAT_NAMES:
        t = torch.tensor([[1.0, 1.0, 1.0], [float("nan"), 0.0, 1.0], [float("inf"), 0.0, 1.0], [1e20, -1e20, 0]],
                         dtype=tdtype(dtype))
        check(kael.standardize(to_kael(t), [3]), torch_layer_norm(t, [3]))
        for shape, ns in [((0, 4), (4,)), ((2, 0), (0,)), ((0,), (0,))]:
            compare(lambda lib, x: lib.layer_norm(x, ns), (shape, dtype))


def test_layer_norm_bad_input():
    t, k = both((3, 4))
    # normalized_shape not matching the trailing dims: RuntimeError in torch
    for ns in [(3,), (5,), (2, 3, 4), (3, 4, 1)]:
        with pytest.raises(RuntimeError):
            torch.layer_norm(t, ns)
        with pytest.raises(RuntimeError, match="layer_norm: Given normalized_shape"):
            kael.layer_norm(k, ns)
        with pytest.raises(RuntimeError, match="standardize"):
            kael.standardize(k, ns)
    # weight of the wrong shape
    compare(lambda lib, x, w: lib.layer_norm(x, [4], w), ((3, 4), "float32"), ((3,), "float32"))
    # integer input
    for dtype in ["int64", "int32", "bool"]:
        compare(lambda lib, x: lib.layer_norm(x, [4]), ((3, 4), dtype))
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        kael.layer_norm(k, [])


def test_layer_norm_threads_and_large():
    t, k = both((512, 1024), "float32")
    before = kael.get_num_threads()
    try:
        kael.set_num_threads(2)
        check(kael.layer_norm(k, [1024]), torch.layer_norm(t, [1024]))
    finally:
        kael.set_num_threads(before)


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_embedding_dtypes_and_shapes(dtype):
    tw, kw = both((10, 6), dtype)
    for ishape in [(), (4,), (2, 3), (2, 0), (0,), (2, 3, 2)]:
        for idt in ["int64", "int32"]:
            ti = torch.randint(0, 10, ishape, dtype=tdtype(idt))
            ki = to_kael(ti)
            check(KF.embedding(ki, kw), TF.embedding(ti, tw))
            check(kael.embedding(kw, ki), torch.embedding(tw, ti))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_embedding_non_contiguous(layout):
    tw, kw = both((12, 5), "float32", layout)
    ti, ki = both((3, 4), "int64", layout, "small")
    check(KF.embedding(ki, kw), TF.embedding(ti, tw))


def test_embedding_large_parallel():
    tw, kw = both((1000, 64), "float32")
    ti = torch.randint(0, 1000, (4096,))
    check(KF.embedding(to_kael(ti), kw), TF.embedding(ti, tw))


def test_embedding_bad_input():
    tw, kw = both((10, 3))
    for bad in [10, -1, 100]:
        ti = torch.tensor([0, bad])
        with pytest.raises(IndexError):
            TF.embedding(ti, tw)
        with pytest.raises(IndexError, match="embedding: index out of range"):
            KF.embedding(to_kael(ti), kw)
    # float indices: RuntimeError in torch
    compare(lambda lib, i, w: lib.nn.functional.embedding(i, w), ((3,), "float32"), ((10, 3), "float32"))
    # weight not 2-d
    with pytest.raises(RuntimeError, match="2-D"):
        KF.embedding(kael.tensor([0]), kael.ones(10))
    with pytest.raises(AssertionError):
        TF.embedding(torch.tensor([0]), tw, padding_idx=10)
    with pytest.raises(AssertionError):
        KF.embedding(kael.tensor([0]), kw, padding_idx=10)


def test_embedding_backward_matches_torch_autograd():
    for dtype in ["float32", "float64", "bfloat16"]:
        for padding_idx in [None, 2, -1]:
            w = rand_torch((7, 5), dtype).requires_grad_()
            idx = torch.tensor([[0, 2, 2], [6, 1, 2]])
            out = TF.embedding(idx, w, padding_idx=padding_idx)
            g = rand_torch(out.shape, dtype)
            out.backward(g)
            pad = -1 if padding_idx is None else padding_idx % 7
            kg = kael.embedding_backward(to_kael(g), to_kael(idx), 7, pad)
            check(kg, w.grad)


# ---------------------------------------------------------------- cross_entropy_losses


def ce_torch(x, t, ignore_index=-100, label_smoothing=0.0):
    return TF.cross_entropy(x, t, reduction="none", ignore_index=ignore_index, label_smoothing=label_smoothing)


def ce_exact(x, t, ignore_index=-100, label_smoothing=0.0):
    # torch in float64, rounded to x's dtype: the exact result the float32 kernels approximate
    r = TF.cross_entropy(x.double(), t.double() if t.is_floating_point() else t, reduction="none",
                         ignore_index=ignore_index, label_smoothing=label_smoothing)
    return r.to(x.dtype)


CE_SHAPES = [((5,), ()), ((4, 7), (4,)), ((3, 5, 2), (3, 2)), ((2, 4, 3, 2), (2, 3, 2)), ((0, 3), (0,)),
             ((64, 1000), (64,))]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("xshape,tshape", CE_SHAPES)
def test_cross_entropy_losses(dtype, xshape, tshape):
    C = xshape[0] if len(xshape) == 1 else xshape[1]
    tx, kx = both(xshape, dtype)
    for smoothing in (0.0, 0.1, 1.0):
        tt = torch.randint(0, C, tshape)
        if tt.numel() > 1:
            tt.view(-1)[0] = -100
        kt = to_kael(tt)
        check(kael.cross_entropy_losses(kx, kt, label_smoothing=smoothing), ce_torch(tx, tt, label_smoothing=smoothing))
        check(KF.cross_entropy(kx, kt, reduction="none", label_smoothing=smoothing),
              ce_torch(tx, tt, label_smoothing=smoothing))
        if tt.numel() > 0:
            for red in ("mean", "sum"):
                # torch's float16/bfloat16 reductions lose precision (inf for a mean of 64 losses
                # near 10 in float16): the oracle is torch's float32 result, rounded
                ref = TF.cross_entropy(tx.float() if dtype in HALF_NAMES else tx, tt, reduction=red,
                                       label_smoothing=smoothing).to(tx.dtype)
                check(KF.cross_entropy(kx, kt, reduction=red, label_smoothing=smoothing), ref)
        # label_smoothing not above 0 (NaN included) is no smoothing; above 1 raises (torch's checks)
        for ls in (-3.0, float("nan"), -float("inf")):
            check(kael.cross_entropy_losses(kx, kt, label_smoothing=ls), ce_torch(tx, tt, label_smoothing=ls))
        # ignore_index of a real class (-100 is then out of range)
        tt = tt.clamp(min=0)
        check(kael.cross_entropy_losses(kx, to_kael(tt), ignore_index=1), ce_torch(tx, tt, ignore_index=1))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cross_entropy_probability_targets(dtype):
    for xshape in [(4, 7), (3, 5, 2), (6,)]:
        tx, kx = both(xshape, dtype)
        cdim = 0 if len(xshape) == 1 else 1
        tp = torch.softmax(rand_torch(xshape, "float64"), cdim).to(tdtype(dtype))
        for smoothing in (0.0, 0.2):
            check(kael.cross_entropy_losses(kx, to_kael(tp), label_smoothing=smoothing),
                  ce_torch(tx, tp, label_smoothing=smoothing))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cross_entropy_non_contiguous(layout):
    tx, kx = both((6, 9, 4), "float32", layout)
    tt = torch.randint(0, 9, (6, 4))
    check(kael.cross_entropy_losses(kx, to_kael(tt)), ce_torch(tx, tt))


def test_cross_entropy_large_vocabulary():
    # 8192 x 50257 would take 1.6 GB per copy; 256 rows keep the vocabulary
    tx = rand_torch((256, 50257), "float32")
    tt = torch.randint(0, 50257, (256,))
    check(kael.cross_entropy_losses(to_kael(tx), to_kael(tt)), ce_exact(tx, tt))
    check(kael.cross_entropy_losses(to_kael(tx), to_kael(tt), label_smoothing=0.1),
          ce_exact(tx, tt, label_smoothing=0.1))


def test_cross_entropy_no_classes():
    for x, t in [(torch.ones(3, 0), torch.full((3,), -100)), (torch.ones(3, 0), torch.ones(3, 0)),
                 (torch.ones(0), torch.ones(0))]:
        check(kael.cross_entropy_losses(to_kael(x), to_kael(t)), ce_torch(x, t))
        check(kael.cross_entropy_losses(to_kael(x), to_kael(t), label_smoothing=0.5),
              ce_torch(x, t, label_smoothing=0.5))


def test_cross_entropy_special_values():
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("nan"), 0.0, 0.0], [1e30, 0.0, -1e30]])
    for t in ([0, 2, 2], [1, 1, 0]):
        tt = torch.tensor(t)
        check(kael.cross_entropy_losses(to_kael(x), to_kael(tt)), ce_torch(x, tt))


@pytest.mark.parametrize("C", [1, 17, 4095, 4096, 4097, 8193])
def test_cross_entropy_rows_read_once(C):
    # class-index targets without smoothing take logsumexp's one pass (nn_ops.cpp): rows around
    # its block length, rows that rise steeply (the two-pass blocks), rows far from 0 (beyond the
    # table's reference, |x| > 4096), and the special values PyTorch's (x - max) gives NaN for
    g = torch.Generator().manual_seed(C)
    rows = [
        torch.randn(C, generator=g),
        torch.linspace(-200.0, 200.0, C),
        torch.linspace(50.0, -50.0, C),
        torch.randn(C, generator=g) * 30 + 6000.0,
        torch.randn(C, generator=g) - 1e5,
    ]
    x = torch.stack(rows)
    t = torch.randint(0, C, (len(rows),), generator=g)
    t[1] = C - 1
    check(kael.cross_entropy_losses(to_kael(x), to_kael(t)), ce_exact(x, t))
    for row, target in [
        ([0.0] * (C - 1) + [float("inf")], C - 1),  # +inf at the target
        ([float("inf")] + [0.0] * (C - 1), C - 1),  # +inf elsewhere
        ([float("nan")] + [0.0] * (C - 1), C - 1),
        ([float("-inf")] * C, 0),
        ([float("-inf")] + [1.0] * (C - 1), 0),  # -inf at the target: +inf
        ([1.0] * (C - 1) + [float("-inf")], 0),
    ]:
        if len(row) != C:
            continue
        xs = torch.tensor([row])
        ts = torch.tensor([target])
        check(kael.cross_entropy_losses(to_kael(xs), to_kael(ts)), ce_torch(xs, ts))


def test_cross_entropy_bad_input():
    tx, kx = both((4, 5))
    for bad in ([0, 1, 5, 2], [0, -1, 2, 3], [0, -101, 1, 1]):
        tt = torch.tensor(bad)
        with pytest.raises(IndexError):
            ce_torch(tx, tt)
        with pytest.raises(IndexError, match="cross_entropy_losses: Target"):
            kael.cross_entropy_losses(kx, to_kael(tt))
    # target shape mismatch
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none"), ((4, 5), "float32"),
            ((3,), "int64", "contig", "small"))
    # int32 targets, float targets of the wrong shape, 0-d input, bad smoothing, integer input
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none"), ((4, 5), "float32"),
            ((4,), "int32", "contig", "small"))
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none"), ((4, 5), "float32"),
            ((4, 4), "float32"))
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none"), ((), "float32"),
            ((), "int64", "contig", "small"))
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none", label_smoothing=1.5),
            ((4, 5), "float32"), ((4,), "int64", "contig", "small"))
    compare(lambda lib, x, t: lib.nn.functional.cross_entropy(x, t, reduction="none"), ((4, 5), "int64"),
            ((4,), "int64", "contig", "small"))


def test_cross_entropy_backward_matches_torch_autograd():
    for dtype in ["float32", "float64"]:
        for smoothing in (0.0, 0.3):
            for xshape, tshape in [((4, 7), (4,)), ((3, 5, 2), (3, 2)), ((6,), ())]:
                x = rand_torch(xshape, dtype).requires_grad_()
                C = xshape[0] if len(xshape) == 1 else xshape[1]
                t = torch.randint(0, C, tshape)
                if t.numel() > 1:
                    t.view(-1)[1] = -100
                out = ce_torch(x, t, label_smoothing=smoothing)
                g = rand_torch(out.shape, dtype)
                out.backward(g)
                kg = kael.cross_entropy_losses_backward(to_kael(g), to_kael(x.detach()), to_kael(t), -100,
                                                             smoothing)
                check(kg, x.grad)
            # probability targets
            x = rand_torch((4, 7), dtype).requires_grad_()
            p = torch.softmax(rand_torch((4, 7), dtype), 1)
            out = ce_torch(x, p, label_smoothing=smoothing)
            g = rand_torch(out.shape, dtype)
            out.backward(g)
            kg = kael.cross_entropy_losses_backward(to_kael(g), to_kael(x.detach()), to_kael(p), -100, smoothing)
            check(kg, x.grad)


@pytest.mark.parametrize("C", [1, 17, 4097, 8193])
def test_cross_entropy_backward_long_rows(C):
    # long rows (the vector loops' remainders), steep rows, rows far from 0, smoothing,
    # ignore_index and rows of special values, against torch's float64 autograd
    g = torch.Generator().manual_seed(C)
    rows = [
        torch.randn(C, generator=g),
        torch.linspace(-200.0, 200.0, C),
        torch.randn(C, generator=g) * 30 + 6000.0,
        torch.randn(C, generator=g) - 1e5,
        torch.full((C,), float("-inf")),
        torch.randn(C, generator=g),
        torch.randn(C, generator=g),
    ]
    rows[5][C // 2] = float("inf")
    rows[6][0] = float("nan")
    x = torch.stack(rows)
    t = torch.randint(0, C, (len(rows),), generator=g)
    t[1] = C - 1
    t[3] = -100
    for smoothing in (0.0, 0.1):
        xd = x.double().requires_grad_()
        out = ce_torch(xd, t, label_smoothing=smoothing)
        grad = torch.rand(out.shape, dtype=torch.float64, generator=g)
        out.backward(grad)
        kg = kael.cross_entropy_losses_backward(to_kael(grad.float()), to_kael(x), to_kael(t), -100, smoothing)
        check(kg, xd.grad.float())


# ---------------------------------------------------------------- linear / addmm / bmm / baddbmm

MM_DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32"]


@pytest.mark.parametrize("dtype", MM_DTYPES)
def test_linear(dtype):
    for xshape, wshape in [((5, 4), (3, 4)), ((2, 3, 4), (6, 4)), ((4,), (3, 4)), ((7, 4), (4,)), ((0, 4), (3, 4)),
                           ((64, 512), (512, 512))]:
        out_f = wshape[0] if len(wshape) == 2 else None
        compare(lambda lib, x, w: lib.nn.functional.linear(x, w), (xshape, dtype, "contig", "small"),
                (wshape, dtype, "contig", "small"), atol=1e-4 if xshape[-1] == 512 else None)
        if out_f is not None:
            compare(lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), (xshape, dtype, "contig", "small"),
                    (wshape, dtype, "contig", "small"), ((out_f,), dtype, "contig", "small"),
                    atol=1e-4 if xshape[-1] == 512 else None)


def test_linear_non_contiguous_and_bad():
    compare(lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), ((6, 5), "float32", "T"),
            ((3, 5), "float32", "step"), ((3,), "float32", "step"))
    compare(lambda lib, x, w: lib.nn.functional.linear(x, w), ((6, 5), "float32"), ((3, 4), "float32"))
    compare(lambda lib, x, w: lib.nn.functional.linear(x, w), ((6, 5), "float32"), ((3, 5), "float64"))


@pytest.mark.parametrize("dtype", MM_DTYPES)
def test_addmm(dtype):
    for sshape in [(3, 5), (5,), (1, 5), (3, 1), ()]:
        for beta, alpha in [(1, 1), (0.5, 2.0), (0, 1), (2, 0)]:
            compare(lambda lib, s, a, b: lib.addmm(s, a, b, beta=beta, alpha=alpha), (sshape, dtype, "contig", "small"),
                    ((3, 4), dtype, "contig", "small"), ((4, 5), dtype, "contig", "small"))
    compare(lambda lib, s, a, b: s.addmm(a, b), ((3, 5), dtype, "contig", "small"), ((3, 4), dtype, "T", "small"),
            ((4, 5), dtype, "step", "small"))


def test_addmm_beta_zero_ignores_nan():
    s = torch.full((2, 2), float("nan"))
    a, b = rand_torch((2, 3)), rand_torch((3, 2))
    check(kael.addmm(to_kael(s), to_kael(a), to_kael(b), beta=0), torch.addmm(s, a, b, beta=0))


def test_addmm_bad_input():
    f = lambda lib, s, a, b: lib.addmm(s, a, b)  # noqa: E731
    compare(f, ((3, 5), "float32"), ((3, 4), "float32"), ((5, 5), "float32"))
    compare(f, ((3, 5), "float32"), ((4,), "float32"), ((4, 5), "float32"))
    compare(f, ((3, 5), "float32"), ((3, 4), "float32"), ((4, 5), "float64"))
    compare(f, ((3, 5), "float64"), ((3, 4), "float32"), ((4, 5), "float32"))
    compare(f, ((4, 5), "float32"), ((3, 4), "float32"), ((4, 5), "float32"))


@pytest.mark.parametrize("dtype", MM_DTYPES)
def test_bmm_baddbmm(dtype):
    for b, n, k, m in [(2, 3, 4, 5), (1, 1, 1, 1), (3, 17, 33, 9), (0, 2, 3, 4), (2, 0, 3, 4), (2, 3, 0, 4)]:
        compare(lambda lib, x, y: lib.bmm(x, y), ((b, n, k), dtype, "contig", "small"),
                ((b, k, m), dtype, "contig", "small"))
        compare(lambda lib, x, y: x.bmm(y), ((b, n, k), dtype, "transpose", "small"),
                ((b, k, m), dtype, "step", "small"))
        for sshape in [(b, n, m), (m,), (1, n, 1)]:
            compare(lambda lib, s, x, y: lib.baddbmm(s, x, y), (sshape, dtype, "contig", "small"),
                    ((b, n, k), dtype, "contig", "small"), ((b, k, m), dtype, "contig", "small"))
            compare(lambda lib, s, x, y: s.baddbmm(x, y, beta=2, alpha=3), (sshape, dtype, "contig", "small"),
                    ((b, n, k), dtype, "contig", "small"), ((b, k, m), dtype, "contig", "small"))


def test_bmm_bad_input():
    compare(lambda lib, x, y: lib.bmm(x, y), ((2, 3, 4), "float32"), ((3, 4, 5), "float32"))
    compare(lambda lib, x, y: lib.bmm(x, y), ((2, 3, 4), "float32"), ((2, 5, 5), "float32"))
    compare(lambda lib, x, y: lib.bmm(x, y), ((3, 4), "float32"), ((4, 5), "float32"))
    compare(lambda lib, x, y: lib.bmm(x, y), ((2, 3, 4), "float32"), ((2, 4, 5), "float64"))
    compare(lambda lib, s, x, y: lib.baddbmm(s, x, y), ((2, 4, 5), "float32"), ((2, 3, 4), "float32"),
            ((2, 4, 5), "float32"))


def test_registry_entries_and_docs():
    ops = kael._C._registered_ops()
    for name in ["softmax", "log_softmax", "standardize", "layer_norm", "embedding", "embedding_backward",
                 "cross_entropy_losses", "cross_entropy_losses_backward", "linear", "addmm", "bmm", "baddbmm",
                 "scaled_dot_product_attention"]:
        assert name in ops, name
    assert "standardize" in kael.standardize.__doc__
    assert "reduction='none'" in kael.cross_entropy_losses.__doc__
