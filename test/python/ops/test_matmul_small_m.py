"""Products of a few rows (Note [Small-M products] in aten/src/native/cpu/gemm_small_m.cpp):
float32 rows bit-identical to the same rows of a taller product (the GEMM's sums), both layouts
of the matrix, and bfloat16/float16 products rounded once from float32 sums."""
import numpy as np
import pytest
import torch

import kael
from helpers import to_kael, to_torch


def operands(m, k, n, transposed, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if transposed else torch.randn(k, n, generator=g)
    return a, b


def kael_matrix(b, transposed):
    return to_kael(b.t().contiguous()).t() if transposed else to_kael(b)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("k, n", [(768, 2304), (37, 50), (300, 129), (1000, 17), (513, 300)])
def test_float32_rows_match_the_gemm_bit_for_bit(k, n, transposed):
    a, b = operands(12, k, n, transposed)
    kb = kael_matrix(b, transposed)
    tall = kael.matmul(to_kael(a), kb).numpy()
    exact = a.double() @ b.double()
    for m in range(1, 9):
        got = kael.matmul(to_kael(a[:m]), kb)
        assert np.array_equal(got.numpy(), tall[:m])
        np.testing.assert_allclose(got.numpy(), exact[:m].numpy(), rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("threads", [1, 2])
def test_float32_does_not_depend_on_the_thread_count(threads):
    a, b = operands(3, 768, 3072, False)
    before = kael.get_num_threads()
    try:
        kael.set_num_threads(1)
        one = kael.matmul(to_kael(a), to_kael(b)).numpy()
        kael.set_num_threads(threads)
        assert np.array_equal(kael.matmul(to_kael(a), to_kael(b)).numpy(), one)
    finally:
        kael.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("m, k, n", [(1, 768, 2304), (3, 100, 37), (8, 513, 300), (5, 64, 16)])
def test_half_products_round_once(dtype, transposed, m, k, n):
    a, b = operands(m, k, n, transposed, seed=1)
    tdtype = getattr(torch, dtype)
    a, b = a.to(tdtype), b.to(tdtype)
    got = kael.matmul(to_kael(a), kael_matrix(b, transposed).to(getattr(kael, dtype)))
    assert got.dtype == getattr(kael, dtype)
    exact = (a.double() @ b.double())
    # float32 sums, then one rounding: within one ulp of the rounded exact value, plus the float32
    # sums' error bound where the result is small
    rounded = exact.to(tdtype).double()
    err = (to_torch(got.float()).double() - rounded).abs()
    ulp = rounded.abs() * (2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10)
    sums = k * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    assert bool((err <= ulp + sums).all())
    # the linear layer and 1-d forms reach it too
    np.testing.assert_allclose(kael.matmul(to_kael(a[0]), kael_matrix(b, transposed).to(getattr(kael, dtype)))
                               .float().numpy(), got[0].float().numpy())
