"""t, expand_as and square: composites of registered ops, against PyTorch."""
import pytest
import torch

import kael
from helpers import DTYPE_NAMES, check, to_kael


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (1, 4), (0, 2)])
def test_t_matches_torch(shape):
    t = torch.arange(int(torch.tensor(shape).prod()) if shape else 1).reshape(shape)
    k = to_kael(t)
    for kr, tr in ((k.t(), t.t()), (kael.t(k), torch.t(t))):
        check(kr, tr)
        assert kr.stride() == tr.stride() and kr is not k
        assert kr._base is (k if k._base is None else k._base)  # a view of the input


def test_t_of_3d_raises_like_torch():
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        torch.zeros(2, 2, 2).t()
    with pytest.raises(RuntimeError, match="t: t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        kael.zeros(2, 2, 2).t()


@pytest.mark.parametrize("src,dst", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((), (2, 2)), ((2, 3), (2, 3))])
def test_expand_as_matches_torch(src, dst):
    t, o = torch.arange(int(torch.tensor(src).prod()) if src else 1).reshape(src), torch.zeros(dst)
    kr, tr = to_kael(t).expand_as(to_kael(o)), t.expand_as(o)
    check(kr, tr)
    assert kr.stride() == tr.stride()


def test_expand_as_of_incompatible_shapes_raises():
    with pytest.raises(RuntimeError):
        torch.zeros(3).expand_as(torch.zeros(4))
    with pytest.raises(RuntimeError, match="expand: the expanded size of the tensor \\(4\\) must match"):
        kael.zeros(3).expand_as(kael.zeros(4))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_square_matches_torch(dtype):
    t = torch.tensor([[1, 0, 3], [-2, 5, 7]]).to(getattr(torch, dtype))
    if dtype == "uint8":
        t = torch.tensor([[1, 0, 3], [200, 5, 17]], dtype=torch.uint8)
    check(kael.square(to_kael(t)), torch.square(t))
    check(to_kael(t).T.square(), t.T.square())


# ------------------------------------------------------------------ dtype and device queries

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8", "bool"])
def test_dtype_and_device_queries_match_torch(dtype):
    t, k = torch.zeros(2, dtype=getattr(torch, dtype)), kael.zeros(2, dtype=getattr(kael, dtype))
    for name in ("is_signed", "is_complex", "is_conj", "is_neg", "get_device", "is_floating_point"):
        assert getattr(k, name)() == getattr(t, name)(), name
        assert getattr(kael, name)(k) == getattr(torch, name)(t), name
    assert k.is_cpu is t.is_cpu is True
    for name in ("resolve_conj", "resolve_neg"):
        assert getattr(k, name)() is k and getattr(kael, name)(k) is k
        assert getattr(t, name)() is t


@pytest.mark.parametrize("name", ["is_signed", "is_complex", "is_conj", "is_neg", "get_device", "is_floating_point",
                                  "resolve_conj", "resolve_neg"])
def test_dtype_and_device_queries_reject_non_tensors_as_torch_does(name):
    for bad in (3, [1.0], None):
        with pytest.raises(TypeError) as te:
            getattr(torch, name)(bad)
        with pytest.raises(TypeError) as ke:
            getattr(kael, name)(bad)
        assert str(ke.value) == str(te.value)
