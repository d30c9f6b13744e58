"""Python operators // % & | ^ ~ and their in-place forms, against PyTorch. & | ^ ~ are the
logical ops on bool tensors; kael has no bitwise kernels, so other dtypes raise."""
import operator

import pytest
import torch

import kael
from helpers import check

A = [[True, False, True], [False, False, True]]
B = [True, True, False]


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor])
def test_bool_operators_match_torch(op):
    check(op(kael.tensor(A), kael.tensor(B)), op(torch.tensor(A), torch.tensor(B)))
    check(op(kael.tensor(A), True), op(torch.tensor(A), True))
    check(op(False, kael.tensor(B)), op(False, torch.tensor(B)))


def test_invert_of_bool_matches_torch():
    check(~kael.tensor(A), ~torch.tensor(A))
    check(~kael.tensor(A)[:, ::2], ~torch.tensor(A)[:, ::2])


@pytest.mark.parametrize("op", [operator.iand, operator.ior, operator.ixor])
def test_bool_in_place_operators_match_torch(op):
    k, t = kael.tensor(A), torch.tensor(A)
    k2, t2 = op(k, kael.tensor(B)), op(t, torch.tensor(B))
    assert k2 is k and t2 is t
    check(k, t)


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor, operator.iand, operator.ior, operator.ixor])
@pytest.mark.parametrize("other", [lambda lib: lib.tensor([1, 2, 3]), lambda lib: 1, lambda lib: 1.5])
def test_bitwise_operators_on_non_bool_raise(op, other):
    k = kael.tensor([3, 5, 6])
    with pytest.raises(RuntimeError, match="bitwise operations are not implemented"):
        op(k, other(kael))
    assert k.tolist() == [3, 5, 6]
    with pytest.raises(RuntimeError, match="bitwise operations are not implemented"):
        op(kael.tensor(B), kael.tensor([1, 0, 1]))


def test_invert_of_non_bool_raises():
    with pytest.raises(RuntimeError, match="__invert__: bitwise operations are not implemented"):
        ~kael.tensor([1, 2])


@pytest.mark.parametrize("op", [operator.floordiv, operator.mod])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float32", "float64"])
def test_floordiv_and_mod_match_torch(op, dtype):
    x = [[7, -7, 5], [-3, 0, 9]] if dtype != "uint8" else [[7, 200, 5], [3, 0, 9]]
    y = [2, -3, 4] if dtype != "uint8" else [2, 3, 4]
    kx, tx = kael.tensor(x, dtype=getattr(kael, dtype)), torch.tensor(x, dtype=getattr(torch, dtype))
    ky, ty = kael.tensor(y, dtype=getattr(kael, dtype)), torch.tensor(y, dtype=getattr(torch, dtype))
    check(op(kx, ky), op(tx, ty))
    check(op(kx, 2), op(tx, 2))
    check(op(kx, 2.5), op(tx, 2.5))
    check(op(11, ky), op(11, ty))
    k2, t2 = kx.clone(), tx.clone()
    iop = {operator.floordiv: operator.ifloordiv, operator.mod: operator.imod}[op]
    assert iop(k2, ky) is k2 and iop(t2, ty) is t2
    check(k2, t2)


def test_integer_floordiv_and_mod_by_zero_raise_before_writing():
    for op in (operator.floordiv, operator.mod, operator.ifloordiv, operator.imod):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(torch.tensor([4, 5]), torch.tensor([1, 0]))
        k = kael.tensor([4, 5])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(k, kael.tensor([1, 0]))
        assert k.tolist() == [4, 5]
    check(kael.tensor([4.0, -5.0]) // 0, torch.tensor([4.0, -5.0]) // 0)


@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide"])
def test_divisor_that_becomes_zero_in_the_compute_dtype_raises_like_torch(name):
    # int32 with an int64 0-d tensor computes in int32, where 2**32 is 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        getattr(torch, name)(torch.tensor([5], dtype=torch.int32), torch.tensor(2**32))
    x = kael.tensor([5], dtype=kael.int32)
    with pytest.raises(RuntimeError, match=f"{name}: ZeroDivisionError"):
        getattr(kael, name)(x, kael.tensor(2**32))
    check(getattr(kael, name)(x, kael.tensor(2**32 + 3)), getattr(torch, name)(torch.tensor([5], dtype=torch.int32),
                                                                             torch.tensor(2**32 + 3)))
