"""Every layout through every matrix product, for every dtype the product takes, against torch.

Layouts (contiguous, transposed, overlapping windows as as_strided's im2col pattern makes them,
zero strides, strided slices, expanded batch dims, 0-size) x dtypes (the float dtypes and the
integer ones) x ops (matmul, mm, bmm, addmm, baddbmm, linear, mv, dot, vdot, einsum). A layout
one dtype takes, every dtype takes: oneDNN (float16/bfloat16, narrow float32) gets a dense copy
of a layout it cannot describe. The inputs hold small integers, so every product is exact in
float32 and rounds the same way on both sides: results are compared exactly.
"""
import math

import pytest
import torch

import kael
from helpers import KAEL_ERRORS, check, to_kael

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8"]  # int16: the loop int32 takes

# (n, k, m): a loop-sized product, a narrow one past the loop (float32 goes to oneDNN), a wide one
# (float32's GEMM)
SIZES = [(3, 5, 2), (40, 48, 8), (20, 24, 40)]

MATRIX_LAYOUTS = ["contig", "transposed", "overlap", "overlap_rows", "zero_row", "zero_col", "step", "col_slice"]
VECTOR_LAYOUTS = ["contig", "zero", "step"]
BATCH_LAYOUTS = ["contig", "transposed", "overlap", "expand_batch", "batch_step", "zero_col"]


def _strides(shape, layout):
    """The strides of a view of `shape` in the given layout (of a storage as long as needed)."""
    nd = len(shape)
    contig = [math.prod(shape[i + 1:]) for i in range(nd)]
    if layout == "contig":
        return contig
    if nd == 1:
        return {"zero": [0], "step": [2]}[layout]
    rows, cols = shape[-2], shape[-1]
    batch = list(contig[:-2])
    if layout == "transposed":  # the last two dims swapped in memory
        return batch + [1, rows]
    if layout == "overlap":  # sliding windows: row i starts one element after row i-1
        return batch + [1, 1]
    if layout == "overlap_rows":  # windows that overlap in part
        return batch + [2, 1]
    if layout == "zero_row":  # every row the same
        return batch + [0, 1]
    if layout == "zero_col":  # every column the same
        return batch + [cols, 0]
    if layout == "step":  # every other row, every third column
        return [6 * s for s in batch] + [6 * cols, 3]
    if layout == "col_slice":  # the first columns of wider rows
        return [s * (cols + 3) // cols for s in batch] + [cols + 3, 1]
    if layout == "expand_batch":  # one matrix repeated along the batch dims
        return [0] * len(batch) + contig[-2:]
    if layout == "batch_step":  # every other matrix
        return [2 * s for s in batch] + contig[-2:]
    raise ValueError(layout)


def _operand(shape, dtype, layout, seed):
    """The same view of the same values in torch and kael."""
    strides = _strides(shape, layout)
    length = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    g = torch.Generator().manual_seed(seed)
    lo = 0 if dtype == "uint8" else -3
    flat = torch.randint(lo, 4, (max(length, 1),), generator=g).to(getattr(torch, dtype))
    t = flat.as_strided(shape, strides)
    k = to_kael(flat).as_strided(shape, strides)
    return t, k


def _run(fn, operands):
    """fn(lib, *operands) on both sides: the same result, or both raise."""
    tin = [t for t, _ in operands]
    kin = [k for _, k in operands]
    try:
        tres = fn(torch, *tin)
    except Exception:
        with pytest.raises(KAEL_ERRORS):
            fn(kael, *kin)
        return
    check(fn(kael, *kin), tres, rtol=0, atol=0)


def _matrix_cases():
    cases = [(la, "contig") for la in MATRIX_LAYOUTS] + [("contig", lb) for lb in MATRIX_LAYOUTS[1:]]
    return cases + [(la, la) for la in MATRIX_LAYOUTS[1:]] + [("overlap", "transposed"), ("transposed", "overlap")]


MATRIX_OPS = {
    "matmul": lambda L, a, b: L.matmul(a, b),
    "mm": lambda L, a, b: L.mm(a, b),
    "operator": lambda L, a, b: a @ b,
    "einsum": lambda L, a, b: L.einsum("ij,jk->ik", a, b),
    "addmm": lambda L, a, b: L.addmm(L.ones(b.shape[1], dtype=a.dtype), a, b),
    "addmm_beta_alpha": lambda L, a, b: L.addmm(L.ones(a.shape[0], b.shape[1], dtype=a.dtype), a, b, beta=2, alpha=3),
    "linear": lambda L, a, b: L.nn.functional.linear(a, b.t()),
    "linear_bias": lambda L, a, b: L.nn.functional.linear(a, b.t(), L.ones(b.shape[1], dtype=a.dtype)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(MATRIX_OPS))
@pytest.mark.parametrize("la,lb", _matrix_cases(), ids=str)
def test_matrix_layouts(op, dtype, la, lb):
    for seed, (n, k, m) in enumerate(SIZES):
        _run(MATRIX_OPS[op], [_operand((n, k), dtype, la, seed), _operand((k, m), dtype, lb, seed + 100)])


BATCH_OPS = {
    "matmul": lambda L, a, b: L.matmul(a, b),
    "bmm": lambda L, a, b: L.bmm(a, b),
    "baddbmm": lambda L, a, b: L.baddbmm(L.ones(b.shape[2], dtype=a.dtype), a, b, alpha=2),
    "einsum": lambda L, a, b: L.einsum("bij,bjk->bik", a, b),
    "matmul_broadcast": lambda L, a, b: L.matmul(a.unsqueeze(0), b),
    "linear_3d": lambda L, a, b: L.nn.functional.linear(a, b[0].t(), L.ones(b.shape[2], dtype=a.dtype)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(BATCH_OPS))
@pytest.mark.parametrize("la,lb", [(la, "contig") for la in BATCH_LAYOUTS] +
                         [("contig", lb) for lb in BATCH_LAYOUTS[1:]] + [(la, la) for la in BATCH_LAYOUTS[1:]], ids=str)
def test_batched_layouts(op, dtype, la, lb):
    for seed, (n, k, m) in enumerate(SIZES):
        _run(BATCH_OPS[op], [_operand((3, n, k), dtype, la, seed), _operand((3, k, m), dtype, lb, seed + 100)])


VECTOR_OPS = {
    "mv": lambda L, a, v: L.mv(a, v),
    "matmul_mv": lambda L, a, v: L.matmul(a, v),
    "matmul_vm": lambda L, a, v: L.matmul(v, a.t()),
    "dot": lambda L, a, v: L.dot(a[0], v),
    "vdot": lambda L, a, v: L.vdot(v, a[-1]),
    "matmul_vv": lambda L, a, v: L.matmul(a[0], v),
    "einsum_mv": lambda L, a, v: L.einsum("ij,j->i", a, v),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(VECTOR_OPS))
@pytest.mark.parametrize("la", MATRIX_LAYOUTS)
@pytest.mark.parametrize("lv", VECTOR_LAYOUTS)
def test_vector_layouts(op, dtype, la, lv):
    for seed, (n, k, _) in enumerate(SIZES):
        _run(VECTOR_OPS[op], [_operand((n, k), dtype, la, seed), _operand((k,), dtype, lv, seed + 100)])


# 0-size operands in every dim, each in a non-contiguous layout as well
EMPTY_CASES = [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (4, 0)), ((0, 0), (0, 0)),
               ((2, 0, 4), (2, 4, 3)), ((0, 3, 4), (0, 4, 2)), ((2, 3, 0), (2, 0, 5)), ((2, 3, 4), (2, 4, 0))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", EMPTY_CASES, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_empty_layouts(dtype, sa, sb, layout):
    ops = [lambda L, a, b: L.matmul(a, b), lambda L, a, b: L.einsum("...ij,...jk->...ik", a, b)]
    if len(sa) == 2:
        ops += [MATRIX_OPS["mm"], MATRIX_OPS["addmm"], MATRIX_OPS["linear_bias"]]
    else:
        ops += [BATCH_OPS["bmm"], BATCH_OPS["baddbmm"]]
    for fn in ops:
        _run(fn, [_operand(sa, dtype, layout, 1), _operand(sb, dtype, layout, 2)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_im2col_windows(dtype):
    # the report's case: a convolution as the product of sliding windows and a filter bank
    g = torch.Generator().manual_seed(0)
    signal = torch.randint(-3, 4, (2, 70), generator=g).to(getattr(torch, dtype))
    filters = torch.randint(-3, 4, (9, 16), generator=g).to(signal.dtype)
    t_windows = signal.as_strided((2, 62, 9), (70, 1, 1))
    k_windows = to_kael(signal).as_strided((2, 62, 9), (70, 1, 1))
    check(k_windows @ to_kael(filters), t_windows @ filters, rtol=0, atol=0)
    check(kael.matmul(k_windows[0], to_kael(filters)), torch.matmul(t_windows[0], filters), rtol=0, atol=0)
