"""matmul / @ in all torch shape cases."""
import pytest
import torch

import kael
from helpers import KAEL_ERRORS, NUMERIC_NAMES, check, compare, make_pair, rand_torch, to_kael

# float16/bfloat16: one rounding of a float32 accumulation on each side (oneDNN or float32 here,
# torch's own kernels there) may land one unit in the last place apart.
TOL = {n: {} for n in NUMERIC_NAMES}
TOL.update({"float32": dict(rtol=1e-5, atol=1e-4), "float16": dict(rtol=2e-3, atol=1e-3),
            "bfloat16": dict(rtol=1.6e-2, atol=1e-2)})

SHAPE_CASES = [
    ((4,), (4,)),            # dot -> 0-d
    ((3, 4), (4,)),          # mv
    ((4,), (4, 5)),          # vm
    ((3, 4), (4, 5)),        # mm
    ((1, 1), (1, 1)),
    ((1, 7), (7, 1)),
    ((2, 3, 4), (2, 4, 5)),  # bmm
    ((2, 3, 4), (4, 5)),     # batched @ matrix
    ((3, 4), (2, 4, 5)),     # matrix @ batched
    ((2, 3, 4), (4,)),       # batched @ vector
    ((4,), (2, 4, 3)),       # vector @ batched
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (6, 4, 2)),
    ((2, 2, 1, 3, 4), (2, 1, 4, 2)),
    ((0, 3), (3, 4)),        # empty rows
    ((3, 0), (0, 4)),        # empty inner dim -> zeros
    ((0,), (0,)),
    ((2, 0, 3), (3, 2)),
    ((17, 33), (33, 9)),
    ((65, 70), (70, 67)),
    ((3, 32, 48), (48, 40)),
]


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("sa,sb", SHAPE_CASES, ids=str)
def test_matmul_function(dtype, sa, sb):
    compare(lambda lib, a, b: lib.matmul(a, b), (sa, dtype), (sb, dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (4,))], ids=str)
def test_matmul_operator_and_method(dtype, sa, sb):
    compare(lambda lib, a, b: a @ b, (sa, dtype), (sb, dtype), **TOL[dtype])
    compare(lambda lib, a, b: a.matmul(b), (sa, dtype), (sb, dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("sa,la,sb,lb", [
    ((3, 4), "T", (4, 5), "contig"),
    ((3, 4), "contig", (4, 5), "T"),
    ((3, 4), "T", (4, 5), "T"),
    ((5, 6), "step", (6, 3), "step"),
    ((3, 4), "transpose", (4,), "step"),
    ((4,), "step", (4, 5), "T"),
    ((2, 3, 4), "T", (2, 4, 5), "transpose"),
    ((2, 3, 4), "step", (4, 5), "T"),
    ((3, 3, 4), "expand", (4, 2), "contig"),
    ((3, 4), "contig", (2, 4, 5), "expand"),
    ((33, 40), "T", (40, 17), "T"),
], ids=str)
def test_matmul_noncontiguous_inputs(dtype, sa, la, sb, lb):
    compare(lambda lib, a, b: lib.matmul(a, b), (sa, dtype, la), (sb, dtype, lb), **TOL[dtype])


def test_matmul_with_mT_view():
    compare(lambda lib, a: a @ a.mT, ((2, 3, 4), "float32"), **TOL["float32"])
    compare(lambda lib, a: a.mT @ a, ((2, 3, 4), "float64"))


def test_matmul_result_is_fresh_contiguous():
    a, b = kael.ones(3, 4), kael.ones(4, 5)
    c = a @ b
    assert c.is_contiguous()
    assert c.stride() == (5, 1)
    c.add_(1)
    assert a.tolist() == [[1.0] * 4] * 3 and b.tolist() == [[1.0] * 5] * 4


def test_matmul_known_values():
    a = [[1, 2], [3, 4]]
    b = [[5, 6], [7, 8]]
    assert (kael.tensor(a) @ kael.tensor(b)).tolist() == [[19, 22], [43, 50]]
    assert (kael.tensor([1.0, 2.0, 3.0]) @ kael.tensor([4.0, 5.0, 6.0])).item() == 32.0


def test_int64_matmul_is_exact_for_large_values():
    a = torch.tensor([[2 ** 40, 3], [1, -(2 ** 41)]])
    b = torch.tensor([[5, 2 ** 20], [7, 1]])
    check(kael.tensor(a.tolist()) @ kael.tensor(b.tolist()), a @ b)


def test_matmul_nan_propagates():
    a = [[1.0, float("nan")], [0.0, 1.0]]
    b = [[1.0, 0.0], [0.0, 1.0]]
    check(kael.tensor(a) @ kael.tensor(b), torch.tensor(a) @ torch.tensor(b))


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (5,)), ((3, 4), (3,)), ((5,), (4, 5)),
                                   ((2, 3, 4), (2, 5, 6))], ids=str)
def test_matmul_inner_dim_mismatch_raises(sa, sb):
    with pytest.raises(RuntimeError):
        torch.matmul(torch.ones(sa), torch.ones(sb))
    with pytest.raises((RuntimeError, ValueError)):
        kael.matmul(kael.ones(sa), kael.ones(sb))
    with pytest.raises((RuntimeError, ValueError)):
        kael.ones(sa) @ kael.ones(sb)


def test_matmul_batch_dims_not_broadcastable_raise():
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, 4) @ torch.ones(3, 4, 5)
    with pytest.raises((RuntimeError, ValueError)):
        kael.ones(2, 3, 4) @ kael.ones(3, 4, 5)


@pytest.mark.parametrize("sa,sb", [((), (3,)), ((3,), ()), ((), ()), ((), (2, 2))], ids=str)
def test_matmul_0d_operand_raises(sa, sb):
    with pytest.raises(RuntimeError):
        torch.matmul(torch.ones(sa), torch.ones(sb))
    with pytest.raises(KAEL_ERRORS):
        kael.matmul(kael.ones(sa), kael.ones(sb))


# ---- addmm with a bias row (Linear's): the bias is added in oneDNN's accumulator

@pytest.mark.parametrize("la", ["contig", "T", "step"])
@pytest.mark.parametrize("lb", ["contig", "T", "step"])
@pytest.mark.parametrize("n,k,m", [(64, 48, 40), (2048, 128, 384), (5, 3, 2), (33, 2, 65)])
def test_addmm_bias_row(n, k, m, la, lb):
    a = make_pair((n, k), "float32", la)
    b = make_pair((k, m), "float32", lb)
    bias = rand_torch((m,), "float32")
    got = kael.addmm(to_kael(bias), a.k, b.k)
    check(got, torch.addmm(bias, a.t, b.t), **TOL["float32"])
    assert got.is_contiguous()
    # the other forms still combine themselves
    check(kael.addmm(to_kael(bias), a.k, b.k, beta=0.5, alpha=2), torch.addmm(bias, a.t, b.t, beta=0.5, alpha=2),
          **TOL["float32"])
    check(kael.addmm(to_kael(bias[:1]), a.k, b.k), torch.addmm(bias[:1], a.t, b.t), **TOL["float32"])
    row = rand_torch((1, m), "float32")
    check(kael.addmm(to_kael(row), a.k, b.k), torch.addmm(row, a.t, b.t), **TOL["float32"])


def test_linear_with_bias_matches_torch_and_its_gradients():
    x = rand_torch((4, 50, 128), "float32")
    w = rand_torch((96, 128), "float32")
    bias = rand_torch((96,), "float32")
    kx, kw, kb = (to_kael(t).requires_grad_() for t in (x, w, bias))
    tx, tw, tb = (t.clone().requires_grad_() for t in (x, w, bias))
    out = kael.nn.functional.linear(kx, kw, kb)
    tout = torch.nn.functional.linear(tx, tw, tb)
    check(out, tout.detach(), **TOL["float32"])
    g = rand_torch(tuple(tout.shape), "float32")
    out.backward(to_kael(g))
    tout.backward(g)
    for k, t in ((kx, tx), (kw, tw), (kb, tb)):
        # sums of 200 products: the tolerance scales with their size
        check(k.grad, t.grad, rtol=1e-5, atol=1e-5 * t.grad.abs().max().item())
    # the bias's NaN and inf reach the result as torch's
    nb = bias.clone()
    nb[0], nb[1] = float("nan"), float("inf")
    check(kael.nn.functional.linear(to_kael(x), to_kael(w), to_kael(nb)), torch.nn.functional.linear(x, w, nb),
          **TOL["float32"])
